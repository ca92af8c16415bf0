"""The parsed entries of the session files read last, kept while their file is unchanged.

Why: an open conversation is loaded many times — to open it (the version in use, then the
session), then by what follows the open (the approval card, the context meter, the Undo-rewind
button, the moved-folder check), and several times per message sent. A 100,000-message session is
a 19 MB file whose parse takes 160 ms on an idle core and 230–580 ms beside the page's other
work: six parses per click made opening it 3.7× slower than a 1,000-message one (issue 32).

How it stays right with other writers (another tab, process or machine's pull, a hand edit):
- A file the cache may answer for unread is the same file (device, inode) with the same size,
  modification and change times, the same first and last 64 cached bytes, and modification and
  change times older than the file system's time step when it was read (:func:`racy`). The last rule is git's "racy clean" one: a
  file changed within its clock's tick of the read could be changed again in that tick, in place
  and to the same size, without any time moving; such a file is checked as below instead.
- Any other file of the same device and inode is read whole (one read, 15 ms for 19 MB from
  the page cache) and the bytes the cache parsed must have the CRC-32 they had (9 ms for 19 MB):
  then only what follows them is parsed — an append, the store's only way of writing an
  existing file. A fresh-user trial replaced a file in place (``cat new > file``: the same inode)
  with a longer copy changed in its middle; a check of the first and last bytes alone took it
  for an append and showed the old text, which an Edit then copied into a new version.
- Anything else (another inode, a shorter file, a prefix that differs) is parsed whole.

A final line without its newline (a writer's append in flight, or a crash's torn tail) is parsed
on each read and never cached, so it is read again once it is finished.

Entries are shared: :meth:`EntryCache.entries` returns a new list each time, but the entry dicts
in it are the cached ones, so callers must not change them (none does: the agent loop, the folds
and the views build new objects). With ``ANYCODE_CHECK_SHARED_ENTRIES=1`` (set by the test suite)
every hit first checks that the cached entries are still equal to a private copy made when they
were parsed, and raises ``AssertionError`` naming the file when a caller changed one.

Memory: entries cost about 3.3× their file's bytes in Python objects (63 MiB for the 19 MB
file); files are kept most recently read first while their bytes add up to at most
:data:`CACHE_BYTES`, and a file larger than that alone is never kept.
"""
from __future__ import annotations

import copy
import logging
import os
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from core.stores.jsonl_io import SIG_BYTES, parse_entries, racy

log = logging.getLogger(__name__)

CACHE_BYTES = 32 * 1024 * 1024  # bytes of session files kept parsed (~105 MiB of Python objects)
CHECK_ENV = "ANYCODE_CHECK_SHARED_ENTRIES"
# racy() (core.stores.jsonl_io, shared with the list index): a file modified within its file
# system's time step of the read is checked byte for byte next time.


@dataclass(frozen=True)
class _Parsed:
    """One file's cached parse: its identity when read, and the entries of its whole lines."""

    dev: int
    ino: int
    size: int  # the file's size when read (the cached lines end at ``offset`` <= size)
    mtime_ns: int
    ctime_ns: int
    head: int  # CRC-32 of the first SIG_BYTES bytes
    offset: int  # bytes of whole lines parsed (just after the last newline)
    sig: int  # CRC-32 of the SIG_BYTES bytes before ``offset``
    crc: int  # CRC-32 of all the bytes before ``offset``
    racy: bool  # changed within its file system's time step of the read: never answered for unread
    lines: int  # lines before ``offset``
    entries: tuple[dict[str, Any], ...]
    tail: tuple[dict[str, Any], ...]  # the entry of an unfinished last line (parsed, not kept on growth)
    pristine: tuple[dict[str, Any], ...] | None  # a private copy, only when checking


