"""The JSONL store's metadata index (``<project>/[archive/].index.json``): what ``list()`` reads
instead of the session files, and how a folder of never-indexed files is indexed fast.

The index is a cache of :class:`~core.stores.jsonl_io.FileScan` records, one per session file,
validated against each file's size and mtime on every ``list()``; deleting it, or any damage to
it, only costs a rebuild. On disk (version 5) it is three JSON lines::

    {"version": 5, "crc": [crc32 of line 2, crc32 of line 3]}
    {"ids": [...], "cwds": ["/home/u/proj", ...], "size": [...], "mtime_ns": [...], "title": [...],
     "created": [...], "updated": [...], "count": [...], "title_source": [...], "cwd": [...],
     "forked_from": [...], "version_of": [...], "current": [...]}
    {"offset": [...], "lines": [...], "sig": [...], "created_at": [...], "last_message_at": [...],
     "has_header": [...], "id": [...], "project_key": [...]}

Columns rather than one record per session, sessions in list order (most recent activity
first), because a new process reads it at every start (``anycode``, ``anycode sessions list``)
and must list near the cost of a bare ``stat`` of every file: one column is one JSON array
(orjson builds it without a Python object per record), the check against the folder is a few
C-level passes (the files ``stat``-ed in index order, their sizes and mtimes compared as whole
lists) and the :class:`SessionMeta` objects come from one ``map`` over the columns. Line 2 is
what such a list needs (``created``/``updated`` as shown: a file without times falls back to
its mtime); line 3 is what continuing a changed file's scan needs, decoded only when a file
changed. ``cwd`` refers to the ``cwds`` path table (null: none); ``id``/``project_key`` are null
when they equal the file name and the folder (always, unless a file was copied in by hand).
The CRC-32 of each line catches a torn or damaged file (a copy taken mid-write, a hand edit):
the index is then rebuilt, never trusted.

A first ``list()`` over many never-indexed files (a restore, an import, a deleted index) scans them
with :func:`scan_many`, which uses a process per core when there is enough to do.
"""
from __future__ import annotations

import logging
import os
import sys
import zlib
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import add, attrgetter
from pathlib import Path
from typing import Any

import orjson

from core.session.models import SessionMeta
from core.stores.jsonl_io import RECORD_FIELDS, FileScan, scan_file
from core.stores.whole_file import place_whole

log = logging.getLogger(__name__)

INDEX_FILE = ".index.json"
INDEX_VERSION = 5  # 5: columns, crc; another version is not read: the index is rebuilt from the files
SUFFIX = ".jsonl"
_CWD, _ID, _PK = RECORD_FIELDS.index("cwd"), RECORD_FIELDS.index("id"), RECORD_FIELDS.index("project_key")
# Line 2 (list) and line 3 (scan) columns, each with its position in a record (RECORD_FIELDS);
# "created"/"updated" are the SessionMeta's values, derived from the record (-1: not in a record).
LIST_COLUMNS = {"size": 0, "mtime_ns": 1, "count": 5, "title": 8, "title_source": 9, "cwd": 10,
                "forked_from": 11, "version_of": 15, "current": 16, "created": -1, "updated": -1}
SCAN_COLUMNS = {"offset": 2, "lines": 3, "sig": 4, "created_at": 6, "last_message_at": 7, "has_header": 12,
                "id": 13, "project_key": 14}
_SIZE, _MTIME = attrgetter("st_size"), attrgetter("st_mtime_ns")
_STAT_AT = os.stat in os.supports_dir_fd
# Helper processes pay off past this much work (each costs ~0.1 s to start and import this module).
POOL_MIN_FILES = 1000
POOL_MIN_BYTES = 256 * 2**20
POOL_BATCH = 200  # files per task: few round trips, still balanced over the workers


