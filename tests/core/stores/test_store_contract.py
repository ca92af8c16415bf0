"""The SessionStore contract, written once and run against every store in ``STORE_FACTORIES``.

Covers the protocol (``core/session/store.py``) and the :class:`core.SessionManager` over it. Nothing here
knows about files or SQL, except :func:`snapshot`, which compares a JSONL session byte for byte.
"""
from __future__ import annotations

import json
import os
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.session.entries
import core.session.manager
from tests.conftest import MIRROR_STORE_FACTORIES, STORE_FACTORIES, made_store
from core import (
    AmbiguousSessionId,
    InvalidTitle,
    LocalSessionStore,
    SessionConflict,
    SessionKey,
    SessionManager,
    SessionNotFound,
    SessionStore,
    header_entry,
    message_entry,
    new_session_id,
    project_key,
    title_entry,
)

DAY = 86400.0
T0 = 1_764_504_000.0  # 2025-11-30, a fixed "now" for timestamps written by hand


@pytest.fixture
def clock(monkeypatch):
    """Deterministic time for the manager: each call to time.time() advances by one second.

    ``clock.now`` is the last value handed out; ``clock.jump(s)`` moves time forward."""
    state = {"now": T0}

    def tick() -> float:
        state["now"] += 1.0
        return state["now"]

    fake = types.SimpleNamespace(time=tick)
    monkeypatch.setattr(core.session.manager, "time", fake)
    monkeypatch.setattr(core.session.entries, "time", fake)

    class Clock:
        @property
        def now(self) -> float:
            return state["now"]

        def jump(self, seconds: float) -> None:
            state["now"] += seconds

    return Clock()


@pytest.fixture(params=sorted({**STORE_FACTORIES, **MIRROR_STORE_FACTORIES}))
def store(request, tmp_path):
    """Every store, the mirror-first ones (S3, Redis) included: one contract for all."""
    yield from made_store({**STORE_FACTORIES, **MIRROR_STORE_FACTORIES}[request.param], tmp_path)


@pytest.fixture
def manager(store) -> SessionManager:
    return SessionManager(store)


@pytest.fixture
def cwd(tmp_path):
    d = tmp_path / "work" / "my-project"
    d.mkdir(parents=True)
    return d


PK = project_key("/home/user/my-project")


def new_key(pk: str = PK, subpath: str | None = None) -> SessionKey:
    return SessionKey(pk, new_session_id(), subpath)


def make_session(store, key: SessionKey, *, created: float = T0, messages=(), title=None, ts=None):
    """Write a header, messages (ts = created + 1, + 2, ... unless ``ts``) and an optional llm title."""
    entries = [header_entry(key.session_id, key.project_key, "/home/user/my-project", created_at=created)]
    for i, m in enumerate(messages):
        entries.append(message_entry(m, ts=(ts if ts is not None else created + 1 + i)))
    if title is not None:
        entries.append(title_entry(title, "llm", ts=created))
    store.append(key, entries)
    return entries


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def snapshot(store, key: SessionKey):
    """What must stay unchanged: the file's bytes for JSONL, the loaded entries otherwise."""
    if isinstance(store, LocalSessionStore):
        paths = [p for p in store.base_dir.rglob(f"{key.session_id}.jsonl")]
        assert len(paths) == 1
        return paths[0].read_bytes()
    return json.dumps(store.load(key), sort_keys=True)


# --- the protocol ---------------------------------------------------------------------------


class TestRoundTrip:
    """Entries come back exactly as given, in order: no key added, dropped, reordered or retyped."""

    def test_store_is_a_session_store(self, store):
        assert isinstance(store, SessionStore)

    def test_its_optional_abilities_are_the_ones_the_guards_name(self, store):
        """The table of core/session/store.py: what a caller may ask of each kind (an ability its
        guard denies is never called; one it grants must work)."""
        from core.session.store import appends_at, carries_blobs, has_list_token, indexes_projects, is_mirrored, \
            knows_write_times
        from core.stores.redis_store import RedisSessionStore
        from core.stores.s3_store import S3SessionStore

        mirror_first = isinstance(store, (S3SessionStore, RedisSessionStore))
        jsonl = isinstance(store, LocalSessionStore)
        assert has_list_token(store) is not mirror_first
        assert appends_at(store) is not jsonl and indexes_projects(store) is not jsonl
        assert knows_write_times(store) is jsonl and carries_blobs(store) and not is_mirrored(store)
        key = new_key()
        store.create_whole(key, [header_entry(key.session_id, key.project_key, "/w", created_at=T0)])
        assert store.list_subpaths(key) == [] and store.list_subpaths(new_key()) == []
        if appends_at(store):
            assert store.entry_count(key) == 1
        if knows_write_times(store):
            assert store.written_at(key) is not None

    def test_append_then_load_returns_entries_exactly(self, store):
        key = new_key()
        entries = [
            header_entry(key.session_id, key.project_key, "/w", created_at=T0),
            message_entry({"role": "system", "content": "be brief"}, ts=T0 + 1),
            message_entry(user("hi"), ts=T0 + 2),
            {"type": "future-kind", "payload": {"nested": [1, 2.5, None, True, "x"]}},
            message_entry(
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]},
                ts=T0 + 3,
            ),
            message_entry({"role": "tool", "tool_call_id": "c1", "content": "file text"}, ts=T0 + 4),
            title_entry("A title", "llm", ts=T0 + 5),
        ]
        assert store.append(key, entries[:3]) == 2
        assert store.append(key, entries[3:]) == 4
        assert store.load(key) == entries
        assert store.exists(key)

    def test_many_appends_keep_order(self, store):
        key = new_key()
        make_session(store, key)
        for i in range(30):
            assert store.append(key, [message_entry(user(f"m{i}"), ts=T0 + i)]) == i + 1
        loaded = store.load(key)
        assert [e["message"]["content"] for e in loaded[1:]] == [f"m{i}" for i in range(30)]

    def test_empty_append_writes_nothing_and_returns_count(self, store):
        key = new_key()
        make_session(store, key, messages=[user("a")])
        before = store.load(key)
        assert store.append(key, []) == 1
        assert store.load(key) == before

    def test_bad_entry_is_refused_and_nothing_written(self, store):
        key = new_key()
        make_session(store, key, messages=[user("a")])
        before = store.load(key)
        with pytest.raises(ValueError):
            store.append(key, [message_entry(user("ok")), {"type": "message", "ts": float("nan"),
                                                            "message": user("x")}])
        with pytest.raises(ValueError):
            store.append(key, [message_entry(user("ok")), "not a dict"])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            store.append(key, [{"type": "message", "ts": 1.0, "message": {"role": "user", "content": object()}}])
        assert store.load(key) == before


class TestMissing:
    """A missing session is reported as missing, never as an empty one or a crash."""

    def test_load_missing_is_none(self, store):
        assert store.load(new_key()) is None
        assert not store.exists(new_key())
        assert store.load(new_key(subpath="subagents/a1")) is None

    def test_remove_missing_raises(self, store):
        with pytest.raises(SessionNotFound):
            store.remove(new_key())
        key = new_key()
        make_session(store, key)
        with pytest.raises(SessionNotFound):
            store.remove(SessionKey(key.project_key, key.session_id, "subagents/nope"))

    def test_archive_unarchive_missing_raise(self, store):
        with pytest.raises(SessionNotFound):
            store.archive(new_key())
        with pytest.raises(SessionNotFound):
            store.unarchive(new_key())

    def test_list_of_unknown_project_is_empty(self, store):
        assert store.list(PK) == []
        assert store.list(PK, archived=True) == []
        assert store.list_projects() == []

    def test_removed_session_is_gone(self, store):
        key = new_key()
        make_session(store, key, messages=[user("a")])
        store.remove(key)
        assert store.load(key) is None
        assert not store.exists(key)
        assert store.list(PK) == []

    def test_message_for_a_deleted_session_does_not_bring_it_back(self, store, manager):
        """Another tab deletes the session while this one sends: the send fails, nothing reappears."""
        key = new_key()
        make_session(store, key, messages=[user("a")])
        store.remove(key)
        with pytest.raises(SessionNotFound):
            store.append(key, [message_entry(user("late"))])
        with pytest.raises(SessionNotFound):
            manager.add_messages(key, [user("late")])
        assert store.load(key) is None
        assert store.list(PK) == []

    def test_sub_agent_record_needs_no_header(self, store):
        parent = new_key()
        make_session(store, parent)
        sub = SessionKey(parent.project_key, parent.session_id, "subagents/a1")
        assert store.append(sub, [message_entry(user("task"))]) == 1
        assert [e["message"]["content"] for e in store.load(sub)] == ["task"]


