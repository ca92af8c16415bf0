"""JSONL store specifics: where files live, who may read them, and what real processes do to them."""
from __future__ import annotations

import errno
import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import platformdirs
import pytest

import core.stores.jsonl_store
from core import (
    LocalSessionStore,
    SessionKey,
    SessionManager,
    header_entry,
    message_entry,
    new_session_id,
    project_key,
    settings,
)
from core.session.entries import messages_of
from tests.support.helpers_proc import payload

ROOT = Path(__file__).resolve().parents[3]
PK = project_key("/home/user/my-project")


def child(*args: str, **kw) -> subprocess.Popen:
    """Start ``python -m tests.support.helpers_proc ARGS`` in a real process."""
    return subprocess.Popen([sys.executable, "-m", "tests.support.helpers_proc", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


class TestLayout:
    """Sessions land where the docs say, so users can find, back up and hand-edit them."""

    def test_default_base_dir_is_anycode_home(self, anycode_home, tmp_path):
        cwd = tmp_path / "proj"
        cwd.mkdir()
        store = LocalSessionStore()
        assert store.base_dir == anycode_home
        s = SessionManager(store).create(cwd)
        path = anycode_home / "projects" / project_key(cwd) / f"{s.id}.jsonl"
        assert path.is_file()
        lines = path.read_bytes().split(b"\n")
        assert lines[-1] == b"" and len(lines) == 2
        header = json.loads(lines[0])
        assert header["type"] == "header" and header["id"] == s.id and header["version"] == 1
        assert header["project_key"] == project_key(cwd) and header["cwd"] == str(cwd)

    def test_home_unset_uses_platformdirs(self, monkeypatch):
        monkeypatch.delenv("ANYCODE_HOME")
        expected = Path(platformdirs.user_data_dir("anycode", appauthor=False))
        assert settings.data_dir() == expected
        assert LocalSessionStore().base_dir == expected  # constructing it touches nothing
        monkeypatch.setenv("ANYCODE_HOME", "  ")
        assert settings.data_dir() == expected

    def test_home_with_tilde(self, monkeypatch, tmp_path):
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("ANYCODE_HOME", "~/ac-data")
        assert settings.data_dir() == tmp_path / "ac-data"

    def test_archive_and_sub_agent_paths(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        key = SessionKey(PK, new_session_id())
        sub = SessionKey(PK, key.session_id, "subagents/agent-1")
        store.append(key, [header_entry(key.session_id, PK, "/w")])
        store.append(sub, [message_entry(user("s"))])
        proj = tmp_path / "home" / "projects" / PK
        assert (proj / f"{key.session_id}.jsonl").is_file()
        assert (proj / key.session_id / "subagents" / "agent-1.jsonl").is_file()
        store.archive(key)
        assert not (proj / f"{key.session_id}.jsonl").exists()
        assert not (proj / key.session_id).exists()
        assert (proj / "archive" / f"{key.session_id}.jsonl").is_file()
        assert (proj / "archive" / key.session_id / "subagents" / "agent-1.jsonl").is_file()

    def test_one_entry_per_line_even_with_line_separators(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        key = SessionKey(PK, new_session_id())
        entries = [header_entry(key.session_id, PK, None, created_at=0.5),
                   message_entry(user("a\u2028b\u2029c\x85d\r\ne\x1cf"), ts=1.0), message_entry(user("z"), ts=2.0)]
        store.append(key, entries)
        raw = (tmp_path / "home" / "projects" / PK / f"{key.session_id}.jsonl").read_bytes()
        lines = raw.split(b"\n")
        assert lines[-1] == b"" and [json.loads(x) for x in lines[:-1]] == entries
        assert "\u2028".encode() in raw  # written readable (ensure_ascii=False), not escaped


class TestPermissions:
    """Conversations are private: other local users must not read them."""

    def _populate(self, home: Path) -> None:
        store = LocalSessionStore(home)
        m = SessionManager(store)
        s = m.create(home.parent / "w")
        m.add_messages(s.key, [user("secret")])
        store.append(SessionKey(s.project_key, s.id, "subagents/a1"), [message_entry(user("s"))])
        other = m.create(home.parent / "w")
        m.archive(other.key)
        m.list(s.project_key)
        m.list(s.project_key, archived=True)

    def test_session_and_index_files_are_0600(self, tmp_path):
        home = tmp_path / "home"
        self._populate(home)
        files = [p for p in home.rglob("*") if p.is_file() and (p.suffix in (".jsonl", ".json") or p.name == ".index")]
        assert len(files) >= 5  # two sessions, a sub-agent record, two indexes
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p

    def test_folders_are_0700(self, tmp_path):
        # The store's docstring promises folders 0700; file names (session ids) are private too.
        home = tmp_path / "home"
        self._populate(home)
        dirs = [p for p in (home / "projects").rglob("*") if p.is_dir()]
        assert dirs
        bad = [f"{oct(stat.S_IMODE(p.stat().st_mode))} {p.relative_to(home)}" for p in dirs
               if stat.S_IMODE(p.stat().st_mode) & 0o077]
        assert bad == []


class TestDurability:
    """A crash or a full disk never leaves half an entry acknowledged."""

    def test_fsync_on_by_default_and_off_by_env(self, tmp_path, monkeypatch):
        calls = []
        real = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
        key = SessionKey(PK, new_session_id())
        LocalSessionStore(tmp_path / "a").append(key, [header_entry(key.session_id, PK, None)])
        assert calls
        calls.clear()
        monkeypatch.setenv("ANYCODE_FSYNC", "off")
        LocalSessionStore(tmp_path / "b").append(key, [header_entry(key.session_id, PK, None)])
        assert calls == []

    def test_disk_full_mid_write(self, tmp_path, monkeypatch):
        store = LocalSessionStore(tmp_path / "home")
        key = SessionKey(PK, new_session_id())
        store.append(key, [header_entry(key.session_id, PK, "/w"), message_entry(user("kept"))])
        path = tmp_path / "home" / "projects" / PK / f"{key.session_id}.jsonl"
        before = path.read_bytes()
        real_write = os.write

        def half_then_enospc(fd, data):
            if len(data) > 20:
                real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(core.stores.jsonl_store.os, "write", half_then_enospc)
        with pytest.raises(OSError):
            store.append(key, [message_entry(user("lost " * 50))])
        monkeypatch.setattr(core.stores.jsonl_store.os, "write", real_write)
        assert path.read_bytes() == before  # the half line was cut off again
        assert store.append(key, [message_entry(user("after"))]) == 2
        assert [m["content"] for m in messages_of(store.load(key))] == ["kept", "after"]


MOVER = """
import sys
from core import LocalSessionStore, SessionKey
store, key = LocalSessionStore(sys.argv[1]), SessionKey(sys.argv[2], sys.argv[3])
print("ready", flush=True)
for _ in range(int(sys.argv[4])):
    store.archive(key)
    store.unarchive(key)
"""


class TestMovedNeverMissing:
    """Guards against a session taken for missing while another process archives or unarchives
    it: ``load`` returned None (and ``exists`` False) when the file moved between finding its
    folder and reading it. A mirror delivery then took the archived chat for deleted and never
    carried the archive choice to the other machines' copy (a full suite run, round 24)."""

    def test_load_and_exists_find_a_session_while_it_moves(self, tmp_path):
        base, sid = tmp_path / "home", new_session_id()
        key = SessionKey(PK, sid)
        store = LocalSessionStore(base)
        store.append(key, [header_entry(sid, PK, None), message_entry(user("still here"))])
        mover = subprocess.Popen([sys.executable, "-c", MOVER, str(base), PK, sid, "300"], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert mover.stdout.readline().strip() == "ready"
        reads = missed = 0
        while mover.poll() is None:
            entries = store.load(key)
            missed += entries is None or not store.exists(key)
            if entries is not None:
                assert messages_of(entries) == [user("still here")]
            reads += 1
        _, err = mover.communicate(timeout=60)
        assert mover.returncode == 0, err
        assert reads > 20, "the reads did not overlap the moves"
        assert missed == 0, f"{missed} of {reads} reads took the moving session for missing"


class TestRealProcesses:
    """Several processes on one session: writers racing, stale writers, and writers killed mid-append."""

    def test_four_processes_append_without_interleaving(self, tmp_path):
        base, sid, n, writers = tmp_path / "home", new_session_id(), 200, 4
        go = tmp_path / "go"
        env = {**os.environ, "ANYCODE_FSYNC": "0"}  # interleaving is about write(), not fsync; keeps it fast
        LocalSessionStore(base).append(SessionKey(PK, sid), [header_entry(sid, PK, None)])
        procs = [child("append", str(base), PK, sid, f"w{w}", str(n), str(go), env=env) for w in range(writers)]
        time.sleep(0.3)
        go.touch()
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        path = base / "projects" / PK / f"{sid}.jsonl"
        raw = path.read_bytes()
        lines = raw.split(b"\n")
        assert lines[-1] == b""
        contents = [json.loads(line)["message"]["content"] for line in lines[1:-1]]  # every line intact
        assert len(contents) == writers * n
        for w in range(writers):
            mine = [c for c in contents if c.startswith(f"<w{w}:")]
            assert mine == [payload(f"w{w}", i) for i in range(n)]  # complete, in order, no dupes
        store = LocalSessionStore(base)
        key = SessionKey(PK, sid)
        assert len(store.load(key)) == writers * n + 1  # the header too
        assert store.list(PK)[0].message_count == writers * n
        assert store.append(key, [message_entry(user("last"))]) == writers * n + 1

    def test_compare_and_swap_across_processes(self, tmp_path):
        # expected_count must be checked and the entry written under one lock: every successful
        # append of the racing writers gets its own count, none is lost or doubled.
        base, sid, n, writers = tmp_path / "home", new_session_id(), 25, 3
        LocalSessionStore(base).append(SessionKey(PK, sid), [header_entry(sid, PK, None)])
        procs = [child("cas", str(base), PK, sid, f"w{w}", str(n)) for w in range(writers)]
        counts = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            counts += [int(x) for x in out.split()]
        assert sorted(counts) == list(range(1, writers * n + 1))
        assert len(messages_of(LocalSessionStore(base).load(SessionKey(PK, sid)))) == writers * n

    def test_threads_share_one_store(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        key = SessionKey(PK, new_session_id())
        store.append(key, [header_entry(key.session_id, PK, None)])
        errors = []

        def work(t):
            try:
                for i in range(40):
                    store.append(key, [message_entry(user(f"t{t}-{i}"))])
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        got = [m["content"] for m in messages_of(store.load(key))]
        assert len(got) == 160
        for t in range(4):
            assert [c for c in got if c.startswith(f"t{t}-")] == [f"t{t}-{i}" for i in range(40)]
        assert store.list(PK)[0].message_count == 160

    def test_sigkill_loses_no_acknowledged_entry(self, tmp_path):
        base, sid = tmp_path / "home", new_session_id()
        key = SessionKey(PK, sid)
        store = LocalSessionStore(base)
        store.append(key, [header_entry(sid, PK, "/w")])
        rng = random.Random(1234)
        expected: list[str] = []  # every acknowledged content, in order
        for run in range(10):
            p = child("ack", str(base), PK, sid, f"r{run}")
            first = p.stdout.readline()  # wait until it is really appending
            assert first.startswith("ack"), p.stderr.read()
            time.sleep(rng.uniform(0.0, 0.25))
            p.send_signal(signal.SIGKILL)
            # Not communicate(): it reads the pipe's descriptor, past the acks readline() above
            # already pulled into p.stdout's buffer (a slow parent would lose them).
            rest = p.stdout.read()
            p.wait(timeout=30)
            p.stderr.close()
            assert p.returncode == -signal.SIGKILL
            acked = [int(line.split()[1]) for line in (first + rest).splitlines() if line.startswith("ack ")]
            assert acked == list(range(len(acked)))
            # The file is loadable right after the kill and holds every acknowledged entry, in order,
            # possibly followed by the one entry whose ack the kill swallowed.
            contents = [m["content"] for m in messages_of(store.load(key))]
            mine = [c for c in contents if c.startswith(f"<r{run}:")]
            assert mine[: len(acked)] == [payload(f"r{run}", i, big=True) for i in acked]
            assert len(mine) - len(acked) in (0, 1)
            expected += mine
            # Appending after the kill works and starts on a line of its own.
            count = len(contents)
            assert store.append(key, [message_entry(user(f"parent after kill {run}"))], expected_count=count) == count + 1
            expected.append(f"parent after kill {run}")
        final = [m["content"] for m in messages_of(store.load(key))]
        assert final == expected
        assert store.list(PK)[0].message_count == len(expected)
