"""The :class:`SessionStore` adapter (design article: ``SessionStore``) and its optional abilities.

Business code talks to this protocol only, so swapping the JSONL files for a database changes no
line of the agent or the UI. Every implementation passes the contract suite in
``tests/core/stores/test_store_contract.py``.

What only some stores can do is a small protocol of its own, each with one type guard — the
only place that asks a store what it can do (model: the OpenAI Agents SDK's optional session
protocols). A caller writes ``if has_list_token(store): store.list_token(pk)`` and the type
checker knows the method is there; nothing else probes a store with ``getattr``/``hasattr``
(``tests/test_layout.py`` enforces it):

=========================  ==========================  ================================================
protocol                   guard                       which stores
=========================  ==========================  ================================================
:class:`ListsByToken`      :func:`has_list_token`      JSONL, SQL, mirrored (the live list's check)
:class:`AppendsAt`         :func:`appends_at`          SQL, S3, Redis (what a mirror copies with)
:class:`KnowsWriteTimes`   :func:`knows_write_times`   JSONL (when a record last arrived)
:class:`CarriesBlobs`      :func:`carries_blobs`       JSONL, SQL, S3, Redis (checkpoint bytes as a mirror)
:class:`IndexesProjects`   :func:`indexes_projects`    SQL, S3, Redis (project keys and identities, cheaply)
:class:`MirroredStore`     :func:`is_mirrored`         :class:`~core.stores.mirror.MirroredSessionStore`
=========================  ==========================  ================================================

What every store has (``list_subpaths``, ``close``) is part of :class:`SessionStore` itself.
"""
from __future__ import annotations

import logging
from typing import Any, Protocol, TypeGuard, runtime_checkable

from core.errors import StaleChange
from core.session.keys import SessionKey
from core.session.models import ProjectInfo, SessionMeta

log = logging.getLogger(__name__)


@runtime_checkable
class SessionSource(Protocol):
    """The read half of a :class:`SessionStore`: what a migration, a restore or a pull reads from
    (a backup zip is one: :class:`core.stores.backup.BackupArchive`)."""

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

    def exists(self, key: SessionKey) -> bool:
        """True when the session (or sub-agent record) exists, archived or not."""
        ...

    def list_projects(self) -> list[ProjectInfo]:
        """Every project holding at least one session (main or archived), most recent first."""
        ...

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """The subpaths of session ``key``'s sub-agent records (sorted; archived or not; [] for
        none or a missing session). What a fork, a move, a migration, a backup and a mirror
        enumerate a session's records with."""
        ...


@runtime_checkable
class SessionStore(SessionSource, Protocol):
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

    def remove(self, key: SessionKey) -> None:
        """Delete a session (with its sub-agent records) or one sub-agent record.
        Raises :class:`~core.errors.SessionNotFound` when missing."""
        ...

    def archive(self, key: SessionKey) -> None:
        """Move a session (and its sub-agent records) out of the main list. Idempotent;
        raises :class:`~core.errors.SessionNotFound` when the session does not exist."""
        ...

    def unarchive(self, key: SessionKey) -> None:
        """Move an archived session back to the main list. Idempotent;
        raises :class:`~core.errors.SessionNotFound` when the session does not exist."""
        ...

    def close(self) -> None:
        """Release what the store holds (database pools, the mirror's delivery thread); a store
        holding nothing does nothing. The store is not used afterwards."""
        ...


class ListsByToken(SessionStore, Protocol):
    """A store that can say cheaply whether a project's list may have changed."""

    def list_token(self, project_key: str) -> str:
        """A short text that changes with any create, append, rename, archive or delete in the
        project, by any process; reading it reads no session (the open page asks every second)."""
        ...


class AppendsAt(SessionStore, Protocol):
    """A store that appends at a known position and counts entries without loading them (what a
    mirror copies with: a re-delivered copy writes nothing twice)."""

    def append_at(self, key: SessionKey, entries: list[dict[str, Any]], first_seq: int) -> int:
        """Store ``entries`` as entries ``first_seq``, ``first_seq + 1``, … of ``key``, skipping
        those already held (each must equal what is held there, else
        :class:`~core.errors.SessionConflict`); return the message count."""
        ...

    def entry_count(self, key: SessionKey) -> int | None:
        """How many entries ``key`` holds (0 or None when missing), without reading them."""
        ...


