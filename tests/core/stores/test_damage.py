"""Damaged session files: a crash, a power cut or a hand edit must cost at most the damaged line.

Each test writes a file the way the damage would leave it, then checks ``load`` (with a warning
naming file and line where a line is lost), the list's count, and that appending still works.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, header_entry, message_entry, project_key
from core.session.entries import messages_of

PK = project_key("/home/user/my-project")
SID = "0b8f7a52-2f6c-4d5e-9a51-6c1a3e0d9f10"
KEY = SessionKey(PK, SID)
T0 = 1_764_504_000.0


def line(entry: dict) -> bytes:
    return json.dumps(entry, ensure_ascii=False).encode() + b"\n"


HEADER = line(header_entry(SID, PK, "/home/user/my-project", created_at=T0))


def msg(text: str, ts: float = T0 + 1) -> bytes:
    return line(message_entry({"role": "user", "content": text}, ts=ts))


@pytest.fixture
def store(tmp_path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "home")


def write(store: LocalSessionStore, data: bytes) -> Path:
    path = store.base_dir / "projects" / PK / f"{SID}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def contents(store) -> list[str]:
    return [m["content"] for m in messages_of(store.load(KEY))]


def warnings_for(caplog, path: Path) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and str(path) in r.getMessage()]


class TestTornTail:
    """A crash mid-write leaves half a line at the end of the file."""

    def test_torn_tail_skipped_and_next_append_on_its_own_line(self, store, caplog):
        full = msg("the last entry, cut in half by the crash")
        path = write(store, HEADER + msg("one") + full[: len(full) // 2])
        with caplog.at_level(logging.WARNING):
            assert contents(store) == ["one"]
        assert any(":3:" in w for w in warnings_for(caplog, path))
        assert store.list(PK)[0].message_count == 1
        assert store.append(KEY, [message_entry({"role": "user", "content": "two"})], expected_count=1) == 2
        assert contents(store) == ["one", "two"]
        assert store.list(PK)[0].message_count == 2
        assert path.read_bytes().endswith(b"\n")

    def test_complete_last_line_without_newline_is_kept(self, store):
        write(store, HEADER + msg("one") + msg("two").rstrip(b"\n"))
        assert contents(store) == ["one", "two"]
        assert store.list(PK)[0].message_count == 2
        store.append(KEY, [message_entry({"role": "user", "content": "three"})])
        assert contents(store) == ["one", "two", "three"]
        assert store.list(PK)[0].message_count == 3

    def test_blank_lines_are_not_reported_as_damage(self, store, caplog):
        # A hand-edited file with an empty line (or a lost final newline, which the next append
        # completes with "\n") is not damaged; the docs say blank lines are skipped silently.
        path = write(store, HEADER + b"\n" + msg("one") + b"\r\n" + msg("two").rstrip(b"\n"))
        with caplog.at_level(logging.WARNING):
            assert store.list(PK)[0].message_count == 2  # indexed with "two" lacking its newline
            store.append(KEY, [message_entry({"role": "user", "content": "three"})])
            assert contents(store) == ["one", "two", "three"]
            assert store.list(PK)[0].message_count == 3  # reads the tail "\n{three}\n"
        assert warnings_for(caplog, path) == []

    def test_lost_final_newline_then_append_is_not_damage(self, store, caplog):
        path = write(store, HEADER + msg("one").rstrip(b"\n"))
        with caplog.at_level(logging.WARNING):
            assert store.list(PK)[0].message_count == 1
            store.append(KEY, [message_entry({"role": "user", "content": "two"})])
            assert store.list(PK)[0].message_count == 2
            assert contents(store) == ["one", "two"]
        assert warnings_for(caplog, path) == []


class TestGarbage:
    """Hand edits and disk errors in the middle of a file."""

    def test_garbage_line_in_the_middle(self, store, caplog):
        path = write(store, HEADER + msg("one") + b"{this is not json\n" + msg("two"))
        with caplog.at_level(logging.WARNING):
            assert contents(store) == ["one", "two"]
        found = warnings_for(caplog, path)
        assert found and all(f"{path}:3:" in w for w in found)
        assert store.list(PK)[0].message_count == 2

    def test_a_damaged_line_is_reported_once_however_often_it_is_read(self, store, caplog):
        # The UI loads an open session several times; the log must not fill with repeats.
        path = write(store, HEADER + msg("one") + b"{this is not json\n" + msg("two"))
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                assert contents(store) == ["one", "two"]
        assert len(warnings_for(caplog, path)) == 1

    def test_nul_run(self, store, caplog):
        # A power cut can leave a block of NUL bytes where the last writes were.
        path = write(store, HEADER + msg("one") + b"\x00" * 4096)
        with caplog.at_level(logging.WARNING):
            assert contents(store) == ["one"]
        assert warnings_for(caplog, path)
        assert store.list(PK)[0].message_count == 1
        store.append(KEY, [message_entry({"role": "user", "content": "two"})])
        assert contents(store) == ["one", "two"]
        assert store.list(PK)[0].message_count == 2

    def test_nul_run_before_a_line(self, store):
        write(store, HEADER + b"\x00" * 100 + msg("one") + msg("two"))
        assert contents(store) == ["one", "two"]
        assert store.list(PK)[0].message_count == 2

    def test_crlf_line_endings(self, store):
        write(store, (HEADER + msg("one") + msg("two")).replace(b"\n", b"\r\n"))
        assert contents(store) == ["one", "two"]
        (meta,) = store.list(PK)
        assert (meta.message_count, meta.created_at) == (2, pytest.approx(T0))
        store.append(KEY, [message_entry({"role": "user", "content": "three"})])
        assert contents(store) == ["one", "two", "three"]

    def test_invalid_utf8_inside_a_string(self, store):
        bad = msg("caf\u00e9 ok").replace("\u00e9".encode(), b"\xff\xfe")
        write(store, HEADER + bad + msg("two"))
        got = contents(store)
        assert got == ["caf\ufffd\ufffd ok", "two"]  # repaired, not dropped
        assert store.list(PK)[0].message_count == 2

    def test_invalid_utf8_garbage_line(self, store, caplog):
        path = write(store, HEADER + b"\xc3\x28\xa0\xa1 binary junk\n" + msg("one"))
        with caplog.at_level(logging.WARNING):
            assert contents(store) == ["one"]
        assert any(f"{path}:2:" in w for w in warnings_for(caplog, path))

    @pytest.mark.parametrize("value", [b"[1, 2, 3]", b"\"a string\"", b"42", b"null", b"true"])
    def test_valid_json_but_not_an_object(self, store, caplog, value):
        path = write(store, HEADER + msg("one") + value + b"\n" + msg("two"))
        with caplog.at_level(logging.WARNING):
            assert contents(store) == ["one", "two"]
        assert any(f"{path}:3:" in w for w in warnings_for(caplog, path))
        assert store.list(PK)[0].message_count == 2

    def test_malformed_entries_do_not_break_the_session(self, store):
        write(store, HEADER
              + line({"type": "message", "ts": T0, "message": "not a dict"})
              + line({"type": "message", "ts": "yesterday", "message": {"role": "user", "content": "odd ts"}})
              + line({"type": "title", "ts": T0, "title": 42, "source": "user"})
              + line({"no": "type"})
              + msg("fine"))
        m = SessionManager(store)
        s = m.get(KEY)
        assert [x["content"] for x in s.messages] == ["odd ts", "fine"]
        assert s.title is None
        assert store.list(PK)[0].message_count == 2


class TestWarningLineNumbers:
    """Guards against the list's scan naming another line than the store's own read for the
    same damage (it counted the newline an append adds to a line that had lost its own as a
    line of its own): the user opens the file at the line the warning names."""

    def test_a_scan_continued_after_a_lost_newline_names_the_line_of_the_full_read(self, store, caplog):
        # lines 1-7, the 7th without its newline; list() folds it as a complete entry
        path = write(store, HEADER + b"".join(msg(f"m{i}") for i in range(5)) + msg("m5").rstrip(b"\n"))
        assert store.list(PK)[0].message_count == 6
        with open(path, "ab") as f:  # an append completes line 7; line 8 is damaged
            f.write(b"\n{damaged by hand\n" + msg("after"))
        with caplog.at_level(logging.WARNING):
            assert store.list(PK)[0].message_count == 7  # the index's scan, continued from line 7
            assert contents(store)[-1] == "after"  # the full read
        found = warnings_for(caplog, path)
        assert found and all(f"{path}:8:" in w for w in found), found


class TestDegenerateFiles:
    """Files with nothing or almost nothing in them still show up and can be used."""

    def test_empty_file(self, store):
        write(store, b"")
        assert store.load(KEY) == []
        assert store.exists(KEY)
        (meta,) = store.list(PK)
        assert meta.message_count == 0 and meta.title is None
        assert store.append(KEY, [message_entry({"role": "user", "content": "one"})]) == 1
        assert contents(store) == ["one"]
        s = SessionManager(store).get(KEY)
        assert s.messages == [{"role": "user", "content": "one"}]

    def test_header_only(self, store):
        write(store, HEADER)
        assert store.load(KEY) == [json.loads(HEADER)]
        (meta,) = store.list(PK)
        assert (meta.message_count, meta.created_at, meta.updated_at) == (0, pytest.approx(T0), pytest.approx(T0))
        s = SessionManager(store).get(KEY)
        assert s.messages == [] and s.cwd == "/home/user/my-project"

    def test_only_garbage(self, store, caplog):
        path = write(store, b"garbage\n\x00\x00\n{\n")
        with caplog.at_level(logging.WARNING):
            assert store.load(KEY) == []
        assert warnings_for(caplog, path)
        assert store.list(PK)[0].message_count == 0
        assert SessionManager(store).get(KEY).messages == []
