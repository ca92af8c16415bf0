"""Project keys that are one project (issue 26, item 5): ``<data dir>/projects.json``.

A project's sessions stay under the key of the path they were started at; this registry records,
for each project identity (:mod:`core.session.identity`: the git remote plus the path inside the
checkout), the keys its sessions are stored under on any machine, with the folder last seen for
each::

    {"version": 1, "identities": {"git:github.com/ann/app": {"-home-ann-app-…": "/home/ann/app",
                                                             "-Users-ann-app-…": "/Users/ann/app"}}}

It is filled when a project folder is opened here, when a session is created, and from the
``project_identity`` recorded in session headers (:func:`learn_from_store`, run by ``sessions
pull`` and ``anycode projects``) — so the headers, which every mirror carries, are the source and
this file only a cache that can be rebuilt. Written whole (temp file + rename) under a file lock,
mode 0600.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
import filelock

from core.session.store import SessionStore
from core.stores.whole_file import place_whole

log = logging.getLogger(__name__)

FILE = "projects.json"


class ProjectAliases:
    """The registry in ``folder`` (a storage's own folder: :attr:`core.storage.Storage.files_dir`)."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.path = Path(folder) / FILE

    def __repr__(self) -> str:
        return f"ProjectAliases({str(self.path.parent)!r})"

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            log.warning("%s cannot be read (%s); project aliases start empty", self.path, err)
            return {}
        found = data.get("identities") if isinstance(data, dict) else None
        return {k: dict(v) for k, v in (found or {}).items() if isinstance(k, str) and isinstance(v, dict)}

    def record(self, identity: str | None, project_key: str, cwd: str | None) -> bool:
        """Note that ``project_key`` (last seen at ``cwd``) is project ``identity``; True when the
        registry changed. No-op for None. OSError passes through (the caller logs it)."""
        if not identity:
            return False
        if self._read().get(identity, {}).get(project_key, "\0") == (cwd or ""):
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with filelock.FileLock(str(self.path) + ".lock", timeout=10):
            data = self._read()
            keys = data.setdefault(identity, {})
            if keys.get(project_key) == (cwd or ""):
                return False
            keys[project_key] = cwd or ""
            payload = json.dumps({"version": 1, "identities": data}, ensure_ascii=False, indent=1, sort_keys=True)
            place_whole(self.path, payload.encode("utf-8"), replace=True)
        return True

    def keys_for(self, identity: str | None) -> dict[str, str]:
        """``{project key: last seen folder}`` of project ``identity`` ({} for None)."""
        return dict(self._read().get(identity, {})) if identity else {}

    def identity_of(self, project_key: str) -> str | None:
        """The identity ``project_key`` was recorded under, if any."""
        for identity, keys in self._read().items():
            if project_key in keys:
                return identity
        return None

    def all(self) -> dict[str, dict[str, str]]:
        """The whole registry: ``{identity: {project key: folder}}``."""
        return self._read()


HEADERS_READ = 5  # headers header_identity reads at most per project


def header_identity(store: SessionStore, project_key: str) -> tuple[str | None, str | None]:
    """``(identity, cwd)`` recorded in the header of the project's newest session that names one
    (of its :data:`HEADERS_READ` newest; archived ones too when it has no other), else the
    newest's ``(None, cwd)``, or ``(None, None)``. (Forks and versions written before they
    carried the identity have none: the next session's header is read.)"""
    for archived in (False, True):
        metas = store.list(project_key, archived=archived)[:HEADERS_READ]
        first_cwd = None
        for n, meta in enumerate(metas):
            entries = store.load(meta.key) or []
            head = entries[0] if entries and isinstance(entries[0], dict) and entries[0].get("type") == "header" else {}
            identity = head.get("project_identity")
            if n == 0:
                first_cwd = head.get("cwd")
            if isinstance(identity, str) and identity:
                return identity, head.get("cwd")
        if metas:
            return None, first_cwd
    return None, None


def learn_from_store(store: SessionStore, aliases: ProjectAliases,
                     project_keys: list[str] | None = None) -> int:
    """Record in ``aliases`` the identity of every project of ``store`` (or ``project_keys``) whose
    newest session's header names one; return how many registry entries changed."""
    changed = 0
    keys = project_keys if project_keys is not None else [p.project_key for p in store.list_projects()]
    for pk in keys:
        identity, cwd = header_identity(store, pk)
        try:
            changed += aliases.record(identity, pk, cwd)
        except OSError as err:
            log.warning("cannot record the identity of project %s: %s", pk, err)
    return changed


def same_project_keys(aliases: ProjectAliases, project_key: str) -> list[str]:
    """The other keys ``project_key``'s sessions and memories are stored under (the same identity
    recorded at another path, e.g. on another machine), sorted; [] when it has no identity here
    or the registry cannot be read."""
    try:
        identity = aliases.identity_of(project_key)
        return sorted(k for k in aliases.keys_for(identity) if k != project_key) if identity else []
    except OSError as err:
        log.warning("cannot read project aliases: %s", err)
        return []
