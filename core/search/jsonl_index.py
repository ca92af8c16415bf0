"""Full-text index of the JSONL store: one SQLite FTS5 file beside the sessions, never the truth.

``<data dir>/search/index.sqlite3`` (0600, folder 0700) holds, per session file (main sessions,
archived ones and sub-agent records), its path, the ``(size, mtime_ns, ctime_ns)`` it was indexed at
(a same-size edit whose mtime was set back still moves the ctime, as the list index counts on), the
byte offset read so far with a CRC of the bytes before it (as :mod:`core.stores.jsonl_io` does for
the list index), the folded metadata (title, tags, times), and its documents (:mod:`core.search.fts`).

The index is brought up to date lazily, at query time, for the projects queried: one ``scandir``
+ ``stat`` per file (the same cost as ``list()``); a file that grew with its indexed prefix
unchanged has only its new lines read; an edited file is re-read; a vanished file's documents
are dropped (so a deleted session is gone from the very next result); a file moved to or from
``archive/`` with the same size and mtime is just re-labelled. Appends therefore stay exactly as
fast as without search, and every writer (other processes, hand edits) is picked up the same way.

Each file's update is one SQLite transaction, so a crash mid-update leaves the file's previous
state, which the next query sees as out of date and redoes. A damaged or foreign index file is
deleted and rebuilt; an index written by another schema version is rebuilt, except a version 3
index (before tags were searched), 4 (before ctimes were recorded) or 5 (before text was folded),
which is upgraded in place:
its ``tags`` column is filled from the folded state each row already holds, and a row's ctime is
recorded on the next walk that finds its size and mtime unchanged, so no session file is read again
(a first build of a large history takes minutes: docs/performance.md). A row whose state cannot be
read is re-read. Any index of versions 3 to 5 gets its documents' folded text (version 6:
accent-, width- and case-insensitive search) from the text it holds
(:meth:`core.search.fts.FtsTables.upgrade`), again without reading a session.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import orjson

from core.search.fts import FtsTables, has_trigram
from core.search.text import Scope, SearchHit, collect_hits, entry_documents, parse_query
from core.session.entries import SessionState
from core.stores.jsonl_io import SIG_BYTES, parse_line

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6  # 2: no triggers; 3: owner in the document id; 4: + files.tags; 5: + files.ctime_ns;
# 6: + docs.fold, the FTS table over folded text (3, 4 and 5 are upgraded in place)
INDEX_DIR = "search"
INDEX_NAME = "index.sqlite3"
FRESH_SECONDS = 1.0  # a project walked this recently is not walked again (unless written through this process)
BATCH_BYTES = 16 << 20  # bytes of session files read per index transaction while catching up
BUSY_TIMEOUT = 30.0  # seconds another process's index update may hold the write lock
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")  # a session id (as the store's file names)
_PROJECT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\Z")  # a project key (starts with "-" for "/…")
SUFFIX = ".jsonl"
ARCHIVE_DIR = "archive"


class _OnDisk(NamedTuple):
    rel: str
    project_key: str
    session_id: str
    subpath: str
    archived: bool
    size: int
    mtime_ns: int
    ctime_ns: int


def _on_disk(rel: str, project_key: str, sid: str, sub: str, archived: bool, st: os.stat_result) -> _OnDisk:
    return _OnDisk(rel, project_key, sid, sub, archived, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _same(size: int, mtime_ns: int, ctime_ns: int | None, st_size: int, st_mtime_ns: int, st_ctime_ns: int) -> bool:
    """Whether a file row indexed at ``(size, mtime_ns, ctime_ns)`` still describes a file whose
    stat says the rest; ``ctime_ns`` None: a row from before ctimes were recorded (schema 4),
    trusted on size and mtime as it was then.

    Unlike the list index (:func:`core.stores.jsonl_io.recorded_ctime`), a file indexed within its
    clock tick of a write is trusted: a mismatch re-reads a same-size file whole, its documents
    indexed again (seconds for a long session), and a search typed while a reply is written would
    pay that after each write. A same-size rewrite within that tick is the case left unseen."""
    return (size, mtime_ns) == (st_size, st_mtime_ns) and (ctime_ns is None or ctime_ns == st_ctime_ns)


def _walk_records(base: Path, project_key: str, archived: bool) -> Iterator[_OnDisk]:
    """Every session file (and sub-agent record) of one list folder, from ``scandir``."""
    folder = base / project_key / ARCHIVE_DIR if archived else base / project_key
    prefix = f"{project_key}/{ARCHIVE_DIR}/" if archived else f"{project_key}/"
    try:
        it = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    with it:
        for e in it:
            name = e.name
            if name.startswith(".") or (not archived and name == ARCHIVE_DIR):
                continue
            try:
                if name.endswith(SUFFIX) and e.is_file():
                    sid = name[: -len(SUFFIX)]
                    if _NAME.match(sid):
                        st = e.stat()
                        yield _on_disk(prefix + name, project_key, sid, "", archived, st)
                elif e.is_dir() and _NAME.match(name):
                    yield from _walk_subagents(Path(e.path), prefix + name, project_key, name, archived)
            except FileNotFoundError:  # removed while listing
                continue


def _walk_subagents(folder: Path, rel: str, project_key: str, sid: str, archived: bool) -> Iterator[_OnDisk]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            path = os.path.join(root, name)
            sub = os.path.relpath(path, folder)[: -len(SUFFIX)].replace(os.sep, "/")
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            yield _on_disk(f"{rel}/{sub}{SUFFIX}", project_key, sid, sub, archived, st)


class JsonlSearchIndex:
    """Search over a :class:`~core.stores.jsonl_store.LocalSessionStore` (see the module docstring).

    ``base_dir``: the store's data directory; ``path``: the index file (default
    ``<base_dir>/search/index.sqlite3``). Thread-safe (one connection, used under a lock) and safe
    across processes (SQLite locking; each file's update re-checks what another process did)."""

    def __init__(self, base_dir: str | os.PathLike[str], path: str | os.PathLike[str] | None = None):
        self.base_dir = Path(base_dir)
        self.projects_dir = self.base_dir / "projects"
        self.path = Path(path) if path is not None else self.base_dir / INDEX_DIR / INDEX_NAME
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._tables = FtsTables("")
        self.fresh_seconds = FRESH_SECONDS
        self._walked: dict[str, float] = {}  # project key -> time.monotonic() of its last walk
        self._dirty: set[str] = set()  # projects written through this process's store since their walk
        self._rows_cache: tuple[int, Any, Scope] | None = None

    def __repr__(self) -> str:
        return f"JsonlSearchIndex({str(self.path)!r})"

    # --- the index file ---------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        folder = self.path.parent
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            # Message text is private: the file exists 0600 before SQLite writes to it (its -wal
            # and -shm files take the database file's mode).
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last update only means redoing it
            self._tables = FtsTables("", use_fts=has_trigram(conn))
            if not self._tables.use_fts:
                log.warning("this SQLite (%s) lacks FTS5 trigram; search scans the text instead", sqlite3.sqlite_version)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                conn.execute("BEGIN IMMEDIATE")
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version in (3, 4, 5):
                    if version == 3:
                        self._upgrade_from_3(conn)
                    if version in (3, 4):
                        # Rows without a ctime get theirs on the next walk that finds them unchanged.
                        conn.execute("ALTER TABLE files ADD COLUMN ctime_ns INTEGER")
                    log.info("%s: index schema %s, folding the indexed text in place", self.path, version)
                    self._tables.upgrade(conn)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                elif version != SCHEMA_VERSION:
                    if version:
                        log.info("%s: index schema %s, rebuilding as %s", self.path, version, SCHEMA_VERSION)
                    self._create(conn)
                conn.execute("COMMIT")
            conn.execute("SELECT count(*) FROM files WHERE fid < 0").fetchone()
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._rows_cache = None
        self._walked.clear()  # a (re)opened file may be new or rebuilt: walk everything again
        return conn

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("DROP TABLE IF EXISTS files")
        self._tables.drop(conn)
        conn.execute(
            "CREATE TABLE files(fid INTEGER PRIMARY KEY AUTOINCREMENT, rel TEXT NOT NULL UNIQUE, "
            "project_key TEXT NOT NULL, session_id TEXT NOT NULL, subpath TEXT NOT NULL, archived INTEGER NOT NULL, "
            "size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, offset INTEGER NOT NULL, sig INTEGER NOT NULL, "
            "messages INTEGER NOT NULL, state TEXT NOT NULL, title TEXT, created_at REAL, updated_at REAL, "
            "tags TEXT, ctime_ns INTEGER)"
        )
        conn.execute("CREATE INDEX files_project ON files(project_key, session_id)")
        self._tables.create(conn)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _upgrade_from_3(self, conn: sqlite3.Connection) -> None:
        """A version 3 index (no ``tags`` column) given one, in the caller's transaction: each
        row's tags come from the state it holds (the fold of what was read, tags included), so
        the documents stay as they are. A row whose state does not parse is marked to be read
        again in full on the next walk."""
        log.info("%s: index schema 3, adding the tags column", self.path)
        conn.execute("ALTER TABLE files ADD COLUMN tags TEXT")
        for fid, state in conn.execute("SELECT fid, state FROM files").fetchall():
            try:
                data = json.loads(state)
                tags = data.get("tags") or []  # a state from before tags existed has none
                if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                    raise ValueError("tags are not a list of strings")
            except (ValueError, TypeError, AttributeError):
                conn.execute("UPDATE files SET size = -1, offset = 0 WHERE fid = ?", (fid,))
                continue
            if tags:
                conn.execute("UPDATE files SET tags = ? WHERE fid = ?", (json.dumps(tags), fid))

    def _reset(self, why: BaseException) -> None:
        """Delete a damaged index file; the next use rebuilds it from the sessions."""
        log.warning("%s: the search index is damaged (%s); rebuilding it", self.path, why)
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(str(self.path) + suffix)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Close the index file (it is reopened on the next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _retrying(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            try:
                return fn(self._open(), *args, **kwargs)
            except sqlite3.DatabaseError as exc:
                if not _is_damage(exc):
                    raise
                self._reset(exc)
            return fn(self._open(), *args, **kwargs)

    # --- bringing the index up to date ------------------------------------------------------

    def _projects(self, project_keys: list[str] | None) -> list[str]:
        if project_keys is not None:
            return [pk for pk in project_keys if _PROJECT.match(pk)]
        try:
            return sorted(e.name for e in os.scandir(self.projects_dir) if e.is_dir() and _PROJECT.match(e.name))
        except FileNotFoundError:
            return []

    def update(self, project_keys: list[str] | None = None) -> int:
        """Bring the index up to date for ``project_keys`` (None: every project); return how many
        files were (re-)read. Every search does this first, so calling it is never required."""
        return self._retrying(self._sync, self._projects(project_keys), project_keys is None, True)

    def mark_written(self, project_key: str) -> None:
        """Note that a session of ``project_key`` was written through this process (the store's
        write listener, :meth:`~core.stores.jsonl_store.LocalSessionStore.on_write`): the next
        search walks that project even inside the freshness window."""
        self._dirty.add(project_key)

    def _sync(self, conn: sqlite3.Connection, projects: list[str], everything: bool, force: bool = False) -> int:
        """Walk ``projects`` and index what changed. Without ``force``, a project walked less than
        ``fresh_seconds`` ago and not written through this process since is skipped: while the user
        types, one walk serves several keystrokes (writes by other processes and hand edits show
        within that window; results are checked against their files before they are returned)."""
        now = time.monotonic()
        if not force:
            projects = [pk for pk in projects if pk in self._dirty
                        or now - self._walked.get(pk, -1e9) >= self.fresh_seconds]
        if everything:
            # Projects whose folder is gone entirely (their files are never walked again).
            listed = set(self._projects(None))
            for (pk,) in conn.execute("SELECT DISTINCT project_key FROM files").fetchall():
                if pk not in listed:
                    self._drop_project(conn, pk)
        if not projects:
            return 0
        for pk in projects:
            self._dirty.discard(pk)  # before the walk: a write during it marks the project again
        disk: dict[str, _OnDisk] = {}
        for pk in projects:
            for archived in (False, True):
                for rec in _walk_records(self.projects_dir, pk, archived):
                    disk[rec.rel] = rec
        rows = []
        for i in range(0, len(projects), 500):
            chunk = projects[i:i + 500]
            rows += conn.execute(
                "SELECT fid, rel, project_key, session_id, subpath, size, mtime_ns, ctime_ns FROM files "
                f"WHERE project_key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
        known = {r[1]: r for r in rows}
        gone = [r for rel, r in known.items() if rel not in disk]
        todo = [rec for rel, rec in disk.items()
                if rel not in known or not _same(*known[rel][5:8], rec.size, rec.mtime_ns, rec.ctime_ns)]
        # Rows from an index before ctimes were recorded, unchanged by size and mtime: their ctime
        # now (so the next walk compares it), without reading them again.
        unrecorded = [(disk[rel].ctime_ns, r[0]) for rel, r in known.items()
                      if r[7] is None and rel in disk and (r[5], r[6]) == (disk[rel].size, disk[rel].mtime_ns)]
        if unrecorded:
            with self._writing(conn):
                conn.executemany("UPDATE files SET ctime_ns = ? WHERE fid = ?", unrecorded)
        if gone:
            # An archived (or unarchived) session moved with its size and mtime: re-label it.
            moved = {(r[2], r[3], r[4], r[5], r[6]): r for r in gone}
            still_todo = []
            with self._writing(conn):
                for rec in todo:
                    r = moved.pop((rec.project_key, rec.session_id, rec.subpath, rec.size, rec.mtime_ns), None)
                    if r is not None and rec.rel not in known:
                        # (a move changes the file's ctime, not its content)
                        conn.execute("UPDATE files SET rel = ?, archived = ?, ctime_ns = ? WHERE fid = ?",
                                     (rec.rel, int(rec.archived), rec.ctime_ns, r[0]))
                    else:
                        still_todo.append(rec)
                for r in moved.values():
                    self._tables.delete_owner(conn, r[0])
                    conn.execute("DELETE FROM files WHERE fid = ?", (r[0],))
            todo = still_todo
        # Oldest first: new files get higher numbers, and a search looks at higher numbers first.
        todo.sort(key=lambda rec: rec.mtime_ns)
        # Several files per transaction while catching up (a first build of thousands of files),
        # each transaction bounded; a crash rolls back one batch, redone on the next query.
        i = 0
        while i < len(todo):
            with self._writing(conn):
                budget = BATCH_BYTES
                while i < len(todo) and budget > 0:
                    budget -= self._index_file(conn, todo[i])
                    i += 1
        for pk in projects:
            self._walked[pk] = now
        return len(todo)

    @contextlib.contextmanager
    def _writing(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``: another process's writer waits for it),
        rolled back on any error; once committed, the rows kept between searches are dropped."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._rows_cache = None

    def _drop_project(self, conn: sqlite3.Connection, project_key: str) -> None:
        with self._writing(conn):
            for (fid,) in conn.execute("SELECT fid FROM files WHERE project_key = ?", (project_key,)).fetchall():
                self._tables.delete_owner(conn, fid)
            conn.execute("DELETE FROM files WHERE project_key = ?", (project_key,))

    def _index_file(self, conn: sqlite3.Connection, rec: _OnDisk) -> int:
        """Index what is new in one file inside the caller's transaction; return the bytes read.
        The row is re-read here, so a file another process indexed meanwhile is not doubled."""
        path = self.projects_dir / rec.rel
        row = conn.execute("SELECT fid, size, mtime_ns, offset, sig, messages, state, ctime_ns FROM files "
                           "WHERE rel = ?", (rec.rel,)).fetchone()
        try:
            f = open(path, "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            if row is not None:
                self._tables.delete_owner(conn, row[0])
                conn.execute("DELETE FROM files WHERE fid = ?", (row[0],))
            return 0
        with f:
            st = os.fstat(f.fileno())
            if row is not None and _same(row[1], row[2], row[7], st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                return 0  # another process indexed it meanwhile
            offset, messages, state = 0, 0, SessionState()
            # Grown: only what was appended is read, once the bytes before it are the ones indexed.
            # (The same size with another ctime or mtime: edited in place, read again in full.)
            if row is not None and row[1] < st.st_size and 0 < row[3] <= st.st_size:
                start = max(0, row[3] - SIG_BYTES)
                f.seek(start)
                if zlib.crc32(f.read(row[3] - start)) == row[4]:
                    offset, messages = row[3], row[5]
                    state = SessionState.from_dict(json.loads(row[6]))
            if row is not None and offset == 0:
                self._tables.delete_owner(conn, row[0])  # edited or shrunk: read it all again
            f.seek(offset)
            data = f.read(st.st_size - offset)
        entries, used = _complete_entries(data, path, offset)
        tail = data[max(0, used - SIG_BYTES):used]
        if used < SIG_BYTES and offset:
            with open(path, "rb") as f2:  # the signature reaches back before this read
                start = max(0, offset + used - SIG_BYTES)
                f2.seek(start)
                tail = f2.read(offset + used - start)
        offset += used
        docs = []
        for messages, doc in entry_documents(_fed(state, entries), messages):
            if doc is not None:
                docs.append(doc)
        values = (rec.project_key, rec.session_id, rec.subpath, int(rec.archived), st.st_size, st.st_mtime_ns,
                  offset, zlib.crc32(tail) if offset else 0, messages, json.dumps(state.to_dict()), state.title,
                  state.created_at, state.updated_at(default=st.st_mtime_ns / 1e9),
                  json.dumps(list(state.tags)) if state.tags else None, st.st_ctime_ns)
        if row is None:
            fid = conn.execute(
                "INSERT INTO files(rel, project_key, session_id, subpath, archived, size, mtime_ns, offset, sig, "
                "messages, state, title, created_at, updated_at, tags, ctime_ns) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (rec.rel, *values)).lastrowid
        else:
            fid = row[0]
            conn.execute(
                "UPDATE files SET project_key=?, session_id=?, subpath=?, archived=?, size=?, mtime_ns=?, "
                "offset=?, sig=?, messages=?, state=?, title=?, created_at=?, updated_at=?, tags=?, ctime_ns=? "
                "WHERE fid=?",
                (*values, fid))
        self._tables.add(conn, fid, docs)
        return len(data)

    # --- queries ----------------------------------------------------------------------------

    def search(self, query: str, *, project_keys: list[str] | None = None, archived: bool = False,
               limit: int = 50) -> list[SearchHit]:
        """Sessions matching every term of ``query`` (:func:`core.search.text.parse_query`), at most
        ``limit``: title and tag matches first, then newest matching message first. ``project_keys``: the
        projects searched (None: all); ``archived``: include archived sessions (marked)."""
        terms = parse_query(query)
        if not terms:
            return []
        return self._retrying(self._search, terms, self._projects(project_keys), project_keys is None,
                              archived, max(1, int(limit)))

    def _search(self, conn: sqlite3.Connection, terms: list[str], projects: list[str], everything: bool,
                archived: bool, limit: int) -> list[SearchHit]:
        self._sync(conn, projects, everything)
        if not projects:
            return []
        where = "1" if everything else f"project_key IN ({','.join('?' * len(projects))})"
        params: list[Any] = [] if everything else list(projects)
        if not archived:
            where += " AND archived = 0"
        for attempt in range(2):
            scope = self._scope(conn, where, params)
            found = self._tables.candidates(conn, terms, scope.owners, limit)
            hits = collect_hits(scope, found, self._tables.fetch(conn, found.values()), terms, limit)
            stale = self._stale(scope, hits) if attempt == 0 else set()
            if not stale:
                return hits
            # A result's file changed since the project was walked (inside the freshness window):
            # walk those projects now and search again, so nothing deleted or edited is shown.
            self._sync(conn, sorted(stale), False, True)
        return hits

    def _scope(self, conn: sqlite3.Connection, where: str, params: list[Any]) -> Scope:
        """The file rows in scope, kept between searches while the index is unchanged (``PRAGMA
        data_version`` moves when another process commits, our own writes clear the cache)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        key = (where, tuple(params))
        cached = self._rows_cache
        if cached is not None and cached[0] == version and cached[1] == key:
            return cached[2]
        rows = conn.execute(
            f"SELECT fid, project_key, session_id, subpath, archived, title, created_at, updated_at, tags, rel, "
            f"size, mtime_ns, ctime_ns FROM files WHERE {where}", params).fetchall()
        scope = Scope(rows)
        self._rows_cache = (version, key, scope)
        return scope

    def _stale(self, scope: Scope, hits: list[SearchHit]) -> set[str]:
        """Projects of ``hits`` whose session files (main or sub-agent) differ from their indexed stat."""
        stale: set[str] = set()
        for h in hits:
            for r in scope.by_session.get((h.project_key, h.session_id), ()):
                try:
                    st = os.stat(self.projects_dir / r[9])
                except OSError:
                    stale.add(r[1])
                    continue
                if not _same(r[10], r[11], r[12], st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                    stale.add(r[1])
        return stale


def _fed(state: SessionState, entries: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for e in entries:
        state.feed(e)
        yield e


def _complete_entries(data: bytes, path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The entries of whole lines in ``data`` (the file's bytes from ``offset`` on) and how many
    bytes they span. A last line without ``\\n`` counts only when it parses (a complete entry
    whose newline was lost); a torn one waits. A damaged line is skipped with the warning of the
    store's own read, naming the same line of the file."""
    entries = []
    used = 0
    lines = data.split(b"\n")
    before: int | None = None if offset else 0  # the file's lines before ``data``, counted once needed
    for i, raw in enumerate(lines):
        last = i == len(lines) - 1
        if last and not raw:
            break
        entry = None
        if raw.strip():
            try:
                entry = orjson.loads(raw)  # one C call per clean line, as the store reads them
            except ValueError:
                pass
            if type(entry) is not dict:
                # Damage (or what only the json module accepts): parse_line decides and warns. The
                # line number needs the lines before an incremental read's offset, counted only
                # here, so a clean append is never read from the start.
                if before is None:
                    before = _newlines_before(path, offset)
                entry = parse_line(raw, path, before + i + 1)
        if last and entry is None:
            break
        if entry is not None:
            entries.append(entry)
        used += len(raw) + (0 if last else 1)
    return entries, used


def _newlines_before(path: Path, offset: int) -> int:
    """The newlines among the first ``offset`` bytes of ``path`` (0 when it cannot be read:
    the warning then names line numbers from the offset on)."""
    count = 0
    try:
        with open(path, "rb") as f:
            while offset > 0:
                chunk = f.read(min(offset, 1 << 20))
                if not chunk:
                    break
                count += chunk.count(b"\n")
                offset -= len(chunk)
    except OSError as exc:
        log.debug("%s: cannot count its lines (%s)", path, exc)
    return count


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """True for a damaged or foreign file (rebuild), False for a busy database (retry later)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return True  # "file is not a database", "database disk image is malformed"
    msg = str(exc).lower()
    return "no such" in msg or "malformed" in msg or "corrupt" in msg
