"""Resume on another machine (issue 26): copy from a mirror what this machine lacks.

``anycode sessions pull`` runs :func:`pull_sessions` with the configured mirror as ``remote`` and
the local store as ``local``. For every session of the chosen projects (main and archived, with
sub-agent records and memories; each conversation's root before its versions):

- a record this machine does not have is created whole, archived as it is in the mirror —
  except a version whose messages a history of its conversation here already holds
  (**already here**): one equal to it, or, for a version marked as a copy (``copy_of`` in its
  header: this machine's own history the mirror kept when the copies diverged, or a copy an
  earlier pull made on another machine) or the one this machine's outbox writes to, one it is
  the start of. A version that is just the start of the conversation (a rewind) still comes;
- a record this machine holds a prefix of (the other machine carried on) gets the missing tail;
- a record this machine holds more of (this machine carried on) is left as it is — the mirror
  catches up through the outbox;
- a record that differs otherwise (both machines wrote after their last exchange) is never
  overwritten: when no history here holds the mirror's messages, the mirror's history becomes a
  **version** of the local conversation (:meth:`~core.session.manager.SessionManager.fork` cut
  after the messages both share, its header ``copy_of`` the record), so nothing either machine
  wrote is lost and the ``‹ n / m ›`` arrows show both. The version in use here does not change.
  When the other machine carried on after that, the next pull appends the new part to that
  version (as long as nobody wrote in it here) instead of making another one.

So a repeat pull adds nothing, and neither machine ends up with its own history twice.

A local delete is never undone by a pull, and a local archive state only by the other machine's
newer archive or unarchive by hand (titles, pins, tags and archive choices merge by time:
:mod:`core.session.metadata`); auto-archive is each machine's own. Memories merge by entry id (a
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
from core.session.metadata import archive_choice, history_of, is_root, metadata_to_apply
from core.session.subagents import records_for_calls, subagent_records, tool_call_ids
from core.session.versions import valid_cut
from core.session.store import SessionSource, SessionStore, is_mirrored
from core.stores.aliases import ProjectAliases, learn_from_store
from core.stores.backend import Backend
from core.stores.blobs import BlobCarrier, BlobStore, Carrier, carry_blobs, referenced_in
from core.stores.memory_log import MemoryLog
from core.stores.migrate import MigrationReport, _copy_record, copy_memories

log = logging.getLogger(__name__)


@dataclass
class PullReport:
    """What :func:`pull_sessions` did; lists hold ``str(SessionKey)``. ``copied``: new here;
    ``extended``: the missing tail appended; ``identical``/``ahead``: nothing to do (equal; this
    machine holds more); ``already_here``: mirror records not copied because a history of their
    conversation here already holds their messages (this machine's own history kept there as a
    version, a copy made by an earlier pull); ``versions``: ``(key, version id)`` where both
    machines wrote and the mirror's history was kept as a version (not the one in use);
    ``errors``: ``(key, sentence)``; ``memory_entries``: memory log entries copied; ``blobs``:
    checkpoint blobs copied. ``extended`` also names a version an earlier pull kept that got the
    other machine's new messages. ``metadata``: conversations here that took the other machine's
    newer title, pin or tags (:mod:`core.session.metadata`), whatever happened to their messages."""

    copied: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)
    already_here: list[str] = field(default_factory=list)
    versions: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    memory_entries: int = 0
    blobs: int = 0

    @property
    def ok(self) -> bool:
        """True when every record was brought here (as itself or as a version)."""
        return not self.errors

    def summary(self) -> str:
        """One sentence for people."""
        # Only what happened is named (trial 11: "Pulled 0 new record(s) and the new part of 0").
        pulled = []
        if self.copied:
            pulled.append(f"{len(self.copied)} new record(s)")
        if self.extended:
            pulled.append(f"the new messages of {len(self.extended)} record(s)")
        text = "Pulled " + " and ".join(pulled) if pulled else "Nothing new to pull"
        current = len(self.identical) + len(self.ahead) + len(self.already_here)
        if current:
            text += f"; {current} already up to date here"
        if self.already_here:
            text += (f" ({len(self.already_here)} of them the mirror's copy of a history this machine "
                     "already holds, not copied again)")
        text += "."
        if self.blobs:
            text += f" {self.blobs} file checkpoint(s) came with them (rewind restores those files here)."
        if self.metadata:
            text += (f" {len(self.metadata)} conversation(s) took the other machine's newer title, pin or "
                     "tags.")
        if self.versions:
            text += (f" {len(self.versions)} conversation(s) had changes on both machines: the other "
                     "machine's history was kept as a version; the version in use here is unchanged.")
        if self.errors:
            text += f" {len(self.errors)} could not be pulled; see above."
        return text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"copied": self.copied, "extended": self.extended, "identical": self.identical,
                "ahead": self.ahead, "already_here": self.already_here, "versions": [list(v) for v in self.versions],
                "errors": [list(e) for e in self.errors], "metadata": self.metadata,
                "memory_entries": self.memory_entries,
                "blobs": self.blobs, "ok": self.ok}


def remote_sessions(remote: SessionSource, project_keys: list[str] | None = None) -> list[tuple[Any, bool]]:
    """``[(SessionMeta, archived)]`` of the mirror's main sessions in ``project_keys`` (None: all
    projects), from its metadata only."""
    projects = ([p.project_key for p in remote.list_projects()] if project_keys is None else list(project_keys))
    return [(meta, archived) for pk in projects for archived in (False, True)
            for meta in remote.list(pk, archived=archived)]


def pull_sessions(remote: Backend, local: SessionStore, *, aliases: ProjectAliases, memory_log: MemoryLog,
                  blobs: BlobStore, project_keys: list[str] | None = None,
                  session_ids: Any = None) -> PullReport:
    """Bring ``remote``'s sessions of ``project_keys`` (None: every project) into ``local``
    (rules in the module docstring) — with ``session_ids``, only the conversations (each with
    all its versions) one of those ids belongs to: opening a chat that is only in the mirror
    (:mod:`core.stores.remote_list`) pulls that one — with their memories (into ``memory_log``)
    and checkpoint blobs (into ``blobs``), then record the pulled projects' identities (their git
    remote, from the session headers) in ``aliases``, so a checkout of the same repository at
    another path here lists them. ``local``, ``aliases``, ``memory_log`` and ``blobs`` are one
    storage's (:class:`core.storage.Storage`: ``sessions`` …). Per-record failures are reported,
    not raised; listing the remote may raise its :class:`~core.errors.StoreUnavailable`."""
    report = PullReport()
    manager = SessionManager(local)
    pulled = remote_sessions(remote, project_keys)
    if session_ids is not None:
        wanted = set(session_ids)
        families = {meta.family for meta, _ in pulled if meta.id in wanted or meta.family in wanted}
        pulled = [(meta, archived) for meta, archived in pulled if meta.family in families]
    # Roots first (stable: the listing's order otherwise): a version is then compared with its
    # conversation's histories here, and a root is never left out for a version holding the same.
    pulled.sort(key=lambda pair: pair[0].version_of is not None)
    carrier = BlobCarrier.of(remote)
    for meta, archived in pulled:
        key = meta.key
        had = local.exists(key)
        if not had and meta.version_of and _held_here(remote, local, key, report):
            continue  # its sub-agent records and checkpoints are those of the history holding it
        for sub in [*remote.list_subpaths(key), None]:  # the main record last: it is what lists
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
    copy_memories(remote.memory_log(), memory_log, mig)
    report.memory_entries = mig.memory_entries
    report.errors += mig.errors
    log.info("pulled: %d copied, %d extended, %d already here, %d versions, %d errors", len(report.copied),
             len(report.extended), len(report.already_here), len(report.versions), len(report.errors))
    return report


def _pull_blobs(remote: SessionStore, carrier: Carrier | None, blobs: BlobStore, key: SessionKey, report: PullReport) -> None:
    """Copy the checkpoint blobs the mirror's record ``key`` names that this machine lacks."""
    if carrier is None:
        return
    try:
        names = referenced_in(remote.load(key) or [])
        report.blobs += carry_blobs(names, carrier, blobs)
    except (AnycodeError, OSError) as err:
        why = f"{os_error_message(err)}." if isinstance(err, OSError) else str(err)
        report.errors.append((str(key), f"its checkpoint blobs could not be pulled ({why})"))


