"""Which folder a session's tools may touch (issue 10, defect 4).

A session's header records a ``cwd``, but a session file can be an export, a copy or a row of a
shared database: ``"cwd": "/"`` must not hand the model the whole disk. The workspace is the
project the session is *stored under*: the recorded folder is used only when its
:func:`~core.session.keys.project_key` is the session key's project key, it exists, and it is not
the root of the file system, the home folder or a folder above it, nor anycode's own data folder
(or inside it: the tools would reach every conversation). A session whose header came from
elsewhere — imported from another tool (``imported_from``) or restored from a backup into a
database (``restored_from``) — never has its recorded folder trusted on its own: a Claude Code file
saying ``"cwd": "/etc"`` is a claim, not a choice. Anything else turns the file tools off with one
sentence saying why, until the user explicitly chooses the folder (the web UI's "Use this folder"
button; :class:`core.agent.approval.Grants` holds that choice in the running app, never in the
session file), or opens anycode in that folder.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable
from dataclasses import dataclass

from core.agent.tools import ToolError, Workspace
from core.settings import inside_data_dir
from core.session.identity import project_identity
from core.session.keys import SessionKey, normalize_path, project_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkspaceCheck:
    """The outcome of :func:`check_workspace`: ``workspace`` (None when tools are off),
    ``cwd`` (the recorded folder), ``problem`` (one sentence, None when fine) and
    ``choosable`` (the folder exists, so the user may choose it anyway), ``missing`` (the folder
    is the session's project's but no longer exists: it can move to another project,
    :mod:`core.stores.move`)."""

    workspace: Workspace | None
    cwd: str | None
    problem: str | None = None
    choosable: bool = False
    missing: bool = False  # the recorded folder is this project's but is gone (renamed or moved)


def _too_broad(path: str) -> str | None:
    """Why ``path`` (normalised) is too broad to be a workspace, or None."""
    candidates = {path}
    try:
        candidates.add(os.path.realpath(path))
    except OSError:
        pass
    home = os.path.expanduser("~")
    homes = {normalize_path(home), os.path.realpath(home)} if home and home != "~" else set()
    for c in candidates:
        if c == os.sep:
            return "is the root of the file system"
        for h in homes:
            if c == h:
                return "is your home folder"
            if h.startswith(c.rstrip(os.sep) + os.sep):
                return "holds your home folder"
    return None


def check_workspace(key: SessionKey, cwd: str | None, *, chosen: str | None = None,
                    origin: str | None = None, opened_in: str | None = None,
                    identity: str | None = None,
                    protected_dirs: Iterable[str | os.PathLike[str]] = ()) -> WorkspaceCheck:
    """Decide the workspace of the session at ``key`` whose header records ``cwd``.

    ``chosen``: a folder the user explicitly chose for this session (used as is when it exists).
    ``origin``: ``Session.origin`` ("imported", "restored" or None); such a session's folder is
    used only when it is ``opened_in`` (the folder anycode was opened in) or chosen.
    ``identity``: ``Session.identity`` (the git remote recorded when it was started); when
    ``opened_in`` is a checkout of the same identity — the same project at another path, on another
    machine — the tools use ``opened_in``.
    ``protected_dirs``: the storage's own folders (:meth:`core.storage.Storage.protected_dirs`),
    refused like the settings' data folder.
    Never raises; a refusal comes back as ``problem``.
    """
    def ours(path: str) -> bool:
        return inside_data_dir(path) or any(inside_data_dir(path, d) for d in protected_dirs)

    if chosen:
        if ours(chosen):
            return WorkspaceCheck(None, chosen, f"{chosen} is inside anycode's data folder, where the conversations "
                                  "are stored; it cannot be a chat's folder.")
        try:
            return WorkspaceCheck(Workspace(chosen), chosen)
        except ToolError as err:
            return WorkspaceCheck(None, chosen, f"The folder chosen for this chat is unavailable: {err}")
    if not isinstance(cwd, str) or not cwd.strip() or "\x00" in cwd or not os.path.isabs(cwd):
        return WorkspaceCheck(None, None, "This chat records no project folder, so the file tools are off.")
    norm = normalize_path(cwd)
    if identity and opened_in and normalize_path(opened_in) != norm and project_identity(opened_in) == identity:
        here = normalize_path(opened_in)
        if not ours(here):
            try:
                return WorkspaceCheck(Workspace(here), here)
            except ToolError as err:
                return WorkspaceCheck(None, here, f"The file tools are off: {err}")
    exists = os.path.isdir(norm)
    if project_key(norm) != key.project_key:
        return WorkspaceCheck(None, norm, f"This chat says its folder is {norm}, but it is stored under another "
                              "project, so the file tools are off until you choose that folder.", exists)
    if not exists:
        return WorkspaceCheck(None, norm, f"This chat's project folder {norm} does not exist any more (renamed or "
                              "moved?), so the file tools are off.", missing=True)
    if ours(norm):
        return WorkspaceCheck(None, norm, f"This chat's folder {norm} is inside anycode's data folder, where the "
                              "conversations are stored, so the file tools are off.")
    if origin and (not opened_in or normalize_path(opened_in) != norm):
        came = "was imported from another tool" if origin == "imported" else "was restored from a backup"
        return WorkspaceCheck(None, norm, f"This chat {came}; the folder it records ({norm}) is used only once "
                              "you choose it, so the file tools are off.", True)
    broad = _too_broad(norm)
    if broad:
        return WorkspaceCheck(None, norm, f"This chat's folder {norm} {broad}, so the file tools are off until "
                              "you choose to allow it.", True)
    try:
        return WorkspaceCheck(Workspace(norm), norm)
    except ToolError as err:
        return WorkspaceCheck(None, norm, f"The file tools are off: {err}")
