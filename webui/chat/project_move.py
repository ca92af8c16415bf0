"""A chat whose project folder was renamed or moved (issue 18, item 6).

The workspace notice under the chat (:mod:`webui.gui.approval_card`) already says that the chat's
folder is gone and its file tools are off (:func:`core.agent.workspace.check_workspace`,
``missing``). This module adds the way out to that notice: **Move this chat to <project>**, the
project anycode was started in, which re-files the conversation (every version, its sub-agent
records, archived flag, id, entries and timestamps) under that project
(:func:`core.stores.move.move_conversation`) and reopens it there, its tools confined to the
new folder. ``anycode sessions move`` (:mod:`webui.cli.move`) does the same for many sessions.

Plain functions (tested without a browser); the button is :mod:`webui.gui.project_move`.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.agent.workspace import check_workspace
from core.errors import AnycodeError, SessionNotFound
from core.session.keys import SessionKey
from webui.i18n import t
from webui.chat.views import not_saved, opened_elsewhere, reload
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MoveOffer:
    """The chat's recorded folder ``missing`` is gone; it can move to ``target`` (a real path)."""

    missing: str
    target: str

    @property
    def button(self) -> str:
        """The button's label: "Move this chat to <folder name>" (in the request's language)."""
        return t("move_chat_to", name=os.path.basename(self.target.rstrip("/")) or self.target)


def offer(ctx: WebContext, state: dict[str, Any] | None) -> MoveOffer | None:
    """The move offered for the tab's chat: its recorded project folder no longer exists, and the
    project anycode was started in (``ctx.project_path``) is another, existing folder. None
    otherwise (a new chat, a healthy chat, a store failure)."""
    state = state or {}
    if not state.get("session") or not state.get("project"):
        return None
    key = SessionKey(state["project"], state["session"])
    try:
        cwd = ctx.manager.state(key).cwd
    except SessionNotFound:
        cwd = None
    except (AnycodeError, OSError) as err:
        log.warning("cannot read the folder of %s: %s", key.session_id, err)
        return None
    checked = check_workspace(key, cwd, protected_dirs=ctx.storage.protected_dirs())
    target = ctx.project_path
    if not checked.missing or not checked.cwd or ctx.project_key == key.project_key or not os.path.isdir(target):
        return None
    return MoveOffer(checked.cwd, target)


def move_to_current(ctx: WebContext, state: dict[str, Any]) -> Any:
    """Move the tab's chat to the project anycode was started in and return the
    :class:`~webui.chat.views.SessionView` of the moved chat (with an info notice), or the chat
    as it was with a notice saying why it could not move."""
    from core.stores.move import move_conversation
    found = offer(ctx, state)
    if found is None:  # moved already (reload opens it where it is now), or the folder is back
        return reload(ctx, state)
    try:
        report = move_conversation(ctx.storage.sessions, SessionKey(state["project"], state["session"]), found.target,
                                   protected_dirs=ctx.storage.protected_dirs())
    except (AnycodeError, OSError) as err:
        log.warning("moving %s failed: %s", state["session"], err)
        text = describe(err) if isinstance(err, AnycodeError) else None
        return reload(ctx, state, notice=text or not_saved(err, t("not_saved_moved")))
    return opened_elsewhere(ctx, report.key, found.target)