def _pull_record(remote: SessionStore, local: SessionStore, manager: SessionManager, key: SessionKey, report: PullReport) -> None:
    if key.subpath is not None:
        _pull_entries(remote, local, manager, key, report)
        return
    try:
        before = archive_choice(local.load(key) or [])
    except (AnycodeError, OSError):
        before = None
    _pull_entries(remote, local, manager, key, report)
    try:
        held = local.load(key) or []
        after = archive_choice(held)
        if after is not None and after != before and is_root(held):
            # The newest archive or unarchive by hand came with this pull: the other machine's,
            # made after every choice here (core.session.metadata), so it is followed here.
            manager.follow_archive_choice(key, after[1])
    except (AnycodeError, OSError) as err:
        report.errors.append((str(key), f"the other machine's archive choice could not be followed here ({err})"))


def _pull_entries(remote: SessionStore, local: SessionStore, manager: SessionManager, key: SessionKey, report: PullReport) -> None:
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
    try:
        entries, held = remote.load(key) or [], local.load(key) or []
    except (AnycodeError, OSError) as err:
        report.errors.append((str(key), f"could not be compared with the copy here ({err})"))
        return
    theirs, mine = history_of(entries), history_of(held)
    if mine == theirs[:len(mine)] and len(theirs) > len(mine):
        _extend_beside_metadata(local, key, held, entries, report)
        return
    if theirs != mine[:len(theirs)]:
        _keep_remote_as_version(remote, local, manager, key, report)
    elif len(mine) > len(theirs):
        report.ahead.append(str(key))
    else:
        report.identical.append(str(key))
    _take_metadata(local, key, entries, report)