class TestList:
    """The session list: wrong order, wrong counts or stale titles are what a user sees first."""

    def test_most_recent_activity_first(self, store):
        a, b, c = new_key(), new_key(), new_key()
        make_session(store, a, created=T0, messages=[user("a")], ts=T0 + 50)
        make_session(store, b, created=T0 + 10, messages=[user("b")], ts=T0 + 20)
        make_session(store, c, created=T0 + 30)  # no messages: its creation is its activity
        assert [m.id for m in store.list(PK)] == [a.session_id, c.session_id, b.session_id]
        store.append(b, [message_entry(user("again"), ts=T0 + 100)])
        assert [m.id for m in store.list(PK)] == [b.session_id, a.session_id, c.session_id]

    def test_meta_fields(self, store):
        key = new_key()
        make_session(store, key, created=T0, messages=[{"role": "system", "content": "s"}, user("u"),
                                                       assistant("a")], title="Fix the login bug")
        (meta,) = store.list(PK)
        assert meta.id == key.session_id
        assert meta.project_key == PK
        assert meta.key == key
        assert meta.title == "Fix the login bug"
        assert meta.title_source == "llm"
        assert meta.message_count == 3
        assert meta.created_at == pytest.approx(T0)
        assert meta.updated_at == pytest.approx(T0 + 3)
        assert meta.archived is False
        assert meta.cwd == "/home/user/my-project"
        assert meta.forked_from is None

    def test_meta_follows_appends_and_title_changes(self, store):
        key = new_key()
        make_session(store, key, messages=[user("u")], title="First")
        assert store.list(PK)[0].title == "First"
        store.append(key, [title_entry("Second", "user", ts=T0 + 9), message_entry(assistant("x"), ts=T0 + 9)])
        (meta,) = store.list(PK)
        assert (meta.title, meta.title_source, meta.message_count) == ("Second", "user", 2)
        assert meta.updated_at == pytest.approx(T0 + 9)

    def test_sub_agent_records_not_listed(self, store):
        key = new_key()
        make_session(store, key, messages=[user("main")])
        sub = SessionKey(key.project_key, key.session_id, "subagents/agent-1")
        store.append(sub, [message_entry(user("sub"), ts=T0 + 500)])
        store.append(SessionKey(key.project_key, key.session_id, "subagents/agent-2"),
                     [message_entry(user("sub2"), ts=T0 + 500)])
        metas = store.list(PK)
        assert [m.id for m in metas] == [key.session_id]
        assert metas[0].message_count == 1
        assert store.load(sub) == [message_entry(user("sub"), ts=T0 + 500)]
        assert store.exists(sub)

    def test_projects_are_separate(self, store):
        other = project_key("/srv/other")
        a, b = new_key(), new_key(other)
        make_session(store, a)
        make_session(store, b)
        assert [m.id for m in store.list(PK)] == [a.session_id]
        assert [m.id for m in store.list(other)] == [b.session_id]
        assert store.load(SessionKey(other, a.session_id)) is None


class TestArchive:
    """Archiving hides a session from the list without losing it, and never half-moves it."""

    def test_archive_moves_out_and_back(self, store):
        keep, arch = new_key(), new_key()
        make_session(store, keep, messages=[user("k")])
        entries = make_session(store, arch, messages=[user("a")], title="Old work")
        store.archive(arch)
        assert [m.id for m in store.list(PK)] == [keep.session_id]
        (meta,) = store.list(PK, archived=True)
        assert (meta.id, meta.archived, meta.title, meta.message_count) == (arch.session_id, True, "Old work", 1)
        assert store.load(arch) == entries  # still loadable
        assert store.exists(arch)
        store.unarchive(arch)
        assert store.list(PK, archived=True) == []
        assert {m.id for m in store.list(PK)} == {keep.session_id, arch.session_id}
        assert all(m.archived is False for m in store.list(PK))
        assert store.load(arch) == entries

    def test_archive_and_unarchive_are_idempotent(self, store):
        key = new_key()
        entries = make_session(store, key, messages=[user("a")])
        store.archive(key)
        store.archive(key)
        assert [m.id for m in store.list(PK, archived=True)] == [key.session_id]
        assert store.list(PK) == []
        store.unarchive(key)
        store.unarchive(key)
        assert [m.id for m in store.list(PK)] == [key.session_id]
        assert store.load(key) == entries

    def test_append_to_archived_session(self, store):
        key = new_key()
        make_session(store, key, messages=[user("a")])
        store.archive(key)
        assert store.append(key, [message_entry(user("b"), ts=T0 + 60)], expected_count=1) == 2
        assert [e["message"]["content"] for e in store.load(key)[1:]] == ["a", "b"]
        assert store.list(PK) == []  # appending does not unarchive
        (meta,) = store.list(PK, archived=True)
        assert meta.message_count == 2

    def test_archive_takes_sub_agent_records_along(self, store):
        key = new_key()
        make_session(store, key)
        sub = SessionKey(key.project_key, key.session_id, "subagents/agent-1")
        store.append(sub, [message_entry(user("sub"), ts=T0)])
        store.archive(key)
        assert store.load(sub) == [message_entry(user("sub"), ts=T0)]
        store.append(sub, [message_entry(user("sub2"), ts=T0 + 1)])
        store.unarchive(key)
        assert [e["message"]["content"] for e in store.load(sub)] == ["sub", "sub2"]

    def test_remove_archived(self, store):
        key = new_key()
        make_session(store, key)
        store.archive(key)
        store.remove(key)
        assert store.load(key) is None
        assert store.list(PK, archived=True) == []


class TestRemove:
    """Deleting a session deletes all of it (sub-agent records too), and only it."""

    def test_remove_takes_sub_agent_records(self, store):
        key, other = new_key(), new_key()
        make_session(store, key)
        make_session(store, other)
        subs = [SessionKey(key.project_key, key.session_id, p) for p in ("subagents/a1", "subagents/a2")]
        for s in subs:
            store.append(s, [message_entry(user("x"), ts=T0)])
        other_sub = SessionKey(other.project_key, other.session_id, "subagents/a1")
        store.append(other_sub, [message_entry(user("y"), ts=T0)])
        store.remove(key)
        for s in subs:
            assert store.load(s) is None
            assert not store.exists(s)
        assert store.load(other_sub) == [message_entry(user("y"), ts=T0)]
        assert [m.id for m in store.list(PK)] == [other.session_id]

    def test_remove_one_sub_agent_record(self, store):
        key = new_key()
        entries = make_session(store, key)
        s1, s2 = (SessionKey(key.project_key, key.session_id, p) for p in ("subagents/a1", "subagents/a2"))
        store.append(s1, [message_entry(user("x"), ts=T0)])
        store.append(s2, [message_entry(user("y"), ts=T0)])
        store.remove(s1)
        assert store.load(s1) is None
        assert store.load(s2) is not None
        assert store.load(key) == entries


class TestProjects:
    """The project picker: every project with sessions, newest first, with its real path."""

    def test_list_projects(self, store):
        p1, p2 = project_key("/srv/one"), project_key("/srv/two")
        make_session(store, new_key(p1), created=T0, messages=[user("x")], ts=T0 + 5)
        make_session(store, new_key(p1), created=T0)
        make_session(store, new_key(p2), created=T0 + 100)
        projects = store.list_projects()
        assert [p.project_key for p in projects] == [p2, p1]
        assert [p.session_count for p in projects] == [1, 2]
        assert projects[1].updated_at == pytest.approx(T0 + 5)
        assert projects[1].cwd == "/home/user/my-project"  # the cwd written in the headers

    def test_project_with_only_archived_sessions_is_listed(self, store):
        key = new_key()
        make_session(store, key)
        store.archive(key)
        (info,) = store.list_projects()
        assert info.project_key == PK
        assert info.session_count == 0

    def test_project_emptied_by_remove_disappears(self, store):
        key = new_key()
        make_session(store, key)
        store.remove(key)
        assert store.list_projects() == []


class TestConflict:
    """Two tabs (or processes) on one session: a stale writer is told, and writes nothing."""

    def test_expected_count_mismatch_raises_and_writes_nothing(self, store):
        key = new_key()
        make_session(store, key, messages=[user("a"), assistant("b")])
        before = store.load(key)
        with pytest.raises(SessionConflict) as info:
            store.append(key, [message_entry(user("stale"))], expected_count=1)
        assert (info.value.expected, info.value.actual) == (1, 2)
        assert store.load(key) == before
        assert store.list(PK)[0].message_count == 2

    def test_expected_count_match_appends(self, store):
        key = new_key()
        make_session(store, key, messages=[user("a")])
        assert store.append(key, [message_entry(assistant("b"))], expected_count=1) == 2
        with pytest.raises(SessionConflict):
            store.append(key, [message_entry(user("c"))], expected_count=1)
        assert store.append(key, [message_entry(user("c"))], expected_count=2) == 3

    def test_expected_zero_on_missing_session(self, store):
        key = new_key()
        assert store.append(key, [header_entry(key.session_id, PK, "/w")], expected_count=0) == 0

    def test_manager_add_messages_conflict(self, manager, cwd):
        s = manager.create(cwd)
        manager.add_messages(s.key, [user("a")], expected_count=0)
        with pytest.raises(SessionConflict):
            manager.add_messages(s.key, [user("b")], expected_count=0)
        assert [m["content"] for m in manager.get(s.key).messages] == ["a"]


