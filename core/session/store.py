"""The :class:`SessionStore` adapter (design article: ``SessionStore``).

Business code talks to this protocol only, so swapping the JSONL files for a database changes no
line of the agent or the UI. Every implementation passes the contract suite in
``tests/core/stores/test_store_contract.py``.
"""
from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable

from core.errors import StaleChange
from core.session.keys import SessionKey
from core.session.models import ProjectInfo, SessionMeta

log = logging.getLogger(__name__)


@runtime_checkable
class SessionStore(Protocol):
    """Append-only storage of session entries (see :mod:`core.session.entries` for their shapes)."""

    def append(
        self, key: SessionKey, entries: list[dict[str, Any]], *, expected_count: int | None = None,
        expected_version: str | None = None,
    ) -> int:
        """Append ``entries`` atomically (all or none) and durably; return the session's message
        count afterwards. With ``expected_count`` (the message count the caller loaded), raise
        :class:`~core.errors.SessionConflict` and write nothing if the stored count differs.
        With ``expected_version`` (for a family root: the version in use the caller read — the
        last ``version`` entry's id, or the root's own id when there is none), raise
        :class:`~core.errors.StaleChange` and write nothing if it differs; both checks are made
        under the same lock or transaction as the write, so two racing writers cannot both pass.
        Raises ``ValueError`` for an entry that is not a JSON-serialisable dict. A main session
        (no subpath) is created only by an append whose first entry is a header; any other
        append to a missing main session raises :class:`~core.errors.SessionNotFound`, so a
        session deleted meanwhile is never brought back headless."""
        ...

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        """Create the record ``key`` holding exactly ``entries``, whole or not at all, and return
        its message count. For every multi-entry creation (a new session, a fork, an import, a
        restore, a migrated record): a process killed or a disk filling up mid-way leaves the
        record absent, and no reader (``load``, ``list``, ``exists``) ever sees part of it.
        Raises ``ValueError`` (a bad entry, no entries, a main session whose first entry is not
        its header; see :func:`check_new_record`), :class:`~core.errors.SessionExists` (the
        record exists, archived or not; nothing written), and the store's own failures
        (``OSError`` for files, :class:`~core.errors.StoreUnavailable`) with nothing written."""
        ...

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """Return every readable entry in order (archived sessions too), or None when missing.
        Damaged entries are skipped with a logged warning, never failing the whole session.
        The list is the caller's; the entry dicts in it are read-only (a store may share them
        between calls: :mod:`core.stores.entry_cache`)."""
        ...

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """Metadata of the project's main sessions (or archived ones), most recent activity
        first. Sub-agent records are never listed. Must not read the messages of unchanged sessions."""
        ...

    def remove(self, key: SessionKey) -> None:
        """Delete a session (with its sub-agent records) or one sub-agent record.
        Raises :class:`~core.errors.SessionNotFound` when missing."""
        ...

    def exists(self, key: SessionKey) -> bool:
        """True when the session (or sub-agent record) exists, archived or not."""
        ...

    def list_projects(self) -> list[ProjectInfo]:
        """Every project holding at least one session (main or archived), most recent first."""
        ...

    def archive(self, key: SessionKey) -> None:
        """Move a session (and its sub-agent records) out of the main list. Idempotent;
        raises :class:`~core.errors.SessionNotFound` when the session does not exist."""
        ...

    def unarchive(self, key: SessionKey) -> None:
        """Move an archived session back to the main list. Idempotent;
        raises :class:`~core.errors.SessionNotFound` when the session does not exist."""
        ...


def check_new_record(key: SessionKey, entries: list[dict[str, Any]]) -> None:
    """The rule every store's :meth:`SessionStore.create_whole` keeps before writing: at least one
    entry, and a main session (no subpath) starts with its header entry. Raises ``ValueError``."""
    if not entries:
        raise ValueError("A new session needs at least one entry.")
    if key.subpath is None and not (isinstance(entries[0], dict) and entries[0].get("type") == "header"):
        raise ValueError("A new session must start with its header entry.")


def check_version(key: SessionKey, expected_version: str, current: str | None) -> None:
    """The ``expected_version`` rule of :meth:`SessionStore.append`, which every store keeps under
    its lock: ``current`` is the family root ``key``'s stored version pointer (the last
    ``version`` entry's id; None: none, the root itself is in use). Raises
    :class:`~core.errors.StaleChange` when the version in use is not ``expected_version``."""
    in_use = current or key.session_id
    if in_use != expected_version:
        raise StaleChange("version", expected_version, in_use)


def subpaths_of(store: Any, key: SessionKey) -> list[str]:
    """The subpaths of a session's sub-agent records (sorted), for any store: ``store.list_subpaths(key)``
    (JSONL, SQL, mirrored, backup archives); a store without it has none (logged)."""
    lister = getattr(store, "list_subpaths", None)
    if callable(lister):
        return list(lister(key))
    log.warning("%r cannot enumerate sub-agent records; only main sessions are copied", store)
    return []
