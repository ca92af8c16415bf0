"""The JSONL store's metadata index (``<project>/[archive/].index``): what ``list()`` reads
instead of the session files, and how a folder of never-indexed files is indexed fast.

The index is a cache of :class:`~core.stores.jsonl_io.FileScan` records, one per session file,
validated against each file's size, mtime and ctime on every ``list()``; deleting it, or any
damage to it, only costs a rebuild. On disk (version 9): one ASCII head line, then two parts::

    anycode-index 9 <list part bytes> <its CRC-32> <scan part bytes> <its CRC-32> <folder>\n
    <list part: marshal of {"ids": [...], "cwds": ["/home/u/proj", ...], "size": [...],
     "mtime_ns": [...], "ctime_ns": [...], "title": [...], "created": [...], "updated": [...],
     "count": [...], "title_source": [...], "cwd": [...], "forked_from": [...], "version_of": [...],
     "current": [...], "pinned": [...], "tags": [...]}>
    <scan part: marshal of {"offset": [...], "lines": [...], "sig": [...], "created_at": [...],
     "last_message_at": [...], "has_header": [...], "id": [...], "project_key": [...], "marks": [...]}>

Why the ctime: an edit of the same length with the mtime set back (``os.utime``, as editors and
restores can) keeps size and mtime, but the ctime moves and nothing can set it back. A file read
within its file system's time step of a change (:func:`~core.stores.jsonl_io.racy`: 50 ms, or
2 s where file times are whole seconds) records ``UNTRUSTED`` instead (git's racy-clean rule, as
the entry cache keeps it: a same-size rewrite in the same clock tick moves no time), so the next
``list()`` reads it again; that costs one re-read of a file just written, never of the others.

Columns rather than one record per session, sessions in list order (most recent activity
first), because a new process reads it at every start (``anycode``, ``anycode sessions list``)
and must list near the cost of a bare ``stat`` of every file: the check against the folder is
a stream of C calls (the files ``stat``-ed by name relative to the folder, in index order, each
``(size, mtime_ns, ctime_ns)`` compared and dropped) and the :class:`SessionMeta` objects come from one
``map`` over the columns. ``marshal`` (the standard library's own fast format for plain
values) decodes the list part in about half the time and memory of JSON, which is most of what
a new process spends beyond the ``stat`` calls; the CRC-32 of each part is checked before it is
decoded, so a torn or damaged file (a copy taken mid-write, a hand edit) is rebuilt, never
trusted, and ``marshal`` only ever sees bytes this module wrote. The list part is what such a
list needs (``created``/``updated`` as shown: a file without times falls back to its mtime);
the scan part is what continuing a changed file's scan needs, decoded only when a file
changed. ``cwd`` refers to the ``cwds`` path table (None: none); ``id``/``project_key`` are None
when they equal the file name and the folder (always, unless a file was copied in by hand).
``<folder>`` is the session folder's ``st_dev.st_ino.st_ctime_ns`` (20 digits each; zeros:
unknown), written in place by a ``list()`` that found the folder's names to be exactly the
indexed ones, once the folder has been still for :data:`SETTLED_NS`; while it matches, a
``list()`` does not list the folder (creating, removing or renaming a file in it moves its
ctime, which no tool can set back), only ``stat``-s the indexed files.
Version 5 and older indexes (``.index.json``) are not read: the index is rebuilt and the old
file removed; an index of versions 6 to 8 (before the ctime) is rebuilt in place.

A first ``list()`` over many never-indexed files (a restore, an import, a deleted index) scans them
with :func:`scan_many`, which uses a process per core when there is enough to do.
"""
from __future__ import annotations

import gc
import logging
import marshal
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import add, attrgetter, eq
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import orjson

from core.session.models import SessionMeta
from core.stores.jsonl_io import RECORD_FIELDS, FileScan, scan_file
from core.stores.whole_file import is_part, place_whole

if TYPE_CHECKING:
    import subprocess  # annotations only: helpers are started lazily

log = logging.getLogger(__name__)

