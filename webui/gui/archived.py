"""The bar "This chat is archived" with **Unarchive** above the message box (the plain functions
are :mod:`webui.chat.archived`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import handlers
from webui.gui.i18n_ui import tr

if TYPE_CHECKING:
    from webui.chat.context import WebContext


def build_archived_bar() -> dict[str, Any]:
    """Create the bar (hidden) where this is called; returns its parts for :func:`wire_archived_bar`."""
    with gr.Row(visible=False, elem_id="ac-archived-bar", equal_height=True) as row:
        gr.Markdown(tr("archived_bar"), elem_id="ac-archived-text")
        button = gr.Button(tr("unarchive"), size="sm", scale=0, min_width=110, elem_id="ac-archived-unarchive")
    return {"row": row, "button": button}


def wire_archived_bar(ctx: WebContext, parts: dict[str, Any], *, state: Any, search: Any, show_archived: Any,
                      sessions: Any, view_outputs: list[Any], show: Callable[..., tuple],
                      listen: Callable[..., None]) -> None:
    """The bar follows the tab's state; its Unarchive unarchives (checked against what the tab
    showed) and, when the archive list was shown, goes back to the main list where the chat now
    is (like the top bar's button). After a send unarchived the chat, the list switches back too."""
    common = {"api_visibility": "private", "show_progress": "hidden"}

    def on_state(st, query, archived):
        st = st or {}
        if st.get("unarchived") and archived:  # a send brought it back: show the list it is in
            html_list = handlers.session_list_html(ctx, st["project"], query=query or "", active=st.get("session"))
            return gr.Row(visible=bool(st.get("archived"))), gr.Checkbox(value=False), html_list
        return gr.Row(visible=bool(st.get("session") and st.get("archived"))), gr.skip(), gr.skip()

    listen(on_state, [state, search, show_archived], [parts["row"], show_archived, sessions])

    def on_unarchive(st, query, archived):
        view = handlers.set_archived(ctx, st or {}, False)
        if archived and not view.archived:
            return (*show(view, query, False), gr.Checkbox(value=False))
        return (*show(view, query, archived), gr.skip())

    parts["button"].click(on_unarchive, [state, search, show_archived], [*view_outputs, show_archived], **common)
