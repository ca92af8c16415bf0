"""The JSONL session store: one append-only file per session (design article: LocalSessionStore).

Layout under the base directory (``ANYCODE_HOME`` or the platformdirs user data dir)::

    projects/<project_key>/<session_id>.jsonl            a session: one JSON entry per line
    projects/<project_key>/<session_id>/<subpath>.jsonl  sub-agent records of that session
    projects/<project_key>/archive/<session_id>.jsonl    an archived session (and archive/<id>/…)
    projects/<project_key>/.index                        metadata index of the main list (a cache)
    projects/<project_key>/archive/.index                the same for the archive
    projects/<project_key>/.locks/<session_id>.lock      per-session lock (filelock)

Entry shapes are documented in :mod:`core.session.entries`. Writes only ever append: each
:meth:`LocalSessionStore.append` is one ``write`` of whole lines under the session's
``filelock.FileLock``, then ``fsync`` (unless turned off), so concurrent writers never interleave
and a crash loses at most the append in flight. If the file does not end in a newline (a torn
tail), the append starts with one, so new entries never glue onto the fragment.

``list()`` reads the index and ``stat``\\ s each file; only files whose size, mtime or ctime
changed since they were indexed (or that changed within two seconds of being indexed) are read
again, and of those only the appended tail when the bytes before it are unchanged. The index is
a cache: deleting it, editing a session by hand or copying a session file in is healed on the
next ``list()``. Its format, and the fast scan of many
never-indexed files, live in :mod:`core.stores.jsonl_index`.
"""
from __future__ import annotations

import logging
import operator
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from core import settings
from core.errors import InvalidSessionKey, SessionConflict, SessionExists, SessionNotFound, StoreUnavailable
from core.session.entries import encode_entries
from core.stores.jsonl_index import CTIME, SUFFIX, FolderIndex, read_index, scan_many, write_index
from core.stores.entry_cache import EntryCache
from core.stores.jsonl_io import FileScan, scan_file
from core.stores.whole_file import fsync_dir, is_part, place_whole, sweep_stale
from core.session.keys import SessionKey, _check_project_key
from core.session.store import check_new_record, check_version
from core.session.models import ProjectInfo, SessionMeta

if TYPE_CHECKING:
    from core.stores.leases import LeaseBoard
    from core.stores.memory_log import MemoryLog
    import filelock

log = logging.getLogger(__name__)

ARCHIVE_DIR = "archive"
LOCK_TIMEOUT = 30.0  # seconds; an append holds the lock for milliseconds
_ID_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.jsonl\Z")
_SORT_KEY = operator.attrgetter("updated_at", "created_at", "id")


