"""Move a session to another project (issue 18, item 6): a project folder that was renamed or moved.

A session is stored under the project key of the folder it was started in, and its file tools are
confined to that folder (:mod:`core.agent.workspace`). When the user renames or moves the folder,
the session's recorded folder no longer exists and its tools are off. Moving it to the project
now open re-files it under that project: same id, same entries and timestamps, the header naming
the new project and folder (and ``"moved_from": {"project_key", "cwd", "at"}``, so the history
says where it came from).

Stores are append-only, so a move is a copy and a removal, through the
:class:`~core.session.store.SessionStore` protocol only (every store: JSONL, SQLite, PostgreSQL):

1. each sub-agent record, then the main record, is created whole under the new key
   (``create_whole``: a kill or a full disk mid-way leaves nothing half-written);
2. the archived flag is carried over;
3. entries appended to the old record meanwhile are appended to the new one;
4. the old record (with its sub-agent records) is removed.

A conversation moves whole: its root and every Edit/Regenerate version (they find each other
within one project). Re-running a move that was killed part-way finishes it: a record already
created under the new key with the same entries is taken as done, never duplicated; one holding
other entries is a conflict (:class:`~core.errors.SessionExists`) and nothing is removed.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
import os
from typing import Any, Iterable

from core.errors import SessionExists, SessionNotFound
from core.session.keys import SessionKey, normalize_path, project_key
from core.session.manager import SessionManager, refuse_data_dir
from core.session.store import SessionStore
from core.stores.migrate import _without

log = logging.getLogger(__name__)

_MOVED = ("moved_from",)  # the header field a re-run of a move writes anew (its time)


@dataclass
class MoveReport:
    """What :func:`move_conversation` did: ``moved`` the new keys (root first, then its versions),
    ``already`` True when the conversation was already in the target project (nothing written)."""

    moved: list[SessionKey] = field(default_factory=list)
    already: bool = False

    @property
    def key(self) -> SessionKey | None:
        """The new key of the session that was asked for (the first moved), or None."""
        return self.moved[0] if self.moved else None


def _rewrite(entries: list[dict[str, Any]], new_project: str, new_cwd: str, at: float) -> list[dict[str, Any]]:
    """``entries`` with the header (the first entry, if it is one) naming the new project."""
    out = [dict(e) for e in entries]
    if out and out[0].get("type") == "header":
        head = out[0]
        if head.get("project_key") != new_project:
            head["moved_from"] = {"project_key": head.get("project_key"), "cwd": head.get("cwd"), "at": at}
        head["project_key"], head["cwd"] = new_project, new_cwd
    return out


def _same_record(have: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """A record created by an earlier (killed) run of the same move: equal but for the time of the move."""
    if len(have) < len(want) or not have or not want:
        return False
    return _without(have[:len(want)], _MOVED) == _without(want, _MOVED)


def _place(store: SessionStore, key: SessionKey, entries: list[dict[str, Any]]) -> None:
    """Create ``key`` whole with ``entries``; an equal record left by a killed run counts as done."""
    try:
        store.create_whole(key, entries)
    except SessionExists:
        have = store.load(key) or []
        if not _same_record(have, entries):
            raise SessionExists(f"{key.session_id} already exists in the target project with other content; "
                                "nothing was moved") from None
        if len(have) < len(entries):
            store.append(key, entries[len(have):])


def _move_one(store: SessionStore, key: SessionKey, archived: bool, new_project: str, new_cwd: str, at: float) -> SessionKey:
    new_key = SessionKey(new_project, key.session_id)
    entries = store.load(key)
    if entries is None:
        raise SessionNotFound(key.session_id)
    for sub in store.list_subpaths(key):
        sub_entries = store.load(SessionKey(key.project_key, key.session_id, sub))
        if sub_entries:
            _place(store, SessionKey(new_project, key.session_id, sub), _rewrite(sub_entries, new_project, new_cwd, at))
    want = _rewrite(entries, new_project, new_cwd, at)
    _place(store, new_key, want)
    if archived:
        store.archive(new_key)
    now = store.load(key) or entries  # a writer that appended meanwhile: its entries move too
    if len(now) > len(entries):
        store.append(new_key, [dict(e) for e in now[len(entries):]])
    store.remove(key)
    log.info("moved session %s from project %s to %s (%s)", key.session_id, key.project_key, new_project, new_cwd)
    return new_key


def move_conversation(store: SessionStore, key: SessionKey, new_cwd: str, *, now: float | None = None,
                      protected_dirs: Iterable[str | os.PathLike[str]] = ()) -> MoveReport:
    """Move the conversation of ``key`` (its root and every version, each with its sub-agent
    records and archived flag) to the project of folder ``new_cwd`` (normalised; need not exist
    for the store, but callers pass the project open now). Keeps ids, entries and timestamps.

    Raises :class:`SessionNotFound` (no such session), :class:`SessionExists` (the target project
    holds a different session with the same id; nothing removed), ``ValueError`` (``new_cwd`` is
    not an absolute path), :class:`~core.errors.ForbiddenProjectFolder` (``new_cwd`` is anycode's
    data folder, one of ``protected_dirs`` — the storage's own folders — or inside one), and the store's own failures (``OSError``,
    :class:`~core.errors.StoreUnavailable`): re-running the move after them finishes it."""
    if not isinstance(new_cwd, str) or not new_cwd.startswith("/"):
        raise ValueError(f"The target project folder must be an absolute path, not {new_cwd!r}.")
    cwd = normalize_path(new_cwd)
    refuse_data_dir(cwd, protected_dirs)
    new_project = project_key(cwd)
    manager = SessionManager(store)
    root = manager.root_of(key)
    if root.project_key == new_project:
        return MoveReport(already=True)
    members = manager.family(root)
    archived = {m.id for m in store.list(root.project_key, archived=True)}
    at = time.time() if now is None else now
    # The root last: a run killed part-way leaves the conversation listed where its root is.
    order = [m for m in members if m.id != root.session_id] + [m for m in members if m.id == root.session_id]
    moved = [_move_one(store, m.key, m.id in archived, new_project, cwd, at) for m in order]
    wanted = next((k for k in moved if k.session_id == key.session_id), moved[-1])
    return MoveReport(moved=[wanted] + [k for k in moved if k != wanted])
