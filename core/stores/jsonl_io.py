"""Reading and writing JSONL session files safely.

Rules (why each exists):
- Lines are split on ``b"\\n"`` only, never ``str.splitlines()``, which would also split inside
  JSON strings at U+2028, ``\\x1c`` and friends.
- A line that does not parse (torn by a crash, hand-edited, NUL-filled after a power cut) is
  skipped with a warning naming file and line; the rest of the session loads.
- Text is written as UTF-8 with ``ensure_ascii=False`` (readable in an editor); a lone surrogate
  (from tool output decoded with ``surrogateescape``) cannot be encoded, so it becomes U+FFFD.
"""
from __future__ import annotations

import json
import logging
import os
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson

from core.session.entries import SessionState

log = logging.getLogger(__name__)

_JUNK = b" \t\r\n\x00"
SIG_BYTES = 64  # bytes before the indexed offset that must be unchanged for an incremental read
# One index record (FileScan.to_list): a flat list, cheap to decode and to turn into a SessionMeta.
RECORD_FIELDS = ("size", "mtime_ns", "offset", "lines", "sig", "message_count", "created_at",
                 "last_message_at", "title", "title_source", "cwd", "forked_from", "has_header", "id",
                 "project_key", "version_of", "current", "pinned", "tags", "marks", "ctime_ns")
# A file changed less than its file system's time step before it was read may change again with
# no time moving: what was read of it is not trusted unread next time (git's "racy clean" rule;
# the entry cache and the list index both keep it, through racy()). The step is read off the
# file's own times: whole seconds (FAT: 2 s; ext3, HFS+: 1 s) get RACY_NS; finer ones (ext4, XFS,
# Btrfs, APFS, NTFS: stamped from a clock that ticks every 1-10 ms, Linux's jiffy) FINE_RACY_NS.
# With 2 s for every file, a list() once a second (the page's live check) read a 100,000-message
# session whole again after each write, twice (35 ms each).
RACY_NS = 2_000_000_000
FINE_RACY_NS = 50_000_000
UNTRUSTED = -1  # the ctime recorded for such a file: no stat has it, so the next check reads it again


# A session is loaded several times while it is open (view, send, title); the same damaged line
# is worth one warning per process, later sightings go to debug. Bounded, so memory stays flat.
_WARNED: "OrderedDict[tuple[str, int, int], None]" = OrderedDict()
_WARNED_MAX = 1024


def _warn_once(path: os.PathLike[str] | str, lineno: int, raw: bytes, what: str) -> None:
    key = (str(path), lineno, zlib.crc32(raw))
    if key in _WARNED:
        log.debug("%s:%d: %s (again)", path, lineno, what)
        return
    _WARNED[key] = None
    if len(_WARNED) > _WARNED_MAX:
        _WARNED.popitem(last=False)
    log.warning("%s:%d: %s", path, lineno, what)


def parse_line(raw: bytes, path: os.PathLike[str] | str, lineno: int) -> dict[str, Any] | None:
    """Parse one JSONL line; return the entry dict, or None (logged) when it is damaged.

    ``lineno`` is 1-based, for the warning. Blank lines are skipped silently.
    """
    try:
        value = json.loads(raw)
    except ValueError:
        stripped = raw.strip(_JUNK)
        if not stripped:
            if raw.strip(b" \t\r\n"):  # a run of NULs is damage worth a warning; blank is not
                _warn_once(path, lineno, raw, "skipped a line of NUL bytes")
            return None
        try:
            value = json.loads(stripped.decode("utf-8", "replace"))
        except ValueError as exc:
            _warn_once(path, lineno, raw, f"skipped a damaged line ({exc})")
            return None
    if not isinstance(value, dict):
        _warn_once(path, lineno, raw, "skipped a line that is not a JSON object")
        return None
    return value