# --- the manager ----------------------------------------------------------------------------


class TestCreateAndGet:
    """A new session is findable at once, with its workspace, and holds no invented messages."""

    def test_create_writes_header_only(self, manager, store, cwd):
        s = manager.create(cwd)
        assert s.messages == [] and s.title is None
        assert s.project_key == project_key(cwd)
        entries = store.load(s.key)
        assert len(entries) == 1 and entries[0]["type"] == "header"
        assert entries[0]["id"] == s.id and entries[0]["cwd"] == os.path.normpath(str(cwd))
        got = manager.get(s.key)
        assert (got.cwd, got.messages, got.archived) == (str(cwd), [], False)
        assert [m.id for m in manager.list(project_key(cwd))] == [s.id]

    def test_create_with_title_is_a_user_title(self, manager, cwd):
        s = manager.create(cwd, title="  My\n task  ")
        assert (s.title, s.title_source) == ("My task", "user")
        assert manager.get(s.key).title == "My task"

    def test_get_missing_raises(self, manager):
        with pytest.raises(SessionNotFound):
            manager.get(new_key())
        with pytest.raises(SessionNotFound):
            manager.add_messages(new_key(), [user("x")])

    def test_get_reports_archived(self, manager, cwd):
        s = manager.create(cwd)
        manager.archive(s.key)
        assert manager.get(s.key).archived is True
        manager.unarchive(s.key)
        assert manager.get(s.key).archived is False

    def test_add_messages_round_trip(self, manager, cwd):
        s = manager.create(cwd)
        msgs = [{"role": "system", "content": "sys"}, user("hi"), assistant("hello")]
        assert manager.add_messages(s.key, msgs[:2]) == 2
        assert manager.add_messages(s.key, msgs[2:]) == 3
        assert manager.get(s.key).messages == msgs
        with pytest.raises(ValueError):
            manager.add_messages(s.key, [{"content": "no role"}])
        assert manager.get(s.key).messages == msgs


class TestFork:
    """Branching a conversation: the copy is right and the original is untouched."""

    def _session(self, manager, cwd, n=5, title="Login bug"):
        s = manager.create(cwd, title=title)
        msgs = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(n)]
        manager.add_messages(s.key, msgs)
        return s, msgs

    def test_fork_copies_messages_through_index_inclusive(self, manager, store, cwd):
        s, msgs = self._session(manager, cwd)
        before = snapshot(store, s.key)
        f = manager.fork(s.key, 2)
        assert f.id != s.id and f.project_key == s.project_key
        assert f.messages == msgs[:3]
        assert manager.get(f.key).messages == msgs[:3]
        assert snapshot(store, s.key) == before  # original unchanged
        assert manager.get(s.key).messages == msgs

    def test_fork_header_and_title(self, manager, store, cwd):
        s, _ = self._session(manager, cwd)
        f = manager.fork(s.key, 1)
        header = store.load(f.key)[0]
        assert header["type"] == "header" and header["id"] == f.id
        assert header["forked_from"] == {"session_id": s.id, "message_index": 1}
        got = manager.get(f.key)
        assert got.forked_from == {"session_id": s.id, "message_index": 1}
        assert got.title == "Login bug (branch)"
        assert got.cwd == str(cwd)
        meta = next(m for m in manager.list(s.project_key) if m.id == f.id)
        assert meta.forked_from == {"session_id": s.id, "message_index": 1}
        assert meta.title == "Login bug (branch)"
        assert meta.message_count == 2

    def test_fork_last_and_only_message(self, manager, cwd):
        s, msgs = self._session(manager, cwd, n=1)
        f = manager.fork(s.key, 0)
        assert manager.get(f.key).messages == msgs
        s2, msgs2 = self._session(manager, cwd, n=4)
        assert manager.get(manager.fork(s2.key, 3).key).messages == msgs2

    def test_fork_out_of_range(self, manager, store, cwd):
        s, _ = self._session(manager, cwd, n=3)
        before = snapshot(store, s.key)
        for bad in (3, 99, -1):
            with pytest.raises(IndexError):
                manager.fork(s.key, bad)
        empty = manager.create(cwd)
        with pytest.raises(IndexError):
            manager.fork(empty.key, 0)
        assert snapshot(store, s.key) == before
        assert len(manager.list(s.project_key)) == 2  # no half-made fork left behind

    def test_fork_of_missing_session(self, manager):
        with pytest.raises(SessionNotFound):
            manager.fork(new_key(), 0)

    def test_fork_of_untitled_session_has_no_title(self, manager, cwd):
        s = manager.create(cwd)
        manager.add_messages(s.key, [user("x")])
        assert manager.get(manager.fork(s.key, 0).key).title is None


class TestUsageFollowsForks:
    """issue 31, item 17: a version (Edit, Regenerate) or a branch copied the shared messages but
    not their replies' usage, so the chat's total dropped to the new reply's tokens. A chat's
    usage is that of the replies it shows: the copy counts the shared prefix's, not the rest."""

    def test_a_version_and_a_branch_carry_the_prefix_usage(self, manager, store, cwd):
        from core.session.usage import usage_entry

        s = manager.create(cwd, title="Usage")
        manager.add_messages(s.key, [user("u0"), assistant("a1")])
        store.append(s.key, [usage_entry(2, "m", 100, 10, estimated=False)])
        manager.add_messages(s.key, [user("u2"), assistant("a3")])
        store.append(s.key, [usage_entry(4, "m", 200, 20, estimated=True)])
        assert manager.get(s.key).usage.total == 330
        v = manager.fork(s.key, 2, version=True)  # regenerate a3: keeps u0..u2, the first reply's usage
        got = manager.get(v.key).usage
        assert (got.prompt, got.completion, got.replies, got.estimated) == (100, 10, 1, False)
        b = manager.fork(s.key, 3)  # a branch after a3: both replies
        assert manager.get(b.key).usage.total == 330 and manager.get(b.key).usage.replies == 2
        assert manager.get(manager.fork(s.key, -1, version=True).key).usage.replies == 0  # shares nothing
        assert manager.get(s.key).usage.total == 330  # the original untouched


class TestUpdatedAt:
    """The list's order is "last activity": renaming is not activity, new messages and forks are."""

    def test_rename_does_not_bump(self, manager, cwd, clock):
        a = manager.create(cwd)
        manager.add_messages(a.key, [user("a")])
        b = manager.create(cwd)
        manager.add_messages(b.key, [user("b")])
        pk = a.project_key
        assert [m.id for m in manager.list(pk)] == [b.id, a.id]
        updated = manager.get(a.key).updated_at
        clock.jump(1000)
        manager.rename(a.key, "Renamed")
        manager.set_generated_title(b.key, "Generated")
        assert manager.get(a.key).updated_at == updated
        metas = manager.list(pk)
        assert [m.id for m in metas] == [b.id, a.id]
        assert metas[1].updated_at == pytest.approx(updated)

    def test_new_message_bumps(self, manager, cwd, clock):
        a = manager.create(cwd)
        b = manager.create(cwd)
        assert [m.id for m in manager.list(a.project_key)] == [b.id, a.id]
        manager.add_messages(a.key, [user("late")])
        metas = manager.list(a.project_key)
        assert [m.id for m in metas] == [a.id, b.id]
        assert metas[0].updated_at == pytest.approx(clock.now)
        assert manager.get(a.key).updated_at == pytest.approx(clock.now)

    def test_fresh_fork_counts_as_new(self, manager, cwd, clock):
        old = manager.create(cwd)
        manager.add_messages(old.key, [user("x"), assistant("y")])
        other = manager.create(cwd)
        manager.add_messages(other.key, [user("z")])
        clock.jump(DAY)
        f = manager.fork(old.key, 0)
        assert f.created_at >= clock.now - 5
        assert manager.get(f.key).updated_at >= clock.now - 5
        assert manager.list(old.project_key)[0].id == f.id
        assert manager.latest(old.project_key).id == f.id

    def test_created_and_updated_times(self, manager, cwd, clock):
        s = manager.create(cwd)
        created = clock.now
        assert manager.get(s.key).created_at == pytest.approx(created)
        assert manager.get(s.key).updated_at == pytest.approx(created)
        clock.jump(60)
        manager.add_messages(s.key, [user("x")])
        got = manager.get(s.key)
        assert got.created_at == pytest.approx(created)
        assert got.updated_at == pytest.approx(clock.now)
        (meta,) = manager.list(s.project_key)
        assert (meta.created_at, meta.updated_at) == (pytest.approx(got.created_at), pytest.approx(got.updated_at))