class EntryCache:
    """Parsed entries of session files by path (the module docstring says when a hit is trusted).

    ``max_bytes``: the file bytes kept parsed at most (default :data:`CACHE_BYTES`). Safe for
    several threads: a parse runs outside the lock; two threads parsing one file both return
    correct entries and the later one is kept."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, _Parsed] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._check = os.environ.get(CHECK_ENV, "") not in ("", "0")

    def entries(self, path: os.PathLike[str] | str) -> list[dict[str, Any]]:
        """Every readable entry of the JSONL file at ``path``, in order — what
        :func:`core.stores.jsonl_io.read_entries` returns, from the cache when the file did not
        change and parsing only its new lines when it grew. The dicts are shared: read-only.
        Raises ``FileNotFoundError`` (and other ``OSError``)."""
        name = os.fspath(path)
        with self._lock:
            known = self._items.get(name)
        with open(name, "rb") as f:
            fd = f.fileno()
            st = os.fstat(fd)
            if known is not None and (known.dev, known.ino) == (st.st_dev, st.st_ino) and st.st_size >= known.offset:
                if not known.racy \
                        and (known.size, known.mtime_ns, known.ctime_ns) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns) \
                        and _crc(fd, 0, min(SIG_BYTES, known.offset)) == known.head \
                        and _crc(fd, max(0, known.offset - SIG_BYTES), known.offset) == known.sig:
                    return self._hit(name, known)
                data = f.read()
                if zlib.crc32(memoryview(data)[:known.offset]) == known.crc:  # what was parsed is still there
                    self._check_unchanged(name, known)
                    return self._keep(name, _parse(data, name, st, known))
            else:
                data = f.read()
            return self._keep(name, _parse(data, name, st, None))

    @staticmethod
    def _check_unchanged(name: str, known: _Parsed) -> None:
        if known.pristine is not None and known.entries != known.pristine:
            raise AssertionError(f"a caller changed an entry of {name} read from the shared entry cache "
                                 "(core.stores.entry_cache): entries are read-only, copy before changing")

    def _hit(self, name: str, known: _Parsed) -> list[dict[str, Any]]:
        self._check_unchanged(name, known)
        with self._lock:
            if name in self._items:
                self._items.move_to_end(name)
        return [*known.entries, *known.tail]

    def _keep(self, name: str, parsed: _Parsed) -> list[dict[str, Any]]:
        if self._check:
            parsed = replace(parsed, pristine=tuple(copy.deepcopy(list(parsed.entries))))
        with self._lock:
            old = self._items.pop(name, None)
            if old is not None:
                self._bytes -= old.size
            if parsed.size <= self.max_bytes:
                self._items[name] = parsed
                self._bytes += parsed.size
                while self._bytes > self.max_bytes:
                    _, dropped = self._items.popitem(last=False)
                    self._bytes -= dropped.size
        return [*parsed.entries, *parsed.tail]


def _crc(fd: int, start: int, end: int) -> int:
    """CRC-32 of the file's bytes ``[start, end)`` (fewer when the file is shorter now)."""
    return zlib.crc32(os.pread(fd, end - start, start)) if end > start else 0


def _parse(data: bytes, name: str, st: os.stat_result, before: _Parsed | None) -> _Parsed:
    """The cache record of the file whose bytes are ``data`` (``st``: its ``fstat`` before the
    read): only what follows ``before.offset`` is parsed when ``before`` is given (the bytes
    before that offset were checked to be the ones it parsed)."""
    start, lines, kept, crc = (before.offset, before.lines, before.entries, before.crc) if before else (0, 0, (), 0)
    offset = data.rfind(b"\n", start) + 1 or start  # whole lines end here; what follows is an unfinished line
    whole, rest = data[start:offset], data[offset:]
    count = whole.count(b"\n")
    entries = parse_entries(whole, name, lines + 1)
    tail = parse_entries(rest, name, lines + count + 1) if rest else []
    # The size is what was read, not the stat's (a writer may have appended in between): the next
    # read then sees a file larger than this and checks it byte for byte.
    return _Parsed(dev=st.st_dev, ino=st.st_ino, size=len(data), mtime_ns=st.st_mtime_ns,
                   ctime_ns=st.st_ctime_ns, head=zlib.crc32(data[:min(SIG_BYTES, offset)]),
                   sig=zlib.crc32(data[max(0, offset - SIG_BYTES):offset]), crc=zlib.crc32(whole, crc),
                   racy=racy(st), offset=offset, lines=lines + count,
                   entries=(*kept, *entries), tail=tuple(tail), pristine=None)
