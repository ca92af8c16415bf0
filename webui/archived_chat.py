"""Archived chats in the chat pane (issue 18, item 5), the way ChatGPT does it.

An open archived chat shows a bar "This chat is archived" with **Unarchive** above the message
box. Sending a message (or Retry) in it brings it back to the main list, saying so once. The
stale-tab rule of issue 15 holds: the tab's state records the archive state it showed
(``state["archived"]``); a send in a chat another tab archived since is refused (the text goes
back to the box, the chat reloads with the bar), never silently unarchived; the bar's Unarchive
goes through :func:`webui.handlers.set_archived` with the same expected-state check as the top
bar's button.

Plain functions first (tested without a browser), then :func:`add_bar` / :func:`wire` for the
Blocks.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from core.errors import AnycodeError, StaleChange
from webui.i18n import Msg

log = logging.getLogger(__name__)

UNARCHIVED_BY_SEND = Msg("unarchived_by_send")  # "This chat was archived; your message brought it back …"
ARCHIVED_ELSEWHERE = Msg("archived_elsewhere")  # "This chat was archived in another tab or window …"


def refused_send(session: Any, state: dict[str, Any]) -> str | None:
    """The notice refusing a send in ``session`` (a loaded ``Session``) when it was archived after
    the tab showed it unarchived (another tab did it: issue 15's stale-tab rule); else None."""
    return ARCHIVED_ELSEWHERE if session.archived and state.get("archived") is False else None


def unarchive_for_send(ctx: Any, key: Any, session: Any) -> str | None:
    """Bring ``session`` back to the main list because the user sent in it (called once the
    message is stored, or when a Retry starts). Returns the one info notice saying so, or None
    when it was not archived (or another tab unarchived it meanwhile). A store failure is
    logged and leaves it archived (the send itself went through)."""
    if not session.archived:
        return None
    try:
        ctx.manager.unarchive(key, expected=True)
    except StaleChange:  # unarchived elsewhere meanwhile: the outcome the send wanted
        return None
    except (AnycodeError, OSError) as err:
        log.warning("could not unarchive %s after a send: %s", key.session_id, err)
        return None
    log.info("unarchived %s: the user sent a message in it", key.session_id)
    return UNARCHIVED_BY_SEND


def add_bar(gr: Any) -> dict[str, Any]:
    """Create the bar (hidden) where this is called; returns its parts for :func:`wire`."""
    from webui.i18n_ui import tr

    with gr.Row(visible=False, elem_id="ac-archived-bar", equal_height=True) as row:
        gr.Markdown(tr("archived_bar"), elem_id="ac-archived-text")
        button = gr.Button(tr("unarchive"), size="sm", scale=0, min_width=110, elem_id="ac-archived-unarchive")
    return {"row": row, "button": button}


def wire(ctx: Any, gr: Any, parts: dict[str, Any], *, state: Any, search: Any, show_archived: Any,
         sessions: Any, view_outputs: list[Any], show: Callable[..., tuple]) -> None:
    """The bar follows the tab's state; its Unarchive unarchives (checked against what the tab
    showed) and, when the archive list was shown, goes back to the main list where the chat now
    is (like the top bar's button). After a send unarchived the chat, the list switches back too."""
    from webui import handlers

    common = {"api_visibility": "private", "show_progress": "hidden"}

    def on_state(st, query, archived):
        st = st or {}
        if st.get("unarchived") and archived:  # a send brought it back: show the list it is in
            html_list = handlers.session_list_html(ctx, st["project"], query=query or "", active=st.get("session"))
            return gr.Row(visible=bool(st.get("archived"))), gr.Checkbox(value=False), html_list
        return gr.Row(visible=bool(st.get("session") and st.get("archived"))), gr.skip(), gr.skip()

    state.change(on_state, [state, search, show_archived], [parts["row"], show_archived, sessions], **common)

    def on_unarchive(st, query, archived):
        view = handlers.set_archived(ctx, st or {}, False)
        if archived and not view.archived:
            return (*show(view, query, False), gr.Checkbox(value=False))
        return (*show(view, query, archived), gr.skip())

    parts["button"].click(on_unarchive, [state, search, show_archived], [*view_outputs, show_archived], **common)
