"""Full-text search across every conversation (issue 16): a wing between ``core.stores`` and ``core.agent``.

Each store kind of record has its index: :class:`~core.search.jsonl_index.JsonlSearchIndex` (an
SQLite FTS5 file beside the JSONL sessions) and :class:`~core.search.sql_index.SqlSearchIndex` (FTS5
in the SQLite database, ``pg_trgm`` in PostgreSQL). :class:`core.storage.Storage` builds the one of
its local store once (``storage.search``; a mirrored storage searches its local store, the source
of truth). Every index is a :class:`SearchIndex`; it is a cache, brought up to date at query time,
never the source of truth.
"""
from __future__ import annotations

import logging
from typing import Protocol

from core.search.text import SearchHit, make_snippet, parse_query

log = logging.getLogger(__name__)


class SearchIndex(Protocol):
    """What every search index answers."""

    def search(self, query: str, *, project_keys: list[str] | None = None, archived: bool = False,
               limit: int = 50) -> list[SearchHit]:
        """The best matches of ``query`` (words, ``"phrases"``, ``#tags``) in ``project_keys``
        (None: every project), newest first within equal rank; archived sessions only with
        ``archived``. Brings the index up to date for those projects first."""
        ...

    def update(self, project_keys: list[str] | None = None) -> int:
        """Bring the index up to date for ``project_keys`` (None: every project); return how many
        session records were (re-)indexed."""
        ...


__all__ = ["SearchHit", "SearchIndex", "make_snippet", "parse_query"]