def read_entries(path: os.PathLike[str] | str) -> list[dict[str, Any]]:
    """Read every readable entry of a JSONL file, in order. Raises ``FileNotFoundError``."""
    with open(path, "rb") as f:
        data = f.read()
    return parse_entries(data, path)


def parse_entries(data: bytes, path: os.PathLike[str] | str, first_line: int = 1) -> list[dict[str, Any]]:
    """The readable entries of ``data`` (JSONL bytes of the file at ``path``, its line
    ``first_line`` first: warnings name the file's own line numbers), in order. Damaged lines are
    skipped with a warning (:func:`parse_line`)."""
    entries = []
    loads = orjson.loads  # hot: a long session is read on every open; json is the slow-path fallback
    for lineno, line in enumerate(data.split(b"\n"), first_line):
        if not line:
            continue
        try:
            # Fast path: one C call per clean line. orjson refuses what the json module accepts
            # in a hand-edited file (a lone surrogate escape, a huge integer): parse_line decides.
            value = loads(line)
        except ValueError:
            value = parse_line(line, path, lineno)
            if value is None:
                continue
        if type(value) is dict:
            entries.append(value)
        else:
            _warn_once(path, lineno, line, "skipped a line that is not a JSON object")
    return entries


@dataclass
class FileScan:
    """Incremental read state of one session file, as kept in the metadata index.

    ``size``/``mtime_ns``/``ctime_ns``: the file's stat when scanned (``ctime_ns`` is
    :data:`UNTRUSTED` when the file changed within its time step of the scan:
    :func:`recorded_ctime`); ``offset``: bytes folded so far (whole lines only); ``lines``: lines
    before ``offset``; ``sig``: CRC-32 of the ``SIG_BYTES`` before ``offset``, to tell an append
    (prefix unchanged, read only the tail) from an edit (read all).
    """

    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    lines: int = 0
    sig: int = 0
    state: SessionState = field(default_factory=SessionState)
    ctime_ns: int = 0

    def to_list(self) -> list[Any]:
        """Flat JSON form for the index file (fields in :data:`RECORD_FIELDS` order)."""
        s = self.state
        return [self.size, self.mtime_ns, self.offset, self.lines, self.sig, s.message_count, s.created_at,
                s.last_message_at, s.title, s.title_source, s.cwd, s.forked_from, s.has_header, s.id,
                s.project_key, s.version_of, s.current, s.pinned, tuple(s.tags),
                (s.title_ts, s.pin_ts, tuple(map(tuple, s.tag_ts))), self.ctime_ns]

    @classmethod
    def from_list(cls, data: list[Any]) -> "FileScan":
        """Inverse of :meth:`to_list`; raises ``ValueError``/``TypeError`` on a malformed record."""
        (size, mtime_ns, offset, lines, sig, count, created, last, title, source, cwd, forked, has_header,
         sid, pk, version_of, current, pinned, tags, (title_ts, pin_ts, tag_ts), ctime_ns) = data
        state = SessionState(id=sid, project_key=pk, cwd=cwd, created_at=created, last_message_at=last,
                             message_count=int(count), forked_from=forked, title=title, title_source=source,
                             has_header=bool(has_header), version_of=version_of, current=current,
                             pinned=pinned, tags=tuple(tags), title_ts=title_ts, pin_ts=pin_ts,
                             tag_ts=tuple(map(tuple, tag_ts)))
        return cls(int(size), int(mtime_ns), int(offset), int(lines), int(sig), state, int(ctime_ns))


def racy(st: os.stat_result, now_ns: int | None = None) -> bool:
    """Whether the file whose stat is ``st`` changed so recently (before ``now_ns``, default now)
    that a rewrite of the same size could still come with the same times: within its file
    system's time step of now — :data:`RACY_NS` when its times are whole seconds, else
    :data:`FINE_RACY_NS`."""
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    coarse = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    return changed + (RACY_NS if coarse else FINE_RACY_NS) > (time.time_ns() if now_ns is None else now_ns)


