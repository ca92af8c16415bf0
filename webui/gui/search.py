"""The message search's results panel under the sidebar's search box (the plain functions are
:mod:`webui.chat.search`)."""
from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from core.errors import AnycodeError
from webui.chat import handlers
from webui.chat.search import HIGHLIGHT_SECONDS, hit_include, hit_row, results_html, warm_up
from webui.gui.assets import script, signal_answered
from webui.gui.i18n_ui import tr
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

# Clicks on a result become a ``select`` event carrying {sid, pk, idx} as JSON in ``value``.
RESULTS_JS = script("search_results.js")
# After the conversation opened: wait for its rows, scroll the hit's row into view, highlight it.
SCROLL_JS = script("search_scroll.js", HIGHLIGHT_MS=HIGHLIGHT_SECONDS * 1000)


def build_search_results(ctx: WebContext, *, state: Any, search: Any, show_archived: Any, tab: Any,
                         show: Callable[..., tuple], switching: Callable[..., Any], switch: dict[str, Any],
                         idle_box: Callable[[], Any]) -> Any:
    """Place the results panel (call inside the sidebar, under the search box) and wire it.

    ``show(view, query, archived)``, ``switching(fn)``, ``switch`` (outputs of an open) and
    ``idle_box()`` are the app's own, so opening a result is exactly opening a session from the
    list. Returns the results component."""
    all_projects = gr.Checkbox(label=tr("search_all_projects"), value=False, elem_id="ac-search-all",
                               visible=True, container=False)
    results = gr.HTML("", js_on_load=RESULTS_JS, elem_id="ac-search-results")
    target = gr.Textbox(visible="hidden", elem_id="ac-search-target")

    def on_query(st, query, archived, everywhere):
        project = (st or {}).get("project") or ctx.project_key
        return results_html(ctx, project, query or "", all_projects=bool(everywhere), archived=bool(archived))

    inputs = [state, search, show_archived, all_projects]
    # always_last: while one search runs, only the newest query waits (typing never queues a backlog).
    search.change(on_query, inputs, results, api_visibility="private", trigger_mode="always_last",
                  show_progress="hidden")
    all_projects.input(on_query, inputs, results, api_visibility="private", show_progress="hidden")
    show_archived.input(on_query, inputs, results, api_visibility="private", show_progress="hidden")

    def on_hit(st, query, archived, evt: gr.SelectData):
        try:
            data = json.loads(evt.value)
            project, sid, idx = str(data["pk"]), str(data["sid"]), int(data.get("idx", -1))
            role = data.get("role")
            # A hit far back in a long conversation: the chat opens from there on.
            view = handlers.open_session(ctx, project, sid,
                                         include=hit_include(ctx, project, sid, idx, role) if idx >= 0 else None)
            row = hit_row(ctx, project, sid, idx, view.state.get("from", 0), role)
        except (ValueError, TypeError, KeyError) as err:
            log.warning("bad search result click %r: %s", evt.value, err)
            return (*show(handlers.reload(ctx, st), query, archived), idle_box(), gr.skip())
        except AnycodeError as err:  # deleted meanwhile
            return (*show(handlers.reload(ctx, st, notice=describe(err)), query, archived), idle_box(), gr.skip())
        return (*show(view, query, archived), idle_box(),
                json.dumps({"sid": sid, "row": row, "at": time.time()}))

    warm_up(ctx)
    # One hit on its way at a time: the results' script holds a hit clicked meanwhile until this
    # answer is drawn, as the session list does (wire_sidebar in webui/gui/app.py): Gradio dropped it
    # ("once", its default for a select) or drew two answers in either order ("multiple", here only so
    # that the held click is never dropped).
    picked = results.select(switching(on_hit), [tab, state, search, show_archived], trigger_mode="multiple",
                            outputs=[*switch["outputs"], target], api_visibility="private")
    signal_answered(picked, "ac-hit-picked")
    target.change(None, target, None, js=SCROLL_JS)
    return results
