"""Back up every session of a store into one zip file, and restore such a file into a store.

**The backup** (``anycode backup FILE.zip``) holds every project's sessions, archived ones and
sub-agent records, each as the JSONL lines its entries encode to (the same bytes the JSONL store
writes), plus ``manifest.json``::

    {"format": "anycode-backup", "version": 1, "created_at": <Unix seconds>,
     "records": [{"path": "sessions/<project key>/<session id>.jsonl", "project_key": …,
                  "session_id": …, "subpath": null | "subagents/…", "archived": bool,
                  "entries": N, "bytes": N, "sha256": "<hex>"}, …],
     "memory": [...]}

plus ``"memory": [{"scope": "user" | "project:<key>", "path": "memory/<n>.jsonl", "entries": N,
"bytes": N, "sha256": …}]``: the memory log of each scope (:mod:`core.stores.memory_log`), so a
removed memory stays removed after a restore; and ``"blobs": [{"path": "blobs/<sha256>", "bytes": N,
"sha256": …}]``: the file bytes the sessions' checkpoints name (:mod:`core.stores.blobs`), put back
into the target's blob store by the restore (issue 29). The zip is written beside its target and renamed
into place when complete (a crash leaves no half backup under the name), mode 0600. An existing
file is never replaced unless asked (``replace=True``, ``anycode backup --force``): an earlier
backup under the same name may be the only copy of sessions deleted since.

**The restore** (``anycode restore FILE.zip``) checks every member against its checksum, then
copies the records into the store with :func:`core.stores.migrate.migrate_sessions`: sessions
the store already holds identically are skipped, a session the store holds differently is
reported as a conflict and left untouched — nothing is overwritten; one the store holds with
more entries after the backup's (the user carried on) is reported as newer and left as it is —
and every copied record is read back and compared. Restored sessions keep their original times,
but cleanup and auto-archive count from their arrival: the JSONL store knows it from the file's
time; in a store that does not (a database) the restored header records ``"restored_from":
{"file", "at"}``, as an import's records ``imported_from``.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from typing import Any

from core.errors import BackupError, InvalidSessionKey, StoreUnavailable
from core.session.text import parse_json
from core.session.entries import SessionState, encode_entries
from core.session.keys import SessionKey
from core.session.models import ProjectInfo, SessionMeta
from core.session.store import SessionSource, SessionStore, knows_write_times
from core.stores.blobs import BlobStore, referenced_in
from core.stores.memory_log import MemoryLog
from core.stores.migrate import MigrationReport, migrate_sessions
from core.stores.whole_file import link_whole
from core.stores.zip_limits import read_member

log = logging.getLogger(__name__)

FORMAT = "anycode-backup"
VERSION = 1
MANIFEST = "manifest.json"
_EXISTS = ("{path} already exists; nothing was written. Give another file name, or add --force to replace "
           "it with a new backup.")


@dataclass
class BackupReport:
    """What :func:`backup_store` wrote: ``path``, ``sessions`` (main sessions), ``records`` (with
    sub-agent records), ``bytes`` of session data, ``memories`` (memory log entries)."""

    path: str
    sessions: int = 0
    records: int = 0
    bytes: int = 0
    memories: int = 0
    blobs: int = 0
    skipped: list[str] = field(default_factory=list)


def _record_path(key: SessionKey) -> str:
    base = f"sessions/{key.project_key}/{key.session_id}"
    return f"{base}/{key.subpath}.jsonl" if key.subpath else f"{base}.jsonl"


def _member(zf: zipfile.ZipFile, name: str, data: bytes) -> dict[str, Any]:
    zf.writestr(name, data)
    return {"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def backup_store(store: SessionSource, path: str | os.PathLike[str], *, memory_log: MemoryLog | None = None,
                 blobs: BlobStore | None = None, replace: bool = False) -> BackupReport:
    """Write every record of ``store`` into the zip file ``path`` (format in the module docstring),
    with the memories of ``memory_log`` and the checkpoint blobs of ``blobs`` the records name
    (a storage's ``memory_log`` and ``blobs``; None: none written). Raises :class:`BackupError` when the file cannot be written, or when ``path``
    already exists and ``replace`` is False (checked before and, atomically, when the finished
    file is put in place: a file appearing meanwhile is not replaced either); one sentence each.
    The store's own errors (e.g. :class:`~core.errors.StoreUnavailable`) pass through."""
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    if not replace and os.path.lexists(path):
        raise BackupError(_EXISTS.format(path=path))
    report = BackupReport(path=path)
    records: list[dict[str, Any]] = []
    referenced: set[str] = set()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".anycode-backup-", suffix=".tmp", dir=folder)
    except OSError as err:
        raise BackupError(f"The backup cannot be written to {folder} ({err.strerror or err}).") from err
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for project in store.list_projects():
                for archived in (False, True):
                    for meta in store.list(project.project_key, archived=archived):
                        report.sessions += 1
                        for sub in [None, *store.list_subpaths(meta.key)]:
                            key = SessionKey(meta.project_key, meta.id, sub)
                            entries = store.load(key)
                            if entries is None:
                                report.skipped.append(str(key))  # removed while backing up
                                continue
                            referenced |= referenced_in(entries)
                            rec = _member(zf, _record_path(key), encode_entries(entries))
                            records.append({**rec, "project_key": key.project_key, "session_id": key.session_id,
                                            "subpath": key.subpath, "archived": archived, "entries": len(entries)})
                            report.records += 1
                            report.bytes += rec["bytes"]
            memories = []
            for n, (scope, entries) in enumerate(_memory_scopes(memory_log)):
                memories.append({**_member(zf, f"memory/{n}.jsonl", encode_entries(entries)),
                                 "scope": scope, "entries": len(entries)})
                report.memories += len(entries)
            blob_members = []
            for name in sorted(referenced) if blobs is not None else ():  # the bytes the checkpoints name
                data = blobs.get(name)
                if data is None:
                    continue  # over the size cap (only its hash was kept) or lost: rewind says so
                blob_members.append(_member(zf, f"blobs/{name}", data))
                report.blobs += 1
            manifest = {"format": FORMAT, "version": VERSION, "created_at": time.time(),
                        "records": records, "memory": memories, "blobs": blob_members}
            zf.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1))
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                link_whole(tmp, path)  # fails if the name was taken meanwhile: never replaces
            except FileExistsError:
                _unlink(tmp)
                raise BackupError(_EXISTS.format(path=path)) from None
            _unlink(tmp)
    except OSError as err:
        _unlink(tmp)
        raise BackupError(f"The backup {path} could not be written ({err.strerror or err}); nothing was left behind.") from err
    except BaseException:
        _unlink(tmp)
        raise
    log.info("backed up %d records (%d sessions) to %s", report.records, report.sessions, path)
    return report