def recorded_ctime(st: os.stat_result) -> int:
    """The ctime to record for a file read after ``st`` was taken: its ``st_ctime_ns`` (which no
    tool can set back, unlike the mtime ``os.utime`` restores), or :data:`UNTRUSTED` when it is
    :func:`racy` — a same-size rewrite in the same clock tick would move neither time, so such a
    record is read again next time instead of trusted."""
    return UNTRUSTED if racy(st) else st.st_ctime_ns


def unchanged(scan: FileScan, st: os.stat_result) -> bool:
    """True when the file whose stat is ``st`` is the one ``scan`` read: the same size, mtime and
    ctime, and not read within its time step of a change (:func:`recorded_ctime`)."""
    return scan.size == st.st_size and scan.mtime_ns == st.st_mtime_ns and scan.ctime_ns == st.st_ctime_ns


# The first scan of a file (never indexed, or edited) for list() decodes only what list() needs.
# Lines are the encoder's compact JSON (core.session.entries.encode_entry), so a message entry
# starts with exactly _MSG, its timestamp follows, and it ends by closing "message" and the entry.
# Everything else (the header, titles, other entry types, a hand-edited or damaged line) is a
# handful of lines per file and goes through parse_line like before.
_MSG = b'{"type":"message","ts":'
_MSG_LEN = len(_MSG)
FAST_SCAN_MAX_BYTES = 64 * 2**20  # larger files are read line by line (memory stays flat)
# A run of NULs (blocks a power cut lost) inside a message line would still start and end like
# one; such runs cover whole disk blocks (512 bytes at least), so a byte every 512 finds them.
_NUL_STRIDE = 512
_CLOSE = ord("}")


def _ts_at(data: bytes, start: int) -> float | None:
    """The ``ts`` of the message line starting at ``start`` (None when it is not a number)."""
    begin = start + _MSG_LEN
    try:
        return float(data[begin:data.find(b",", begin)])
    except ValueError:
        return None


