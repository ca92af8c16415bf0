"""What a store kind is besides its sessions: the :class:`Backend` protocol.

A store that can be the store of record (the JSONL files, a SQL database, S3, Redis) builds the
services that live beside its sessions — its reply leases and its memory log — itself, so nothing
else needs to know where each kind keeps them. :class:`core.storage.Storage` asks once and keeps
the answer; a mirrored store is not a backend (its services are its local store's).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from core.session.store import SessionStore
from core.stores.jsonl_store import LocalSessionStore
from core.stores.leases import LeaseBoard
from core.stores.memory_log import MemoryLog

log = logging.getLogger(__name__)


class Backend(SessionStore, Protocol):
    """A :class:`~core.session.store.SessionStore` that builds its own services (each call builds a
    new one: the caller keeps it)."""

    def leases(self) -> LeaseBoard:
        """A new board of this store's reply leases (:mod:`core.stores.leases`)."""
        ...

    def memory_log(self) -> MemoryLog:
        """A new memory log kept beside the sessions (:mod:`core.stores.memory_log`)."""
        ...

    def describe(self) -> str:
        """How messages name this store, passwords left out: ``jsonl (FOLDER)``, the database or
        bucket URL as opened (a relative SQLite path shown resolved)."""
        ...


def own_folder(store: SessionStore, data_dir: Path) -> Path:
    """Where this machine keeps the files that live beside ``store``'s sessions (checkpoint
    blobs, project aliases, the memory switch): a JSONL store's own folder (its ``base_dir``, the
    data dir itself unless the store was given another with ``jsonl:PATH``), else ``data_dir`` (a
    database, S3 or Redis store of record: such files stay on this machine)."""
    return store.base_dir if isinstance(store, LocalSessionStore) else data_dir