def _memory_scopes(mlog: MemoryLog | None) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every memory scope of ``mlog`` with its log entries; none for None or a store that keeps none."""
    if mlog is None:
        return []
    try:
        return [(scope, mlog.load(scope)) for scope in mlog.scopes()]
    except StoreUnavailable as err:
        log.info("no memories backed up: %s", err)
        return []


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class BackupArchive:
    """A backup zip opened read-only, with the read half of the
    :class:`~core.session.store.SessionStore` protocol (``list_projects``, ``list``, ``load``,
    ``exists``, ``list_subpaths``) so :func:`migrate_sessions` can copy from it.

    Raises :class:`BackupError` when the file is not an anycode backup or a member does not
    match its checksum (naming the member)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        try:
            self._zip = zipfile.ZipFile(self.path)
            manifest = parse_json(read_member(self._zip, MANIFEST)[0])
        except FileNotFoundError as err:
            raise BackupError(f"There is no backup file {self.path}.") from err
        except (OSError, zipfile.BadZipFile, KeyError, ValueError) as err:
            raise BackupError(f"{self.path} is not an anycode backup ({err}).") from err
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise BackupError(f"{self.path} is not an anycode backup (no anycode manifest).")
        if manifest.get("version") != VERSION:
            raise BackupError(f"{self.path} is a backup of format version {manifest.get('version')}; "
                              f"this anycode reads version {VERSION}.")
        #: One sentence per manifest entry that could not be used (named, skipped; the rest restores).
        self.problems: list[tuple[str, str]] = []
        self.manifest = {**manifest, "memory": self._scopes(self._valid(manifest.get("memory"), "memory", ("scope",))),
                         "blobs": self._valid(manifest.get("blobs"), "blobs", ())}
        self._records: dict[SessionKey, dict[str, Any]] = {}
        for rec in self._valid(manifest.get("records"), "records", ("project_key", "session_id")):
            sub = rec.get("subpath")
            if sub is not None and not isinstance(sub, str):
                self.problems.append((f"manifest:{rec['path']}", "its subpath is not text; skipped"))
                continue
            try:
                key = SessionKey(rec["project_key"], rec["session_id"], sub)
            except InvalidSessionKey as err:
                # A record's names become file names in the target store: one that is a path
                # (absolute, "..", a separator, NUL) is refused by name; the others restore.
                self.problems.append((f"manifest:{rec['path']}", f"names its record unsafely ({err}); skipped"))
                continue
            self._records[key] = rec
        self._cache: dict[SessionKey, list[dict[str, Any]]] = {}

    def _valid(self, items: Any, field_name: str, keys: tuple[str, ...]) -> list[dict[str, Any]]:
        """The manifest entries of ``field_name`` that name a member (``path``, ``sha256``) and the
        text ``keys``; each other one is put in :attr:`problems` by position and left out."""
        if items is None:
            return []
        if not isinstance(items, list):
            self.problems.append((f"manifest:{field_name}", "is not a list; nothing of it was restored"))
            return []
        good = []
        for n, rec in enumerate(items, 1):
            need = ("path", "sha256", *keys)
            if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) and rec[k] for k in need):
                self.problems.append((f"manifest:{field_name}[{n}]",
                                      f"lacks one of {', '.join(need)} (or one is not text); skipped"))
                continue
            member = rec["path"]
            if "\x00" in member or member.startswith(("/", "\\")) or ".." in member.replace("\\", "/").split("/"):
                self.problems.append((f"manifest:{field_name}[{n}]",
                                      f"names the member {member!r}, which is not a plain path inside the backup; skipped"))
                continue
            good.append(rec)
        return good

    def _scopes(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The memory entries of the manifest whose scope is one a memory log accepts
        (:func:`core.stores.memory_log.check_scope`: ``user`` or ``project:<safe key>``, as it
        names a file); each other one is put in :attr:`problems` and left out."""
        from core.stores.memory_log import check_scope

        good = []
        for rec in items:
            try:
                check_scope(rec["scope"])
            except ValueError as err:
                self.problems.append((f"manifest:{rec['path']}", f"{err}; skipped"))
                continue
            good.append(rec)
        return good

    def close(self) -> None:
        """Close the zip file."""
        self._zip.close()

    def _read(self, name: str, sha256: str, *, keep: bool = True) -> bytes:
        """A member's bytes, streamed and checked against ``sha256`` (and the zip-bomb limits of
        :mod:`core.stores.zip_limits`); raises :class:`BackupError` naming the member."""
        try:
            data, digest = read_member(self._zip, name, keep=keep)
        except (KeyError, OSError, zipfile.BadZipFile, ValueError) as err:
            raise BackupError(f"The backup member {name} cannot be read ({err}).") from err
        if digest != sha256:
            raise BackupError(f"The backup member {name} is damaged (its checksum does not match).")
        return data

    def _entries(self, name: str, sha256: str) -> list[dict[str, Any]]:
        """A member's JSONL lines as entries; a line that is not a JSON object raises
        :class:`BackupError` naming the member and line (the checksum can match a bad file)."""
        entries = []
        for lineno, line in enumerate(io.BytesIO(self._read(name, sha256)), 1):
            if not line.strip():
                continue
            try:
                entry = parse_json(line)
            except ValueError as err:
                raise BackupError(f"The backup member {name} has a line that is not JSON (line {lineno}: {err}).") from None
            if not isinstance(entry, dict):
                raise BackupError(f"The backup member {name} has a line that is not an entry (line {lineno}).")
            entries.append(entry)
        return entries

    def verify(self) -> list[str]:
        """Check every member against its checksum; return one sentence per damaged member."""
        bad = []
        for rec in (list(self._records.values()) + list(self.manifest.get("memory", []))
                    + list(self.manifest.get("blobs", []))):
            try:
                self._read(rec["path"], rec["sha256"], keep=False)
            except BackupError as err:
                bad.append(str(err))
        return bad

    def memory_log(self) -> "_ArchiveMemoryLog":
        """The backup's memories as a read-only memory log, so :func:`migrate_sessions` restores
        them with the sessions."""
        return _ArchiveMemoryLog(self)

    # --- the read half of the SessionStore protocol -----------------------------------------

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """The record's entries (checksum verified), or None when the backup has no such record."""
        rec = self._records.get(key)
        if rec is None:
            return None
        if key not in self._cache:
            self._cache = {key: self._entries(rec["path"], rec["sha256"])}
        return self._cache[key]

    def exists(self, key: SessionKey) -> bool:
        """Whether the backup holds the record."""
        return key in self._records

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """The sub-agent record subpaths of a main session, sorted."""
        return sorted(k.subpath for k in self._records if k.subpath and k.project_key == key.project_key
                      and k.session_id == key.session_id)

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """Metadata of the backup's main sessions of ``project_key`` (most recent first)."""
        metas = []
        for key, rec in self._records.items():
            if key.subpath or key.project_key != project_key or bool(rec.get("archived")) != archived:
                continue
            try:
                state = SessionState().feed_all(self.load(key) or [])
            except (BackupError, TypeError, ValueError, AttributeError):
                state = SessionState()  # damaged: listed anyway, so the restore reports it by name
            created = state.created_at or 0.0
            metas.append(SessionMeta(id=key.session_id, project_key=project_key, title=state.title,
                                     created_at=created, updated_at=state.updated_at(default=created),
                                     message_count=state.message_count, archived=archived,
                                     forked_from=state.forked_from, cwd=state.cwd, title_source=state.title_source,
                                     version_of=state.version_of, current_version=state.current,
                                     pinned=state.pinned, tags=tuple(state.tags)))
        return sorted(metas, key=lambda m: m.updated_at, reverse=True)

    def list_projects(self) -> list[ProjectInfo]:
        """The projects the backup holds sessions of."""
        counts: dict[str, int] = {}
        for key, rec in self._records.items():
            if not key.subpath:
                counts[key.project_key] = counts.get(key.project_key, 0) + (0 if rec.get("archived") else 1)
        return [ProjectInfo(project_key=pk, cwd=None, session_count=n) for pk, n in sorted(counts.items())]


