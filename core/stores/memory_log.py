"""Where memories are kept: an append-only log of memory entries per scope, in every backend.

The memory layer (:mod:`core.memory`) writes *entries* (``add`` / ``update`` / ``remove``, see
:mod:`core.memory.model`) and folds them into the current memories; this module only stores them,
the same way sessions are stored:

- A **scope** names one log: ``"user"`` (the user's memories, every project) or
  ``"project:<project_key>"`` (one project's; the key as :func:`core.session.keys.project_key`).
- Every entry carries a unique ``eid`` (entry id). :meth:`MemoryLog.append` skips entries whose
  ``eid`` the log already holds, so copying a log twice (the mirror retrying, ``migrate`` run
  again) duplicates nothing: logs merge by union, and the fold does not depend on their order.
- JSONL (:class:`JsonlMemoryLog`): ``<data dir>/memory/user.jsonl`` and
  ``<data dir>/memory/projects/<project_key>.jsonl`` (outside ``projects/``, whose ``*.jsonl``
  files are sessions), one JSON entry per line, each append one ``write`` under a ``filelock``
  (``memory/.locks/``), then ``fsync``; damaged lines are skipped with a warning naming file and
  line; files 0600, folders 0700 (the same writer as sessions, :meth:`LocalSessionStore._write`).
- SQL (:class:`SqlMemoryLog`): table ``anycode_memory`` (migration 3 of
  :mod:`core.stores.sql_schema`), one row per entry, unique on ``(scope, eid)``.
- Mirrored (:class:`MirroredMemoryLog`): the primary's log first; a background thread copies
  whatever entries the mirror lacks (all scopes once at start, then each written scope). It needs
  no outbox: comparing by ``eid`` finds what is missing, after any crash.

Each store kind builds its own log (``store.memory_log()``); :class:`core.storage.Storage` keeps one
per storage (``storage.memory_log``: the local store's, mirrored when the storage is), which is
what every caller uses — one mirrored log (one copying thread) per storage.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

import filelock

from core.errors import StoreUnavailable
from core.session.entries import encode_entries, encode_entry
from core.session.keys import _check_project_key
from core.stores.jsonl_io import read_entries

if TYPE_CHECKING:
    from core.stores.jsonl_store import LocalSessionStore
    from core.stores.sql_store import SqlSessionStore

log = logging.getLogger(__name__)

USER_SCOPE = "user"
PROJECT_PREFIX = "project:"
MEMORY_DIR = "memory"
LOCK_TIMEOUT = 30.0  # seconds, as the session store's
_EID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


def check_scope(scope: object) -> str:
    """Return ``scope`` if it is ``"user"`` or ``"project:<valid project key>"``; else ValueError."""
    if scope == USER_SCOPE:
        return scope
    if isinstance(scope, str) and scope.startswith(PROJECT_PREFIX):
        try:
            _check_project_key(scope[len(PROJECT_PREFIX):])
        except ValueError as e:
            raise ValueError(f"memory scope {scope!r}: {e}") from None
        return scope
    raise ValueError(f"memory scope must be 'user' or 'project:<project key>', not {scope!r}")


def project_scope(project_key: str) -> str:
    """The scope of one project's memories (``"project:<project_key>"``)."""
    return check_scope(PROJECT_PREFIX + project_key)


def _check_entries(entries: list[dict[str, Any]]) -> None:
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("eid"), str) or not _EID.match(e["eid"]):
            raise ValueError(f"a memory entry needs an 'eid' of 1-64 letters, digits, '_' or '-': {e!r}")


class MemoryLog(Protocol):
    """The memory backend contract (run on every backend by ``tests/core/memory/test_memory_contract.py``)."""

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        """Add ``entries`` (dicts with a unique ``eid``) to the scope's log, skipping those whose
        ``eid`` it holds; return how many were written. ValueError for a bad scope or entry
        (nothing written), StoreUnavailable when the backend cannot be reached or locked."""

    def load(self, scope: str) -> list[dict[str, Any]]:
        """Every readable entry of the scope's log in append order (``[]`` when it has none)."""

    def scopes(self) -> list[str]:
        """Every scope holding at least one entry, sorted."""


