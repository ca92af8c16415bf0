"""The list() metadata index: fast (unchanged sessions are not read), and never wrong for long.

The index (``projects/<key>/.index``) is a cache. These tests spy on ``core.stores.jsonl_io`` to see
which session files ``list()`` opens and how many lines it parses, and damage or bypass the index
in the ways a user or another process would.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import core.stores.jsonl_io
from core.stores import jsonl_index
from core import (
    LocalSessionStore,
    SessionKey,
    SessionManager,
    header_entry,
    message_entry,
    new_session_id,
    project_key,
    title_entry,
)

ROOT = Path(__file__).resolve().parents[3]
PK = project_key("/home/user/my-project")
T0 = 1_764_504_000.0


def user(text: str) -> dict:
    return {"role": "user", "content": text}


class Spy:
    """Counts session files opened and lines parsed by the metadata scan."""

    def __init__(self, monkeypatch):
        self.opened: list[str] = []
        self.parsed = 0
        real_open, real_parse = open, core.stores.jsonl_io.parse_line

        def spy_open(path, *args, **kw):
            self.opened.append(os.fspath(path))
            return real_open(path, *args, **kw)

        def spy_parse(raw, path, lineno):
            self.parsed += 1
            return real_parse(raw, path, lineno)

        real_read_whole = core.stores.jsonl_io._read_whole

        def spy_read_whole(path, size):
            self.opened.append(os.fspath(path))
            return real_read_whole(path, size)

        monkeypatch.setattr(core.stores.jsonl_io, "open", spy_open, raising=False)
        monkeypatch.setattr(core.stores.jsonl_io, "_read_whole", spy_read_whole)
        monkeypatch.setattr(core.stores.jsonl_io, "parse_line", spy_parse)

    def reset(self) -> None:
        self.opened.clear()
        self.parsed = 0

    def sessions_opened(self) -> list[str]:
        return sorted(Path(p).stem for p in self.opened if p.endswith(".jsonl"))


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


def populate(home: Path, n_sessions: int = 4, n_messages: int = 60) -> list[SessionKey]:
    store = LocalSessionStore(home)
    keys = []
    for s in range(n_sessions):
        key = SessionKey(PK, new_session_id())
        entries = [header_entry(key.session_id, PK, "/home/user/my-project", created_at=T0 + s)]
        entries += [message_entry(user(f"s{s} m{i}"), ts=T0 + 100 * s + i) for i in range(n_messages)]
        entries.append(title_entry(f"Session {s}", "llm", ts=T0 + s))
        store.append(key, entries)
        keys.append(key)
    return keys


def session_path(home: Path, key: SessionKey, archived: bool = False) -> Path:
    d = home / "projects" / key.project_key
    return (d / "archive" if archived else d) / f"{key.session_id}.jsonl"


def later(path: Path, seconds: float = 2.0) -> None:
    """Move the file's mtime forward, as a hand edit seconds after the last write would."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + int(seconds * 1e9)))


def summary(metas) -> list[tuple]:
    return [(m.id, m.title, m.message_count, m.created_at, m.updated_at) for m in metas]


@pytest.fixture
def settled_files(monkeypatch):
    """The session files were written long ago: a file changed within two seconds of a list()
    is read again by the next one (git's racy-clean rule, TestRacyClean), which tests of what
    an unchanged file costs must not trip over."""
    monkeypatch.setattr(core.stores.jsonl_io, "RACY_NS", 0)
    monkeypatch.setattr(core.stores.jsonl_io, "FINE_RACY_NS", 0)


