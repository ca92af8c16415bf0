"""Full-text search across every conversation (issue 16): a wing between ``core.stores`` and ``core.agent``.

``open_search(store)`` returns the index for a store: :class:`~core.search.jsonl_index.JsonlSearchIndex`
(an SQLite FTS5 file beside the JSONL sessions), :class:`~core.search.sql_index.SqlSearchIndex`
(FTS5 in the SQLite database, ``pg_trgm`` in PostgreSQL), the primary's for a mirrored store.
Every index has ``search(query, *, project_keys=None, archived=False, limit=50) -> list[SearchHit]``
and ``update(project_keys=None) -> int``; it is a cache, brought up to date at query time, never
the source of truth.
"""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from core.search.text import SearchHit, make_snippet, parse_query

log = logging.getLogger(__name__)

_CACHE: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def open_search(store: Any) -> Any:
    """The search index of ``store`` (one per store object, reused). Raises ``TypeError`` for a
    store kind without search."""
    from core.stores.jsonl_store import LocalSessionStore

    primary = getattr(store, "primary", None)
    if primary is not None and hasattr(store, "outbox"):  # a mirrored store: search its source of truth
        return open_search(primary)
    with _CACHE_LOCK:
        index = _CACHE.get(store)
        if index is None:
            if isinstance(store, LocalSessionStore):
                from core.search.jsonl_index import JsonlSearchIndex, watch_writes

                index = JsonlSearchIndex(store.base_dir)
                watch_writes(store, index)
            elif hasattr(store, "engine") and hasattr(store, "dialect"):
                from core.search.sql_index import SqlSearchIndex

                index = SqlSearchIndex(store)
            else:
                raise TypeError(f"search is not available for {store!r}")
            _CACHE[store] = index
        return index


__all__ = ["SearchHit", "make_snippet", "open_search", "parse_query"]