class JsonlMemoryLog:
    """:class:`MemoryLog` over JSONL files under ``<base_dir>/memory`` (see the module docstring).

    ``store`` is the :class:`~core.stores.jsonl_store.LocalSessionStore` of the same data dir:
    its writer (whole lines, torn-tail repair, fsync, 0600/0700) is the one used here."""

    def __init__(self, store: LocalSessionStore):
        self.store = store
        self.dir = Path(store.base_dir) / MEMORY_DIR

    def __repr__(self) -> str:
        return f"JsonlMemoryLog({str(self.dir)!r})"

    def path(self, scope: str) -> Path:
        """The log file of ``scope``."""
        check_scope(scope)
        if scope == USER_SCOPE:
            return self.dir / "user.jsonl"
        return self.dir / "projects" / (scope[len(PROJECT_PREFIX):] + ".jsonl")

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        """See :meth:`MemoryLog.append`; one write of whole lines under the scope's file lock."""
        path = self.path(scope)
        _check_entries(entries)
        encode_entries(entries)  # a bad entry fails before anything is touched
        lock_dir = self.dir / ".locks"
        self.store._mkdirs(lock_dir)
        lock = filelock.FileLock(str(lock_dir / (path.stem + ".lock")), timeout=LOCK_TIMEOUT, poll_interval=0.005)
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            raise StoreUnavailable(f"The memory log {path} is locked by another process for over "
                                   f"{LOCK_TIMEOUT:.0f} s; try again in a moment.") from exc
        try:
            have = {e.get("eid") for e in self._read(path)}
            new, seen = [], set()
            for e in entries:
                if e["eid"] not in have and e["eid"] not in seen:
                    new.append(e)
                    seen.add(e["eid"])
            if new:
                self.store._write(path, encode_entries(new))
            return len(new)
        finally:
            lock.release()

    @staticmethod
    def _read(path: Path) -> list[dict[str, Any]]:
        try:
            return read_entries(path)
        except FileNotFoundError:
            return []

    def load(self, scope: str) -> list[dict[str, Any]]:
        """See :meth:`MemoryLog.load`; damaged lines are skipped with a warning."""
        return self._read(self.path(scope))

    def scopes(self) -> list[str]:
        """See :meth:`MemoryLog.scopes`."""
        found = []
        if (self.dir / "user.jsonl").is_file():
            found.append(USER_SCOPE)
        try:
            names = os.listdir(self.dir / "projects")
        except FileNotFoundError:
            names = []
        for name in names:
            if name.endswith(".jsonl") and not name.startswith("."):
                try:
                    found.append(project_scope(name[: -len(".jsonl")]))
                except ValueError:
                    log.warning("ignoring %s: not a project memory log", self.dir / "projects" / name)
        return sorted(found)