class KnowsWriteTimes(SessionStore, Protocol):
    """A store that knows when a record was last written here (an import or a restore keeps the
    original message times, and must not look idle for cleanup)."""

    def written_at(self, key: SessionKey) -> float | None:
        """When ``key`` was last written in this store (Unix seconds), None when missing."""
        ...


class CarriesBlobs(SessionStore, Protocol):
    """A store that keeps checkpoint blobs beside its sessions when it is a mirror (or is pulled
    from): the bytes as stored (zlib-compressed), named by the SHA-256 of their content."""

    def has_blob(self, name: str) -> bool:
        """Whether the blob ``name`` is stored."""
        ...

    def get_blob(self, name: str) -> bytes | None:
        """The stored (compressed) bytes of ``name``, unchecked; None when missing."""
        ...

    def put_blob(self, name: str, packed: bytes) -> None:
        """Store the compressed bytes of ``name`` (a second put of one name changes nothing)."""
        ...


class IndexesProjects(SessionStore, Protocol):
    """A store that lists its project keys and their identities without reading session headers
    (a remote database or bucket: one query instead of a header read per project)."""

    def project_keys(self) -> list[str]:
        """Every project key with at least one session (main or archived)."""
        ...

    def project_identity(self, project_key: str) -> str | None:
        """The project identity recorded for ``project_key`` (:mod:`core.session.identity`), if any."""
        ...


class MirroredStore(SessionStore, Protocol):
    """A store that writes locally first and copies to a mirror in the background
    (:class:`~core.stores.mirror.MirroredSessionStore`): each copy has its own retention."""

    mirror_name: str

    def remove_local(self, key: SessionKey) -> None:
        """Remove the local copy only (the mirror keeps its copy until its own retention)."""
        ...

    def archive_local(self, key: SessionKey) -> None:
        """Archive the local copy only (the mirror's copy stays where it is)."""
        ...

    def expire_mirror(self, days: float | None = None, *, now: float | None = None,
                      dry_run: bool = False) -> list[SessionMeta]:
        """Remove the mirror's copies idle for over ``days`` days; return them."""
        ...

    def status(self) -> dict[str, Any]:
        """The mirror's health, read from the local outbox only (never blocks on the mirror)."""
        ...

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued write is copied; True if so within ``timeout`` seconds."""
        ...

    def removing(self) -> set[str]:
        """Ids of sessions deleted here whose delete the mirror has not received yet."""
        ...

    def copy_target(self, key: SessionKey) -> str | None:
        """The id of the mirror's record that ``key``'s writes go to, when it is not ``key``'s own
        (the local history was kept there as a version); else None."""
        ...

    def mirror_store(self) -> SessionStore:
        """The mirror store itself (opened on first use); raises while it is unreachable."""
        ...


def has_list_token(store: SessionStore) -> TypeGuard[ListsByToken]:
    """Whether ``store`` has :meth:`ListsByToken.list_token`."""
    return callable(getattr(store, "list_token", None))


def appends_at(store: SessionStore) -> TypeGuard[AppendsAt]:
    """Whether ``store`` has :meth:`AppendsAt.append_at` and :meth:`AppendsAt.entry_count`."""
    return callable(getattr(store, "append_at", None)) and callable(getattr(store, "entry_count", None))


def knows_write_times(store: SessionStore) -> TypeGuard[KnowsWriteTimes]:
    """Whether ``store`` has :meth:`KnowsWriteTimes.written_at`."""
    return callable(getattr(store, "written_at", None))


def carries_blobs(store: SessionStore) -> TypeGuard[CarriesBlobs]:
    """Whether ``store`` keeps checkpoint blobs (:class:`CarriesBlobs`)."""
    return all(callable(getattr(store, name, None)) for name in ("has_blob", "get_blob", "put_blob"))


def indexes_projects(store: SessionStore) -> TypeGuard[IndexesProjects]:
    """Whether ``store`` has :class:`IndexesProjects`' ``project_keys`` and ``project_identity``."""
    return callable(getattr(store, "project_keys", None)) and callable(getattr(store, "project_identity", None))


def is_mirrored(store: SessionStore) -> TypeGuard[MirroredStore]:
    """Whether ``store`` is a mirrored store (:class:`MirroredStore`)."""
    return callable(getattr(store, "expire_mirror", None)) and callable(getattr(store, "remove_local", None))


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