INDEX_FILE = ".index"
# 6: marshal columns; 7: + pinned, tags; 8: + marks (when each changed); 9: + ctime_ns (a file
# edited with its mtime set back is seen). Another version is not read: the index is rebuilt.
INDEX_VERSION = 9
_MAGIC = b"anycode-index"
_OLD_INDEX_FILE = ".index.json"  # versions up to 5, removed when a version 6 index is written
SUFFIX = ".jsonl"
_CWD, _ID, _PK = RECORD_FIELDS.index("cwd"), RECORD_FIELDS.index("id"), RECORD_FIELDS.index("project_key")
CTIME = RECORD_FIELDS.index("ctime_ns")
# The list and scan parts' columns, each with its position in a record (RECORD_FIELDS);
# "created"/"updated" are the SessionMeta's values, derived from the record (-1: not in a record).
LIST_COLUMNS = {"size": 0, "mtime_ns": 1, "ctime_ns": CTIME, "count": 5, "title": 8, "title_source": 9,
                "cwd": 10, "forked_from": 11, "version_of": 15, "current": 16, "pinned": 17, "tags": 18,
                "created": -1, "updated": -1}
SCAN_COLUMNS = {"offset": 2, "lines": 3, "sig": 4, "created_at": 6, "last_message_at": 7, "has_header": 12,
                "id": 13, "project_key": 14, "marks": 19}
# What check() compares per file: an edit of the same size with its mtime set back (os.utime)
# still moves the ctime; a record read within racy() time of a change holds UNTRUSTED, which no stat has.
_STAMP = attrgetter("st_size", "st_mtime_ns", "st_ctime_ns")
_STAT_AT = os.stat in os.supports_dir_fd and os.listdir in os.supports_fd
# The folder's (st_dev, st_ino, st_ctime_ns) in the head, fixed width so it can be written in
# place; all zeros: unknown. Recorded once the folder has been unchanged for SETTLED_NS.
_FOLDER = b"%020d.%020d.%020d"
_NO_FOLDER = _FOLDER % (0, 0, 0)
SETTLED_NS = 3 * 10**9
# Helper processes pay off past this much work: each costs 0.1-0.2 s to start and import this
# module (more on a busy machine), about what one process takes to scan 1,000-2,000 files.
POOL_MIN_FILES = 5000
POOL_MIN_BYTES = 512 * 2**20