class SqlMemoryLog:
    """:class:`MemoryLog` in the ``anycode_memory`` table of a
    :class:`~core.stores.sql_store.SqlSessionStore`'s database (same engine, same errors)."""

    def __init__(self, store: SqlSessionStore):
        self.store = store

    def __repr__(self) -> str:
        return f"SqlMemoryLog({self.store.url!r})"

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        """See :meth:`MemoryLog.append`: one transaction; two writers of one ``eid`` insert it once."""
        import sqlalchemy as sa

        check_scope(scope)
        _check_entries(entries)
        rows = [(e["eid"], encode_entry(e)) for e in entries]
        t = self.store._t.memory
        with self.store._errors("memory append"), self.store._write() as conn:
            if conn.dialect.name == "postgresql":
                # Serialise writers of one scope (SQLite's BEGIN IMMEDIATE already does), so
                # "is this eid there?" and the insert see the same rows.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:s))"), {"s": "anycode-memory:" + scope})
            have = set(conn.execute(sa.select(t.c.eid).where(t.c.scope == scope)).scalars())
            new = []
            for eid, data in rows:
                if eid not in have:
                    have.add(eid)
                    new.append({"scope": scope, "eid": eid, "data": data})
            if new:
                conn.execute(t.insert(), new)
            return len(new)

    def load(self, scope: str) -> list[dict[str, Any]]:
        """See :meth:`MemoryLog.load` (rows in insertion order)."""
        import json

        import sqlalchemy as sa

        check_scope(scope)
        t = self.store._t.memory
        with self.store._errors("memory load"), self.store._read() as conn:
            data = conn.execute(sa.select(t.c.data).where(t.c.scope == scope).order_by(t.c.pk)).scalars().all()
        return [json.loads(d) for d in data]

    def scopes(self) -> list[str]:
        """See :meth:`MemoryLog.scopes`."""
        import sqlalchemy as sa

        t = self.store._t.memory
        with self.store._errors("memory scopes"), self.store._read() as conn:
            return sorted(conn.execute(sa.select(t.c.scope).distinct()).scalars())


class MirroredMemoryLog:
    """:class:`MemoryLog` writing to ``primary`` (the answer to every read) and copying to the
    mirror in a daemon thread; the mirror failing or hanging never fails or slows a write.

    ``open_mirror``: zero-argument callable returning the mirror's :class:`MemoryLog` (called
    in the thread, retried with backoff). ``retry_max``: longest wait between attempts, seconds."""

    def __init__(self, primary: MemoryLog, open_mirror: Callable[[], MemoryLog], *, retry_max: float = 30.0):
        self.primary = primary
        self._open_mirror = open_mirror
        self._mirror: MemoryLog | None = None
        self.retry_max = retry_max
        self._todo: set[str] | None = None  # None: every scope (the first sync)
        self._cond = threading.Condition()
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="anycode-memory-mirror", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"MirroredMemoryLog({self.primary!r})"

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        """Append to the primary (its errors propagate), then queue the scope's copy."""
        written = self.primary.append(scope, entries)
        with self._cond:
            if self._todo is not None:
                self._todo.add(scope)
            self._cond.notify_all()
        return written

    def load(self, scope: str) -> list[dict[str, Any]]:
        """The primary's entries."""
        return self.primary.load(scope)

    def scopes(self) -> list[str]:
        """The primary's scopes."""
        return self.primary.scopes()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued scope is copied; True if so within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._todo == set() and not self._busy, timeout)

    def _run(self) -> None:
        delay = 0.5
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._todo is None or bool(self._todo))
                todo, self._todo, self._busy = self._todo, set(), True
            try:
                if self._mirror is None:
                    self._mirror = self._open_mirror()
                for scope in sorted(todo if todo is not None else self.primary.scopes()):
                    copy_memory_log(self.primary, self._mirror, scope)
                delay = 0.5
            except Exception as e:  # noqa: BLE001 -- a mirror must never break anything
                log.warning("copying memories to the mirror failed (%s); retrying in %.1f s", e, delay)
                with self._cond:
                    self._todo = None if todo is None else (self._todo or set()) | todo
                    self._busy = False
                threading.Event().wait(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            with self._cond:
                self._busy = False
                self._cond.notify_all()


def copy_memory_log(source: MemoryLog, target: MemoryLog, scope: str) -> int:
    """Copy the entries of ``scope`` that ``target`` lacks (by ``eid``); return how many."""
    entries = source.load(scope)
    if not entries:
        return 0
    have = {e.get("eid") for e in target.load(scope)}
    missing = [e for e in entries if e.get("eid") not in have and isinstance(e.get("eid"), str) and _EID.match(e["eid"])]
    return target.append(scope, missing) if missing else 0