def _read_whole(path: str, size: int) -> bytes:
    """The first ``size + 1`` bytes of ``path`` in one read (one more than expected, to notice growth)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.read(fd, size + 1)
    finally:
        os.close(fd)


def _fast_scan(path: str, data: bytes) -> tuple[SessionState, int, int] | None:
    """Fold a whole file's bytes into ``(state, lines, offset)``: message lines are counted and
    only the first and last are looked into (their timestamps), every other line is decoded.

    One pass of ``bytes.find`` (memchr) from line to line, with a prefix and a suffix test on
    each; no line is copied except the few that are decoded. None when the careful
    line-by-line read must decide: a torn last line, NUL damage, or a message entry spelled
    another way (hand-edited). Known limits: a message line damaged in its middle that still
    ends by closing its objects (``…}}garbage}}``; no anycode writer produces one, as appends
    never glue onto a torn line), or holding a run of NULs shorter than a disk block, is counted
    here; ``fast`` scans feed only the list, while appends (``expected_count``) and ``load()``
    use the careful read."""
    if not data.endswith(b"\n") or b"\x00" in data[::_NUL_STRIDE] or b"\x00" in data[-_NUL_STRIDE:]:
        return None
    find, starts, msg, close = data.find, data.startswith, _MSG, _CLOSE  # locals: ~2M loops per GB
    start = n = 0
    end = len(data)
    last = -1
    others: list[tuple[int, int, int]] = []  # (line number from 1, start, end) of lines to decode
    while start < end:
        stop = find(10, start)
        if starts(msg, start) and data[stop - 1] == close and data[stop - 2] == close:
            n += 1
            last = start
        else:
            others.append((n + len(others) + 1, start, stop))
        start = stop + 1
    state = SessionState()
    loads = orjson.loads
    first = 0  # the first message line: the first line that is not among the others
    for lineno, start, stop in others:
        if start == first:
            first = stop + 1
        raw = data[start:stop]
        if not raw.strip(_JUNK):
            continue
        try:
            entry = loads(raw)  # as read_entries: orjson first, parse_line decides what it refuses
        except ValueError:
            entry = None
        if type(entry) is not dict:
            entry = parse_line(raw, path, lineno)
            if entry is None:
                continue  # damage: warned about and skipped, as load() skips it
        if entry.get("type") == "message":
            return None  # a message in another spelling: the exact fold decides
        state.feed(entry)
    if n:
        first_ts, last_ts = _ts_at(data, first), _ts_at(data, last)
        if first_ts is None or last_ts is None:
            return None
        state.message_count = n
        state.last_message_at = last_ts
        if state.created_at is None:
            state.created_at = first_ts
    return state, n + len(others), end


def scan_file(path: str, st: os.stat_result, prev: FileScan | None, *, fast: bool = False) -> FileScan:
    """Fold the session file at ``path`` into metadata, reading only what changed since ``prev``.

    Unchanged (same size, mtime and ctime, and ``prev`` not read within its time step of a
    change: :func:`unchanged`) → ``prev`` itself. Grown with the bytes before ``prev.offset``
    unchanged → only the new tail is read. Anything else (shrunk, edited) → a full re-read.
    Known blind spot: an edit before the last 64 indexed bytes *and* an append between two
    scans looks like a pure append; deleting ``.index`` forces a full re-read. Reads
    line by line, so memory does not grow with the file. A final line without ``\\n`` is folded
    only when it parses (a complete entry whose newline was lost); a torn one is left for later.
    """
    if prev is not None and unchanged(prev, st):
        return prev
    if fast and (prev is None or prev.size >= st.st_size) and st.st_size <= FAST_SCAN_MAX_BYTES:
        # A full read either way: take the whole file in one read and decode only what matters.
        data = _read_whole(path, st.st_size)
        found = _fast_scan(path, data) if len(data) == st.st_size else None
        if found is not None:
            state, lines, offset = found
            start = max(0, offset - SIG_BYTES)
            return FileScan(st.st_size, st.st_mtime_ns, offset, lines, zlib.crc32(data[start:offset]), state,
                            recorded_ctime(st))
    with open(path, "rb") as f:
        scan = FileScan()
        continues = False
        # Only a file that grew can be an append; same size with a new mtime is an edit.
        if prev is not None and prev.size < st.st_size and 0 < prev.offset <= st.st_size:
            start = max(0, prev.offset - SIG_BYTES)
            f.seek(start)
            before = f.read(prev.offset - start)
            if zlib.crc32(before) == prev.sig:
                scan = FileScan(offset=prev.offset, lines=prev.lines, sig=prev.sig,
                                state=SessionState.from_dict(prev.state.to_dict()))
                # The last line was folded without its newline (lost; the next append adds it):
                # what is read first finishes that line, not a new one, so warnings name the
                # same line numbers as a full read.
                continues = not before.endswith(b"\n")
        f.seek(scan.offset)
        offset, lines, state = scan.offset, scan.lines, scan.state
        for raw in f:
            counted = 0 if continues else 1
            continues = False
            lines += counted
            complete = raw.endswith(b"\n")
            entry = parse_line(raw, path, lines) if (complete or raw.strip(_JUNK)) else None
            if not complete and entry is None:
                lines -= counted  # a torn tail: fold it when its line is finished
                break
            if entry is not None:
                state.feed(entry)
            offset += len(raw)
        if offset != scan.offset:
            start = max(0, offset - SIG_BYTES)
            f.seek(start)
            scan.sig = zlib.crc32(f.read(offset - start))
    scan.size, scan.mtime_ns, scan.offset, scan.lines, scan.state = st.st_size, st.st_mtime_ns, offset, lines, state
    scan.ctime_ns = recorded_ctime(st)
    return scan