@pytest.mark.usefixtures("settled_files")
class TestNoNeedlessReads:
    """A long history must not make the session list slow: unchanged sessions are not read."""

    def test_unchanged_sessions_are_not_read(self, home, monkeypatch):
        populate(home)
        first = LocalSessionStore(home).list(PK)
        assert len(first) == 4 and all(m.message_count == 60 for m in first)
        spy = Spy(monkeypatch)
        fresh = LocalSessionStore(home)  # as a new process would: only the index on disk
        assert summary(fresh.list(PK)) == summary(first)
        assert fresh.list(PK, archived=False) == first
        assert spy.sessions_opened() == [] and spy.parsed == 0

    def test_only_the_appended_tail_is_read(self, home, monkeypatch):
        keys = populate(home)
        store = LocalSessionStore(home)
        store.list(PK)
        LocalSessionStore(home).append(keys[1], [message_entry(user("new"), ts=T0 + 10_000),
                                                 message_entry(user("newer"), ts=T0 + 10_001)])
        spy = Spy(monkeypatch)
        metas = store.list(PK)
        assert metas[0].id == keys[1].session_id and metas[0].message_count == 62
        assert metas[0].updated_at == pytest.approx(T0 + 10_001)
        assert spy.sessions_opened() == [keys[1].session_id]
        assert spy.parsed == 2  # the two new lines, not the 62 before them
        spy.reset()
        LocalSessionStore(home).list(PK)  # the index on disk is up to date too
        assert spy.sessions_opened() == [] and spy.parsed == 0

    def test_a_new_process_reads_only_the_appended_tail(self, home, monkeypatch, caplog):
        # The part of the index that lets list() continue a file where it stopped is read back
        # from disk by a new process (not only kept in memory by the one that wrote it).
        keys = populate(home)
        LocalSessionStore(home).list(PK)
        LocalSessionStore(home).append(keys[2], [message_entry(user("new"), ts=T0 + 10_000)])
        spy = Spy(monkeypatch)
        with caplog.at_level(logging.WARNING):
            metas = LocalSessionStore(home).list(PK)
        assert (metas[0].id, metas[0].message_count) == (keys[2].session_id, 61)
        assert spy.sessions_opened() == [keys[2].session_id] and spy.parsed == 1
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    def test_torn_tail_is_read_again_once_finished(self, home):
        (key,) = populate(home, 1, 3)
        store = LocalSessionStore(home)
        path = session_path(home, key)
        full = json.dumps(message_entry(user("late"), ts=T0 + 500)).encode() + b"\n"
        with open(path, "ab") as f:
            f.write(full[:20])
        assert store.list(PK)[0].message_count == 3
        with open(path, "ab") as f:
            f.write(full[20:])
        (meta,) = store.list(PK)
        assert (meta.message_count, meta.updated_at) == (4, pytest.approx(T0 + 500))


