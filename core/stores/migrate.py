"""Copy every session from one store to another (``anycode sessions migrate --to URL``).

What is copied: every project's main and archived sessions with their sub-agent records, entry
by entry, through the :class:`~core.session.store.SessionStore` protocol, then the archived flag;
and, when the caller names them (a storage's ``memory_log`` and ``blobs``, the target's), the
memories and the checkpoint blobs. Safe to re-run:

- a record the target already holds identically is skipped;
- a record the target holds a prefix of (the source grew since the last run) gets the rest;
- a record that differs otherwise is a *conflict*: reported, never overwritten;
- each written record is read back and compared entry by entry, and at the end every source
  record must be present in the target with the same archived state (``MigrationReport.ok``);
- memories (:mod:`core.stores.memory_log`) are copied too: the entries of each scope the target
  lacks (by entry id), so removals travel with adds and a removed memory never comes back.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator

from core.errors import AnycodeError, os_error_message
from core.session.keys import SessionKey
from core.session.store import SessionStore
from core.stores.blobs import BlobStore, copy_blobs
from core.stores.memory_log import MemoryLog, copy_memory_log

log = logging.getLogger(__name__)


@dataclass
class MigrationReport:
    """Outcome of :func:`migrate_sessions`; each list holds record keys as ``str(SessionKey)``.

    ``copied``: new in the target; ``extended``: target had a prefix, the rest was appended;
    ``identical``: already equal, skipped; ``archive_synced``: archived flag changed in the
    target; ``conflicts``/``errors``: ``(key, reason)`` pairs, target left as it was;
    ``missing``: records the final check did not find (in the target, or with the same archived
    state); ``newer``: the target holds the source's entries plus later ones (only with
    ``newer_ok``; left as they are); ``records``: how many source records were examined."""

    records: int = 0
    copied: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    identical: list[str] = field(default_factory=list)
    archive_synced: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    newer: list[str] = field(default_factory=list)
    memory_entries: int = 0  # memory log entries copied (the target lacked them)

    @property
    def ok(self) -> bool:
        """True when everything in the source is now in the target, equal."""
        return not (self.conflicts or self.errors or self.missing)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (lists of keys; conflicts/errors as ``[key, reason]``)."""
        return {k: v for k, v in self.__dict__.items()} | {"ok": self.ok}


@dataclass(frozen=True)
class _Group:
    """A main session and its sub-agent records, migrated together."""

    key: SessionKey
    archived: bool
    subpaths: tuple[str, ...]


def _groups(source: SessionStore) -> Iterator[_Group]:
    for project in source.list_projects():
        for archived in (False, True):
            for meta in source.list(project.project_key, archived=archived):
                yield _Group(meta.key, archived, tuple(source.list_subpaths(meta.key)))


def migrate_sessions(source: SessionStore, target: SessionStore, *,
                     memories: tuple[MemoryLog, MemoryLog] | None = None,
                     blobs: tuple[BlobStore, BlobStore] | None = None, progress: bool = False, out: Any = None,
                     newer_ok: bool = False, arrival: dict[str, Any] | None = None) -> MigrationReport:
    """Copy every record of ``source`` into ``target`` (see the module docstring for the rules).

    ``memories``: the memory logs ``(source's, target's)`` whose entries follow the sessions (None:
    no memories copied); ``blobs``: the checkpoint blob stores ``(source's, target's)`` (None, or
    one folder for both: none copied).

    ``progress``: show a tqdm progress bar (on ``out``, default stderr). ``newer_ok``: a target
    record that starts with all of the source's entries and has more (the user carried on after a
    backup) is reported as ``newer`` instead of a conflict; both leave it untouched. Per-record failures are
    collected in the report, not raised; enumerating the source may raise the source's errors
    (e.g. :class:`~core.errors.StoreUnavailable`). ``arrival``: header fields (e.g. a restore's
    ``{"restored_from": {"file", "at"}}``) recorded in each main session newly written into the
    target, so every store knows when it arrived (the entries keep their original times);
    comparisons ignore these fields, so a re-run finds such a session identical."""
    groups = list(_groups(source))
    report = MigrationReport(records=sum(1 + len(g.subpaths) for g in groups))
    target_archived: dict[str, set[str]] = {}
    with _progress_bar(report.records, progress, out or sys.stderr) as bar:
        for group in groups:
            ok = True
            for sub in (None,) + group.subpaths:
                key = SessionKey(group.key.project_key, group.key.session_id, sub)
                try:
                    _copy_record(source, target, key, report, newer_ok, arrival if sub is None else None)
                except AnycodeError as e:
                    report.errors.append((str(key), str(e)))
                    ok = False
                except OSError as e:  # disk full, read-only: a sentence, nothing of it written
                    log.info("migrating %s failed: %s", key, e)  # reported in the report
                    report.errors.append((str(key), f"{os_error_message(e)}; not copied."))
                    ok = False
                except Exception as e:  # one broken record must not stop the others
                    log.exception("migrating %s failed", key)
                    report.errors.append((str(key), f"{type(e).__name__}: {e}"))
                    ok = False
                bar.update(1)
            if ok:
                _sync_archived(target, group, target_archived, report)
    _final_check(source, target, groups, report)
    if memories is not None:
        copy_memories(*memories, report)
    try:  # the file bytes checkpoints name (issue 29), when the target keeps them elsewhere
        if blobs is not None:
            copy_blobs(*blobs)
    except OSError as e:
        report.errors.append(("blobs", f"{os_error_message(e)}; the checkpoint blobs were not copied."))
    log.info("migrated %d records: %d copied, %d extended, %d identical, %d conflicts, %d errors",
             report.records, len(report.copied), len(report.extended), len(report.identical),
             len(report.conflicts), len(report.errors))
    return report


