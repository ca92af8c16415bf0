"""A conversation's title, pin and tags follow it between machines (core/stores/mirror.py's
metadata merge, core/stores/pull.py, rule in core/session/metadata.py): two data dirs, "machines"
A and B, each a JSONL store mirrored to one real backend on 127.0.0.1 (SQLite, PostgreSQL, S3 via
moto, redis-server)."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionKey, SessionManager
from tests.core.agent.test_two_writers import strict_problem
from tests.core.stores.test_mirror import mirror_url, open_mirror
from tests.support.machines import mirrored
from tests.support.storage import pull_into


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


@pytest.fixture(params=["sqlite", "postgresql", "s3", "redis"])
def mirror_spec(request, tmp_path):
    """The URL of a fresh mirror of each backend."""
    if request.param == "postgresql":
        from tests.support.pg_server import fresh_database_url

        return fresh_database_url()
    return mirror_url(request.param, tmp_path)


@pytest.fixture
def two_machines(mirror_spec, tmp_path):
    """(A's store, B's store, the mirror): two data dirs mirrored to one fresh backend."""
    a, b = (mirrored(tmp_path / name, open_mirror(mirror_spec)) for name in ("a", "b"))
    mirror = open_mirror(mirror_spec)
    yield a, b, mirror
    for store in (a, b):
        store.close()
    close = getattr(mirror, "close", None)
    if callable(close):
        close()


def texts(session):
    return [m["content"] for m in session.messages]


def counts(*pairs):
    """Entry counts of ``(store, key)`` pairs: what a repeated sync must leave as it is."""
    return [len(store.load(key) or []) for store, key in pairs]


def redeliver(store, key):
    """Queue the record again and deliver it: what any later write of it does."""
    store.outbox.add("append", key, 0, ready=True)
    assert store.flush(15), store.status()


def resync_adds_nothing(a, b, mirror, key, empty=()):
    """Two more rounds of delivery and ``sessions pull``, both ways: the entry counts on both
    machines and the mirror do not move, and each pull report's fields ``empty`` stay empty."""
    before = counts((a, key), (b, key), (mirror, key))
    for _ in range(2):
        redeliver(a, key)
        redeliver(b, key)
        for store in (a, b):
            again = pull_into(mirror, store)
            assert again.ok and not any(getattr(again, f) for f in empty), again.to_dict()
    assert counts((a, key), (b, key), (mirror, key)) == before


def start(two_machines, tmp_path):
    """A starts a chat and is mirrored; B pulls it. Returns (A's, B's manager, the chat)."""
    a, b, mirror = two_machines
    ma, mb = SessionManager(a), SessionManager(b)
    chat = ma.create(tmp_path / "proj", title="Plan")
    ma.add_messages(chat.key, [user("q1"), assistant("a1")])
    assert a.flush(15), a.status()
    assert pull_into(mirror, b).ok
    return ma, mb, chat


class TestRenameOnBWhileAWritesMessages:
    """Guards against B's rename, pin and tags reaching A only inside a version A never opens (or
    not at all): B renamed, pinned and tagged the chat while A sent messages; A's next sync must
    show B's title, pin and tags on the conversation A uses, with A's messages as they were, B
    must get A's messages after its own changes (no version: B wrote no message), a later rename
    on A must win on B too, and repeated syncs must add nothing."""

    def test_b_metadata_lands_on_a_and_a_later_rename_wins_on_b(self, two_machines, tmp_path):
        a, b, mirror = two_machines
        ma, mb, chat = start(two_machines, tmp_path)
        key = chat.key
        mb.rename(key, "Plan from B")
        mb.pin(key)
        mb.tag(key, add=["urgent"])
        assert b.flush(15), b.status()
        ma.add_messages(key, [user("q2"), assistant("a2")])  # A has not seen B's changes
        assert a.flush(15), a.status()

        got = ma.get(key)
        assert got.title == "Plan from B"
        assert ma.pin_and_tags(key)[0] is not None and ma.pin_and_tags(key)[1] == ("urgent",)
        assert texts(got) == ["q1", "a1", "q2", "a2"]
        assert a.status()["diverged"] == [] and [m.id for m in ma.list(key.project_key)] == [key.session_id]
        on_mirror = SessionManager(mirror).get(key)
        assert texts(on_mirror) == ["q1", "a1", "q2", "a2"] and on_mirror.title == "Plan from B"
        assert strict_problem(on_mirror.messages) is None

        report = pull_into(mirror, b)
        assert report.ok and str(key) in report.extended, report.to_dict()
        assert texts(mb.get(key)) == ["q1", "a1", "q2", "a2"] and mb.get(key).title == "Plan from B"
        assert [m.id for m in mb.list(key.project_key)] == [key.session_id], "no version on B either"

        # A renames after B did: A's title wins on both, through the mirror.
        ma.rename(key, "Plan, final")
        assert a.flush(15), a.status()
        assert SessionManager(mirror).get(key).title == "Plan, final"
        assert pull_into(mirror, b).ok
        assert mb.get(key).title == "Plan, final" and ma.get(key).title == "Plan, final"
        assert b.flush(15), b.status()

        # Repeated syncs, both ways: nothing is added anywhere.
        resync_adds_nothing(a, b, mirror, key, empty=("copied", "extended", "versions", "metadata"))
        for store in (a, b, mirror):
            assert SessionManager(store).get(key).title == "Plan, final"
            assert texts(SessionManager(store).get(key)) == ["q1", "a1", "q2", "a2"]

    def test_tags_merge_per_tag_and_the_latest_pin_wins(self, two_machines, tmp_path):
        a, b, mirror = two_machines
        ma, mb, chat = start(two_machines, tmp_path)
        key = chat.key
        ma.pin(key)
        mb.tag(key, add=["urgent"])  # both change tags and the pin at once, one chat
        ma.tag(key, add=["work"])
        mb.pin(key, False)  # B unpins after A pinned: unpinned on both
        assert b.flush(15), b.status()
        assert a.flush(15), a.status()
        # Each machine's delivery takes what the mirror holds then; a pull takes the rest.
        assert pull_into(mirror, a).ok and pull_into(mirror, b).ok
        for m in (ma, mb):
            pinned, tags = m.pin_and_tags(key)
            assert pinned is None and sorted(tags) == ["urgent", "work"], (m, pinned, tags)

        ma.tag(key, remove=["urgent"])  # a later removal on A removes it on B
        assert a.flush(15), a.status()
        assert pull_into(mirror, b).ok and pull_into(mirror, a).ok
        assert mb.pin_and_tags(key) == (None, ("work",)) and ma.pin_and_tags(key) == (None, ("work",))


