"""The JSONL store's metadata index (``<project>/[archive/].index.json``): what ``list()`` reads
instead of the session files, and how a folder of never-indexed files is indexed fast.

The index is a cache of :class:`~core.stores.jsonl_io.FileScan` records, one per session file,
validated against each file's size and mtime on every ``list()``; deleting it, or any damage to
it, only costs a rebuild. On disk (version 4)::

    {"version": 4, "cwds": ["/home/u/proj", …],
     "files": {"<session id>": [size, mtime_ns, offset, lines, sig, message_count, created_at,
                                last_message_at, title, title_source, cwd_id, forked_from,
                                has_header, id_or_null, project_key_or_null, version_of,
                                current], …}}

Compact because a new process reads it at every start (``anycode``, ``anycode sessions list``):
the workspace path, the same for nearly every session of a folder, is stored once in ``cwds`` and
referenced by position; the header's id and project key are null when they equal the file name
and the folder (always, unless a file was copied in by hand). ``files`` is written in list order
(most recent activity first), so an unchanged folder is listed without sorting. Read with orjson:
this file is the hot path of a cold start.

A first ``list()`` over many never-indexed files (a restore, an import, a deleted index) scans them
with :func:`scan_many`, which uses a process per core when there is enough to do.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from core.session.models import SessionMeta
from core.stores.jsonl_io import RECORD_FIELDS, FileScan, scan_file
from core.stores.whole_file import place_whole

log = logging.getLogger(__name__)

INDEX_FILE = ".index.json"
INDEX_VERSION = 4  # 4: version_of and current (version families); another version is not read: the index is rebuilt from the files
_CWD, _ID, _PK = RECORD_FIELDS.index("cwd"), RECORD_FIELDS.index("id"), RECORD_FIELDS.index("project_key")
# Helper processes pay off past this much work (each costs ~0.1 s to start and import this module).
POOL_MIN_FILES = 1000
POOL_MIN_BYTES = 256 * 2**20
POOL_BATCH = 200  # files per task: few round trips, still balanced over the workers


@dataclass
class FolderIndex:
    """One folder's index in memory. ``records``: disk-form records by session id (in list order
    when ``ordered``); ``cwds``/``cwd_ids``: the workspace path table; ``metas``: SessionMetas
    made from the records so far; ``stamp``: ``(mtime_ns, size)`` of the file as read or written
    (None: no file)."""

    stamp: tuple[int, int] | None = None
    records: dict[str, list[Any]] = field(default_factory=dict)
    cwds: list[str] = field(default_factory=list)
    cwd_ids: dict[str, int] = field(default_factory=dict)
    metas: dict[str, SessionMeta] = field(default_factory=dict)
    ordered: bool = False

    def cwd_id(self, cwd: Any) -> int | None:
        """The position of ``cwd`` in the path table (added when new); None for no path."""
        if not isinstance(cwd, str):
            return None
        found = self.cwd_ids.get(cwd)
        if found is None:
            found = self.cwd_ids[cwd] = len(self.cwds)
            self.cwds.append(cwd)
        return found

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
        created, last = rec[6], rec[7]
        if created is None:
            # A file copied in by hand may lack a header and timestamps: its mtime is the best guess.
            created = rec[1] / 1e9
            updated = created if last is None else last
        else:
            updated = created if last is None or last < created else last
        cwd = rec[_CWD]
        return SessionMeta(sid, project_key, rec[8], created, updated, rec[5], archived, rec[11],
                           None if cwd is None else self.cwds[cwd], rec[9], rec[15], rec[16])


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
            data = orjson.loads(f.read())
        if data.get("version") == INDEX_VERSION:
            cwds = data["cwds"]
            if type(cwds) is not list or not all(type(c) is str for c in cwds):
                raise ValueError("bad path table")
            n, top = len(RECORD_FIELDS), len(cwds)
            records = data["files"]
            # One check per record here keeps every later use simple: a record is well formed.
            index.records = {sid: r for sid, r in records.items()
                             if type(r) is list and len(r) == n and (r[_CWD] is None or type(r[_CWD]) is int
                                                                      and 0 <= r[_CWD] < top)}
            index.cwds = cwds
            index.cwd_ids = {c: i for i, c in enumerate(cwds)}
            index.ordered = len(index.records) == len(records)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("%s: unreadable index (%s); rebuilding it", path, exc)
        index = FolderIndex(stamp=stamp)
    return index


def write_index(d: Path, index: FolderIndex, order: list[str]) -> None:
    """Write ``index`` (records in ``order``, the list order) atomically; a failure (a full disk)
    is logged, never raised: the index is only a cache."""
    records = {sid: index.records[sid] for sid in order}
    used = sorted({r[_CWD] for r in records.values() if r[_CWD] is not None})
    if len(used) != len(index.cwds):  # drop paths no record uses any more
        remap = {old: new for new, old in enumerate(used)}
        index.cwds = [index.cwds[i] for i in used]
        index.cwd_ids = {c: i for i, c in enumerate(index.cwds)}
        for r in records.values():
            if r[_CWD] is not None:
                r[_CWD] = remap[r[_CWD]]
    index.records = records
    index.ordered = True
    data = {"version": INDEX_VERSION, "cwds": index.cwds, "files": records}
    try:
        # Atomic replace: readers see the old or the new index, never half of one; on a full disk
        # the temporary file goes too.
        place_whole(d / INDEX_FILE, orjson.dumps(data), fsync=False, replace=True)
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