@dataclass
class FolderIndex:
    """One folder's index in memory (see the module docstring for the columns).

    ``ids``: session ids in list order; ``cols``: the list columns, each as long as ``ids``;
    ``cwds``/``cwd_ids``: the workspace path table; ``scan_raw``: line 3 as read, decoded by
    :meth:`records` when needed; ``stamp``: ``(mtime_ns, size)`` of the file as read or written
    (None: no file); ``metas``: the SessionMetas of ``ids``, made once."""

    stamp: tuple[int, int] | None = None
    ids: list[str] = field(default_factory=list)
    cols: dict[str, list[Any]] = field(default_factory=dict)
    cwds: list[str] = field(default_factory=list)
    cwd_ids: dict[str, int] = field(default_factory=dict)
    scan_raw: tuple[bytes, int] | None = None
    scan_cols: dict[str, list[Any]] | None = None
    metas: list[SessionMeta] | None = None
    _names: list[str] | None = None

    def cwd_id(self, cwd: Any) -> int | None:
        """The position of ``cwd`` in the path table (added when new); None for no path."""
        if not isinstance(cwd, str):
            return None
        found = self.cwd_ids.get(cwd)
        if found is None:
            found = self.cwd_ids[cwd] = len(self.cwds)
            self.cwds.append(cwd)
        return found

    def unchanged(self, d: Path, jsonl_count: int) -> bool:
        """True when folder ``d`` (holding ``jsonl_count`` ``*.jsonl`` names) holds exactly the
        indexed session files, each with the indexed size and mtime: the index is then the list.

        One ``stat`` per file, by name relative to the folder, in index order; compared as whole
        lists (any difference, a missing file or an unreadable folder: False, and the caller
        takes the careful path that finds out what changed)."""
        if jsonl_count != len(self.ids) or not self.cols:
            return False
        if self._names is None:
            self._names = list(map(add, self.ids, repeat(SUFFIX)))
        try:
            if _STAT_AT:
                fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                try:
                    stats = list(map(partial(os.stat, dir_fd=fd), self._names))
                finally:
                    os.close(fd)
            else:  # pragma: no cover - not on Linux
                stats = list(map(os.stat, map(os.path.join, repeat(str(d)), self._names)))
        except (OSError, ValueError):
            return False
        return list(map(_SIZE, stats)) == self.cols["size"] and list(map(_MTIME, stats)) == self.cols["mtime_ns"]

    def list_metas(self, project_key: str, archived: bool) -> list[SessionMeta]:
        """The SessionMetas of every indexed session, in list order (made once, then shared)."""
        if self.metas is None:
            c = self.cols
            cwds = [None if i is None else self.cwds[i] for i in c["cwd"]] if self.cwds else repeat(None)
            self.metas = list(map(SessionMeta, self.ids, repeat(project_key), c["title"], c["created"], c["updated"],
                                  c["count"], repeat(archived), c["forked_from"], cwds, c["title_source"],
                                  c["version_of"], c["current"]))
        return self.metas

    def records(self) -> dict[str, list[Any]]:
        """Disk-form records (:data:`RECORD_FIELDS` order, ``cwd`` as a path table position)
        by session id, in list order; empty when line 3 is damaged (every file is then rescanned)."""
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

    def record(self, sid: str, project_key: str, scan: FileScan) -> list[Any]:
        """The disk-form record of a fresh scan of session ``sid``."""
        rec = scan.to_list()
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
                           None if cwd is None else self.cwds[cwd], rec[9], rec[15], rec[16])


def _times(rec: list[Any]) -> tuple[float, float]:
    """``(created_at, updated_at)`` as listed, from a disk-form record."""
    created, last = rec[6], rec[7]
    if created is None:
        # A file copied in by hand may lack a header and timestamps: its mtime is the best guess.
        created = rec[1] / 1e9
        return created, created if last is None else last
    return created, created if last is None or last < created else last


