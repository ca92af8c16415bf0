"""What the object and key-value stores (S3, Redis) share: session metadata folded from entries.

Neither backend can run a query over entries, so each keeps, beside a main session's entries, a
small metadata record — the folded :class:`~core.session.entries.SessionState` and how many
entries it covers — written after every append. ``list()`` reads these records only (the design
article's rule: a list never reads messages). The record is a cache: when it covers fewer
entries than the session holds (a writer died between its two writes), the state is folded again
from the entries themselves.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Iterable

from core.session.entries import SessionState
from core.session.keys import SessionKey
from core.session.models import SessionMeta

log = logging.getLogger(__name__)


def folded(meta: dict[str, Any] | None, new_entries: list[dict[str, Any]], *, start: int) -> dict[str, Any]:
    """The metadata record after ``new_entries`` were written at entry index ``start``: the
    ``meta`` record's state folded further when it covers exactly ``start`` entries, else a fresh
    fold of ``new_entries`` alone (only correct when ``start`` is 0 — callers refold otherwise).
    Shape: ``{"state": SessionState.to_dict(), "entries": n}``."""
    if meta and meta.get("entries") == start and isinstance(meta.get("state"), dict):
        state = SessionState.from_dict(meta["state"])
    else:
        state = SessionState()
    state.feed_all(new_entries)
    return {"state": state.to_dict(), "entries": start + len(new_entries)}


def state_of(meta: dict[str, Any] | None) -> SessionState:
    """The folded state of a metadata record (empty for None or a damaged record)."""
    if meta and isinstance(meta.get("state"), dict):
        try:
            return SessionState.from_dict(meta["state"])
        except TypeError:
            log.warning("a session metadata record is damaged; treated as empty")
    return SessionState()


def session_meta(key: SessionKey, meta: dict[str, Any], *, archived: bool) -> SessionMeta:
    """The :class:`SessionMeta` a list shows for ``key`` from its metadata record."""
    state = state_of(meta)
    created = state.created_at or 0.0
    return SessionMeta(id=key.session_id, project_key=key.project_key, title=state.title, created_at=created,
                       updated_at=state.updated_at(default=created), message_count=state.message_count,
                       archived=archived, forked_from=state.forked_from, cwd=state.cwd,
                       title_source=state.title_source, version_of=state.version_of,
                       current_version=state.current, pinned=state.pinned, tags=tuple(state.tags))


def decode_entries(items: Iterable[bytes | str], where: str) -> list[dict[str, Any]]:
    """The entries of raw JSON texts (a Redis list's items, an S3 batch's lines): blank ones
    skipped, a damaged one or a non-object logged with ``where`` and its position, and skipped."""
    entries = []
    for n, item in enumerate(items, 1):
        if not item.strip():
            continue
        try:
            entry = json.loads(item)
        except ValueError:
            log.warning("%s entry %d is damaged; skipped", where, n)
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