class TestTitles:
    """A title the user typed is never replaced by a generated one, whichever comes first."""

    def test_generated_after_user_is_refused(self, manager, cwd):
        s = manager.create(cwd)
        manager.rename(s.key, "Mine")
        assert manager.set_generated_title(s.key, "Robot title") is False
        assert manager.set_generated_title(s.key, "Fallback", source="fallback") is False
        got = manager.get(s.key)
        assert (got.title, got.title_source) == ("Mine", "user")
        assert manager.list(s.project_key)[0].title == "Mine"

    def test_title_cannot_show_reversed_or_break_lines(self, manager, cwd):
        # A pasted right-to-left override would make the sidebar show the title backwards.
        s = manager.create(cwd)
        assert manager.rename(s.key, "fix \u202elogin\u202c bug\n\tnow\x07") == "fix login bug now"
        assert manager.list(s.project_key)[0].title == "fix login bug now"

    def test_user_after_generated_wins(self, manager, cwd):
        s = manager.create(cwd)
        assert manager.set_generated_title(s.key, "Robot title") is True
        assert manager.get(s.key).title == "Robot title"
        manager.rename(s.key, "Mine")
        assert manager.set_generated_title(s.key, "Robot again") is False
        assert (manager.get(s.key).title, manager.list(s.project_key)[0].title) == ("Mine", "Mine")

    def test_user_title_kept_even_if_generated_entry_lands_after(self, store, manager, cwd):
        # The race set_generated_title allows: it checked before the rename, then appends.
        s = manager.create(cwd)
        manager.rename(s.key, "Mine")
        store.append(s.key, [title_entry("Late robot", "llm")])
        assert manager.get(s.key).title == "Mine"
        assert manager.list(s.project_key)[0].title == "Mine"

    def test_generated_titles_replace_each_other(self, manager, cwd):
        s = manager.create(cwd)
        manager.set_generated_title(s.key, "New chat", source="fallback")
        manager.set_generated_title(s.key, "Fix the login bug")
        assert (manager.get(s.key).title, manager.get(s.key).title_source) == ("Fix the login bug", "llm")

    def test_second_rename_wins(self, manager, cwd):
        s = manager.create(cwd, title="One")
        assert manager.rename(s.key, "  Two\n") == "Two"
        assert manager.get(s.key).title == "Two"

    @pytest.mark.parametrize("bad", ["", "   ", "\n\t \r\n"])
    def test_empty_rename_refused(self, manager, store, cwd, bad):
        s = manager.create(cwd, title="Keep")
        before = snapshot(store, s.key)
        with pytest.raises(InvalidTitle):
            manager.rename(s.key, bad)
        with pytest.raises(ValueError):  # InvalidTitle is a ValueError
            manager.rename(s.key, bad)
        assert snapshot(store, s.key) == before
        assert manager.get(s.key).title == "Keep"

    def test_rename_missing(self, manager):
        with pytest.raises(SessionNotFound):
            manager.rename(new_key(), "x")
        with pytest.raises(SessionNotFound):
            manager.set_generated_title(new_key(), "x")


class TestFind:
    """Resuming by id: a unique prefix is enough; an ambiguous one lists the candidates."""

    def _with_ids(self, store, ids):
        for sid in ids:
            make_session(store, SessionKey(PK, sid))

    def test_full_id_and_unique_prefix(self, manager, store):
        self._with_ids(store, ["abc123", "abd456", "zzz999"])
        assert manager.find(PK, "abc123") == SessionKey(PK, "abc123")
        assert manager.find(PK, "abc") == SessionKey(PK, "abc123")
        assert manager.find(PK, "z") == SessionKey(PK, "zzz999")

    def test_ambiguous_prefix(self, manager, store):
        self._with_ids(store, ["abc123", "abd456", "zzz999"])
        with pytest.raises(AmbiguousSessionId) as info:
            manager.find(PK, "ab")
        assert sorted(info.value.candidates) == ["abc123", "abd456"]
        assert "abc123" in str(info.value) and "abd456" in str(info.value)

    def test_not_found(self, manager, store):
        self._with_ids(store, ["abc123"])
        for wanted in ("x", "abc1234", ""):
            with pytest.raises(SessionNotFound):
                manager.find(PK, wanted)
        with pytest.raises(SessionNotFound):
            manager.find(project_key("/elsewhere"), "abc")

    def test_find_archived(self, manager, store):
        self._with_ids(store, ["abc123"])
        store.archive(SessionKey(PK, "abc123"))
        assert manager.find(PK, "abc") == SessionKey(PK, "abc123")

    def test_find_real_uuid_prefix(self, manager, cwd):
        s = manager.create(cwd)
        manager.create(cwd)
        # uuid4 strings share no 8-character prefix in practice
        assert manager.find(s.project_key, s.id[:8]) == s.key


class TestLatest:
    """``--continue`` resumes the conversation the user touched last, not the one created last."""

    def test_latest(self, manager, cwd, clock):
        pk = project_key(cwd)
        assert manager.latest(pk) is None
        a = manager.create(cwd)
        b = manager.create(cwd)
        assert manager.latest(pk).id == b.id
        manager.add_messages(a.key, [user("back to a")])
        got = manager.latest(pk)
        assert got.id == a.id and got.messages == [user("back to a")]
        manager.archive(a.key)
        assert manager.latest(pk).id == b.id


class TestCleanup:
    """Start-up cleanup deletes only what is old, never archived work, never everything by mistake."""

    @staticmethod
    def _untouched_since(store, key, ts):
        """A session idle that long was also last written that long ago: cleanup counts from the
        later of the two (an import keeps old message times but arrived now)."""
        locate = getattr(store, "_locate", None)
        path = locate(key) if callable(locate) else None
        if path is not None:
            os.utime(path, (ts, ts))

    def _setup(self, store):
        old = new_key()
        make_session(store, old, created=T0 - 40 * DAY, messages=[user("old")], ts=T0 - 40 * DAY)
        self._untouched_since(store, old, T0 - 40 * DAY)
        recent = new_key()
        make_session(store, recent, created=T0 - 40 * DAY, messages=[user("new")], ts=T0 - 2 * DAY)
        self._untouched_since(store, recent, T0 - 2 * DAY)
        archived = new_key()
        make_session(store, archived, created=T0 - 400 * DAY, messages=[user("arch")], ts=T0 - 400 * DAY)
        store.archive(archived)
        other_pk = project_key("/srv/other")
        other_old = new_key(other_pk)
        make_session(store, other_old, created=T0 - 90 * DAY)
        self._untouched_since(store, other_old, T0 - 90 * DAY)
        return old, recent, archived, other_old

    def test_an_import_with_old_times_is_kept_until_idle_here(self, store, manager):
        """Messages 400 days old, arrived now (an import): not expired now, expired 31 days on."""
        key = new_key()
        make_session(store, key, created=T0 - 400 * DAY, messages=[user("imported")], ts=T0 - 400 * DAY)
        entries = store.load(key)
        store.remove(key)
        entries[0]["imported_from"] = {"source": "chatgpt", "id": "c1", "file": "x.json", "at": T0}
        store.create_whole(key, entries)
        self._untouched_since(store, key, T0)
        assert manager.cleanup(30, now=T0 + DAY) == []
        assert manager.cleanup(30, now=T0 + 31 * DAY) == [key]

    def test_deletes_only_idle_non_archived(self, store, manager):
        old, recent, archived, other_old = self._setup(store)
        sub = SessionKey(old.project_key, old.session_id, "subagents/a1")
        store.append(sub, [message_entry(user("s"), ts=T0 - 40 * DAY)])
        removed = manager.cleanup(30, now=T0)
        assert sorted(removed, key=str) == sorted([old, other_old], key=str)
        assert store.load(old) is None and store.load(other_old) is None and store.load(sub) is None
        assert store.load(recent) is not None
        assert store.load(archived) is not None
        assert [m.id for m in store.list(PK)] == [recent.session_id]

    @pytest.mark.parametrize("days", [0, -1, -30.5])
    def test_zero_or_negative_disables(self, store, manager, days):
        keys = self._setup(store)
        assert manager.cleanup(days, now=T0 + 10_000 * DAY) == []
        assert all(store.load(k) is not None for k in keys)

    def test_env_default(self, store, manager, monkeypatch):
        old, recent, archived, other_old = self._setup(store)
        monkeypatch.setenv("ANYCODE_CLEANUP_DAYS", "60")
        assert manager.cleanup(now=T0) == [other_old]
        monkeypatch.setenv("ANYCODE_CLEANUP_DAYS", "0")
        assert manager.cleanup(now=T0 + 10_000 * DAY) == []
        monkeypatch.setenv("ANYCODE_CLEANUP_DAYS", "-5")
        assert manager.cleanup(now=T0 + 10_000 * DAY) == []
        monkeypatch.setenv("ANYCODE_CLEANUP_DAYS", "not a number")  # default 30, not "delete all"
        assert manager.cleanup(now=T0) == [old]
        assert store.load(recent) is not None and store.load(archived) is not None

    def test_unset_env_defaults_to_30_days(self, store, manager):
        old, recent, archived, other_old = self._setup(store)
        assert sorted(manager.cleanup(now=T0), key=str) == sorted([old, other_old], key=str)
        assert store.load(recent) is not None

    def test_fractional_days(self, store, manager):
        key = new_key()
        make_session(store, key, created=T0 - 0.5 * DAY)
        self._untouched_since(store, key, T0 - 0.5 * DAY)
        assert manager.cleanup(0.6, now=T0) == []
        assert manager.cleanup(0.4, now=T0) == [key]

    def test_empty_store(self, manager):
        assert manager.cleanup(1) == []


