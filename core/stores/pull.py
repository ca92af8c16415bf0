"""Resume on another machine (issue 26): copy from a mirror what this machine lacks.

``anycode sessions pull`` runs :func:`pull_sessions` with the configured mirror as ``remote`` and
the local store as ``local``. For every session of the chosen projects (main and archived, with
sub-agent records and memories):

- a record this machine does not have is created whole, archived as it is in the mirror;
- a record this machine holds a prefix of (the other machine carried on) gets the missing tail;
- a record this machine holds more of (this machine carried on) is left as it is — the mirror
  catches up through the outbox;
- a record that differs otherwise (both machines wrote after their last exchange) is never
  overwritten: the mirror's history becomes a **version** of the local conversation
  (:meth:`~core.session.manager.SessionManager.keep_as_version`, cut after the messages both
  share), so nothing either machine wrote is lost, and the ``‹ n / m ›`` arrows show both.

Local archive and delete choices are never undone by a pull; memories merge by entry id (a
removal travels with its add, as in :mod:`core.stores.migrate`). The checkpoint blobs the pulled
records name (:mod:`core.stores.blobs`) come too, so a rewind here restores the other machine's
file bytes (issue 29); one the mirror lacks (over the size cap where it was written) is left out.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from core.errors import AnycodeError, os_error_message
from core.session.entries import messages_of
from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.stores.blobs import blobs_for, carrier_for, carry_blobs, referenced_in
from core.stores.migrate import MigrationReport, _copy_memories, _copy_record, subpaths_of

log = logging.getLogger(__name__)


@dataclass
class PullReport:
    """What :func:`pull_sessions` did; lists hold ``str(SessionKey)``. ``copied``: new here;
    ``extended``: the missing tail appended; ``identical``/``ahead``: nothing to do (equal; this
    machine holds more); ``versions``: ``(key, version id)`` where both machines wrote and the
    mirror's history was kept as a version; ``errors``: ``(key, sentence)``; ``memory_entries``:
    memory log entries copied; ``blobs``: checkpoint blobs copied."""

    copied: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)
    versions: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    memory_entries: int = 0
    blobs: int = 0

    @property
    def ok(self) -> bool:
        """True when every record was brought here (as itself or as a version)."""
        return not self.errors

    def summary(self) -> str:
        """One sentence for people."""
        text = (f"Pulled {len(self.copied)} new record(s) and the new part of {len(self.extended)}; "
                f"{len(self.identical) + len(self.ahead)} already up to date here.")
        if self.blobs:
            text += f" {self.blobs} file checkpoint(s) came with them (rewind restores those files here)."
        if self.versions:
            text += (f" {len(self.versions)} conversation(s) had changes on both machines: the other "
                     "machine's history was kept as a version.")
        if self.errors:
            text += f" {len(self.errors)} could not be pulled; see above."
        return text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"copied": self.copied, "extended": self.extended, "identical": self.identical,
                "ahead": self.ahead, "versions": [list(v) for v in self.versions],
                "errors": [list(e) for e in self.errors], "memory_entries": self.memory_entries,
                "blobs": self.blobs, "ok": self.ok}


def remote_sessions(remote: Any, project_keys: list[str] | None = None) -> list[tuple[Any, bool]]:
    """``[(SessionMeta, archived)]`` of the mirror's main sessions in ``project_keys`` (None: all
    projects), from its metadata only."""
    projects = ([p.project_key for p in remote.list_projects()] if project_keys is None else list(project_keys))
    return [(meta, archived) for pk in projects for archived in (False, True)
            for meta in remote.list(pk, archived=archived)]


def pull_sessions(remote: Any, local: Any, *, project_keys: list[str] | None = None,
                  aliases: Any = None, session_ids: Any = None) -> PullReport:
    """Bring ``remote``'s sessions of ``project_keys`` (None: every project) into ``local``
    (rules in the module docstring) — with ``session_ids``, only the conversations (each with
    all its versions) one of those ids belongs to: opening a chat that is only in the mirror
    (:mod:`core.stores.remote_list`) pulls that one — then record the pulled projects' identities (their git
    remote, from the session headers) in ``aliases`` (default: this data dir's
    :class:`~core.stores.aliases.ProjectAliases`), so a checkout of the same repository at another
    path here lists them. Per-record failures are reported, not raised; listing the remote may
    raise its :class:`~core.errors.StoreUnavailable`."""
    from core.stores.aliases import learn_from_store

    report = PullReport()
    manager = SessionManager(local)
    pulled = remote_sessions(remote, project_keys)
    if session_ids is not None:
        wanted = set(session_ids)
        families = {meta.family for meta, _ in pulled if meta.id in wanted or meta.family in wanted}
        pulled = [(meta, archived) for meta, archived in pulled if meta.family in families]
    carrier, blobs = carrier_for(remote), blobs_for(local)
    for meta, archived in pulled:
        key = meta.key
        had = local.exists(key)
        for sub in [*subpaths_of(remote, key), None]:  # the main record last: it is what lists
            rec = SessionKey(key.project_key, key.session_id, sub)
            if sub is None:  # its checkpoints' bytes first: once it lists, a rewind finds them
                _pull_blobs(remote, carrier, blobs, key, report)
            _pull_record(remote, local, manager, rec, report)
        if archived and not had and local.exists(key):
            try:
                local.archive(key)
            except (AnycodeError, OSError) as err:
                report.errors.append((str(key), f"pulled, but could not be archived here ({err})"))
    learn_from_store(local, aliases, project_keys=sorted({meta.project_key for meta, _ in pulled}))
    mig = MigrationReport()
    _copy_memories(remote, local, mig)
    report.memory_entries = mig.memory_entries
    report.errors += mig.errors
    log.info("pulled: %d copied, %d extended, %d versions, %d errors", len(report.copied), len(report.extended),
             len(report.versions), len(report.errors))
    return report


def _pull_blobs(remote: Any, carrier: Any, blobs: Any, key: SessionKey, report: PullReport) -> None:
    """Copy the checkpoint blobs the mirror's record ``key`` names that this machine lacks."""
    if carrier is None:
        return
    try:
        names = referenced_in(remote.load(key) or [])
        report.blobs += carry_blobs(names, carrier, blobs)
    except (AnycodeError, OSError) as err:
        why = f"{os_error_message(err)}." if isinstance(err, OSError) else str(err)
        report.errors.append((str(key), f"its checkpoint blobs could not be pulled ({why})"))