def _progress_bar(total: int, enabled: bool, out: Any) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm comes with anycode[sql]; without it, migrate just has no bar
        if enabled:
            log.info("tqdm is not installed; no progress bar")
        enabled = False

        class _Quiet:
            def __enter__(self) -> "_Quiet":
                return self

            def __exit__(self, *exc: Any) -> None:
                return None

            def update(self, n: int = 1) -> None:
                return None

        return _Quiet()
    return tqdm(total=total, unit="rec", desc="migrating", disable=not enabled, file=out, dynamic_ncols=True)


def _without(entries: list[dict[str, Any]] | None, keys: Any) -> list[dict[str, Any]] | None:
    """``entries`` with the header fields ``keys`` left out (for comparing; copies, never changes)."""
    if not entries or not keys or not isinstance(entries[0], dict) or entries[0].get("type") != "header":
        return entries
    return [{k: v for k, v in entries[0].items() if k not in keys}, *entries[1:]]


def _copy_record(source: SessionStore, target: SessionStore, key: SessionKey, report: MigrationReport, newer_ok: bool = False,
                 arrival: dict[str, Any] | None = None) -> None:
    entries = source.load(key)
    if entries is None:
        return  # removed while migrating; the final check skips it too
    have = target.load(key)
    compared, theirs = _without(entries, arrival), _without(have, arrival)
    if theirs == compared:
        report.identical.append(str(key))
        return
    if have is None:
        if arrival and entries and entries[0].get("type") == "header":
            entries = [{**entries[0], **arrival}, *entries[1:]]
        target.create_whole(key, entries)  # a migration killed mid-record leaves it absent
        outcome = report.copied
    elif len(have) < len(entries) and compared[: len(have)] == theirs:
        target.append(key, entries[len(have):])
        entries = have + entries[len(have):]
        outcome = report.extended
    elif newer_ok and len(have) > len(entries) and theirs[: len(entries)] == compared:
        report.newer.append(str(key))
        return
    else:
        report.conflicts.append((str(key), f"the target holds a different version ({len(have)} entries, "
                                           f"the source {len(entries)}); left untouched"))
        return
    written = target.load(key)
    if written != entries:
        n = 0 if written is None else len(written)
        report.errors.append((str(key), f"verification failed: {n} entries read back, {len(entries)} expected"))
        return
    outcome.append(str(key))


def _sync_archived(target: SessionStore, group: _Group, cache: dict[str, set[str]], report: MigrationReport) -> None:
    pk = group.key.project_key
    if pk not in cache:
        cache[pk] = {m.id for m in target.list(pk, archived=True)}
    is_archived = group.key.session_id in cache[pk]
    if is_archived == group.archived:
        return
    try:
        (target.archive if group.archived else target.unarchive)(group.key)
    except (AnycodeError, OSError) as e:
        why = os_error_message(e) if isinstance(e, OSError) and not isinstance(e, AnycodeError) else str(e)
        report.errors.append((str(group.key), f"cannot set archived={group.archived}: {why}"))
        return
    (cache[pk].add if group.archived else cache[pk].discard)(group.key.session_id)
    report.archive_synced.append(str(group.key))


def _final_check(source: SessionStore, target: SessionStore, groups: list[_Group], report: MigrationReport) -> None:
    failed = {k for k, _ in report.conflicts + report.errors}
    listed: dict[tuple[str, bool], set[str]] = {}
    for g in groups:
        pk = g.key.project_key
        if str(g.key) in failed:
            continue
        if (pk, g.archived) not in listed:
            listed[(pk, g.archived)] = {m.id for m in target.list(pk, archived=g.archived)}
        if g.key.session_id not in listed[(pk, g.archived)] and source.exists(g.key):
            report.missing.append(str(g.key))
        for sub in g.subpaths:
            key = SessionKey(pk, g.key.session_id, sub)
            if str(key) not in failed and not target.exists(key) and source.exists(key):
                report.missing.append(str(key))


def copy_memories(src: MemoryLog, dst: MemoryLog, report: MigrationReport) -> None:
    """Copy every memory log entry of ``src`` that ``dst`` lacks, then check each is there; counts
    and failures go to ``report`` (a store that keeps no memories is logged and skipped)."""
    try:
        scopes = src.scopes()
    except AnycodeError as e:
        log.info("memories not migrated: %s", e)
        return
    for scope in scopes:
        try:
            report.memory_entries += copy_memory_log(src, dst, scope)
            have = {e.get("eid") for e in dst.load(scope)}
            lost = [e for e in src.load(scope) if isinstance(e.get("eid"), str) and e["eid"] not in have]
            if lost:
                report.missing.append(f"memory:{scope} ({len(lost)} entries)")
        except Exception as e:  # one broken scope must not stop the others
            log.exception("migrating the memories of %s failed", scope)
            report.errors.append((f"memory:{scope}", f"{type(e).__name__}: {e}"))