def _decode_scan(raw: tuple[bytes, int] | None, n: int) -> dict[str, list[Any]] | None:
    """Line 3 of an index file (``(bytes, crc)``), checked; None when damaged."""
    if raw is None:
        return None
    data, crc = raw
    try:
        if zlib.crc32(data) != crc:
            raise ValueError("checksum mismatch")
        cols = orjson.loads(data)
        if any(type(cols[name]) is not list or len(cols[name]) != n for name in SCAN_COLUMNS):
            raise ValueError("bad column")
    except (ValueError, TypeError, KeyError) as exc:
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
        end1 = raw.find(b"\n")
        head = orjson.loads(raw[:end1]) if end1 > 0 else None
        if type(head) is not dict or head.get("version") != INDEX_VERSION:
            return index  # another version (or not ours): rebuilt from the files
        crc_list, crc_scan = head["crc"]
        end2 = raw.index(b"\n", end1 + 1)
        view = memoryview(raw)
        if zlib.crc32(view[end1 + 1:end2]) != crc_list:
            raise ValueError("checksum mismatch")
        data = orjson.loads(view[end1 + 1:end2])
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
        index.scan_raw = (view[end2 + 1:], crc_scan)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
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
    index.scan_cols = {name: columns[pos] for name, pos in SCAN_COLUMNS.items()}
    index.scan_raw, index.metas, index._names = None, metas, None
    body = orjson.dumps({"ids": index.ids, "cwds": index.cwds, **index.cols})
    scan = orjson.dumps(index.scan_cols)
    head = orjson.dumps({"version": INDEX_VERSION, "crc": [zlib.crc32(body), zlib.crc32(scan)]})
    try:
        # Atomic replace: readers see the old or the new index, never half of one; on a full disk
        # the temporary file goes too.
        place_whole(d / INDEX_FILE, b"\n".join((head, body, scan, b"")), fsync=False, replace=True)
        st = (d / INDEX_FILE).stat()
        index.stamp = (st.st_mtime_ns, st.st_size)
    except OSError as exc:
        log.warning("%s: cannot write the index (%s); list() will rescan", d, exc)
        index.stamp = None


def _scan_batch(paths: list[str]) -> list[tuple[str, list[Any] | None]]:
    """A fresh fast scan of each path, as ``(path, FileScan.to_list() or None)``."""
    out: list[tuple[str, list[Any] | None]] = []
    for path in paths:
        try:
            out.append((path, scan_file(path, os.stat(path), None, fast=True).to_list()))
        except OSError as exc:
            log.warning("%s: cannot read (%s); left out of the list", path, exc)
            out.append((path, None))
    return out


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def scan_many(paths: list[str], total_bytes: int) -> dict[str, FileScan | None]:
    """Fresh scans of many never-indexed files (``path -> FileScan``, None when unreadable).

    With enough work (:data:`POOL_MIN_FILES` files or :data:`POOL_MIN_BYTES`) and more than one
    core, other cores help: the files are shared between this process and ``cores - 1`` helper
    processes (``python -m core.stores.index_helper``, paths on stdin, records on stdout). They are
    plain subprocesses rather than a multiprocessing pool, so nothing of the caller is re-imported
    or forked (the web app runs threads). A helper that fails is not fatal: its files are scanned
    here."""
    import subprocess  # here: a cold list() never needs them (import time is start-up time)
    import threading

    helpers = min(_cores(), 8) - 1
    if helpers < 1 or (len(paths) < POOL_MIN_FILES and total_bytes < POOL_MIN_BYTES):
        return {path: None if rec is None else FileScan.from_list(rec) for path, rec in _scan_batch(paths)}
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
    found: dict[str, FileScan | None] = {}
    for path, rec in _scan_batch(shares[0]):
        found[path] = None if rec is None else FileScan.from_list(rec)
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
        for path, rec in results if results is not None else _scan_batch(share):
            found[path] = None if rec is None else FileScan.from_list(rec)
    for feeder in feeders:
        feeder.join()
    return found


def _feed(proc: subprocess.Popen, share: list[str]) -> None:
    try:
        proc.stdin.write("\n".join(share).encode("utf-8", "surrogateescape"))
        proc.stdin.close()
    except OSError:
        pass  # the helper died; communicate() reports it
