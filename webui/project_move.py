"""A chat whose project folder was renamed or moved (issue 18, item 6).

The workspace notice under the chat (:mod:`webui.approval_card`) already says that the chat's
folder is gone and its file tools are off (:func:`core.agent.workspace.check_workspace`,
``missing``). This module adds the way out to that notice: **Move this chat to <project>**, the
project anycode was started in, which re-files the conversation (every version, its sub-agent
records, archived flag, id, entries and timestamps) under that project
(:func:`core.stores.move.move_conversation`) and reopens it there, its tools confined to the
new folder. ``anycode sessions move`` (:mod:`webui.move_cli`) does the same for many sessions.

Plain functions first (tested without a browser), then :func:`wire`.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

from core.agent.workspace import check_workspace
from core.errors import AnycodeError
from core.session.entries import SessionState
from core.session.keys import SessionKey
from webui.i18n import t
from webui.error_text import describe

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


def offer(ctx: Any, state: dict[str, Any] | None) -> MoveOffer | None:
    """The move offered for the tab's chat: its recorded project folder no longer exists, and the
    project anycode was started in (``ctx.project_path``) is another, existing folder. None
    otherwise (a new chat, a healthy chat, a store failure)."""
    state = state or {}
    if not state.get("session") or not state.get("project"):
        return None
    key = SessionKey(state["project"], state["session"])
    try:
        cwd = SessionState().feed_all(ctx.store.load(key) or []).cwd
    except (AnycodeError, OSError) as err:
        log.warning("cannot read the folder of %s: %s", key.session_id, err)
        return None
    checked = check_workspace(key, cwd)
    target = ctx.project_path
    if not checked.missing or not checked.cwd or ctx.project_key == key.project_key or not os.path.isdir(target):
        return None
    return MoveOffer(checked.cwd, target)


def move_to_current(ctx: Any, state: dict[str, Any]) -> Any:
    """Move the tab's chat to the project anycode was started in and return the
    :class:`~webui.handlers.SessionView` of the moved chat (with an info notice), or the chat
    as it was with a notice saying why it could not move."""
    from core.stores.move import move_conversation
    from webui import handlers

    found = offer(ctx, state)
    if found is None:  # moved already (reload opens it where it is now), or the folder is back
        return handlers.reload(ctx, state)
    try:
        report = move_conversation(ctx.store, SessionKey(state["project"], state["session"]), found.target)
    except (AnycodeError, OSError) as err:
        log.warning("moving %s failed: %s", state["session"], err)
        text = describe(err) if isinstance(err, AnycodeError) else None
        return handlers.reload(ctx, state, notice=text or handlers.not_saved(err, t("not_saved_moved")))
    return _opened(ctx, report.key, found.target)


def relocated(ctx: Any, state: dict[str, Any]) -> Any:
    """The view of the tab's chat when it is gone from the tab's project because it was moved to
    another one (in another tab, or by ``anycode sessions move``), saying so; None when it is
    nowhere (deleted) or the store cannot tell."""
    from webui import handlers

    sid = (state or {}).get("session")
    if not sid:
        return None
    try:
        key = handlers.locate(ctx, sid, state.get("project"))
        if key.project_key == state.get("project"):
            return None
        return _opened(ctx, key, ctx.manager.get(key).cwd or key.project_key)
    except (AnycodeError, OSError) as err:
        log.info("chat %s is not in another project either: %s", sid, err)
        return None


def _opened(ctx: Any, key: SessionKey, target: str) -> Any:
    """The view of the chat at ``key`` (moved to folder ``target``), saying so."""
    from webui import handlers

    view = handlers.open_session(ctx, key.project_key, key.session_id)
    view.notice, view.notice_level = t("moved_notice", label=handlers.project_label(target)), "info"
    return view


def wire(ctx: Any, gr: Any, parts: dict[str, Any], *, state: Any, search: Any, show_archived: Any,
         project: Any, view_outputs: list[Any], show: Callable[..., tuple]) -> None:
    """Add the Move button to the workspace notice (``parts`` of :func:`webui.approval_card.add_card`),
    shown while :func:`offer` offers a move; a click moves the chat and opens it in its new project
    (the project picker follows)."""
    with parts["ws_row"]:
        button = gr.Button("", visible=False, size="sm", scale=0, min_width=190,
                           elem_id="ac-workspace-move")
    common = {"api_visibility": "private", "show_progress": "hidden"}

    def on_state(st):
        found = offer(ctx, st)
        return gr.Button(value=found.button, visible=True) if found else gr.Button(visible=False)

    state.change(on_state, state, button, **common)

    def on_move(st, query, archived):
        from webui import handlers

        view = move_to_current(ctx, st or {})
        current = view.state["project"]
        picker = gr.Dropdown(choices=handlers.project_choices(ctx, current), value=current)
        return (*show(view, query, archived), picker)

    button.click(on_move, [state, search, show_archived], [*view_outputs, project], **common)

