"""One storage object: the sessions, the data folder, and every service that lives beside them.

:func:`open_store` opens the configured storage (``ANYCODE_STORE`` / ``--store``, ``ANYCODE_MIRROR``)
and returns a :class:`Storage`. Everything that reaches stored data — the web UI, the command line,
the runner, importers, search, memory, backup, pull, migrate — receives this object (or the one
part of it it needs), so a rule that spans features (what a mirror carries, where blobs are, which
leases a reply takes) is written once, here or in the store kind that builds the service.

Which object is which:

- :attr:`Storage.local` — the store of record on this machine (a
  :class:`~core.stores.backend.Backend`: JSONL files, SQLite, PostgreSQL; S3 or Redis too, though
  those are mirrors first). Each store kind builds its own leases and memory log.
- :attr:`Storage.sessions` — what sessions are read and written through: the
  :class:`~core.stores.mirror.MirroredSessionStore` around ``local`` when a mirror is configured,
  else ``local`` itself.
- :attr:`Storage.mirror` — that mirrored store (its status, flush, retention and the mirror store
  itself for pulls), or None.

Services are built on first use, once per storage (never cached by store object elsewhere):
:attr:`~Storage.leases`, :attr:`~Storage.search`, :attr:`~Storage.memory_log` (mirrored to the
mirror's when the storage is), :attr:`~Storage.memories`, :attr:`~Storage.aliases`,
:attr:`~Storage.blobs`, and :attr:`~Storage.manager` (the one writer of sessions). A mirrored storage's services are its local store's: the mirror is a copy,
not a meeting place.

This package sits above ``core.stores``, ``core.search`` and ``core.memory`` and below
``core.agent`` (``tests/test_layout.py`` keeps it so).
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

from core import settings
from core.errors import SearchUnavailable
from core.memory.store import MemoryStore
from core.search import SearchIndex
from core.session.manager import SessionManager
from core.session.store import SessionStore
from core.stores.aliases import ProjectAliases
from core.stores.backend import Backend, own_folder
from core.stores.blobs import BlobStore
from core.stores.factory import DEFAULT_SPEC, MIRROR_ENV, describe, effective_spec, store_from_spec
from core.stores.jsonl_store import LocalSessionStore
from core.stores.leases import LeaseBoard
from core.stores.memory_log import MemoryLog, MirroredMemoryLog
from core.stores.mirror import MirroredSessionStore

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Storage:
    """The sessions of this machine and the services beside them (see the module docstring).

    ``local``: the store of record (a :class:`~core.stores.backend.Backend`). ``data_dir``:
    anycode's data folder (default :func:`core.settings.data_dir`): the mirror's outbox, agent
    definitions (``<data_dir>/agents``), learnt context windows, and the folder no project may be
    inside. ``mirror``: a :class:`~core.stores.mirror.MirroredSessionStore` whose primary is
    ``local`` (ValueError otherwise), or None. A mirrored store given as ``local`` is a TypeError:
    its services are its primary's, so the storage is built from that primary and the mirror.

    Thread-safe: each service is built once, whichever thread asks first. A context manager:
    leaving it closes the storage (:meth:`close`).
    """

    def __init__(self, local: Backend, *, data_dir: str | os.PathLike[str] | None = None,
                 mirror: MirroredSessionStore | None = None):
        if isinstance(local, MirroredSessionStore):
            raise TypeError("a mirrored store is not a store of record: give Storage its local store "
                            "and the mirrored store as mirror=")
        if mirror is not None and not mirror.mirrors_from(local):
            raise ValueError(f"{mirror!r} does not mirror {local!r}")
        self.local: Backend = local
        self.mirror: MirroredSessionStore | None = mirror
        self.sessions: SessionStore = mirror if mirror is not None else local
        self.data_dir: Path = Path(data_dir) if data_dir is not None else settings.data_dir()
        #: Where the files beside the sessions live (blobs, project aliases, the memory switch):
        #: a JSONL store's own folder, else :attr:`data_dir` (:func:`core.stores.backend.own_folder`).
        self.files_dir: Path = own_folder(local, self.data_dir)
        self._services: dict[str, Any] = {}
        self._lock = threading.RLock()  # re-entered: memories are built from memory_log and aliases

    @classmethod
    def over(cls, store: SessionStore, *, data_dir: str | os.PathLike[str] | None = None) -> "Storage":
        """A storage over a store a script holds by itself: ``store`` as the store of record, or,
        for a :class:`~core.stores.mirror.MirroredSessionStore`, its local store with ``store``
        as the mirror (so a turn on it still writes through the mirror's outbox)."""
        if isinstance(store, MirroredSessionStore):
            return cls(store.local_store(), data_dir=data_dir, mirror=store)
        return cls(store, data_dir=data_dir)

    def __repr__(self) -> str:
        return f"Storage({self.describe()})"

    def __enter__(self) -> "Storage":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _service(self, name: str, build: Callable[[], _T]) -> _T:
        with self._lock:
            if name not in self._services:
                self._services[name] = build()
            return self._services[name]

    # --- services, each built once ------------------------------------------------------------

    @property
    def manager(self) -> SessionManager:
        """The :class:`~core.session.manager.SessionManager` over :attr:`sessions` — the one writer
        of sessions, its fold memo shared by everyone holding this storage (the page, its turns,
        their sub-agents and experts); it refuses :meth:`protected_dirs` as projects."""
        return self._service("manager", lambda: SessionManager(self.sessions, protected_dirs=self.protected_dirs()))

    @property
    def leases(self) -> LeaseBoard:
        """The reply leases (:mod:`core.stores.leases`) of the local store: files beside the JSONL
        sessions, the ``anycode_leases`` table of a database, this process's memory otherwise."""
        return self._service("leases", self.local.leases)

    @property
    def memory_log(self) -> MemoryLog:
        """The memory log beside the local store (:mod:`core.stores.memory_log`); on a mirrored
        storage, copied to the mirror's in the background (one copying thread per storage).
        Raises :class:`~core.errors.StoreUnavailable` when the store cannot keep memories."""
        return self._service("memory_log", self._build_memory_log)

    def _build_memory_log(self) -> MemoryLog:
        own = self.local.memory_log()
        mirror = self.mirror
        if mirror is None:
            return own
        return MirroredMemoryLog(own, lambda: mirror.mirror_store().memory_log())

    @property
    def memories(self) -> MemoryStore:
        """The user's and the projects' memories (:class:`~core.memory.store.MemoryStore`) over
        :attr:`memory_log`, with :attr:`aliases` (a project's memories recorded at its other paths)."""
        return self._service("memories", lambda: MemoryStore(self.memory_log, self.aliases))

    @property
    def search(self) -> SearchIndex:
        """The full-text index of the local store (:mod:`core.search`): an FTS5 file beside the
        JSONL sessions (told of every write through this process), or tables in the SQL database.
        Raises :class:`~core.errors.SearchUnavailable` for a store kind without one (S3, Redis)."""
        return self._service("search", self._build_search)

    def _build_search(self) -> SearchIndex:
        local = self.local
        if isinstance(local, LocalSessionStore):
            from core.search.jsonl_index import JsonlSearchIndex

            index = JsonlSearchIndex(local.base_dir)
            local.on_write(index.mark_written)
            return index
        from core.stores.sql_store import SqlSessionStore  # here: only a SQL store needs SQLAlchemy

        if isinstance(local, SqlSessionStore):
            from core.search.sql_index import SqlSearchIndex

            return SqlSearchIndex(local)
        raise SearchUnavailable(f"Search is not available for {local.describe()}: keep the sessions in the JSONL "
                                "files or a SQL database, with this store as the mirror.")

    @property
    def aliases(self) -> ProjectAliases:
        """The project alias registry (:mod:`core.stores.aliases`): ``<files_dir>/projects.json``."""
        return self._service("aliases", lambda: ProjectAliases(self.files_dir))

    @property
    def blobs(self) -> BlobStore:
        """This machine's checkpoint blobs (:mod:`core.stores.blobs`): ``<files_dir>/blobs``; on a
        mirrored storage the mirror's own (the ones it carries to the mirror)."""
        mirror = self.mirror
        return self._service("blobs", lambda: mirror.blobs if mirror is not None else BlobStore(self.files_dir / "blobs"))

    # --- describing and closing ---------------------------------------------------------------

    def protected_dirs(self) -> tuple[Path, ...]:
        """The folders that are anycode's and never a project (nor inside one): :attr:`data_dir`
        and :attr:`files_dir` (what a project folder and a workspace are checked against)."""
        return tuple(dict.fromkeys((self.data_dir, self.files_dir)))

    def describe(self) -> str:
        """One line naming the store (passwords masked) and the mirror, if any: what the start-up
        message says."""
        if self.mirror is None:
            return self.local.describe()
        return f"{self.local.describe()}, mirrored to {self.mirror.mirror_name}"

    def close(self, timeout: float = 2.0) -> None:
        """Give the mirror up to ``timeout`` seconds to deliver what is queued (the rest stays in
        its outbox for the next start), then close the stores (database pools, the mirror's
        thread). Errors are logged, never raised: whoever closes is stopping. The storage is not
        used afterwards."""
        try:
            if self.mirror is not None:
                self.mirror.close(timeout)
            else:
                self.local.close()
        except Exception as err:  # noqa: BLE001 -- shutting down: report and go on
            log.warning("closing the session store failed: %s", err)


def open_store(spec: str | None = None, data_dir: str | os.PathLike[str] | None = None, *,
               mirror: str | None = None) -> Storage:
    """The configured :class:`Storage`: the store ``spec`` (default ``$ANYCODE_STORE``, else
    ``jsonl``: JSONL files under the data dir) mirrored to ``mirror`` (default
    ``$ANYCODE_MIRROR``; empty: no mirror) in the background.

    ``data_dir``: anycode's data folder (default :func:`core.settings.data_dir`), holding the JSONL
    files, the mirror's outbox and relative SQLite paths. The mirror is opened in the background,
    so an unreachable mirror never stops the app from starting (its error shows in
    ``storage.mirror.status()``). Raises :class:`~core.errors.StoreUnavailable` when the store
    cannot be opened (an unknown spec, a missing extra, an unreachable database)."""
    data = Path(data_dir).expanduser() if data_dir is not None else settings.data_dir()
    spec = effective_spec(spec) or DEFAULT_SPEC
    mirror_spec = effective_spec(mirror, MIRROR_ENV)
    local = store_from_spec(spec, data)
    log.info("session store: %s", local.describe())
    if not mirror_spec:
        return Storage(local, data_dir=data)
    log.info("mirroring sessions to %s", describe(mirror_spec))
    mirrored = MirroredSessionStore(local, lambda: store_from_spec(mirror_spec, data / "mirror-jsonl"),
                                    outbox_path=data / "mirror" / "outbox.sqlite3",
                                    blobs=BlobStore(own_folder(local, data) / "blobs"),
                                    mirror_name=describe(mirror_spec))
    return Storage(local, data_dir=data, mirror=mirrored)


__all__ = ["Storage", "open_store"]