class _ArchiveMemoryLog:
    """The read half of :class:`core.stores.memory_log.MemoryLog` over a backup's ``memory/``."""

    def __init__(self, archive: BackupArchive):
        self._members = {m["scope"]: m for m in archive.manifest.get("memory", [])}
        self._archive = archive

    def scopes(self) -> list[str]:
        return sorted(self._members)

    def load(self, scope: str) -> list[dict[str, Any]]:
        m = self._members.get(scope)
        if m is None:
            return []
        return self._archive._entries(m["path"], m["sha256"])

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        raise BackupError("A backup is read-only.")


def restore_backup(path: str | os.PathLike[str], store: SessionStore, *, memory_log: MemoryLog | None = None,
                   blobs: BlobStore | None = None, progress: bool = False) -> MigrationReport:
    """Copy every record of the backup ``path`` into ``store`` (rules in the module docstring), its
    memories into ``memory_log`` and its checkpoint blobs into ``blobs`` (a storage's; None: left
    out).

    Raises :class:`BackupError` for a file that is not a readable anycode backup; damaged
    members are reported in the returned report's ``errors`` and the rest is restored."""
    archive = BackupArchive(path)
    # Restored sessions keep their original times; cleanup and auto-archive count from their
    # arrival. The JSONL store's file time says when (and its files stay byte-identical to the
    # backup); in a store without one (a database) the header says it.
    arrival = (None if knows_write_times(store) else
               {"restored_from": {"file": os.path.basename(os.fspath(path)), "at": time.time()}})
    try:
        blob_errors: list[tuple[str, str]] = []
        if blobs is not None:
            _restore_blobs(archive, blobs, blob_errors)  # first: a restored checkpoint finds its bytes
        report = migrate_sessions(archive, store, progress=progress, newer_ok=True, arrival=arrival,
                                  memories=(archive.memory_log(), memory_log) if memory_log is not None else None)
        report.errors.extend(blob_errors)
    finally:
        archive.close()
    report.errors.extend(archive.problems)
    return report


def _restore_blobs(archive: BackupArchive, blobs: BlobStore, errors: list[tuple[str, str]]) -> None:
    """Copy the backup's checkpoint blobs into ``blobs``; each must be named by the hash of its
    bytes (else it is reported and skipped). Blobs already there are kept."""
    for rec in archive.manifest.get("blobs", []):
        name = rec["path"].rpartition("/")[2]
        try:
            data = archive._read(rec["path"], rec["sha256"])
            if rec["sha256"] != name:
                raise BackupError(f"The backup member {rec['path']} is not named by its bytes' hash.")
            blobs.put(data, name)
        except BackupError as err:
            errors.append((rec["path"], str(err)))
        except OSError as err:
            errors.append((rec["path"], f"could not be written to {blobs.root} ({err.strerror or err})"))
