"""The memory backend contract, written once and run on every store kind (JSONL, SQLite, PostgreSQL)
through the ``store`` fixture, plus the mirror and ``migrate`` carrying memories.

Covers :class:`core.stores.memory_log.MemoryLog` (a storage's ``memory_log``) and
:class:`core.memory.store.MemoryStore` over it.
"""
from __future__ import annotations

import pytest

from core import LocalSessionStore, project_key
from core.errors import InvalidMemory, MemoryNotFound
from core.memory.model import add_entry, remove_entry, update_entry
from core.memory.store import MemoryStore
from core.storage import Storage
from core.stores.memory_log import copy_memory_log, project_scope

PK = project_key("/home/user/my-project")
OTHER = project_key("/home/user/other")


@pytest.fixture
def storage(store) -> Storage:
    return Storage(store)


@pytest.fixture
def memlog(storage):
    return storage.memory_log


@pytest.fixture
def memories(storage) -> MemoryStore:
    return storage.memories


class TestLog:
    """Entries lost, reordered, doubled on a retried copy, or leaking from one scope into another."""

    def test_entries_come_back_in_order_per_scope(self, memlog):
        a, b = add_entry("m1", "uses tabs", "user", ts=1.0), add_entry("m2", "prefers pytest", "model", ts=2.0)
        assert memlog.append(project_scope(PK), [a, b]) == 2
        u = add_entry("m3", "answers in French", "user", ts=3.0)
        memlog.append("user", [u])
        assert memlog.load(project_scope(PK)) == [a, b]
        assert memlog.load("user") == [u]
        assert memlog.load(project_scope(OTHER)) == []
        assert memlog.scopes() == sorted(["user", project_scope(PK)])

    def test_an_entry_copied_twice_is_stored_once(self, memlog):
        a = add_entry("m1", "uses tabs", "user")
        memlog.append("user", [a])
        assert memlog.append("user", [a, a]) == 0
        assert memlog.load("user") == [a]

    def test_bad_scope_or_entry_writes_nothing(self, memlog):
        with pytest.raises(ValueError):
            memlog.append("project:../../etc", [add_entry("m1", "x", "user")])
        with pytest.raises(ValueError):
            memlog.append("user", [{"op": "add", "id": "m1"}])  # no eid
        assert memlog.scopes() == []


class TestMemoryStore:
    """The user's edits not sticking, or a removed memory coming back."""

    def test_add_list_update_remove(self, memories):
        a = memories.add("We use tabs", scope="project", project_key=PK)
        u = memories.add("I prefer short answers", scope="user")
        assert [m.id for m in memories.list(PK)] == [u.id, a.id]  # most recent first
        assert [m.id for m in memories.list(OTHER)] == [u.id]  # user memories reach every project
        assert memories.list(PK, "project") == [a]
        edited = memories.update(a.id[:6], "We use tabs, width 4", project_key=PK)
        assert edited.text == "We use tabs, width 4" and edited.created_at == a.created_at
        assert memories.remove(a.id, project_key=PK).id == a.id
        assert [m.id for m in memories.list(PK)] == [u.id]
        with pytest.raises(MemoryNotFound):
            memories.get(a.id, PK)

    def test_origin_is_kept(self, memories):
        m = memories.add("Deploys go through CI", project_key=PK, source="model", session_id="s1", message_index=3)
        got = memories.get(m.id, PK)
        assert (got.source, got.session_id, got.message_index, got.scope) == ("model", "s1", 3, "project")

    def test_same_text_is_not_added_twice(self, memories):
        a = memories.add("We use tabs", project_key=PK)
        assert memories.add("  we   USE tabs ", project_key=PK).id == a.id
        assert len(memories.list(PK)) == 1

    def test_removed_memory_never_comes_back(self, memories, memlog):
        m = memories.add("We use tabs", project_key=PK)
        memories.remove(m.id, project_key=PK)
        scope = project_scope(PK)
        # A late update (another process, a mirror re-delivering) and a re-delivered add.
        memlog.append(scope, [update_entry(m.id, "We use spaces", "model", ts=m.created_at + 100)])
        memlog.append(scope, [add_entry(m.id, "We use tabs", "model", ts=m.created_at + 200)])
        assert memories.list(PK) == []
        assert memories.removed_texts(PK) == ["We use spaces"]

    def test_remove_delivered_before_its_add_still_wins(self, memlog, memories):
        scope = project_scope(PK)
        memlog.append(scope, [remove_entry("m1", "user", ts=5.0)])
        memlog.append(scope, [add_entry("m1", "We use tabs", "user", ts=1.0)])
        assert memories.list(PK) == []

    def test_a_restated_fact_is_not_stored_twice(self, memories):
        """Issue 28: the same fact worded slightly differently appeared twice in every prompt."""
        first = memories.add("The user prefers tabs for indentation", scope="user", source="model")
        for again in ("User prefers tabs for indentation.", "the user prefers TABS for  indentation",
                      "User prefers tabs"):
            assert memories.add(again, scope="user", source="model").id == first.id
        assert [m.text for m in memories.list(scope="user")] == ["The user prefers tabs for indentation"]

    def test_a_fact_said_with_more_replaces_the_old_one(self, memories):
        old = memories.add("Migrations run with alembic", project_key=PK, source="model")
        new = memories.add("Migrations run with alembic from the repo root", project_key=PK, source="model")
        assert new.id == old.id and new.text == "Migrations run with alembic from the repo root"
        assert len(memories.list(PK, scope="project")) == 1

    def test_a_changed_value_is_another_fact(self, memories):
        memories.add("The database listens on port 5432", project_key=PK)
        memories.add("The database listens on port 5433", project_key=PK)
        memories.add("Deploys go through staging first", project_key=PK)
        assert len(memories.list(PK, scope="project")) == 3

    def test_secret_is_never_stored(self, memories, memlog):
        with pytest.raises(InvalidMemory, match="secret"):
            memories.add("The OpenAI key is sk-proj-a8F3kLm92QxZ7vB1nR4t", project_key=PK)
        with pytest.raises(InvalidMemory):
            memories.add("db password: Tr0ub4dor&3", scope="user")
        assert memlog.scopes() == []

    def test_empty_and_too_long_are_refused(self, memories):
        for bad in ("", "   ", "x" * 501):
            with pytest.raises(InvalidMemory):
                memories.add(bad, project_key=PK)