class TestSelfHealing:
    """The index is only a cache: whatever happens to it or behind its back, list() is right."""

    def _truth(self, home: Path) -> list[tuple]:
        # What a store that has never seen an index reports.
        tmp = home.parent / "truth"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(home, tmp, ignore=shutil.ignore_patterns(".index"))
        return summary(LocalSessionStore(tmp).list(PK))

    def test_index_deleted(self, home):
        populate(home)
        store = LocalSessionStore(home)
        before = summary(store.list(PK))
        index = home / "projects" / PK / ".index"
        assert index.is_file()
        index.unlink()
        assert summary(LocalSessionStore(home).list(PK)) == before
        assert summary(store.list(PK)) == before
        assert index.is_file()  # rebuilt

    @pytest.mark.parametrize("garbage", [b"\x00\x01garbage{", b"", b"[]", b'{"version": 1, "files": 7}',
                                         b'{"version": 1, "files": {"x": [1, 2]}}', b'{"version": 99}'])
    def test_index_corrupted(self, home, garbage, caplog):
        keys = populate(home)
        store = LocalSessionStore(home)
        before = summary(store.list(PK))
        (home / "projects" / PK / ".index").write_bytes(garbage)
        assert summary(store.list(PK)) == before  # the same instance notices the change
        assert summary(LocalSessionStore(home).list(PK)) == before
        store.append(keys[0], [message_entry(user("x"), ts=T0 + 9_999)])
        assert store.list(PK)[0].id == keys[0].session_id
        assert summary(store.list(PK)) == self._truth(home)

    def test_index_lying_about_a_changed_file(self, home):
        # An index copied from a backup describes older files of other sizes: they are rescanned.
        keys = populate(home)
        store = LocalSessionStore(home)
        store.list(PK)
        index = home / "projects" / PK / ".index"
        old_index = index.read_bytes()
        store.append(keys[2], [message_entry(user("x"), ts=T0 + 9_999)])
        store.list(PK)
        index.write_bytes(old_index)
        assert summary(LocalSessionStore(home).list(PK)) == self._truth(home)
        assert LocalSessionStore(home).list(PK)[0].message_count == 61

    def test_title_line_edited_by_hand(self, home):
        (key,) = populate(home, 1, 5)
        store = LocalSessionStore(home)
        assert store.list(PK)[0].title == "Session 0"
        path = session_path(home, key)
        path.write_bytes(path.read_bytes().replace(b'"Session 0"', b'"Renamed in vim"'))
        later(path)
        assert store.list(PK)[0].title == "Renamed in vim"
        assert LocalSessionStore(home).list(PK)[0].title == "Renamed in vim"

    def test_title_edited_by_hand_to_same_length(self, home):
        # "Session 0" -> "Session 9": same size, later mtime. The scan must not mistake an edit of
        # the same length for "nothing appended" and keep showing the old title.
        store = LocalSessionStore(home)
        m = SessionManager(store)
        s = m.create("/home/user/my-project", title="Session 0")  # the title is line 2
        m.add_messages(s.key, [user("hello"), {"role": "assistant", "content": "hi, how can I help?"}])
        assert store.list(PK)[0].title == "Session 0"
        path = session_path(home, s.key)
        path.write_bytes(path.read_bytes().replace(b'"Session 0"', b'"Session 9"'))
        later(path)
        assert m.get(s.key).title == "Session 9"
        assert store.list(PK)[0].title == "Session 9"

    def test_title_edited_in_place_with_its_mtime_set_back(self, home, settled_files):
        # Same length, same mtime (os.utime, as an editor or a restore can leave it): only the
        # ctime moved, which nothing can set back. The list kept showing the old title.
        store = LocalSessionStore(home)
        m = SessionManager(store)
        s = m.create("/home/user/my-project", title="Session 0")
        m.add_messages(s.key, [user("hello")])
        assert store.list(PK)[0].title == "Session 0"
        token = store.list_token(PK)  # an open page's live check (trial: it kept the old title)
        path = session_path(home, s.key)
        st = path.stat()
        path.write_bytes(path.read_bytes().replace(b'"Session 0"', b'"Session 9"'))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        assert store.list_token(PK) != token, "the open page is told the list changed"
        assert store.list(PK)[0].title == "Session 9"
        assert LocalSessionStore(home).list(PK)[0].title == "Session 9"

    def test_lines_removed_by_hand(self, home):
        (key,) = populate(home, 1, 10)
        store = LocalSessionStore(home)
        assert store.list(PK)[0].message_count == 10
        path = session_path(home, key)
        lines = path.read_bytes().split(b"\n")
        # keep the header, messages 0..3 and the title line
        path.write_bytes(b"\n".join(lines[:5] + [lines[11]]) + b"\n")
        later(path)
        (meta,) = store.list(PK)
        assert (meta.message_count, meta.title) == (4, "Session 0")
        assert meta.updated_at == pytest.approx(T0 + 3)

    def test_message_timestamp_edited_by_hand(self, home):
        keys = populate(home, 2, 3)
        store = LocalSessionStore(home)
        assert store.list(PK)[0].id == keys[1].session_id
        path = session_path(home, keys[0])
        path.write_bytes(path.read_bytes().replace(f"{T0 + 2}".encode(), f"{T0 + 99_999}".encode()))
        later(path)
        metas = store.list(PK)
        assert metas[0].id == keys[0].session_id
        assert metas[0].updated_at == pytest.approx(T0 + 99_999)

    def test_session_file_copied_in_with_header(self, home, tmp_path):
        populate(home, 2, 3)
        store = LocalSessionStore(home)
        store.list(PK)
        other = populate(tmp_path / "elsewhere", 1, 7)[0]
        src = session_path(tmp_path / "elsewhere", other)
        shutil.copy2(src, home / "projects" / PK / src.name)
        metas = store.list(PK)
        assert len(metas) == 3
        meta = next(m for m in metas if m.id == other.session_id)
        assert (meta.title, meta.message_count, meta.created_at, meta.updated_at) == (
            "Session 0", 7, pytest.approx(T0), pytest.approx(T0 + 6))
        assert SessionManager(store).get(meta.key).messages[0] == user("s0 m0")

    def test_session_file_copied_in_without_header(self, home):
        populate(home, 1, 3)
        store = LocalSessionStore(home)
        store.list(PK)
        lines = [message_entry(user("a"), ts=T0 + 50), message_entry(user("b"), ts=T0 + 70),
                 title_entry("Imported", "user", ts=T0 + 80)]
        (home / "projects" / PK / "imported-chat.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
        metas = store.list(PK)
        assert metas[0].id == "imported-chat"
        assert (metas[0].title, metas[0].message_count) == ("Imported", 2)
        assert (metas[0].created_at, metas[0].updated_at) == (pytest.approx(T0 + 50), pytest.approx(T0 + 70))
        m = SessionManager(store)
        assert m.find(PK, "imported") == SessionKey(PK, "imported-chat")
        assert m.add_messages(SessionKey(PK, "imported-chat"), [user("c")]) == 3

    def test_file_deleted_by_hand(self, home):
        keys = populate(home, 3, 2)
        store = LocalSessionStore(home)
        store.list(PK)
        session_path(home, keys[1]).unlink()
        assert {m.id for m in store.list(PK)} == {keys[0].session_id, keys[2].session_id}
        assert {m.id for m in LocalSessionStore(home).list(PK)} == {keys[0].session_id, keys[2].session_id}

    def test_file_swapped_for_another_keeping_the_count(self, home, tmp_path):
        # One session deleted and another copied in between two lists: as many files as
        # indexed, so only the names tell that the folder changed.
        keys = populate(home, 3, 2)
        LocalSessionStore(home).list(PK)
        session_path(home, keys[1]).unlink()
        other = populate(tmp_path / "elsewhere", 1, 5)[0]
        shutil.copy2(session_path(tmp_path / "elsewhere", other), home / "projects" / PK)
        ids = {m.id: m.message_count for m in LocalSessionStore(home).list(PK)}
        assert ids == {keys[0].session_id: 2, keys[2].session_id: 2, other.session_id: 5}

    def test_torn_index_write(self, home):
        # An index cut short anywhere (a copy taken while it was written, a full disk under a
        # tool that writes in place) is never believed: not the part before the cut either.
        keys = populate(home, 4, 6)
        store = LocalSessionStore(home)
        store.list(PK)
        index = home / "projects" / PK / ".index"
        whole = index.read_bytes()
        store.append(keys[0], [message_entry(user("after the index"), ts=T0 + 50_000)])
        truth = self._truth(home)
        head = whole.index(b"\n") + 1
        list_end = head + int(whole[:head].split()[2])  # the head says how long the list part is
        cuts = sorted({1, head - 1, head, head + 40, list_end - 1, list_end, list_end + 30, len(whole) - 2})
        for cut in cuts:
            index.write_bytes(whole[:cut])
            assert summary(LocalSessionStore(home).list(PK)) == truth, cut
            index.write_bytes(whole[:cut])
            assert summary(store.list(PK)) == truth, cut  # a warm instance notices the new index too

    def test_index_edited_by_hand(self, home):
        # Only a title changed in the index, its length kept: the checksum tells, and the
        # file is read again.
        (key,) = populate(home, 1, 3)
        LocalSessionStore(home).list(PK)
        index = home / "projects" / PK / ".index"
        data = index.read_bytes()
        assert data.count(b"Session 0") == 1
        index.write_bytes(data.replace(b"Session 0", b"Session X"))
        (meta,) = LocalSessionStore(home).list(PK)
        assert (meta.title, meta.message_count) == ("Session 0", 3)

    def test_damaged_scan_part_of_the_index(self, home):
        # The part that lets list() read only an appended tail is damaged (its checksum fails):
        # the appended sessions are read again in full, the others still come from the index.
        keys = populate(home, 3, 4)
        LocalSessionStore(home).list(PK)
        index = home / "projects" / PK / ".index"
        data = index.read_bytes()
        scan_start = data.index(b"\n") + 1 + int(data.split()[2])  # the scan part follows the list part
        created = struct.pack("<d", T0 + 1)  # keys[1]'s header time, as marshal stores a float
        # (its title has that time too, kept in the scan part's marks since index version 8)
        assert data.count(created, scan_start) == 2
        index.write_bytes(data[:scan_start] + data[scan_start:].replace(created, struct.pack("<d", T0 + 7)))
        LocalSessionStore(home).append(keys[1], [message_entry(user("late"), ts=T0 + 90_000)])
        metas = LocalSessionStore(home).list(PK)
        assert (metas[0].id, metas[0].message_count) == (keys[1].session_id, 5)
        assert summary(metas) == self._truth(home)

    @pytest.mark.parametrize("name", ["con", "Archive", "chat.", "x" * 210], ids=["con", "Archive", "dot", "long"])
    def test_copied_in_file_with_an_unusable_name(self, home, name, caplog):
        # A file named e.g. con.jsonl ("con" for conversation) is not a valid session id. It
        # must not crash the list's users: start-up cleanup, --continue, find.
        (key,) = populate(home, 1, 2)
        shutil.copy(session_path(home, key), home / "projects" / PK / f"{name}.jsonl")
        store = LocalSessionStore(home)
        m = SessionManager(store)
        for meta in store.list(PK):
            assert meta.key.session_id == meta.id
        assert m.latest(PK) is not None
        # 400 days after both its messages (T0) and its file's writing (now, which cleanup also
        # counts from: a fixed date here became a time bomb on 2026-12-05 12:00 UTC)
        m.cleanup(30, now=max(T0, time.time()) + 400 * 86400)
        assert store.load(key) is None  # the real, old session was cleaned up


class TestRacyClean:
    """Guards against trusting what was read of a file changed within two seconds of the read:
    rewritten in place to the same size in the same clock tick (file times tick by a jiffy, by
    up to 2 s on FAT), no time moves, and the list would keep the old text for good."""

    def test_a_file_changed_just_before_a_list_is_read_again_until_it_settles(self, home, monkeypatch):
        # a file system whose times tick every two seconds (FAT), whatever this one's are
        monkeypatch.setattr(core.stores.jsonl_io, "FINE_RACY_NS", core.stores.jsonl_io.RACY_NS)
        (key,) = populate(home, 1, 5)
        LocalSessionStore(home).list(PK)  # within two seconds of the write
        spy = Spy(monkeypatch)
        assert LocalSessionStore(home).list(PK)[0].message_count == 5
        assert set(spy.sessions_opened()) == {key.session_id}  # not trusted unread
        monkeypatch.setattr(core.stores.jsonl_io, "RACY_NS", 0)  # as two seconds later
        monkeypatch.setattr(core.stores.jsonl_io, "FINE_RACY_NS", 0)
        spy.reset()
        LocalSessionStore(home).list(PK)  # read once more, now recorded as settled
        spy.reset()
        assert LocalSessionStore(home).list(PK)[0].message_count == 5
        assert spy.sessions_opened() == [] and spy.parsed == 0

    def test_a_file_with_fine_times_is_read_once_after_a_write_not_for_two_seconds(self, home, monkeypatch):
        """The page's live check lists once a second: with a two-second window for every file, a
        100,000-message session was read whole again twice after each write (35 ms each)."""
        (key,) = populate(home, 1, 5)
        store = LocalSessionStore(home)
        store.list(PK)
        time.sleep(0.1)  # past a fine file system's step (50 ms), well inside two seconds
        st = os.stat(session_path(home, key))
        if st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0:
            pytest.skip("this file system stamps whole seconds")
        store.list(PK)  # the record made just after the write is read again, once
        spy = Spy(monkeypatch)
        assert store.list(PK)[0].message_count == 5
        assert spy.sessions_opened() == [] and spy.parsed == 0

    @pytest.mark.parametrize(("mtime_ns", "ctime_ns", "age_ns", "racy"), [
        (1_700_000_000_000_000_000, 1_700_000_000_000_000_000, 1_000_000_000, True),  # whole seconds: 2 s
        (1_700_000_000_000_000_000, 1_700_000_000_000_000_000, 2_100_000_000, False),
        (1_700_000_000_123_456_789, 1_700_000_000_123_456_789, 40_000_000, True),  # fine: 50 ms
        (1_700_000_000_123_456_789, 1_700_000_000_123_456_789, 60_000_000, False),
        (1_700_000_000_000_000_000, 1_700_000_000_123_456_789, 60_000_000, False),  # a fine ctime: fine
    ])
    def test_the_window_follows_the_file_systems_time_step(self, mtime_ns, ctime_ns, age_ns, racy):
        st = SimpleNamespace(st_mtime_ns=mtime_ns, st_ctime_ns=ctime_ns)
        assert core.stores.jsonl_io.racy(st, now_ns=max(mtime_ns, ctime_ns) + age_ns) is racy


class TestOtherProcesses:
    """Another process (a second tab's server, the CLI) writes; this process's list must follow."""

    def _run(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "tests.support.helpers_proc", *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def test_changes_from_another_process_are_seen(self, home):
        keys = populate(home, 3, 2)
        store = LocalSessionStore(home)
        assert store.list(PK)[-1].id == keys[0].session_id
        self._run("touch", str(home), PK, keys[0].session_id, "from the other process")
        metas = store.list(PK)
        assert metas[0].id == keys[0].session_id and metas[0].message_count == 3
        assert SessionManager(store).get(keys[0]).messages[-1] == user("from the other process")
        # and the other way round: this process appends, the other one lists
        store.append(keys[2], [message_entry(user("here"), ts=T0 + 10**9)])
        other = [json.loads(x) for x in self._run("list", str(home), PK).splitlines()]
        assert [o[0] for o in other] == [keys[2].session_id, keys[0].session_id, keys[1].session_id]
        assert other[0][2] == 3
        # a session removed by one process disappears from the other's list
        LocalSessionStore(home).remove(keys[1])
        assert keys[1].session_id not in {m.id for m in store.list(PK)}

    def test_archive_index_follows_moves(self, home):
        keys = populate(home, 2, 2)
        a, b = LocalSessionStore(home), LocalSessionStore(home)
        assert len(a.list(PK)) == 2 and a.list(PK, archived=True) == []
        b.archive(keys[0])
        assert [m.id for m in a.list(PK)] == [keys[1].session_id]
        assert [m.id for m in a.list(PK, archived=True)] == [keys[0].session_id]
        b.append(keys[0], [message_entry(user("to the archived one"), ts=T0 + 5000)])
        assert a.list(PK, archived=True)[0].message_count == 3
        b.unarchive(keys[0])
        assert a.list(PK, archived=True) == []
        assert [(m.id, m.message_count) for m in a.list(PK)] == [(keys[0].session_id, 3), (keys[1].session_id, 2)]


@pytest.mark.usefixtures("settled_files")
class TestFolderState:
    """list() does not list a folder whose state (device, inode, ctime) the index recorded; a file
    created, removed or renamed there since must still show at once, also when a restore sets
    the folder's mtime back, and a folder that changed a moment ago must not be recorded."""

    @pytest.fixture
    def settled(self, monkeypatch):
        monkeypatch.setattr(jsonl_index, "SETTLED_NS", -10**12)  # record even a folder that just changed

    def _record(self, home: Path) -> None:
        store = LocalSessionStore(home)
        store.list(PK)  # writes the index
        store.list(PK)  # lists the folder, finds exactly the indexed files, records its state
        assert jsonl_index.read_index(home / "projects" / PK, None).folder is not None

    def test_not_recorded_while_the_folder_is_fresh(self, home):
        populate(home, 2, 2)
        store = LocalSessionStore(home)
        store.list(PK)
        store.list(PK)
        assert jsonl_index.read_index(home / "projects" / PK, None).folder is None

    def test_listing_skipped_while_unchanged(self, home, settled, monkeypatch):
        keys = populate(home, 3, 2)
        self._record(home)
        before = summary(LocalSessionStore(home).list(PK))

        def no_listing(*args, **kw):
            raise AssertionError("the folder was listed")

        monkeypatch.setattr(jsonl_index.os, "listdir", no_listing)
        assert summary(LocalSessionStore(home).list(PK)) == before
        # an append changes a file, not the folder: still no listing, and the new count shows
        LocalSessionStore(home).append(keys[0], [message_entry(user("x"), ts=T0 + 9_999)])
        metas = LocalSessionStore(home).list(PK)
        assert (metas[0].id, metas[0].message_count) == (keys[0].session_id, 3)

    def test_file_copied_in_with_the_folder_mtime_set_back(self, home, tmp_path, settled):
        keys = populate(home, 2, 2)
        self._record(home)
        folder = home / "projects" / PK
        st = folder.stat()
        other = populate(tmp_path / "elsewhere", 1, 3)[0]
        shutil.copy2(session_path(tmp_path / "elsewhere", other), folder)
        os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns))  # as rsync -a or a restore leaves it
        assert folder.stat().st_mtime_ns == st.st_mtime_ns
        got = {m.id: m.message_count for m in LocalSessionStore(home).list(PK)}
        assert got == {keys[0].session_id: 2, keys[1].session_id: 2, other.session_id: 3}

    def test_file_removed_or_renamed(self, home, settled):
        keys = populate(home, 3, 2)
        self._record(home)
        session_path(home, keys[0]).unlink()
        assert {m.id for m in LocalSessionStore(home).list(PK)} == {keys[1].session_id, keys[2].session_id}
        self._record(home)
        session_path(home, keys[1]).rename(home / "projects" / PK / "renamed-chat.jsonl")
        assert {m.id for m in LocalSessionStore(home).list(PK)} == {"renamed-chat", keys[2].session_id}
