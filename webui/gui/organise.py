"""Pins and tags on the page (issue 31): the tag bar under the title — also the carrier of the
sidebar menu's and the tag chips' script — and its event (the plain functions are
:mod:`webui.chat.organise`)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat.organise import apply, tag_bar_html
from webui.gui.assets import script

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

ORGANISE_JS = script("organise.js")


def build_tag_bar() -> Any:
    """Create, where it is called (under the top bar), the open chat's tag bar."""
    return gr.HTML("", js_on_load=ORGANISE_JS, elem_id="ac-tags", padding=False)


def wire_tag_bar(ctx: WebContext, bar: Any, *, state: Any, search: Any, show_archived: Any, sessions: Any,
                 list_html: Callable[..., str], notify: Callable[..., None], listen: Callable[..., None]) -> None:
    """The bar follows the tab's state (``listen``: the app's one state listener); an action from the bar or a sidebar row's menu is
    applied, then the list and the bar are drawn again (``list_html(st, query, archived,
    active=...)`` is the app's own)."""

    def on_state(st):
        return tag_bar_html(ctx, st)

    listen(on_state, state, bar)  # follows the tab's state (webui.gui.state_hub)

    def on_action(st, query, archived, evt: gr.SelectData):
        st = st or {}
        notice = apply(ctx, st, evt.value)
        if notice:
            notify(notice)
        return list_html(st, query, archived, active=st.get("session")), tag_bar_html(ctx, st)

    bar.select(on_action, [state, search, show_archived], [sessions, bar], api_visibility="private",
               show_progress="hidden")