class LocalSessionStore:
    """:class:`~core.session.store.SessionStore` over JSONL files (layout in the module docstring).

    ``base_dir``: the data directory (default :func:`core.settings.data_dir`); ``fsync``: fsync
    after each append (default :func:`core.settings.fsync_enabled`). Files are created 0600 and
    folders 0700: conversations are private. Safe for several threads and processes at once.
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, *, fsync: bool | None = None):
        self.base_dir = Path(base_dir) if base_dir is not None else settings.data_dir()
        self.projects_dir = self.base_dir / "projects"
        self.fsync = settings.fsync_enabled() if fsync is None else fsync
        # In-process caches of index records; both are only hints validated against stat().
        self._index: dict[Path, FolderIndex] = {}
        self._scans: dict[Path, FileScan] = {}
        # The entries of the sessions read last, checked against the file on every read and
        # extended by an append's new lines only (issue 32: a long session was parsed six times
        # per click); shared dicts, read-only (core.stores.entry_cache).
        self._entries = EntryCache()
        # Called with a project key after each write through this object (the search index
        # marks the project to walk again: core.search.jsonl_index).
        self._write_listeners: list[Callable[[str], None]] = []

    def __repr__(self) -> str:
        return f"LocalSessionStore({str(self.base_dir)!r})"

    # --- paths ----------------------------------------------------------------------------

    def _project_dir(self, project_key: str) -> Path:
        return self.projects_dir / _check_project_key(project_key)

    def _list_dir(self, project_key: str, archived: bool) -> Path:
        d = self._project_dir(project_key)
        return d / ARCHIVE_DIR if archived else d

    def _main_file(self, key: SessionKey, archived: bool) -> Path:
        return self._list_dir(key.project_key, archived) / (key.session_id + SUFFIX)

    def _file(self, key: SessionKey, archived: bool) -> Path:
        if key.subpath is None:
            return self._main_file(key, archived)
        return self._list_dir(key.project_key, archived) / key.session_id / (key.subpath + SUFFIX)

    def _is_archived(self, key: SessionKey) -> bool | None:
        """Where the main session lives: False (main list), True (archive) or None (nowhere)."""
        if self._main_file(key, False).exists():
            return False
        if self._main_file(key, True).exists():
            return True
        # Only sub-agent records, with no main file: they still belong to one side.
        if (self._list_dir(key.project_key, False) / key.session_id).is_dir():
            return False
        if (self._list_dir(key.project_key, True) / key.session_id).is_dir():
            return True
        return None

    def _locate(self, key: SessionKey) -> Path | None:
        """The record's file, in the main list or ``archive/``; None when it is in neither.

        Each side is looked at for the record's own file, in turn, a few times on a miss: a
        lookup that settled the side first (from the main file) missed a record that archive or
        unarchive was moving meanwhile (the main file first, then its sub-agent records, each
        with one atomic rename). 8% of reads beside a process archiving and unarchiving took
        the session for missing, and a mirror delivery then skipped an archived chat's archive
        choice as if it had been deleted (a full suite run, round 24). A record is always on one
        side, so only moves faster than two ``stat`` calls could hide it. No lock: a miss is
        also the answer for every chat of another machine (:mod:`core.stores.remote_list` asks
        for each), which must not create a lock file per chat."""
        for attempt in range(3):
            for archived in (False, True):
                path = self._file(key, archived)
                if path.is_file():
                    return path
            if attempt == 0 and not self._project_dir(key.project_key).is_dir():
                return None
        return None

    def _lock(self, key: SessionKey) -> filelock.BaseFileLock:
        # One lock per main session, outside the archive split, so archiving and appending
        # (to the session or any of its sub-agent records) exclude each other.
        lock_dir = self._project_dir(key.project_key) / ".locks"
        self._mkdirs(lock_dir)
        import filelock  # here: a process that only lists (anycode sessions list) never locks

        # A short poll keeps several writers' appends quick (filelock's default polls every 50 ms).
        return filelock.FileLock(str(lock_dir / f"{key.session_id}.lock"), timeout=LOCK_TIMEOUT,
                                 poll_interval=0.005)

    def _mkdirs(self, path: Path) -> None:
        """``mkdir -p`` giving every folder it creates mode 0700 (``Path.mkdir(parents=True)``
        gives missing parents the default mode, which would make session ids world-listable)."""
        if path.is_dir():
            return
        todo = []
        while not path.is_dir():
            todo.append(path)
            if path.parent == path:
                break
            path = path.parent
        for d in reversed(todo):
            try:
                d.mkdir(mode=0o700)
            except FileExistsError:
                pass

    def _locked(self, key: SessionKey):
        import filelock

        lock = self._lock(key)
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            raise StoreUnavailable(
                f"Session {key.session_id} is locked by another process for over {LOCK_TIMEOUT:.0f} s; "
                "try again in a moment."
            ) from exc
        return lock

    # --- writes -----------------------------------------------------------------------------

    def append(self, key: SessionKey, entries: list[dict[str, Any]], *, expected_count: int | None = None,
               expected_version: str | None = None) -> int:
        """Append ``entries`` in one write under the session lock; return the new message count.

        Raises ``ValueError`` (bad entry; nothing written), :class:`SessionConflict` (the stored
        message count is not ``expected_count``; nothing written), :class:`StaleChange` (the
        version in use is not ``expected_version``; see :meth:`SessionStore.append`),
        :class:`StoreUnavailable` (lock timeout) and ``OSError`` (disk full: the entries are then
        not acknowledged).
        """
        try:
            return self._append(key, entries, expected_count, expected_version)
        finally:
            self._written(key)

    def _append(self, key: SessionKey, entries: list[dict[str, Any]], expected_count: int | None,
                expected_version: str | None) -> int:
        payload = encode_entries(entries)  # fail before touching the file
        added = _count_messages(entries)
        lock = self._locked(key)
        try:
            path = self._file(key, bool(self._is_archived(key.parent)))
            if key.subpath is None and entries and entries[0].get("type") != "header" \
                    and not path.exists():
                # Only a header starts a session: a message for a session deleted meanwhile
                # (another tab, cleanup) must not bring it back as a headless file.
                raise SessionNotFound(str(key))
            before = self._message_count(path)
            if expected_count is not None and before != expected_count:
                raise SessionConflict(expected_count, before)
            if expected_version is not None:
                scan = self._scans.get(path)  # just brought up to date by _message_count
                check_version(key, expected_version, scan.state.current if scan is not None else None)
            if payload:
                self._write(path, payload)
            return before + added
        finally:
            lock.release()

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        """Create the record ``key`` holding exactly ``entries``, whole or not at all; return its
        message count.

        The entries are written aside into a hidden temporary file and linked into place under
        the session's lock (:func:`core.stores.whole_file.place_whole`), so no reader ever sees
        a part of them, whether the process is killed or the disk fills up. Raises
        ``ValueError`` (a bad entry, no entries, a main session not starting with its header),
        :class:`SessionExists` (the record exists, archived or not; nothing written),
        :class:`StoreUnavailable` (lock timeout) and ``OSError`` (disk full: nothing left behind).
        """
        try:
            return self._create_whole(key, entries)
        finally:
            self._written(key)

    def _create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        check_new_record(key, entries)
        payload = encode_entries(entries)
        lock = self._locked(key)
        try:
            if key.subpath is None:
                path = self._main_file(key, False)
                taken = path.exists() or self._main_file(key, True).exists()
            else:
                path = self._file(key, bool(self._is_archived(key.parent)))
                taken = path.exists()
            if taken:
                raise SessionExists(f"The session {key} already exists; nothing was written.")
            self._mkdirs(path.parent)
            try:
                place_whole(path, payload, fsync=self.fsync)
            except FileExistsError:
                raise SessionExists(f"The session {key} already exists; nothing was written.") from None
        finally:
            lock.release()
        return _count_messages(entries)

    def _write(self, path: Path, payload: bytes) -> None:
        created = not path.exists()
        if created:
            self._mkdirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        size = 0
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload  # never glue onto a torn tail
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            # A partial write (disk full) leaves a torn tail that readers skip; cut it off so
            # the next append starts clean and nothing half-written is ever acknowledged.
            try:
                os.ftruncate(fd, size)
                if created:
                    # A file this write made (a disk full at its first bytes) would list as an
                    # empty session: it goes, as if the append never started.
                    os.unlink(path)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)
        if created and self.fsync:
            fsync_dir(path.parent)

    def _message_count(self, path: Path) -> int:
        try:
            st = path.stat()
        except FileNotFoundError:
            self._scans.pop(path, None)
            return 0
        scan = scan_file(str(path), st, self._scans.get(path))
        self._scans[path] = scan
        return scan.state.message_count

    # --- reads ------------------------------------------------------------------------------

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """Every readable entry of the session, in order, or None when it does not exist. The
        entry dicts may be shared with other callers (the store keeps a long session parsed:
        :mod:`core.stores.entry_cache`): read-only, copy one before changing it."""
        for _ in range(3):
            path = self._locate(key)
            if path is None:
                return None
            try:
                return self._entries.entries(path)
            except FileNotFoundError:
                continue  # moved (archived, unarchived) or removed between finding and reading it
        return None

    def exists(self, key: SessionKey) -> bool:
        """True when the session or sub-agent record exists (archived or not)."""
        return self._locate(key) is not None

    def written_at(self, key: SessionKey) -> float | None:
        """When the record was last written in this store (its file's mtime, Unix seconds), or
        None when it is missing. Imported and restored sessions carry their original message
        times; this is when they arrived, which cleanup and auto-archive count from too."""
        path = self._locate(key)
        try:
            return path.stat().st_mtime if path is not None else None
        except OSError:
            return None

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """Session metadata, most recent activity first (ties: newest created, then id).

        Reads only the index plus one ``stat`` per session file; changed files are re-read
        (only their new tail when possible), never-indexed ones scanned fast (in parallel when
        there are many: :func:`core.stores.jsonl_index.scan_many`), and the index is rewritten."""
        d = self._list_dir(project_key, archived)
        index = read_index(d, self._index.get(d))
        self._index[d] = index
        try:
            unchanged, debris = index.check(d)
        except (FileNotFoundError, NotADirectoryError):
            return []
        if unchanged:
            # The common case (nothing changed since the index was written, in list order): no
            # per-file Python work beyond the stat, no sort, no write.
            out = list(index.list_metas(project_key, archived))
        else:
            out = self._list_changed(d, index, project_key, archived)
        if debris:
            sweep_stale(d, debris)  # left by a process killed mid-creation; never listed
        return out

    def _list_changed(self, d: Path, index: FolderIndex, project_key: str, archived: bool) -> list[SessionMeta]:
        """list() of a folder whose files differ from its index: rescan what changed, drop what
        went, sort, and rewrite the index."""
        records = index.records()
        known = dict(zip(index.ids, index.metas)) if index.metas is not None and records else {}
        seen: dict[str, list[Any]] = {}
        changed: list[tuple[str, str, os.stat_result, list[Any] | None]] = []
        try:
            it = os.scandir(d)
        except (FileNotFoundError, NotADirectoryError):
            return []
        with it:
            for e in it:
                name = e.name
                rec = records.get(name[:-6])  # the common case first: a known session file
                if rec is None or not name.endswith(SUFFIX):
                    if not name.endswith(SUFFIX) or not _ID_FILE.match(name):
                        continue
                    try:
                        SessionKey(project_key, name[:-6])  # a file copied in by hand may have any name
                    except InvalidSessionKey:
                        log.warning("%s: the file name is not a valid session id; left out of the list", e.path)
                        continue
                try:
                    st = e.stat()
                except FileNotFoundError:
                    continue
                sid = name[:-6]
                if rec is not None and (rec[0], rec[1], rec[CTIME]) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                    seen[sid] = rec
                else:
                    changed.append((sid, e.path, st, rec))
                    known.pop(sid, None)
        if changed:
            self._rescan(index, project_key, changed, seen)
        out = [known.get(sid) or index.meta(sid, project_key, archived, rec) for sid, rec in seen.items()]
        out.sort(key=_SORT_KEY, reverse=True)
        write_index(d, index, seen, out)
        return out

    def _rescan(self, index: FolderIndex, project_key: str,
                changed: list[tuple[str, str, os.stat_result, list[Any] | None]], seen: dict[str, list[Any]]) -> None:
        """Scan the files that changed since they were indexed (only their new tail when
        possible), adding their new records to ``seen``."""
        fresh = [(sid, path, st) for sid, path, st, rec in changed if rec is None]
        if len(fresh) >= 2:
            scans = scan_many({path: st for _, path, st in fresh})
            for sid, path, _st in fresh:
                scan = scans.get(path)
                if scan is not None:
                    seen[sid] = index.record(sid, project_key, scan)
            changed = [c for c in changed if c[3] is not None]
        for sid, path, st, rec in changed:
            try:
                prev = index.scan(sid, project_key, rec) if rec is not None else None
            except (ValueError, TypeError, IndexError):
                prev = None
            try:
                scan = scan_file(path, st, prev, fast=True)
            except OSError as exc:
                log.warning("%s: cannot read (%s); left out of the list", path, exc)
                continue
            seen[sid] = index.record(sid, project_key, scan)

    # --- lifecycle --------------------------------------------------------------------------

    def remove(self, key: SessionKey) -> None:
        """Delete the session with its sub-agent records (or just the one sub-agent record)."""
        try:
            self._remove(key)
        finally:
            self._written(key)

    def _remove(self, key: SessionKey) -> None:
        lock = self._locked(key)
        try:
            where = self._is_archived(key.parent)
            if key.subpath is not None:
                path = self._file(key, bool(where))
                if not path.is_file():
                    raise SessionNotFound(str(key))
                path.unlink()
                return
            if where is None:
                raise SessionNotFound(str(key))
            self._main_file(key, where).unlink(missing_ok=True)
            shutil.rmtree(self._list_dir(key.project_key, where) / key.session_id, ignore_errors=True)
        finally:
            lock.release()
        if key.subpath is None:
            # Waiters on this lock still hold their own descriptor; a later writer makes a new one.
            Path(lock.lock_file).unlink(missing_ok=True)

    def archive(self, key: SessionKey) -> None:
        """Move the session and its sub-agent records into ``archive/``."""
        self._move(key.parent, to_archive=True)

    def unarchive(self, key: SessionKey) -> None:
        """Move an archived session and its sub-agent records back to the main list."""
        self._move(key.parent, to_archive=False)

    def _move(self, key: SessionKey, *, to_archive: bool) -> None:
        try:
            self._move_locked(key, to_archive)
        finally:
            self._written(key)

    def _move_locked(self, key: SessionKey, to_archive: bool) -> None:
        lock = self._locked(key)
        try:
            where = self._is_archived(key)
            if where is None:
                raise SessionNotFound(str(key))
            if where == to_archive:
                return
            src_dir = self._list_dir(key.project_key, where)
            dst_dir = self._list_dir(key.project_key, to_archive)
            self._mkdirs(dst_dir)
            src = src_dir / (key.session_id + SUFFIX)
            if src.exists():
                os.replace(src, dst_dir / (key.session_id + SUFFIX))
            if (src_dir / key.session_id).is_dir():
                target = dst_dir / key.session_id
                if target.exists():
                    shutil.rmtree(target)
                os.replace(src_dir / key.session_id, target)
        finally:
            lock.release()

    def on_write(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(project_key)`` after every write through this object (append, whole
        creation, remove, archive, unarchive), whether it succeeded or not; a listener's error
        is logged, never raised. The JSONL search index listens, so a search right after a
        write walks that project again."""
        self._write_listeners.append(listener)

    def _written(self, key: SessionKey) -> None:
        for listener in self._write_listeners:
            try:
                listener(key.project_key)
            except Exception:  # noqa: BLE001 -- a listener must never fail a write
                log.exception("a write listener of %r failed", self)

    def memory_log(self) -> MemoryLog:
        """A new :class:`~core.stores.memory_log.JsonlMemoryLog` beside the sessions
        (``<base_dir>/memory/``). :class:`core.storage.Storage` keeps one per storage."""
        from core.stores.memory_log import JsonlMemoryLog

        return JsonlMemoryLog(self)

    def describe(self) -> str:
        """``jsonl (FOLDER)``: how messages name this store."""
        return f"jsonl ({self.base_dir})"

    def leases(self) -> LeaseBoard:
        """A new :class:`~core.stores.leases.FileLeases`: reply leases as files beside the
        session locks, seen by every process on this data dir."""
        from core.stores.leases import FileLeases

        return FileLeases(self)

    def _blobs(self) -> Any:
        from core.stores.blobs import BlobStore

        return BlobStore(self.base_dir / "blobs")

    def has_blob(self, name: str) -> bool:
        """Whether the checkpoint blob ``name`` is in ``<base_dir>/blobs`` (a JSONL mirror, or a
        JSONL store pulled from, carries blobs there: :mod:`core.stores.blobs`)."""
        return self._blobs().has(name)

    def get_blob(self, name: str) -> bytes | None:
        """The blob's stored (zlib-compressed) bytes, hash checked; None when missing or damaged."""
        return self._blobs().get_packed(name)

    def put_blob(self, name: str, packed: bytes) -> None:
        """Store a blob received as stored elsewhere; one whose bytes do not match ``name`` is
        logged and left out."""
        self._blobs().put_packed(name, packed)

    def close(self) -> None:
        """Nothing to release: every file is closed after each call."""

    def list_token(self, project_key: str) -> str:
        """A short text that changes whenever the project's list could (issue 25, the live
        list): a session created, appended to, renamed, archived, unarchived or deleted, by any
        process. One ``scandir`` of the project folder and its archive with a ``stat`` per
        session file — no file is read — so an open page can ask every second."""
        import hashlib

        digest = hashlib.blake2b(digest_size=12)
        for d in (self._list_dir(project_key, False), self._list_dir(project_key, True)):
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if e.name.endswith(SUFFIX) and not is_part(e.name):
                            try:
                                st = e.stat()
                            except FileNotFoundError:
                                continue
                            # the ctime too: an edit of the same length with its mtime set back
                            # (os.utime) moves only that (as in the list index)
                            digest.update(f"{d.name}/{e.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\n".encode())
            except (FileNotFoundError, NotADirectoryError):
                digest.update(b"-")
        return digest.hexdigest()

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """The subpaths of the session's sub-agent records (sorted; archived or not): every
        ``<project>/[archive/]<session id>/**.jsonl`` whose name makes a valid key (others are
        logged and left out)."""
        found: set[str] = set()
        for folder in (self._list_dir(key.project_key, False) / key.session_id,
                       self._list_dir(key.project_key, True) / key.session_id):
            if not folder.is_dir():
                continue
            for dirpath, _dirs, files in os.walk(folder):
                for name in files:
                    if not name.endswith(SUFFIX) or is_part(name):
                        continue
                    rel = (Path(dirpath) / name[: -len(SUFFIX)]).relative_to(folder).as_posix()
                    try:
                        SessionKey(key.project_key, key.session_id, rel)
                    except InvalidSessionKey:
                        log.warning("%s: not a valid sub-agent record name; left out", Path(dirpath) / name)
                        continue
                    found.add(rel)
        return sorted(found)

    def list_projects(self) -> list[ProjectInfo]:
        """Projects with at least one session, most recently active first."""
        try:
            names = sorted(e.name for e in os.scandir(self.projects_dir) if e.is_dir())
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            try:
                _check_project_key(name)
            except ValueError:
                log.warning("%s: not a project folder name; ignored", self.projects_dir / name)
                continue
            main = self.list(name)
            metas = main or self.list(name, archived=True)
            if not metas:
                continue
            cwd = next((m.cwd for m in metas if m.cwd), None)
            out.append(ProjectInfo(name, cwd, len(main), max(m.updated_at for m in metas)))
        out.sort(key=lambda p: p.updated_at, reverse=True)
        return out


def _count_messages(entries: list[dict[str, Any]]) -> int:
    return sum(1 for e in entries if e.get("type") == "message" and isinstance(e.get("message"), dict))

