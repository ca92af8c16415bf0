"""The data dir on a full disk (a real tmpfs of 1 MiB, filled to the last byte).

Guards against what a full disk used to do: ``create()`` leaving a 0-byte session that the list
then showed, every ``list()`` leaking a ``.index.*.tmp`` file, a fork leaving a short copy, and
the store staying broken after space was freed.
"""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager
from core.errors import is_disk_full, os_error_message
from core.session.keys import project_key
from tests.support.tiny_disk import mounted


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    yield from mounted(tmp_path_factory, "tiny")


@pytest.fixture
def home(disk, request):
    """A fresh data dir on the tiny disk (space freed again afterwards)."""
    path = disk.path / request.node.name[:40].replace("[", "_").replace("]", "_")
    path.mkdir()
    yield path
    disk.free()


@pytest.fixture
def work(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


def messages(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 200}
            for i in range(n)]


class TestFullDisk:
    """Disk full mid-write: nothing half-written, nothing left over, a readable reason."""

    def test_create_leaves_no_empty_session(self, disk, home, work):
        mgr = SessionManager(LocalSessionStore(home))
        pk = project_key(work)
        disk.fill()
        with pytest.raises(OSError) as caught:
            mgr.create(work, title="doomed")
        assert is_disk_full(caught.value)
        assert os_error_message(caught.value).startswith("The disk is full")
        assert mgr.list(pk) == []
        assert mgr.list(pk) == []  # listing twice on the full disk leaks nothing either
        assert disk.files() == []  # no 0-byte session, no .part, no .index.*.tmp

    def test_list_leaks_no_index_temp_file(self, disk, home, work):
        store = LocalSessionStore(home)
        mgr = SessionManager(store)
        made = [mgr.create(work, title=f"s{i}") for i in range(3)]
        index = store.projects_dir / made[0].project_key / ".index"
        index.unlink(missing_ok=True)  # the next list() must write a new one
        disk.fill()
        for _ in range(3):
            fresh = LocalSessionStore(home)  # a new process: rescans and tries to write the index
            assert sorted(m.id for m in fresh.list(made[0].project_key)) == sorted(s.id for s in made)
        assert not [f for f in disk.files() if ".tmp" in f or ".part" in f]

    def test_fork_and_append_write_nothing(self, disk, home, work):
        mgr = SessionManager(LocalSessionStore(home))
        s = mgr.create(work, title="long")
        mgr.add_messages(s.key, messages(40))
        before = disk.files()
        original = mgr.get(s.key).messages
        disk.fill()
        with pytest.raises(OSError) as caught:
            mgr.fork(s.key, 30)
        assert is_disk_full(caught.value)
        with pytest.raises(OSError):
            mgr.add_messages(s.key, messages(30), expected_count=40)
        assert [m.id for m in mgr.list(s.project_key)] == [s.id]
        assert mgr.get(s.key).messages == original
        assert disk.files() == before

    def test_everything_works_once_space_is_freed(self, disk, home, work):
        mgr = SessionManager(LocalSessionStore(home))
        s = mgr.create(work, title="before")
        mgr.add_messages(s.key, messages(4))
        disk.fill()
        for attempt in (lambda: mgr.create(work), lambda: mgr.fork(s.key, 2),
                        lambda: mgr.add_messages(s.key, messages(30))):
            with pytest.raises(OSError):
                attempt()
        disk.free()
        t = mgr.create(work, title="after")
        assert mgr.add_messages(s.key, messages(2), expected_count=4) == 6
        f = mgr.fork(s.key, 5)
        assert {m.id: m.message_count for m in mgr.list(s.project_key)} == {s.id: 6, t.id: 0, f.id: 6}