# --- text ------------------------------------------------------------------------------------

TRICKY = [
    "中文对话：修复登录错误",
    "emoji 🎉👩‍💻🏳️‍🌈",
    "controls \x00\x01\x07\x08\x0b\x0c\x1b\x1c\x1d\x1e\x1f\x7f end",
    "NUL\x00inside",
    "line\u2028sep\u2029para\x85nel",
    "crlf\r\nand\rcr\nlf",
    "quotes \" and \\ backslash",
    "x" * 70_000,
]


class TestText:
    """Any text a model or a tool can produce survives a round trip, and the file stays valid UTF-8."""

    @pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
    def test_round_trip(self, manager, store, cwd, text):
        s = manager.create(cwd, title="t")
        msgs = [user(text), {"role": "tool", "tool_call_id": "c", "content": text}]
        manager.add_messages(s.key, msgs)
        manager.add_messages(s.key, [assistant("after")])
        assert manager.get(s.key).messages == msgs + [assistant("after")]
        assert manager.list(s.project_key)[0].message_count == 3

    def test_text_in_titles_and_keys(self, manager, cwd):
        s = manager.create(cwd)
        manager.rename(s.key, "标题 🎉")
        assert manager.get(s.key).title == "标题 🎉"
        assert manager.list(s.project_key)[0].title == "标题 🎉"

    def test_lone_surrogates_become_replacement_char(self, manager, store, cwd):
        s = manager.create(cwd)
        text = "bad \ud800 and \udcff tail"
        manager.add_messages(s.key, [{"role": "tool", "tool_call_id": "c", "content": text,
                                      "extra\udc80key": "v"}])
        manager.add_messages(s.key, [assistant("next")])
        got = manager.get(s.key).messages
        assert got[0]["content"] == "bad \ufffd and \ufffd tail"
        assert "extra\ufffdkey" in got[0]
        assert got[1] == assistant("next")
        if isinstance(store, LocalSessionStore):
            raw = next(store.base_dir.rglob(f"{s.id}.jsonl")).read_bytes()
            raw.decode("utf-8")  # strict: valid UTF-8 on disk
            assert "\ufffd".encode() in raw

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(text=st.text(alphabet=st.characters(codec=None), max_size=60))
    def test_any_text_round_trips(self, store, text):
        key = new_key()
        store.append(key, [header_entry(key.session_id, key.project_key, None, created_at=T0),
                           message_entry(user(text), ts=T0)])
        expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
        assert store.load(key)[1]["message"]["content"] == expected
        assert store.append(key, [message_entry(user("next"), ts=T0)]) == 2


class TestCreateWhole:
    """A multi-entry creation (fork, import, restore, migrated record) is whole or absent: a refused
    one leaves nothing, and it never lands on a record someone else made."""

    def _entries(self, key: SessionKey, n: int = 50) -> list[dict]:
        return [header_entry(key.session_id, key.project_key, "/w", created_at=T0)] + [
            message_entry(user(f"m{i}") if i % 2 == 0 else assistant(f"a{i}"), ts=T0 + i) for i in range(n)
        ] + [title_entry("Imported", "user", ts=T0)]

    def test_round_trip_and_listed_with_its_count(self, store):
        key = new_key()
        entries = self._entries(key)
        assert store.create_whole(key, entries) == 50
        assert store.load(key) == entries and store.exists(key)
        [meta] = store.list(PK)
        assert (meta.id, meta.message_count, meta.title) == (key.session_id, 50, "Imported")

    def test_existing_session_is_refused_untouched(self, store):
        from core import SessionExists

        key = new_key()
        make_session(store, key, messages=[user("original")])
        before = snapshot(store, key)
        with pytest.raises(SessionExists):
            store.create_whole(key, self._entries(key))
        assert snapshot(store, key) == before
        store.archive(key)
        with pytest.raises(SessionExists):  # an archived one is taken too
            store.create_whole(key, self._entries(key))
        assert store.list(PK) == [] and len(store.load(key)) == 2

    @pytest.mark.parametrize("bad", ["empty", "no header", "bad entry"])
    def test_refused_creation_leaves_nothing(self, store, bad):
        key = new_key()
        entries = {"empty": [], "no header": self._entries(key)[1:],
                   "bad entry": self._entries(key) + [{"type": "message", "ts": float("nan"),
                                                        "message": user("x")}]}[bad]
        with pytest.raises(ValueError):
            store.create_whole(key, entries)
        assert not store.exists(key) and store.load(key) is None and store.list(PK) == []

    def test_sub_agent_record_created_whole_and_not_listed(self, store):
        from core import SessionExists

        key = new_key()
        make_session(store, key)
        sub = SessionKey(key.project_key, key.session_id, "subagents/helper")
        records = [message_entry(user("task"), ts=T0), message_entry(assistant("done"), ts=T0 + 1)]
        assert store.create_whole(sub, records) == 2
        assert store.load(sub) == records
        assert [m.id for m in store.list(PK)] == [key.session_id]
        with pytest.raises(SessionExists):
            store.create_whole(sub, records)
        assert store.load(sub) == records

    def test_manager_create_whole_returns_the_session(self, manager, store):
        key = new_key()
        session = manager.create_whole(key, self._entries(key, 4))
        assert session.title == "Imported" and len(session.messages) == 4
        assert manager.get(key).messages == session.messages


class TestApprovalEntries:
    """Guards against a store dropping or reordering the approval entries of a paused turn (issue
    10): a restart must show the pending approval again instead of losing the turn."""

    def test_pending_approval_survives_a_reload(self, store):
        from core.agent.approval import ApprovalState, decision_entry, request_entry

        key = new_key()
        call = {"id": "call_w", "type": "function",
                "function": {"name": "write_file", "arguments": '{"path": "a.txt", "content": "A"}'}}
        make_session(store, key, messages=[user("write a.txt")])
        request = request_entry("call_w", "write_file", call["function"]["arguments"],
                                "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+A\n", ts=T0 + 5)
        count = store.append(key, [message_entry({"role": "assistant", "content": "", "tool_calls": [call]},
                                                 ts=T0 + 4), request], expected_count=1)
        assert count == 2  # the approval entry is not a message
        loaded = store.load(key)
        assert loaded[-1] == request
        pending = ApprovalState.from_entries(loaded).pending()
        assert [(p.call_id, p.tool, p.preview) for p in pending] == [("call_w", "write_file", request["preview"])]
        assert [m.message_count for m in store.list(PK)] == [2]
        # the answer closes it, in every store
        store.append(key, [decision_entry("call_w", False, reason="not now", ts=T0 + 6)], expected_count=2)
        assert ApprovalState.from_entries(store.load(key)).pending() == []
        assert store.load(key)[-1]["reason"] == "not now"