class TestCarried:
    """Memories left behind by ``migrate`` or the mirror, or a removal not travelling with its add."""

    def test_migrate_copies_memories_and_removals(self, storage, memories, tmp_path):
        from core.stores.migrate import migrate_sessions

        keep = memories.add("We use tabs", project_key=PK)
        gone = memories.add("We use Python 3.8", project_key=PK)
        memories.remove(gone.id, project_key=PK)
        memories.add("I like terse answers", scope="user")
        target = Storage(LocalSessionStore(tmp_path / "target"))
        logs = (storage.memory_log, target.memory_log)
        report = migrate_sessions(storage.sessions, target.sessions, memories=logs)
        assert report.ok and report.memory_entries == 4
        assert [m.text for m in target.memories.list(PK)] == ["I like terse answers", keep.text]
        again = migrate_sessions(storage.sessions, target.sessions, memories=logs)  # safe to re-run: nothing doubled
        assert again.ok and again.memory_entries == 0
        assert len(target.memory_log.load(project_scope(PK))) == 3

    def test_copy_is_a_union(self, memlog, tmp_path):
        other = Storage(LocalSessionStore(tmp_path / "other")).memory_log
        a, b = add_entry("m1", "one", "user"), add_entry("m2", "two", "user")
        memlog.append("user", [a])
        other.append("user", [b])
        assert copy_memory_log(memlog, other, "user") == 1
        assert {e["eid"] for e in other.load("user")} == {a["eid"], b["eid"]}


def test_mirror_carries_memories(tmp_path):
    """A mirrored store's memories reaching the mirror (and a failing mirror never failing a write)."""
    from core.stores.mirror import MirroredSessionStore

    primary = LocalSessionStore(tmp_path / "primary")
    mirror = LocalSessionStore(tmp_path / "mirror")
    storage = Storage(primary, mirror=MirroredSessionStore(primary, mirror, outbox_path=tmp_path / "outbox.sqlite3"))
    try:
        memories = storage.memories
        m = memories.add("We use tabs", project_key=PK)
        memories.remove(memories.add("temporary", project_key=PK).id, project_key=PK)
        assert memories.log.flush(10)
        the_mirror = Storage(mirror)
        assert [x.id for x in the_mirror.memories.list(PK)] == [m.id]
        assert len(the_mirror.memory_log.load(project_scope(PK))) == 3
    finally:
        storage.close()
