"""The metadata merge rule (core/session/metadata.py) and the fold it relies on
(core/session/entries.py): pure functions, no store."""
from __future__ import annotations

from core.session.entries import SessionState, header_entry, message_entry, pin_entry, tags_entry, title_entry
from core.session.metadata import history_of, metadata_to_apply


def fold(entries):
    return SessionState().feed_all(entries)


HEAD = header_entry("s1", "p", "/w", created_at=1.0)
MSG = message_entry({"role": "user", "content": "q"}, ts=2.0)


class TestTheFoldReadsTimesNotPositions:
    """Guards against a merged copy showing an older rename, pin or tag because a merge (or a
    race between a delivery and the user) appended it after a newer one: every copy holding the
    same entries must show the same title, pin and tags, whatever their order."""

    def test_title_pin_and_tags_are_the_newest_whatever_the_order(self):
        entries = [title_entry("old", "user", ts=10.0), title_entry("new", "user", ts=20.0),
                   pin_entry(True, ts=11.0), pin_entry(False, ts=21.0),
                   tags_entry(add=["work"], ts=12.0), tags_entry(remove=["work"], add=["urgent"], ts=22.0)]
        for order in (entries, entries[::-1], entries[1::2] + entries[::2]):
            state = fold([HEAD, MSG, *order])
            assert (state.title, state.pinned, state.tags) == ("new", None, ("urgent",)), order

    def test_a_user_title_beats_a_newer_generated_one(self):
        state = fold([HEAD, title_entry("mine", "user", ts=5.0), title_entry("generated", "llm", ts=9.0)])
        assert (state.title, state.title_source) == ("mine", "user")

    def test_the_state_survives_a_round_trip_through_json(self):
        import json

        state = fold([HEAD, tags_entry(add=["a"], ts=5.0), pin_entry(True, ts=6.0)])
        again = SessionState.from_dict(json.loads(json.dumps(state.to_dict())))
        again.feed(tags_entry(remove=["a"], ts=4.0))  # older: ignored after the round trip too
        again.feed(pin_entry(False, ts=3.0))
        assert tuple(again.tags) == ("a",) and again.pinned == 6.0


class TestMetadataToApply:
    """Guards against a sync copying the other side's older changes over newer ones, or adding
    entries again on every sync."""

    def test_only_newer_changes_and_nothing_twice(self):
        mine = [HEAD, MSG, title_entry("A's", "user", ts=30.0), tags_entry(add=["work"], ts=31.0)]
        theirs = [HEAD, MSG, title_entry("B's", "user", ts=20.0), pin_entry(True, ts=21.0),
                  tags_entry(add=["urgent"], remove=["work"], ts=22.0)]
        got = metadata_to_apply(mine, theirs)
        # B's title is older than A's; B's removal of "work" is older than A's add: cut out.
        assert got == [pin_entry(True, ts=21.0), {"type": "tags", "ts": 22.0, "add": ["urgent"], "remove": []}]
        merged = mine + got
        assert metadata_to_apply(merged, theirs) == []
        state = fold(merged)
        assert (state.title, state.pinned, sorted(state.tags)) == ("A's", 21.0, ["urgent", "work"])
        back = metadata_to_apply(theirs, merged)  # the other way: A's newer title and tag
        assert back == [mine[2], mine[3]]
        assert fold(theirs + back).title == "A's" and sorted(fold(theirs + back).tags) == ["urgent", "work"]

    def test_messages_are_never_part_of_it(self):
        other = [HEAD, MSG, message_entry({"role": "assistant", "content": "a"}, ts=3.0)]
        assert metadata_to_apply([HEAD], other) == []
        assert history_of([HEAD, title_entry("t", "user", ts=1.0), MSG]) == [HEAD, MSG]
