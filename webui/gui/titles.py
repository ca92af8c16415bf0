"""Push a generated title to the page as soon as it is stored (the plain functions are
:mod:`webui.chat.titles`)."""
from __future__ import annotations

import html
import uuid
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import handlers
from webui.chat.titles import wait_for_title

if TYPE_CHECKING:
    from webui.chat.context import WebContext


def wire_title_push(ctx: WebContext, *, state: Any, title: Any, sessions: Any, timer: Any, search: Any,
                    show_archived: Any, listen: Callable[..., None]) -> None:
    """Push the title when the tab's state says one is awaited (a send just ended): the title
    field, the sidebar list and the poll timer (off, or on as the fallback). The exports are
    written when clicked, so they carry the title then. ``listen``: the state hub's
    :meth:`~webui.gui.state_hub.StateListeners.add`."""

    def on_state(st, query, archived):
        found = wait_for_title(ctx, st)
        if found is None:
            return gr.skip(), gr.skip(), gr.skip()
        text, poll = found
        if poll:
            return gr.skip(), gr.skip(), gr.Timer(active=True)
        html_list = handlers.session_list_html(ctx, st["project"], query=query or "", archived=bool(archived),
                                               active=st["session"])
        # Seen about once in four runs with another browser on the machine: the list rendered here
        # still lacked the title the field got. Until that race is understood, a list without the
        # title keeps the poll on for one tick, whose list has it (the field is not touched again
        # unless the tick finds the title: see webui.gui.app.wire_titles). The title is looked for escaped as
        # render.sidebar_html writes it (quotes too: "What's new" is listed as What&#x27;s new).
        listed = text is None or html.escape(text) in html_list
        return text, html_list, gr.Timer(active=not listed)

    # The push runs only when the state awaits a title (a chat's first reply just ended), not on
    # every change of the state (issue 32: one more queued event per open, switch and send, whose
    # status changes each made the page copy every progress target's data). The state hub, which
    # runs on every change anyway, sets ``due`` then; the push is its own event, since it waits.
    due = gr.Textbox(visible="hidden", elem_id="ac-title-due")

    def on_due(st):
        st = st or {}
        return uuid.uuid4().hex if st.get("session") and st.get("title_wait") else gr.skip()

    listen(on_due, state, due)
    # No concurrency limit: each call only waits for its own tab's thread (bounded).
    due.change(on_state, [state, search, show_archived], [title, sessions, timer],
               api_visibility="private", show_progress="hidden", concurrency_limit=None)