def _take_metadata(local: SessionStore, key: SessionKey, remote_entries: list[dict[str, Any]], report: PullReport) -> None:
    """Append to the local conversation root ``key`` the mirror's title, pin and tag changes that
    are newer than its own (:mod:`core.session.metadata`: the latest change of each field wins),
    its messages untouched; recorded in ``report.metadata``. A repeat pull takes nothing."""
    try:
        held = local.load(key) or []
        if not is_root(held):
            return
        theirs = metadata_to_apply(held, remote_entries)
        if theirs:
            local.append(key, theirs)
    except (AnycodeError, OSError, ValueError) as err:
        report.errors.append((str(key), f"the other machine's title, pin or tags could not be taken here ({err})"))
        return
    if theirs:
        report.metadata.append(str(key))
        log.info("pull: took %d title/pin/tag change(s) of %s from the mirror", len(theirs), key)


def _extend_beside_metadata(local: SessionStore, key: SessionKey, held: list[dict[str, Any]],
                            entries: list[dict[str, Any]], report: PullReport) -> None:
    """The mirror's ``key`` holds this machine's history and more, with metadata entries in other
    places (a title or tags each machine set while the other wrote): append the rest of its
    history and its newer metadata here (refused if a message was added here meanwhile)."""
    mine = history_of(held)
    tail = history_of(entries)[len(mine):]
    tail += metadata_to_apply(held, entries) if is_root(held) else []
    try:
        local.append(key, tail, expected_count=len(messages_of(held)))
    except (AnycodeError, OSError, ValueError) as err:
        report.errors.append((str(key), f"the other machine's new messages could not be added ({err})"))
        return
    report.extended.append(str(key))


def _keep_remote_as_version(remote: SessionStore, local: SessionStore, manager: SessionManager, key: SessionKey,
                            report: PullReport) -> None:
    """Both machines wrote in ``key``: unless a history of the conversation here already holds the
    mirror's messages, or a copy an earlier pull kept holds their start (then it gets the rest),
    the mirror's messages after the ones both hold become a version of the local conversation —
    marked ``copy_of`` ``key``, and not made the version in use."""
    entries, held = remote.load(key) or [], local.load(key) or []
    theirs, mine = messages_of(entries), messages_of(held)
    try:
        here = _histories_here(local, key.project_key, _root_id(held, key))
    except (AnycodeError, OSError) as err:
        report.errors.append((str(key), f"this machine's versions of it could not be read ({err})"))
        return
    if any(h.messages[:len(theirs)] == theirs for h in here):
        report.already_here.append(str(key))
        return
    copy = next((h for h in here if h.key != key and h.copy_of == key.session_id
                 and theirs[:len(h.messages)] == h.messages), None)
    if copy is not None:
        _extend_copy(local, key, copy, entries, report)
        return
    shared = 0
    while shared < min(len(theirs), len(mine)) and theirs[shared] == mine[shared]:
        shared += 1
    if shared == 0:
        report.errors.append((str(key), "the two machines' histories share no message to branch from; left as it is here"))
        return
    # The last message both hold that ends a round in both histories: no tool call is cut from
    # its result, and the mirror's messages after it continue it.
    cut = shared - 1
    while cut >= 0 and (valid_cut(mine, cut) != cut or valid_cut(theirs, cut) != cut):
        cut -= 1
    try:
        version = manager.fork(key, cut, version=True, extra=_entries_after(entries, cut + 1), in_use=False,
                               copy_of=key.session_id)
    except (AnycodeError, OSError, IndexError) as err:
        report.errors.append((str(key), f"the other machine's history could not be kept as a version ({err})"))
        return
    log.warning("pull: both machines wrote in %s; the mirror's history was kept as version %s (the version in "
                "use here is unchanged)", key, version.id)
    report.versions.append((str(key), version.id))