@dataclass
class FolderIndex:
    """One folder's index in memory (see the module docstring for the columns).

    ``ids``: session ids in list order; ``cols``: the list columns, each as long as ``ids``;
    ``cwds``/``cwd_ids``: the workspace path table; ``scan_raw``: the scan part as read, decoded by
    :meth:`records` when needed; ``stamp``: ``(mtime_ns, size)`` of the file as read or written
    (None: no file); ``metas``: the SessionMetas of ``ids``, made once; ``folder``: the
    session folder's ``(st_dev, st_ino, st_ctime_ns)`` when its names were last seen to be
    exactly ``ids`` (None: unknown), kept in the file's head at byte ``folder_at``."""

    stamp: tuple[int, int] | None = None
    ids: list[str] = field(default_factory=list)
    cols: dict[str, list[Any]] = field(default_factory=dict)
    cwds: list[str] = field(default_factory=list)
    cwd_ids: dict[str, int] = field(default_factory=dict)
    scan_raw: tuple[bytes, int, int, int] | None = None
    scan_cols: dict[str, list[Any]] | None = None
    metas: list[SessionMeta] | None = None
    folder: tuple[int, int, int] | None = None
    folder_at: int = 0

    def cwd_id(self, cwd: Any) -> int | None:
        """The position of ``cwd`` in the path table (added when new); None for no path."""
        if not isinstance(cwd, str):
            return None
        found = self.cwd_ids.get(cwd)
        if found is None:
            found = self.cwd_ids[cwd] = len(self.cwds)
            self.cwds.append(cwd)
        return found

    def check(self, d: Path) -> tuple[bool, list[str]]:
        """``(unchanged, debris)`` for folder ``d``: ``unchanged`` when it holds exactly the indexed
        session files, each with the indexed size, mtime and ctime (the index is then the list; else the
        caller takes the careful path that finds out what changed); ``debris``: the temporary
        files (:func:`~core.stores.whole_file.is_part`) a listing of the folder saw.

        One ``stat`` per file, by name relative to the folder, in index order. The folder itself
        is listed only when its ``(device, inode, ctime)`` differs from the one recorded in the
        index: a file created, removed or renamed in it changes its ctime, which nothing can set
        back (unlike the mtime, which a restore keeps). Raises ``FileNotFoundError`` or
        ``NotADirectoryError`` when ``d`` is missing."""
        if not _STAT_AT:  # pragma: no cover - not on Linux: list the folder, stat by path
            names = os.listdir(d)
            others = [n for n in names if not n.endswith(SUFFIX)]
            if len(names) - len(others) != len(self.ids) or not self.cols:
                return False, [n for n in others if is_part(n)]
            paths = map(os.path.join, repeat(str(d)), map(add, self.ids, repeat(SUFFIX)))
            return self._match(map(os.stat, paths)), [n for n in others if is_part(n)]
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            st = os.fstat(fd)
            folder = (st.st_dev, st.st_ino, st.st_ctime_ns)
            debris: list[str] = []
            if folder != self.folder:
                names = os.listdir(fd)
                others = [n for n in names if not n.endswith(SUFFIX)]
                debris = [n for n in others if is_part(n)]
                if len(names) - len(others) != len(self.ids):
                    return False, debris
            if not self.cols:
                return False, debris
            same = self._match(map(partial(os.stat, dir_fd=fd), map(add, self.ids, repeat(SUFFIX))))
        finally:
            os.close(fd)
        if same and folder != self.folder and time.time_ns() - st.st_ctime_ns > SETTLED_NS:
            # Recorded only once the folder has been still for a while: a change within the
            # same clock tick as the recorded ctime would not move it.
            self._record_folder(d, folder)
        return same, debris

    def _match(self, stats: Iterator[os.stat_result]) -> bool:
        # A stream of C calls: each file name and stat result is made, compared and freed at
        # once (10,000 stat results kept alive would be 8 MB of fresh memory for a new process).
        try:
            return all(map(eq, map(_STAMP, stats), zip(self.cols["size"], self.cols["mtime_ns"],
                                                       self.cols["ctime_ns"])))
        except (OSError, ValueError):
            return False

    def _record_folder(self, d: Path, folder: tuple[int, int, int]) -> None:
        """Write ``folder`` into the index file's head, in place, if the file is still the one
        this index was read from or written as (nothing is lost when it cannot be: the next
        list() lists the folder)."""
        try:
            fd = os.open(d / INDEX_FILE, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if self.folder_at <= 0 or (st.st_mtime_ns, st.st_size) != self.stamp:
                return
            os.pwrite(fd, _FOLDER % folder, self.folder_at)
            st = os.fstat(fd)
        except OSError as exc:
            log.debug("%s: cannot record the folder's state in the index (%s)", d, exc)
            return
        finally:
            os.close(fd)
        self.stamp, self.folder = (st.st_mtime_ns, st.st_size), folder

    def list_metas(self, project_key: str, archived: bool) -> list[SessionMeta]:
        """The SessionMetas of every indexed session, in list order (made once, then shared)."""
        if self.metas is None:
            c = self.cols
            paths: dict[int | None, str | None] = {None: None, **dict(enumerate(self.cwds))}
            # The cyclic GC is paused while 10,000 acyclic objects are made: otherwise it would
            # walk the young ones a dozen times over (a tenth of a cold list()).
            paused = gc.isenabled()
            gc.disable()
            try:
                self.metas = list(map(SessionMeta, self.ids, repeat(project_key), c["title"], c["created"],
                                      c["updated"], c["count"], repeat(archived), c["forked_from"],
                                      map(paths.__getitem__, c["cwd"]), c["title_source"], c["version_of"],
                                      c["current"], repeat(()), c["pinned"], map(tuple, c["tags"])))
            finally:
                if paused:
                    gc.enable()
        return self.metas

    def records(self) -> dict[str, list[Any]]:
        """Disk-form records (:data:`RECORD_FIELDS` order, ``cwd`` as a path table position)
        by session id, in list order; empty when the scan part is damaged (every file is then rescanned)."""
        if not self.ids:
            return {}
        if self.scan_cols is None:
            self.scan_cols = _decode_scan(self.scan_raw, len(self.ids))
            self.scan_raw = None
            if self.scan_cols is None:
                return {}
        columns: list[Any] = [None] * len(RECORD_FIELDS)
        for name, pos in LIST_COLUMNS.items():
            if pos >= 0:
                columns[pos] = self.cols[name]
        for name, pos in SCAN_COLUMNS.items():
            columns[pos] = self.scan_cols[name]
        return dict(zip(self.ids, map(list, zip(*columns))))

    def record(self, sid: str, project_key: str, scan: FileScan | list[Any]) -> list[Any]:
        """The disk-form record of a fresh scan of session ``sid`` (a :class:`FileScan` or its
        :meth:`~FileScan.to_list`, which this changes)."""
        rec = scan.to_list() if isinstance(scan, FileScan) else scan
        rec[_CWD] = self.cwd_id(rec[_CWD])
        if rec[_ID] == sid:
            rec[_ID] = None
        if rec[_PK] == project_key:
            rec[_PK] = None
        return rec

    def scan(self, sid: str, project_key: str, rec: list[Any]) -> FileScan:
        """The :class:`FileScan` a disk-form record stands for (to continue it incrementally).
        Raises ``ValueError``/``TypeError``/``IndexError`` on a malformed record."""
        full = list(rec)
        full[_CWD] = None if rec[_CWD] is None else self.cwds[rec[_CWD]]
        full[_ID] = sid if rec[_ID] is None else rec[_ID]
        full[_PK] = project_key if rec[_PK] is None else rec[_PK]
        return FileScan.from_list(full)

    def meta(self, sid: str, project_key: str, archived: bool, rec: list[Any]) -> SessionMeta:
        """A :class:`SessionMeta` straight from a disk-form record (timestamps in Unix seconds)."""
        created, updated = _times(rec)
        cwd = rec[_CWD]
        return SessionMeta(sid, project_key, rec[8], created, updated, rec[5], archived, rec[11],
                           None if cwd is None else self.cwds[cwd], rec[9], rec[15], rec[16], (), rec[17],
                           tuple(rec[18]))


def _times(rec: list[Any]) -> tuple[float, float]:
    """``(created_at, updated_at)`` as listed, from a disk-form record."""
    created, last = rec[6], rec[7]
    if created is None:
        # A file copied in by hand may lack a header and timestamps: its mtime is the best guess.
        created = rec[1] / 1e9
        return created, created if last is None else last
    return created, created if last is None or last < created else last


def _decode_scan(raw: tuple[bytes, int, int, int] | None, n: int) -> dict[str, list[Any]] | None:
    """The scan part of an index file (``(file bytes, start, length, crc)``), checked; None when
    damaged."""
    if raw is None:
        return None
    data, start, length, crc = raw
    try:
        part = memoryview(data)[start:start + length]
        if len(part) != length or zlib.crc32(part) != crc:
            raise ValueError("checksum mismatch")
        cols = marshal.loads(part)
        if any(type(cols[name]) is not list or len(cols[name]) != n for name in SCAN_COLUMNS):
            raise ValueError("bad column")
    except (ValueError, TypeError, KeyError, EOFError) as exc:
        log.warning("damaged index (%s); rescanning the sessions that changed in full", exc)
        return None
    return cols


def read_index(d: Path, cached: FolderIndex | None) -> FolderIndex:
    """The index of folder ``d``: ``cached`` when the file has not changed since, else read from
    disk (an unreadable, damaged or other-version file gives an empty index, to be rebuilt)."""
    path = d / INDEX_FILE
    try:
        st = path.stat()
        stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    if cached is not None and (cached.stamp == stamp or stamp is None):
        return cached
    index = FolderIndex(stamp=stamp)
    if stamp is None:
        return index
    try:
        with open(path, "rb") as f:
            raw = f.read()
        end = raw.find(b"\n", 0, 200)
        head = raw[:end].split()
        if len(head) != 7 or head[0] != _MAGIC or head[1] != str(INDEX_VERSION).encode():
            raise ValueError("not a version %d index" % INDEX_VERSION)
        n_list, crc_list, n_scan, crc_scan = map(int, head[2:6])
        if len(head[6]) != len(_NO_FOLDER):
            raise ValueError("bad head")
        folder = tuple(map(int, head[6].split(b".")))
        if len(raw) != end + 1 + n_list + n_scan:
            raise ValueError("cut short")
        part = memoryview(raw)[end + 1:end + 1 + n_list]
        if zlib.crc32(part) != crc_list:
            raise ValueError("checksum mismatch")
        data = marshal.loads(part)
        ids, cwds = data["ids"], data["cwds"]
        if type(ids) is not list or type(cwds) is not list or not all(type(c) is str for c in cwds):
            raise ValueError("bad path table")
        n = len(ids)
        cols = {name: data[name] for name in LIST_COLUMNS}
        if any(type(c) is not list or len(c) != n for c in cols.values()):
            raise ValueError("bad column")
        if not set(cols["cwd"]) <= {None, *range(len(cwds))}:
            raise ValueError("bad path reference")
        index.ids, index.cols, index.cwds = ids, cols, cwds
        index.cwd_ids = {c: i for i, c in enumerate(cwds)}
        index.scan_raw = (raw, end + 1 + n_list, n_scan, crc_scan)
        index.folder = folder if any(folder) and len(folder) == 3 else None
        index.folder_at = end - len(_NO_FOLDER)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, EOFError) as exc:
        log.warning("%s: unreadable index (%s); rebuilding it", path, exc)
        index = FolderIndex(stamp=stamp)
    return index