class TestStoreRound:
    """Guards against a round stored in part: a round's messages, its usage, its checkpoint and
    the approval it paused on are one append, all of it or none, in every store — a rewind then
    always finds the files a stored reply changed, and a paused turn always finds its request."""

    def _round(self):
        from core.agent.approval import request_entry
        from core.agent.checkpoints import checkpoint_entry
        from core.session.rounds import Round
        from core.session.usage import usage_entry

        call = {"id": "call_w", "type": "function", "function": {"name": "write_file", "arguments": "{}"}}
        return Round([{"role": "assistant", "content": "", "tool_calls": [call]}], agent="architect",
                     usage=usage_entry(2, "m", 120, 7, estimated=False),
                     checkpoint=checkpoint_entry(2, [{"path": "a.txt", "before": None, "after": "ab" * 32,
                                                      "mode_before": None, "mode_after": 0o644}]),
                     approval=request_entry("call_w", "write_file", "{}", "+A"))

    def test_a_round_is_stored_whole(self, manager, store, cwd):
        from core.agent.approval import ApprovalState
        from core.agent.checkpoints import checkpoints_of

        s = manager.create(cwd)
        manager.add_messages(s.key, [user("write a.txt")])
        assert manager.store_round(s.key, self._round(), expected_count=1) == 2
        entries = store.load(s.key)
        assert [e["type"] for e in entries[-4:]] == ["message", "usage", "checkpoint", "approval"]
        assert entries[-4]["agent"] == "architect"
        got = manager.get(s.key)
        assert got.usage.replies == 1 and got.usage.prompt == 120
        assert [cp["at"] for cp in checkpoints_of(entries)] == [2]
        assert [p.call_id for p in ApprovalState.from_entries(entries).pending()] == ["call_w"]

    def test_a_refused_round_stores_nothing(self, manager, store, cwd):
        from dataclasses import replace

        s = manager.create(cwd)
        manager.add_messages(s.key, [user("write a.txt")])
        before = store.load(s.key)
        with pytest.raises(SessionConflict):
            manager.store_round(s.key, self._round(), expected_count=0)
        with pytest.raises(ValueError):  # a decision where the round's request goes
            manager.store_round(s.key, replace(self._round(), approval={"type": "approval", "action": "allow"}))
        assert store.load(s.key) == before

    def test_a_round_kept_as_a_version_keeps_its_entries(self, manager, store, cwd):
        s = manager.create(cwd)
        manager.add_messages(s.key, [user("write a.txt")])
        manager.add_messages(s.key, [assistant("another tab answered")])
        version = manager.keep_as_version(s.key, 1, self._round())
        entries = store.load(version.key)
        assert [e["type"] for e in entries[-4:]] == ["message", "usage", "checkpoint", "approval"]
        assert [m["role"] for m in manager.get(version.key).messages] == ["user", "assistant"]


class TestCompactionEntries:
    """A compaction is one appended entry: a store that drops it, rewrites messages around it, or
    counts it as a message would lose the summary or shift every message index (issue 9)."""

    def _compacted(self, manager, cwd, n=6):
        from core.session.compaction import compaction_entry

        s = manager.create(cwd, title="Long one")
        msgs = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(n)]
        manager.add_messages(s.key, msgs[:4])
        entry = compaction_entry("Earlier: the user asked u0 and u2.", 2, tokens_before=900, tokens_after=300,
                                 model="m", trigger="auto")
        assert manager.add_compaction(s.key, entry, expected_count=4) == 4
        manager.add_messages(s.key, msgs[4:])
        return s, msgs, entry

    def test_round_trip_keeps_every_message_and_the_entry(self, manager, store, cwd):
        from core.session.compaction import model_view

        s, msgs, entry = self._compacted(manager, cwd)
        stored = [e for e in store.load(s.key) if e.get("type") == "compaction"]
        assert stored == [entry]
        got = manager.get(s.key)
        assert got.messages == msgs  # nothing removed or rewritten
        assert [c["at"] for c in got.compactions] == [4]
        view = model_view(got.messages, got.compactions)
        assert view[0]["role"] == "system" and "Earlier: the user asked u0 and u2." in view[0]["content"]
        assert view[1:] == msgs[2:]

    def test_list_counts_messages_only(self, manager, cwd):
        s, msgs, _ = self._compacted(manager, cwd)
        meta = next(m for m in manager.list(s.project_key) if m.id == s.id)
        assert meta.message_count == len(msgs) and meta.title == "Long one"

    def test_stale_compaction_is_a_conflict(self, manager, cwd):
        from core.session.compaction import compaction_entry

        s, _, _ = self._compacted(manager, cwd)
        with pytest.raises(SessionConflict):
            manager.add_compaction(s.key, compaction_entry("x", 1, tokens_before=None, tokens_after=None,
                                                           model=None, trigger="manual"), expected_count=4)

    def test_fork_after_the_compaction_keeps_it_before_drops_it(self, manager, cwd):
        s, msgs, entry = self._compacted(manager, cwd)
        after = manager.get(manager.fork(s.key, 4).key)
        assert after.messages == msgs[:5] and [c["summary"] for c in after.compactions] == [entry["summary"]]
        inside = manager.get(manager.fork(s.key, 2).key)  # after the cut (first_kept_index 2), before the entry
        assert inside.messages == msgs[:3] and len(inside.compactions) == 1
        at_point = manager.get(manager.fork(s.key, 1).key)  # exactly the summarised messages
        assert len(at_point.compactions) == 1
        before = manager.get(manager.fork(s.key, 0).key)
        assert before.messages == msgs[:1] and before.compactions == []


