"""The :class:`core.storage.Storage` of a store a test built by hand.

Tests open stores of every kind directly (a JSONL folder, a database, a mirrored store over a fake
mirror); the product holds each in one ``Storage``. :func:`storage_of` gives the storage such a
store belongs to — a mirrored store's is its primary's, with the mirrored store as its mirror —
the same one for every call with the same store object, as the app holds one storage (one search
index told of its writes, one mirrored memory log) per store.
"""
from __future__ import annotations

import weakref
from typing import Any

from core.storage import Storage
from core.stores.mirror import MirroredSessionStore

_HELD: "weakref.WeakKeyDictionary[Any, Storage]" = weakref.WeakKeyDictionary()


def storage_of(store: Any) -> Storage:
    """``store`` itself when it is a Storage; else the one Storage over it (built on first use,
    with the settings' data dir)."""
    if isinstance(store, Storage):
        return store
    held = _HELD.get(store)
    if held is None:
        if isinstance(store, MirroredSessionStore):
            held = Storage(store.primary, mirror=store)
        else:
            held = Storage(store)
        _HELD[store] = held
    return held


def pull_into(remote: Any, local: Any, **kwargs: Any) -> Any:
    """:func:`core.stores.pull.pull_sessions` from ``remote`` into the storage of ``local`` (its
    sessions, aliases, memory log and blobs); ``kwargs``: ``project_keys``, ``session_ids``."""
    from core.stores.pull import pull_sessions

    storage = storage_of(local)
    return pull_sessions(remote, storage.sessions, aliases=storage.aliases, memory_log=storage.memory_log,
                         blobs=storage.blobs, **kwargs)
