"""The JSONL store keeps the parsed entries of the sessions it read last (core.stores.entry_cache):
a cached read must never show a session as it was before someone else wrote to it.

Every test compares what the store returns with a fresh parse of the file (``read_entries``),
after the change a second writer, a restore or a hand edit would make.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, header_entry, message_entry, project_key
from core.session.entries import encode_entries, messages_of, title_entry
from core.stores.entry_cache import EntryCache
from core.stores.jsonl_io import read_entries

ROOT = Path(__file__).resolve().parents[3]
PK = project_key("/home/user/my-project")
SID = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
KEY = SessionKey(PK, SID)
T0 = 1_764_504_000.0


def entries_of(*texts: str) -> list[dict]:
    return [header_entry(SID, PK, "/home/user/my-project", created_at=T0),
            *[message_entry({"role": "user", "content": t}, ts=T0 + i) for i, t in enumerate(texts)]]


@pytest.fixture
def store(tmp_path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "home")


def path_of(store: LocalSessionStore) -> Path:
    return store.base_dir / "projects" / PK / f"{SID}.jsonl"


def write(store: LocalSessionStore, data: bytes) -> Path:
    path = path_of(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def texts(store: LocalSessionStore) -> list[str]:
    return [m["content"] for m in messages_of(store.load(KEY))]


def child(*args: str) -> subprocess.Popen:
    """``python -m tests.support.helpers_proc ARGS`` in a real process."""
    return subprocess.Popen([sys.executable, "-m", "tests.support.helpers_proc", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class TestAnotherProcessAppended:
    """Another process (a second app on the same data, the CLI) appended after this one read the
    session: a cached read that missed the new messages would make them vanish from the page."""

    def test_each_append_is_seen_by_the_next_read_and_the_next_get(self, store):
        store.create_whole(KEY, entries_of("first"))
        manager = SessionManager(store)
        assert texts(store) == ["first"] and len(manager.get(KEY).messages) == 1
        for i in range(3):
            proc = child("touch", str(store.base_dir), PK, SID, f"from the other process {i}")
            assert proc.wait(timeout=60) == 0, proc.stderr.read()
            assert texts(store)[-1] == f"from the other process {i}"
            assert manager.get(KEY).messages[-1]["content"] == f"from the other process {i}"
            assert store.load(KEY) == read_entries(path_of(store))

    def test_reads_while_another_process_appends_are_whole_prefixes(self, store, tmp_path):
        store.create_whole(KEY, entries_of("first"))
        go = tmp_path / "go"
        proc = child("append", str(store.base_dir), PK, SID, "w", "60", str(go))
        go.touch()
        seen = []
        while proc.poll() is None:
            seen.append(texts(store))
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        final = texts(store)
        assert final == [m["content"] for m in messages_of(read_entries(path_of(store)))]
        assert len(final) == 61
        for read in seen:  # every read is the file as it was at one moment: nothing skipped or doubled
            assert read == final[:len(read)]


class TestReplacedOrEdited:
    """A file replaced whole (a pull, a restore) or changed by hand — even keeping its size and
    modification time — must be read again, never answered from the cache."""

    def test_replaced_by_another_file(self, store):
        path = write(store, encode_entries(entries_of("old one", "old two")))
        assert texts(store) == ["old one", "old two"]
        new = path.with_suffix(".new")
        new.write_bytes(encode_entries(entries_of("new one")))
        os.replace(new, path)
        assert texts(store) == ["new one"]

    def test_edited_in_place_with_the_same_size_and_mtime(self, store):
        path = write(store, encode_entries(entries_of("alpha", "bravo", "charlie")))
        assert texts(store) == ["alpha", "bravo", "charlie"]
        st = path.stat()
        data = path.read_bytes().replace(b"bravo", b"BRAVO")  # the middle: neither end's bytes
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as an editor keeping the time would
        assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
        assert texts(store) == ["alpha", "BRAVO", "charlie"]

    def test_rewritten_in_place_longer_with_its_middle_changed(self, store):
        # The fresh-user trial's case: `cat new.jsonl > file` keeps the inode, the file grows, its
        # first and last cached bytes are unchanged — it is not an append. The old text was shown,
        # and an Edit then copied it into a new version.
        path = write(store, encode_entries(entries_of("message number 0 alpha", "message number 1 alpha",
                                                      "message number 2 alpha")))
        assert texts(store)[1] == "message number 1 alpha"
        inode = path.stat().st_ino
        with open(path, "r+b") as f:  # in place, as a shell's > does
            f.write(encode_entries(entries_of("message number 0 alpha", "message number 1 OMEGA",
                                              "message number 2 alpha", "a new last line")))
        assert path.stat().st_ino == inode
        assert texts(store) == ["message number 0 alpha", "message number 1 OMEGA", "message number 2 alpha",
                                "a new last line"]
        assert SessionManager(store).get(KEY).messages[1]["content"] == "message number 1 OMEGA"

    def test_edited_in_place_then_appended_to_before_the_next_read(self, store):
        # A typo fixed by hand, then `anycode sessions rename` (an append) before the app looks again
        path = write(store, encode_entries(entries_of("a tpyo in the middle", "the last one")))
        assert texts(store) == ["a tpyo in the middle", "the last one"]
        data = path.read_bytes().replace(b"tpyo", b"typo")
        with open(path, "r+b") as f:
            f.write(data)
        store.append(KEY, [title_entry("Renamed", "user")])
        assert texts(store) == ["a typo in the middle", "the last one"]
        assert SessionManager(store).state(KEY).title == "Renamed"

    def test_shortened(self, store):
        data = encode_entries(entries_of("one", "two", "three"))
        path = write(store, data)
        assert texts(store) == ["one", "two", "three"]
        path.write_bytes(encode_entries(entries_of("one")))
        assert texts(store) == ["one"]

    def test_removed_and_written_again_with_the_same_size(self, store):
        path = write(store, encode_entries(entries_of("aaaa")))
        assert texts(store) == ["aaaa"]
        path.unlink()
        write(store, encode_entries(entries_of("bbbb")))  # same size, maybe the same inode
        assert texts(store) == ["bbbb"]


class TestUnfinishedLastLine:
    """A final line without its newline — another writer's append in flight, or a crash's torn
    tail — must not be kept as the file's content: once it is finished, the entry is read whole."""

    def test_a_half_written_line_is_read_once_finished(self, store, caplog):
        line = encode_entries([message_entry({"role": "user", "content": "written in two steps"}, ts=T0 + 5)])
        path = write(store, encode_entries(entries_of("one")) + line[:20])
        with caplog.at_level(logging.WARNING):
            assert texts(store) == ["one"]
        with open(path, "ab") as f:
            f.write(line[20:])
        assert texts(store) == ["one", "written in two steps"]
        assert store.load(KEY) == read_entries(path)

    def test_a_whole_last_line_without_newline_then_an_append(self, store):
        data = encode_entries(entries_of("one", "no newline after me"))
        path = write(store, data[:-1])
        assert texts(store) == ["one", "no newline after me"]
        store.append(KEY, [message_entry({"role": "user", "content": "appended"}, ts=T0 + 9)])
        assert texts(store) == ["one", "no newline after me", "appended"]
        assert store.load(KEY) == read_entries(path)


