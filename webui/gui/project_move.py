"""The **Move this chat to <project>** button of the workspace notice (the plain functions are
:mod:`webui.chat.project_move`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import handlers
from webui.chat.project_move import move_to_current, offer

if TYPE_CHECKING:
    from webui.chat.context import WebContext


def wire_move_button(ctx: WebContext, parts: dict[str, Any], *, state: Any, search: Any, show_archived: Any,
                     project: Any, view_outputs: list[Any], show: Callable[..., tuple],
                     listen: Callable[..., None]) -> None:
    """Add the Move button to the workspace notice (``parts`` of :func:`webui.gui.approval_card.build_approval_card`),
    shown while :func:`offer` offers a move; a click moves the chat and opens it in its new project
    (the project picker follows)."""
    with parts["ws_row"]:
        button = gr.Button("", visible=False, size="sm", scale=0, min_width=190,
                           elem_id="ac-workspace-move")
    common = {"api_visibility": "private", "show_progress": "hidden"}

    def on_state(st):
        found = offer(ctx, st)
        return gr.Button(value=found.button, visible=True) if found else gr.Button(visible=False)

    listen(on_state, state, button)  # follows the tab's state (webui.gui.state_hub)

    def on_move(st, query, archived):
        view = move_to_current(ctx, st or {})
        current = view.state["project"]
        picker = gr.Dropdown(choices=handlers.project_choices(ctx, current), value=current)
        return (*show(view, query, archived), picker)

    button.click(on_move, [state, search, show_archived], [*view_outputs, project], **common)

