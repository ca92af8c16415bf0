"""The manager folds a session once while its file is unchanged (core.session.folds): what it
hands out must still be each caller's own, and never the session as it was before a write."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, header_entry, message_entry, project_key
from core.session.entries import title_entry
from core.session.folds import FoldMemo

PK = project_key("/home/user/my-project")
KEY = SessionKey(PK, "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")


@pytest.fixture
def manager(tmp_path) -> SessionManager:
    store = LocalSessionStore(tmp_path / "home")
    store.create_whole(KEY, [header_entry(KEY.session_id, PK, "/home/user/my-project", created_at=1.0),
                             message_entry({"role": "user", "content": "question"}, ts=2.0),
                             message_entry({"role": "assistant", "content": "cut off"}, ts=3.0, end="length")])
    return SessionManager(store)


class TestEachCallerGetsItsOwnSession:
    """A caller that changes the session it got (the agent loop extends its messages, a view
    sets the title) must not change what the next caller gets from the same unchanged file."""

    def test_changes_to_one_get_do_not_reach_the_next(self, manager):
        first = manager.get(KEY)
        first.messages.append({"role": "user", "content": "only in memory"})
        first.reply_ends.clear()
        first.compactions.append({"summary": "made up"})
        first.title = "changed in memory"
        again = manager.get(KEY)
        assert [m["content"] for m in again.messages] == ["question", "cut off"]
        assert again.reply_ends == {1: "length"} and again.compactions == [] and again.title is None

    def test_state_is_a_copy(self, manager):
        manager.state(KEY).title = "changed in memory"
        assert manager.state(KEY).title is None


class TestAWriteIsSeen:
    """After a write (this process's or another's), the fold must be made again."""

    def test_append_then_get_and_state(self, manager):
        assert manager.get(KEY).title is None
        manager.store.append(KEY, [title_entry("Named", "user"),
                                   message_entry({"role": "user", "content": "next"}, ts=4.0)])
        assert manager.state(KEY).title == "Named"
        got = manager.get(KEY)
        assert got.title == "Named" and got.messages[-1]["content"] == "next"

    def test_archived_follows_the_archive_not_the_memo(self, manager):
        assert manager.get(KEY).archived is False
        manager.store.archive(KEY)
        assert manager.get(KEY).archived is True


class TestFoldMemo:
    """A fold is reused only for the very same entry objects: equal entries parsed afresh (a
    store without a cache, or a file read again) are folded again."""

    def test_reused_only_for_the_same_objects(self):
        memo, calls = FoldMemo(), []

        def count(entries):
            calls.append(len(entries))
            return len(entries)

        shared = [{"type": "message", "message": {"role": "user", "content": "x"}}]
        assert memo.fold("k", list(shared), "n", count) == 1
        assert memo.fold("k", list(shared), "n", count) == 1  # a new list of the same objects
        assert calls == [1]
        assert memo.fold("k", [dict(shared[0])], "n", count) == 1  # equal, not the same: folded again
        assert calls == [1, 1]

    def test_the_callers_list_changed_afterwards_does_not_fool_it(self):
        memo = FoldMemo()
        entries = [{"type": "message"}]
        memo.fold("k", entries, "n", len)
        entries.append({"type": "message"})  # the caller's list is theirs to change
        assert memo.fold("k", entries, "n", len) == 2

    def test_at_most_size_sessions_kept(self):
        memo, calls = FoldMemo(size=2), []
        lists = {k: [{"k": k}] for k in "abc"}
        for k in "abca":
            memo.fold(k, lists[k], "n", lambda e: calls.append(e[0]["k"]))
        assert [c for c in calls] == ["a", "b", "c", "a"]  # "a" was dropped when "c" came

    def test_at_most_max_entries_kept(self):
        memo, calls = FoldMemo(max_entries=5), []
        lists = {k: [{"k": k}] * 3 for k in "ab"}
        for k in "aba":
            memo.fold(k, lists[k], "n", lambda e: calls.append(e[0]["k"]))
        assert calls == ["a", "b", "a"]  # 3 + 3 entries > 5: "a" went when "b" came
        memo.fold("big", [{}] * 6, "n", lambda e: calls.append("big"))
        memo.fold("big", [{}] * 6, "n", lambda e: calls.append("big"))
        assert calls[-2:] == ["big", "big"]  # longer than the budget alone: never kept