class TestDivergedConversationKeepsOneTitle:
    """Guards against a conversation both machines wrote messages in showing B's rename only on
    the version holding B's history: the histories stay two versions (never merged out of
    order), but the title, pin and tags are the conversation's on both machines, A's version in
    use is unchanged, and pulling again adds nothing."""

    def test_versions_for_messages_one_title_for_the_conversation(self, two_machines, tmp_path):
        a, b, mirror = two_machines
        ma, mb, chat = start(two_machines, tmp_path)
        key = chat.key
        mb.add_messages(key, [user("from B"), assistant("B's answer")])
        mb.rename(key, "Plan from B")
        mb.tag(key, add=["from-b"])
        mb.pin(key)
        assert b.flush(15), b.status()
        ma.add_messages(key, [user("from A"), assistant("A's answer")])
        assert a.flush(15), a.status()
        assert [c.key for c in a.outbox.diverged()] == [key]  # A's history went there as a version

        # The mirror's sync already brought B's title, pin and tags to A's conversation.
        assert ma.get(key).title == "Plan from B" and ma.pin_and_tags(key)[1] == ("from-b",)
        assert ma.pin_and_tags(key)[0] is not None
        assert texts(ma.get(key)) == ["q1", "a1", "from A", "A's answer"]

        report = pull_into(mirror, a)
        assert report.ok and len(report.versions) == 1, report.to_dict()
        assert ma.current_version(key) == key, "A's own history stays the one in use"
        kept = ma.get(SessionKey(key.project_key, report.versions[0][1]))
        assert texts(kept) == ["q1", "a1", "from B", "B's answer"]
        assert kept.title == "Plan from B", "every version shows the conversation's title"
        assert texts(ma.get(key)) == ["q1", "a1", "from A", "A's answer"]
        assert a.flush(15), a.status()

        # A renames after B: the mirror's root (B's conversation there) and B get A's title, and
        # B's messages are untouched.
        ma.rename(key, "Plan, A's way")
        ma.tag(key, remove=["from-b"])
        assert a.flush(15), a.status()
        assert SessionManager(mirror).get(key).title == "Plan, A's way"
        assert texts(SessionManager(mirror).get(key)) == ["q1", "a1", "from B", "B's answer"]
        assert pull_into(mirror, b).ok
        assert mb.get(key).title == "Plan, A's way" and mb.pin_and_tags(key)[1] == ()
        assert texts(mb.get(key)) == ["q1", "a1", "from B", "B's answer"]
        assert mb.current_version(key) == key
        assert b.flush(15), b.status()

        family = {m.id for m in ma.family(key)}
        resync_adds_nothing(a, b, mirror, key, empty=("copied", "versions", "metadata"))
        assert {m.id for m in ma.family(key)} == family
        assert ma.get(key).title == mb.get(key).title == "Plan, A's way"