@dataclass
class _History:
    """One record of a conversation on this machine: its key, messages and the ``copy_of``
    session id of its header (None: not a copy)."""

    key: SessionKey
    messages: list[dict[str, Any]]
    copy_of: str | None


def _root_id(entries: list[dict[str, Any]], key: SessionKey) -> str:
    head = entries[0] if entries and entries[0].get("type") == "header" else {}
    link = head.get("version_of")
    return link["session_id"] if isinstance(link, dict) and isinstance(link.get("session_id"), str) else key.session_id


def _histories_here(local: SessionStore, project_key: str, root_id: str) -> list[_History]:
    """The records of conversation ``root_id`` on this machine (main list and archive)."""
    out = []
    for meta in local.list(project_key) + local.list(project_key, archived=True):
        if meta.id != root_id and (meta.version_of or {}).get("session_id") != root_id:
            continue
        entries = local.load(meta.key)
        if entries is None:
            continue  # removed meanwhile
        head = entries[0] if entries and entries[0].get("type") == "header" else {}
        link = head.get("copy_of")
        copy_of = link.get("session_id") if isinstance(link, dict) else None
        out.append(_History(meta.key, messages_of(entries), copy_of if isinstance(copy_of, str) else None))
    return out


def _held_here(remote: SessionStore, local: SessionStore, key: SessionKey, report: PullReport) -> bool:
    """Whether the mirror's version ``key`` (not on this machine) need not be copied: a history of
    its conversation here holds the same messages, or — when it is a copy (``copy_of``) or the
    record this machine's outbox writes one of its histories to — all of them and more. Recorded
    in ``report.already_here`` then. Read errors answer False (the copy goes ahead as before)."""
    try:
        entries = remote.load(key) or []
        theirs = messages_of(entries)
        head = entries[0] if entries and entries[0].get("type") == "header" else {}
        a_copy = isinstance(head.get("copy_of"), dict)
        for h in _histories_here(local, key.project_key, _root_id(entries, key)):
            if h.messages == theirs or ((a_copy or _outbox_target(local, h.key) == key.session_id)
                                        and h.messages[:len(theirs)] == theirs):
                report.already_here.append(str(key))
                log.info("pull: %s is already here (its messages are in %s)", key, h.key.session_id)
                return True
    except (AnycodeError, OSError) as err:
        log.warning("pull: could not compare %s with this machine's histories (%s); copying it", key, err)
    return False


def _outbox_target(local: SessionStore, key: SessionKey) -> str | None:
    """The mirror session this machine's outbox copies ``key`` to (a mirrored store), else None."""
    return local.copy_target(key) if is_mirrored(local) else None


def _entries_after(entries: list[dict[str, Any]], held: int) -> list[dict[str, Any]]:
    """The entries of ``entries`` that follow its first ``held`` messages in a copy: the later
    message entries as they are (times and marks kept) and the usage and checkpoint entries of
    those rounds (``at`` past ``held``), in order; titles, version pointers, pins and tags stay
    with the conversation's root."""
    out, seen = [], 0
    for e in entries:
        kind = e.get("type")
        if kind == "message" and isinstance(e.get("message"), dict):
            if seen >= held:
                out.append(e)
            seen += 1
        elif (kind in ("usage", "checkpoint") and isinstance(e.get("at"), int) and e["at"] > held
              and not e.get("rewind")):
            out.append(e)
    return out


def _extend_copy(local: SessionStore, key: SessionKey, copy: _History, entries: list[dict[str, Any]],
                 report: PullReport) -> None:
    """Append to ``copy`` (a version an earlier pull kept of the mirror's ``key``) what the other
    machine wrote since, with the sub-agent records of its new task calls (pulled into ``key``)."""
    tail = _entries_after(entries, len(copy.messages))
    try:
        calls = tool_call_ids(messages_of(tail))
        for rec in records_for_calls(subagent_records(local, key), calls) if calls else []:
            sub = SessionKey(copy.key.project_key, copy.key.session_id, rec.key.subpath)
            if not local.exists(sub):
                local.create_whole(sub, rec.entries)
        local.append(copy.key, tail, expected_count=len(copy.messages))  # refused if written here meanwhile
    except (AnycodeError, OSError) as err:
        report.errors.append((str(key), f"the other machine's new messages could not be added to version "
                                        f"{copy.key.session_id} ({err})"))
        return
    report.extended.append(str(copy.key))