def _pull_record(remote: Any, local: Any, manager: SessionManager, key: SessionKey, report: PullReport) -> None:
    mig = MigrationReport()
    try:
        _copy_record(remote, local, key, mig, newer_ok=True)
    except (AnycodeError, OSError) as err:
        why = f"{os_error_message(err)}." if isinstance(err, OSError) else str(err)
        report.errors.append((str(key), why))
        return
    report.copied += mig.copied
    report.extended += mig.extended
    report.identical += mig.identical
    report.ahead += mig.newer
    report.errors += mig.errors
    if not mig.conflicts:
        return
    if key.subpath is not None:
        report.errors.append((str(key), "the sub-agent record differs on the two machines; left as it is here"))
        return
    _keep_remote_as_version(remote, local, manager, key, report)


def _keep_remote_as_version(remote: Any, local: Any, manager: SessionManager, key: SessionKey,
                            report: PullReport) -> None:
    """Both machines wrote in ``key``: the mirror's messages after the ones both hold become a
    version of the local conversation."""
    theirs, mine = messages_of(remote.load(key) or []), messages_of(local.load(key) or [])
    shared = 0
    while shared < min(len(theirs), len(mine)) and theirs[shared] == mine[shared]:
        shared += 1
    if shared == 0 or shared == len(theirs):
        report.errors.append((str(key), "the two machines' histories share no message to branch from; left as it is here"))
        return
    try:
        version = manager.keep_as_version(key, shared, theirs[shared:])
    except (AnycodeError, OSError, IndexError) as err:
        report.errors.append((str(key), f"the other machine's history could not be kept as a version ({err})"))
        return
    report.versions.append((str(key), version.id))