class TestPullTakesMetadataWithoutTheMirrorSync:
    """Guards against a pull ignoring B's rename when this machine's outbox has nothing to send
    (A wrote nothing since): `sessions pull` alone must bring the title, pin and tags B set,
    and leave an older rename made here in place when B's is older."""

    def test_pull_brings_b_title_and_keeps_a_newer_one(self, mirror_spec, tmp_path):
        from core.stores.mirror import MirroredSessionStore

        # A's deliveries run by hand here, so nothing but the pull can bring B's changes to A.
        a = MirroredSessionStore(LocalSessionStore(tmp_path / "a", fsync=False), open_mirror(mirror_spec),
                                 outbox_path=tmp_path / "a" / "outbox.sqlite3", start=False)
        b = mirrored(tmp_path / "b", open_mirror(mirror_spec))
        mirror = open_mirror(mirror_spec)
        try:
            ma, mb = SessionManager(a), SessionManager(b)
            chat = ma.create(tmp_path / "proj", title="Plan")
            ma.add_messages(chat.key, [user("q1"), assistant("a1")])
            while a.deliver_once():
                pass
            assert pull_into(mirror, b).ok
            key = chat.key
            mb.rename(key, "B's name")  # older than A's rename below
            ma.rename(key, "A's name")  # not delivered yet
            mb.pin(key)
            assert b.flush(15), b.status()
            report = pull_into(mirror, a)
            assert report.ok and report.metadata == [str(key)], report.to_dict()
            assert ma.get(key).title == "A's name", "A renamed after B: A's title stays"
            assert ma.pin_and_tags(key)[0] is not None, "B's pin came"
            assert texts(ma.get(key)) == ["q1", "a1"]
            assert not pull_into(mirror, a).metadata, "a repeat pull takes nothing"
            while a.deliver_once():
                pass
            assert SessionManager(mirror).get(key).title == "A's name"
            assert pull_into(mirror, b).ok
            assert mb.get(key).title == "A's name" and mb.pin_and_tags(key)[0] is not None
        finally:
            a.close()
            b.close()


def archived_ids(manager, project_key):
    return {m.id for m in manager.store.list(project_key, archived=True)}


class TestArchiveChoiceFollows:
    """Guards against an archive or unarchive by hand on one machine staying there (or reaching
    only a version): the newest choice moves the conversation on the other machine too, both
    ways, once — and a local auto-archive, which is no choice, is not undone by a pull."""

    def test_b_archives_while_a_writes_and_a_later_unarchive_wins_on_b(self, two_machines, tmp_path):
        a, b, mirror = two_machines
        ma, mb, chat = start(two_machines, tmp_path)
        key = chat.key
        mb.archive(key)
        assert b.flush(15), b.status()
        ma.add_messages(key, [user("q2"), assistant("a2")])
        assert a.flush(15), a.status()
        assert pull_into(mirror, a).ok
        assert key.session_id in archived_ids(ma, key.project_key), "B's archive reached A"
        assert texts(ma.get(key)) == ["q1", "a1", "q2", "a2"]
        assert a.flush(15), a.status()
        assert key.session_id in archived_ids(SessionManager(mirror), key.project_key)

        ma.unarchive(key)  # later on A: unarchived everywhere
        assert a.flush(15), a.status()
        assert key.session_id not in archived_ids(SessionManager(mirror), key.project_key)
        assert pull_into(mirror, b).ok
        assert key.session_id not in archived_ids(mb, key.project_key)
        assert texts(mb.get(key)) == ["q1", "a1", "q2", "a2"]
        assert b.flush(15), b.status()

        resync_adds_nothing(a, b, mirror, key)
        for m in (ma, mb, SessionManager(mirror)):
            assert key.session_id not in archived_ids(m, key.project_key)

    def test_a_diverged_conversation_archived_on_a_is_archived_on_b(self, two_machines, tmp_path):
        a, b, mirror = two_machines
        ma, mb, chat = start(two_machines, tmp_path)
        key = chat.key
        mb.add_messages(key, [user("from B")])
        assert b.flush(15), b.status()
        ma.add_messages(key, [user("from A")])
        assert a.flush(15), a.status()
        assert [c.key for c in a.outbox.diverged()] == [key]
        ma.archive(key)
        assert a.flush(15), a.status()
        assert key.session_id in archived_ids(SessionManager(mirror), key.project_key), \
            "the mirror's root (B's conversation there) follows, not only A's version"
        assert pull_into(mirror, b).ok
        assert key.session_id in archived_ids(mb, key.project_key)
        assert texts(mb.get(key)) == ["q1", "a1", "from B"]

    def test_auto_archive_is_not_undone_by_a_pull(self, two_machines, tmp_path):
        import time

        a, b, mirror = two_machines
        ma, mb, chat = start(two_machines, tmp_path)
        key = chat.key
        assert ma.auto_archive(1, now=time.time() + 5 * 86400) == [key]
        mb.rename(key, "Renamed on B")
        assert b.flush(15), b.status()
        assert pull_into(mirror, a).ok
        assert key.session_id in archived_ids(ma, key.project_key), "B made no archive choice"
        assert ma.get(key).title == "Renamed on B"