def write_index(d: Path, index: FolderIndex, records: dict[str, list[Any]], metas: list[SessionMeta]) -> None:
    """Make ``index`` hold ``records`` in the order of ``metas`` (the list order), and write it
    atomically; a failure (a full disk) is logged, never raised: the index is only a cache."""
    rows = [records[m.id] for m in metas]
    used = sorted({r[_CWD] for r in rows if r[_CWD] is not None})
    if len(used) != len(index.cwds):  # drop paths no record uses any more
        remap = {old: new for new, old in enumerate(used)}
        index.cwds = [index.cwds[i] for i in used]
        index.cwd_ids = {c: i for i, c in enumerate(index.cwds)}
        rows = [list(r) for r in rows]
        for r in rows:
            if r[_CWD] is not None:
                r[_CWD] = remap[r[_CWD]]
    columns = list(map(list, zip(*rows))) if rows else [[] for _ in RECORD_FIELDS]
    index.ids = [m.id for m in metas]
    index.cols = {name: columns[pos] for name, pos in LIST_COLUMNS.items() if pos >= 0}
    index.cols["created"] = [m.created_at for m in metas]
    index.cols["updated"] = [m.updated_at for m in metas]
    # One object per distinct value: marshal then writes the rest as references, and a reader
    # gets one string instead of 10,000 equal ones.
    shared: dict[Any, Any] = {}
    index.cols["title_source"] = [shared.setdefault(v, v) for v in index.cols["title_source"]]
    index.scan_cols = {name: columns[pos] for name, pos in SCAN_COLUMNS.items()}
    index.scan_raw, index.metas = None, metas
    body = marshal.dumps({"ids": index.ids, "cwds": index.cwds, **index.cols})
    scan = marshal.dumps(index.scan_cols)
    head = b"%s %d %d %d %d %d %s\n" % (_MAGIC, INDEX_VERSION, len(body), zlib.crc32(body), len(scan),
                                         zlib.crc32(scan), _NO_FOLDER)
    index.folder, index.folder_at = None, len(head) - 1 - len(_NO_FOLDER)
    try:
        # Atomic replace: readers see the old or the new index, never half of one; on a full disk
        # the temporary file goes too.
        place_whole(d / INDEX_FILE, head + body + scan, fsync=False, replace=True)
        st = (d / INDEX_FILE).stat()
        index.stamp = (st.st_mtime_ns, st.st_size)
    except OSError as exc:
        log.warning("%s: cannot write the index (%s); list() will rescan", d, exc)
        index.stamp = None
        return
    try:
        (d / _OLD_INDEX_FILE).unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.debug("%s: cannot remove the old index (%s)", d, exc)