class TestDamageAfterACachedRead:
    """A damaged line appended after the session was read is skipped with a warning naming its
    own line of the file (the new lines are parsed alone: their numbers must continue)."""

    def test_warning_names_the_line_in_the_file(self, store, caplog):
        path = write(store, encode_entries(entries_of("one", "two")))
        assert texts(store) == ["one", "two"]
        with open(path, "ab") as f:
            f.write(b'{"type": "message", "mess\n')
            f.write(encode_entries([message_entry({"role": "user", "content": "after"}, ts=T0 + 7)]))
        with caplog.at_level(logging.WARNING):
            assert texts(store) == ["one", "two", "after"]
        assert any(f"{path}:4:" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


class TestEntriesAreReadOnly:
    """Entries are shared between reads: a caller that changed one would change the session for
    every later reader. With the check the test suite turns on, the next read says so."""

    def test_changing_an_entry_is_caught(self, store):
        store.create_whole(KEY, entries_of("original"))
        assert os.environ.get("ANYCODE_CHECK_SHARED_ENTRIES") == "1"
        store.load(KEY)[1]["message"]["content"] = "changed by a careless caller"
        with pytest.raises(AssertionError, match="read-only"):
            store.load(KEY)

    def test_the_list_is_the_callers(self, store):
        store.create_whole(KEY, entries_of("one", "two"))
        got = store.load(KEY)
        got.pop()
        got.append(title_entry("not stored", "user"))
        assert texts(store) == ["one", "two"]


class TestMemoryStaysBounded:
    """Reading many long sessions must not keep them all in memory."""

    def test_at_most_the_budget_is_kept(self, tmp_path):
        files = []
        for i in range(12):
            p = tmp_path / f"s{i}.jsonl"
            p.write_bytes(encode_entries(entries_of(*[f"message {j} " + "x" * 200 for j in range(400)])))
            files.append(p)
        size = files[0].stat().st_size  # ~100 KB
        cache = EntryCache(max_bytes=3 * size)
        tracemalloc.start()
        try:
            for p in files:
                assert len(cache.entries(p)) == 401
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # three files' entries (~3.3x their bytes each) at most, not twelve
        assert kept < 3 * size * 6, kept