class TestVersionFamilies:
    """Edit/Regenerate versions: a store that dropped the family link or the version in use would
    show every version as its own conversation, or reopen the wrong one after a reload."""

    def _chat(self, manager, cwd):
        s = manager.create(cwd, title="Plan")
        manager.add_messages(s.key, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
        return s

    def test_version_header_list_and_current(self, manager, store, cwd):
        s = self._chat(manager, cwd)
        before = store.load(s.key)
        v = manager.fork(s.key, 1, version=True)  # an edit of message 2
        assert store.load(v.key)[0]["version_of"] == {"session_id": s.id, "message_index": 1}
        assert v.title == "Plan" and v.messages == [user("q1"), assistant("a1")]
        metas = {m.id: m for m in store.list(s.project_key)}
        assert metas[v.id].version_of == {"session_id": s.id, "message_index": 1}
        assert metas[v.id].family == s.id
        assert metas[s.id].current_version == v.id  # the root remembers the version in use
        assert manager.get(s.key).messages == [user("q1"), assistant("a1"), user("q2"), assistant("a2")]
        # Only a version entry was appended to the root: every earlier entry is unchanged.
        after = store.load(s.key)
        assert after[:-1] == before and after[-1]["type"] == "version" and after[-1]["current"] == v.id
        assert manager.current_version(s.key) == v.key
        assert manager.current_version(v.key) == v.key

    def test_one_row_per_conversation_and_switching(self, manager, store, cwd, clock):
        s = self._chat(manager, cwd)
        other = manager.create(cwd, title="Other")
        v = manager.fork(s.key, 1, version=True)
        manager.add_messages(v.key, [user("q2 edited")])
        rows = manager.conversations(s.project_key)
        assert sorted(m.id for m in rows) == sorted([s.id, other.id])
        assert rows[0].id == s.id  # the version's new message counts as the conversation's activity
        manager.switch_version(s.key, s.id, expected=v.id)
        assert manager.current_version(v.key) == s.key
        assert {m.id: m for m in store.list(s.project_key)}[s.id].current_version == s.id

    def test_stale_switch_is_refused(self, manager, cwd):
        from core.errors import StaleChange
        s = self._chat(manager, cwd)
        v1 = manager.fork(s.key, 1, version=True)
        v2 = manager.fork(s.key, 1, version=True)  # another tab made v2 current meanwhile
        with pytest.raises(StaleChange):
            manager.switch_version(s.key, s.id, expected=v1.id)
        assert manager.current_version(s.key) == v2.key

    def test_archive_and_delete_take_the_versions(self, manager, store, cwd):
        s = self._chat(manager, cwd)
        v = manager.fork(s.key, 2, version=True)
        manager.archive(s.key)
        assert manager.list(s.project_key) == []
        assert {m.id for m in manager.list(s.project_key, archived=True)} == {s.id, v.id}
        manager.unarchive(s.key)
        manager.delete(s.key)
        assert not store.exists(v.key) and not store.exists(s.key)

    def test_branch_is_its_own_row(self, manager, cwd):
        s = self._chat(manager, cwd)
        b = manager.fork(s.key, 1)
        assert b.version_of is None and b.forked_from == {"session_id": s.id, "message_index": 1}
        assert {m.id for m in manager.conversations(s.project_key)} == {s.id, b.id}

    def test_one_title_on_every_version(self, manager, store, cwd):
        # issue 31, item 1: a rename on a version was written to that version only.
        s = self._chat(manager, cwd)
        v = manager.fork(s.key, 1, version=True)
        manager.rename(v.key, "Renamed on the version")
        assert manager.get(s.key).title == "Renamed on the version" == manager.get(v.key).title
        assert {m.title for m in manager.list(s.project_key)} == {"Renamed on the version"}
        assert [m.title for m in manager.conversations(s.project_key)] == ["Renamed on the version"]
        manager.archive(s.key)
        assert {m.title for m in manager.list(s.project_key, archived=True)} == {"Renamed on the version"}


class TestVersionSwitchRace:
    """Two tabs switching versions from the same state: without a check under the store's lock,
    both switches would be written and the later one would silently undo the earlier."""

    def _family(self, manager, cwd):
        s = manager.create(cwd, title="Plan")
        manager.add_messages(s.key, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
        v1 = manager.fork(s.key, 1, version=True)
        manager.add_messages(v1.key, [user("q2 edited"), assistant("a2'"), user("q3"), assistant("a3")])
        v2 = manager.fork(v1.key, 4, version=True)  # Regenerate of v1's last reply
        manager.add_messages(v2.key, [assistant("a3 again")])
        return s, v1, v2

    def test_expected_version_is_checked_by_the_store(self, manager, store, cwd):
        from core.errors import StaleChange
        from core.session.entries import version_entry
        s, v1, v2 = self._family(manager, cwd)
        before = store.load(s.key)
        with pytest.raises(StaleChange):  # v2 is in use, the caller read v1
            store.append(s.key, [version_entry(s.id)], expected_version=v1.id)
        assert store.load(s.key) == before
        store.append(s.key, [version_entry(s.id)], expected_version=v2.id)
        assert {m.id: m for m in store.list(s.project_key)}[s.id].current_version == s.id
        fresh = manager.create(cwd)  # no version entry yet: the root itself is in use
        store.append(fresh.key, [version_entry(fresh.id)], expected_version=fresh.id)

    def test_two_tabs_racing_exactly_one_switch_wins(self, manager, store, cwd):
        import threading

        from core.errors import StaleChange
        s, v1, v2 = self._family(manager, cwd)
        for _ in range(3):
            shown = manager.current_version(s.key).session_id
            targets = [t for t in (s.id, v1.id, v2.id) if t != shown][:2]
            barrier, results = threading.Barrier(2), {}

            def switch(to):
                barrier.wait()
                try:
                    results[to] = SessionManager(store).switch_version(s.key, to, expected=shown)
                except StaleChange:
                    results[to] = None

            threads = [threading.Thread(target=switch, args=(t,)) for t in targets]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            won = [to for to, key in results.items() if key is not None]
            assert len(won) == 1, results
            assert manager.current_version(s.key).session_id == won[0]

    def test_writing_in_a_version_makes_it_the_one_in_use(self, manager, store, cwd):
        s, v1, v2 = self._family(manager, cwd)
        assert manager.use_version(v2.key) is False  # already in use: nothing written
        assert manager.use_version(v1.key) is True
        assert {m.id: m for m in store.list(s.project_key)}[s.id].current_version == v1.id
        assert manager.current_version(v2.key) == v1.key
        plain = manager.create(cwd)
        assert manager.use_version(plain.key) is False and store.load(plain.key)[-1]["type"] == "header"

    def test_arrows_bring_back_the_version_last_used_below_a_point(self, manager, cwd):
        s, v1, v2 = self._family(manager, cwd)
        points = manager.version_points(v2.key)
        assert [(p["index"], p["n"], p["m"]) for p in points] == [(2, 2, 2), (5, 2, 2)]
        manager.switch_version(s.key, s.id)  # back to the first version at message 2
        assert manager.version_points(s.key) == [{"index": 2, "n": 1, "m": 2, "ids": [s.id, v2.id]}]
        manager.switch_version(s.key, v1.id)  # v1 used last below message 2 now
        manager.switch_version(s.key, s.id)
        assert manager.version_points(s.key)[0]["ids"] == [s.id, v1.id]
        assert manager.version_number(v1.key) == (2, 3, False)
        assert manager.version_number(s.key) == (1, 3, True)


class TestCutPoints:
    """A fork inside a tool round would copy a call without its result: the API refuses the
    whole conversation after that, so every fork path moves the cut to a boundary."""

    def _round(self, manager, cwd, results=3):
        s = manager.create(cwd)
        calls = [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
                 for i in range(3)]
        msgs = [user("look"), {"role": "assistant", "content": None, "tool_calls": calls}]
        msgs += [{"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"} for i in range(results)]
        manager.add_messages(s.key, msgs)
        return s, msgs

    @pytest.mark.parametrize("at", [1, 2, 3])
    def test_branch_inside_a_parallel_round_keeps_the_round_whole(self, manager, cwd, at):
        s, msgs = self._round(manager, cwd)
        f = manager.fork(s.key, at)
        assert f.messages == msgs[:5]
        assert f.forked_from["message_index"] == 4

    def test_unfinished_round_is_left_out_not_made_up(self, manager, cwd):
        s, msgs = self._round(manager, cwd, results=2)
        f = manager.fork(s.key, 3)
        assert f.messages == msgs[:1]
        v = manager.fork(s.key, 2, version=True)
        assert v.messages == msgs[:1] and v.version_of["message_index"] == 0


class TestMoveToAnotherProject:
    """A project folder renamed or moved (issue 18, item 6): moving its sessions to the project
    open now must keep ids, every entry and timestamp, sub-agent records, versions and the archived
    flag, leave nothing behind in the old project, and finish (never duplicate) after a kill."""

    def _moved_folder(self, tmp_path):
        old, new = tmp_path / "shop-api", tmp_path / "shop-api-renamed"
        new.mkdir()
        return str(old), str(new)

    def test_move_keeps_everything(self, manager, store, tmp_path):
        from core.stores.move import move_conversation

        old, new = self._moved_folder(tmp_path)
        s = manager.create(old, title="Checkout plan")
        manager.add_messages(s.key, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
        sub = SessionKey(s.project_key, s.id, "subagents/a1")
        store.create_whole(sub, [header_entry(s.id, s.project_key, old, created_at=T0), message_entry(user("task"))])
        v = manager.fork(s.key, 1, version=True)
        before = {k.session_id: store.load(k) for k in (s.key, v.key)}
        sub_before = store.load(sub)
        report = move_conversation(store, v.key, new, now=T0 + 50)
        assert report.key == SessionKey(project_key(new), v.id) and len(report.moved) == 2
        new_pk = project_key(new)
        for sid, entries in before.items():
            moved = store.load(SessionKey(new_pk, sid))
            assert moved[1:] == entries[1:], "every entry after the header is unchanged"
            head = moved[0]
            assert head["id"] == sid and head["created_at"] == entries[0]["created_at"]
            assert head["project_key"] == new_pk and head["cwd"] == new
            assert head["moved_from"] == {"project_key": s.project_key, "cwd": old, "at": T0 + 50}
            assert not store.exists(SessionKey(s.project_key, sid))
        moved_sub = store.load(SessionKey(new_pk, s.id, "subagents/a1"))
        assert moved_sub[1:] == sub_before[1:] and moved_sub[0]["project_key"] == new_pk
        assert not store.exists(sub)
        moved = manager.get(SessionKey(new_pk, s.id))
        assert moved.title == "Checkout plan" and moved.created_at == s.created_at
        assert moved.messages == [user("q1"), assistant("a1"), user("q2"), assistant("a2")]
        assert manager.current_version(SessionKey(new_pk, s.id)).session_id == v.id  # the family holds
        assert [m.id for m in manager.conversations(new_pk)] == [s.id]
        assert manager.list(s.project_key) == [] and manager.list(s.project_key, archived=True) == []

    def test_archived_stays_archived(self, manager, store, tmp_path):
        from core.stores.move import move_conversation

        old, new = self._moved_folder(tmp_path)
        s = manager.create(old)
        manager.add_messages(s.key, [user("q"), assistant("a")])
        manager.archive(s.key)
        move_conversation(store, s.key, new)
        assert [m.id for m in store.list(project_key(new), archived=True)] == [s.id]
        assert store.list(project_key(new)) == []

    def test_rerun_after_a_kill_finishes_without_duplicates(self, manager, store, tmp_path):
        from core.stores.move import move_conversation

        old, new = self._moved_folder(tmp_path)
        s = manager.create(old)
        manager.add_messages(s.key, [user("q"), assistant("a")])
        new_key = SessionKey(project_key(new), s.id)
        # Killed after creating the new record, before removing the old one.
        head = dict(store.load(s.key)[0], project_key=new_key.project_key, cwd=new,
                    moved_from={"project_key": s.project_key, "cwd": old, "at": T0})
        store.create_whole(new_key, [head, *store.load(s.key)[1:]])
        report = move_conversation(store, s.key, new)
        assert report.key == new_key and not store.exists(s.key)
        assert manager.get(new_key).messages == [user("q"), assistant("a")]

    def test_a_different_session_with_that_id_is_never_overwritten(self, manager, store, tmp_path):
        from core.errors import SessionExists
        from core.stores.move import move_conversation

        old, new = self._moved_folder(tmp_path)
        s = manager.create(old)
        manager.add_messages(s.key, [user("mine")])
        other = SessionKey(project_key(new), s.id)
        store.create_whole(other, [header_entry(s.id, other.project_key, new), message_entry(user("theirs"))])
        with pytest.raises(SessionExists):
            move_conversation(store, s.key, new)
        assert manager.get(s.key).messages == [user("mine")]
        assert manager.get(other).messages == [user("theirs")]

    def test_already_there_and_missing(self, manager, store, tmp_path):
        from core.stores.move import move_conversation

        old, new = self._moved_folder(tmp_path)
        s = manager.create(new)
        assert move_conversation(store, s.key, new).already
        with pytest.raises(SessionNotFound):
            move_conversation(store, SessionKey(project_key(old), new_session_id()), new)


class TestExpertSessions:
    """An expert agent's session (issue 30: ``expert-<name>``, one per project) lost by a store, shown
    as a chat, cleaned up as idle, or left behind by a backup, a migration or a mirror."""

    def _expert(self, store, pk: str = PK):
        from core.session.experts import HEADER_KEY, expert_key

        key = expert_key(pk, "architect")
        head = header_entry(key.session_id, pk, "/home/user/my-project", created_at=T0)
        head[HEADER_KEY] = {"name": "architect", "source": "project"}
        store.create_whole(key, [head, title_entry("architect", "user", ts=T0),
                                 message_entry({"role": "system", "content": "You are the architect."}, ts=T0)])
        for i in range(2):  # two consultations, appended like any session
            store.append(key, [message_entry(user(f"question {i}"), ts=T0 + 10 * i + 1),
                               message_entry(assistant(f"answer {i}"), ts=T0 + 10 * i + 2)])
        return key

    def test_kept_and_not_a_chat(self, manager, store):
        from core.session.experts import expert_info

        chat = new_key()
        make_session(store, chat, messages=[user("hi")])
        key = self._expert(store)
        assert expert_info(store.load(key)) == {"name": "architect", "source": "project"}
        got = manager.get(key)
        assert got.title == "architect" and [m["content"] for m in got.messages][1:] == [
            "question 0", "answer 0", "question 1", "answer 1"]
        assert {m.id for m in store.list(PK)} == {chat.session_id, key.session_id}  # the store lists it: carried
        assert [m.id for m in manager.list(PK)] == [chat.session_id]
        assert [m.id for m in manager.conversations(PK)] == [chat.session_id]
        assert [m.id for m in manager.experts(PK)] == [key.session_id]
        assert manager.latest(PK).id == chat.session_id
        assert manager.find(PK, "expert-architect") == key
        assert key.session_id not in {m.id for m in manager.idle_sessions(1, now=T0 + 400 * DAY)}

    def test_backup_migration_and_mirror_carry_it(self, store, tmp_path):
        from core.stores.backup import backup_store, restore_backup
        from core.stores.migrate import migrate_sessions
        from core.stores.mirror import MirroredSessionStore

        key = self._expert(store)
        entries = store.load(key)
        moved = LocalSessionStore(tmp_path / "migrated")
        migrate_sessions(store, moved)
        assert moved.load(key) == entries
        backup_store(store, tmp_path / "all.zip")
        restored = LocalSessionStore(tmp_path / "restored")
        restore_backup(tmp_path / "all.zip", restored)
        assert restored.load(key) == entries
        # This store as the mirror of a local one: the expert's later consultation reaches it too.
        local = LocalSessionStore(tmp_path / "local")
        migrate_sessions(store, local)
        mirrored = MirroredSessionStore(local, store, outbox_path=tmp_path / "outbox.db")
        try:
            mirrored.append(key, [message_entry(user("question 2"), ts=T0 + 50)])
            assert mirrored.flush(10)
        finally:
            mirrored.close()
        assert [e["message"]["content"] for e in store.load(key) if e["type"] == "message"][-1] == "question 2"


def _mirrored_jsonl_sqlite(tmp_path):
    from core.stores.mirror import MirroredSessionStore
    from core.stores.sql_store import SqlSessionStore

    return MirroredSessionStore(LocalSessionStore(tmp_path / "primary"),
                                SqlSessionStore(f"sqlite:///{tmp_path / 'mirror.sqlite3'}"),
                                outbox_path=tmp_path / "outbox.sqlite3", retry_initial=0.02, retry_max=0.1,
                                poll_interval=0.05)


_ORGANISED = {**STORE_FACTORIES, **MIRROR_STORE_FACTORIES, "mirrored": _mirrored_jsonl_sqlite}


@pytest.fixture(params=sorted(_ORGANISED))
def any_store(request, tmp_path):
    """Every store of the contract, and a mirrored one (JSONL primary, SQLite mirror)."""
    yield from made_store(_ORGANISED[request.param], tmp_path)


class TestPinsAndTags:
    """Pins and tags (issue 31): a store that lost a pin or tags entry, or listed them only after
    reading the messages, would drop a chat from the top of the sidebar or from its tag's filter;
    two tabs pinning and tagging at once must both be kept (last write wins per field)."""

    def test_listed_as_metadata_on_the_conversation(self, any_store, cwd, tmp_path):
        manager = SessionManager(any_store)
        s = manager.create(cwd, title="Plan")
        manager.add_messages(s.key, [user("q1"), assistant("a1")])
        v = manager.fork(s.key, 0, version=True)
        assert manager.pin(v.key) == s.key  # a version's pin is its conversation's
        assert manager.tag(v.key, add=["Work", "urgent"]) == ("work", "urgent")
        metas = {m.id: m for m in any_store.list(s.project_key)}
        assert metas[s.id].pinned and metas[s.id].tags == ("work", "urgent")
        assert metas[v.id].pinned is None and metas[v.id].tags == ()
        row = next(m for m in manager.conversations(s.project_key) if m.id == s.id)
        assert row.pinned and row.tags == ("work", "urgent")
        assert manager.pin_and_tags(v.key) == (row.pinned, ("work", "urgent"))
        assert manager.get(s.key).messages == [user("q1"), assistant("a1")]  # no message added
        assert manager.tag(s.key, remove=["work"], add=["later"]) == ("urgent", "later")
        manager.pin(s.key, False)
        meta = next(m for m in any_store.list(s.project_key) if m.id == s.id)
        assert meta.pinned is None and meta.tags == ("urgent", "later")
        manager.archive(s.key)
        meta = next(m for m in any_store.list(s.project_key, archived=True) if m.id == s.id)
        assert meta.tags == ("urgent", "later")
        if hasattr(any_store, "flush"):  # a mirrored store: the mirror's copy carries them too
            assert any_store.flush(10)
            from core.stores.sql_store import SqlSessionStore

            mirror = SqlSessionStore(f"sqlite:///{tmp_path / 'mirror.sqlite3'}")
            try:
                copy = {m.id: m for m in mirror.list(s.project_key) + mirror.list(s.project_key, archived=True)}
            finally:
                mirror.close()
            assert copy[s.id].tags == ("urgent", "later") and copy[s.id].pinned is None

    def test_two_writers_keep_both(self, any_store, cwd):
        tab_a, tab_b = SessionManager(any_store), SessionManager(any_store)
        s = tab_a.create(cwd, title="Shared")
        tab_a.tag(s.key, add=["work"])
        tab_b.tag(s.key, add=["urgent"])  # B had not seen A's tag: both stay
        tab_a.pin(s.key, True)
        tab_b.pin(s.key, False)  # the last pin entry wins
        entries = any_store.load(s.key)
        assert [e["type"] for e in entries[-4:]] == ["tags", "tags", "pin", "pin"]
        assert tab_a.pin_and_tags(s.key) == (None, ("work", "urgent"))

    def test_no_change_writes_nothing_and_bad_tags_are_refused(self, any_store, cwd):
        from core.errors import InvalidTag

        manager = SessionManager(any_store)
        s = manager.create(cwd)
        manager.tag(s.key, add=["a"])
        n = len(any_store.load(s.key))
        assert manager.tag(s.key, add=["A"], remove=["absent"]) == ("a",)
        assert len(any_store.load(s.key)) == n
        for bad in ("", "  ", "a,b", "x\u202ey", "#"):
            with pytest.raises(InvalidTag):
                manager.tag(s.key, add=[bad])
        with pytest.raises(InvalidTag):
            manager.tag(s.key, add=[f"t{i}" for i in range(21)])
        with pytest.raises(SessionNotFound):
            manager.pin(new_key())