def _scan_batch(paths: list[str], stats: dict[str, os.stat_result] | None = None
                ) -> list[tuple[str, list[Any] | None]]:
    """A fresh fast scan of each path, as ``(path, FileScan.to_list() or None)``; ``stats``: the
    paths' ``stat`` results when the caller has them (else each path is ``stat``-ed here)."""
    out: list[tuple[str, list[Any] | None]] = []
    for path in paths:
        try:
            st = stats[path] if stats is not None else os.stat(path)
            out.append((path, scan_file(path, st, None, fast=True).to_list()))
        except OSError as exc:
            log.warning("%s: cannot read (%s); left out of the list", path, exc)
            out.append((path, None))
    return out


def _helper_count() -> int:
    """How many helper processes to start: one per core this process may use beyond its own
    (at most 7), and no more than the machine has idle (its core count minus the load average,
    rounded down): on a busy machine a helper only adds its start-up time."""
    cores = _cores()
    try:
        idle = (os.cpu_count() or cores) - os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows): assume idle
        idle = cores
    return max(0, min(cores - 1, 7, int(idle)))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def scan_many(stats: dict[str, os.stat_result]) -> dict[str, list[Any] | None]:
    """Fresh scans of many never-indexed files, given as ``path -> stat result``: ``path ->
    FileScan.to_list()``, None when unreadable.

    With enough work (:data:`POOL_MIN_FILES` files or :data:`POOL_MIN_BYTES`) and idle cores
    (:func:`_helper_count`), other cores help: the files are shared between this process and helper
    processes (``python -m core.stores.index_helper``, paths on stdin, records on stdout). They are
    plain subprocesses rather than a multiprocessing pool, so nothing of the caller is re-imported
    or forked (the web app runs threads). A helper that fails is not fatal: its files are scanned
    here."""
    import subprocess  # here: a cold list() never needs them (import time is start-up time)
    import threading

    paths = list(stats)
    helpers = _helper_count()
    if helpers < 1 or (len(paths) < POOL_MIN_FILES and sum(st.st_size for st in stats.values()) < POOL_MIN_BYTES):
        return dict(_scan_batch(paths, stats))
    shares = [paths[i::helpers + 1] for i in range(helpers + 1)]
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the ``core`` package
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    procs = []
    for share in shares[1:]:
        try:
            proc = subprocess.Popen([sys.executable, "-m", "core.stores.index_helper"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=env, cwd=root)
        except OSError as exc:
            log.warning("cannot start a helper process (%s); scanning its files here", exc)
            proc = None
        procs.append((proc, share))
    feeders = []
    for proc, share in procs:
        if proc is not None:
            # Written in a thread: a full pipe must not stall this process's own share.
            feeder = threading.Thread(target=_feed, args=(proc, share), daemon=True)
            feeder.start()
            feeders.append(feeder)
    found = dict(_scan_batch(shares[0], stats))
    for proc, share in procs:
        results = None
        if proc is not None:
            out = proc.stdout.read()
            proc.wait()
            if proc.returncode == 0:
                try:
                    results = orjson.loads(out)
                except ValueError:
                    results = None
            if results is None:
                log.warning("a helper process failed (exit %s); scanning its files here", proc.returncode)
        found.update(results if results is not None else _scan_batch(share, stats))
    for feeder in feeders:
        feeder.join()
    return found


def _feed(proc: subprocess.Popen, share: list[str]) -> None:
    try:
        proc.stdin.write("\n".join(share).encode("utf-8", "surrogateescape"))
        proc.stdin.close()
    except OSError:
        pass  # the helper died; communicate() reports it
