"""The context meter and the Compact button wired into the page (the plain functions are
:mod:`webui.chat.compaction`). Compact runs like a message: the same streaming, the same Stop."""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import gradio as gr

from core.errors import AnycodeError
from core.session.keys import SessionKey
from webui.chat import handlers
from webui.chat.compaction import COMPACT_COMMAND, meter_html, nothing_to_compact
from webui.i18n import t

if TYPE_CHECKING:
    from webui.chat.context import WebContext


def wire_compaction(ctx: WebContext, *, state: Any, model: Any, meter: Any, compact_btn: Any,
                    tab: Any, box: Any, pending: Any, on_send: Any, send_inputs: list, view_outputs: list,
                    on_sent: Any, stream_args: dict, tab_key: Any, listen: Any) -> None:
    """Wire the meter (refreshed whenever the tab's state or the model changes) and the Compact
    button (it runs like a message: the same streaming, the same Stop, the box's draft untouched)."""

    def on_meter(st, model_name):
        # One load of the session for both (each loads, and reports a failure, itself when this fails).
        session = None
        if (st or {}).get("session"):
            try:
                session = ctx.manager.get(SessionKey(st["project"], st["session"]))
            except (AnycodeError, OSError):
                pass
        # Compact is offered only when there is something to summarise (an empty new chat has not).
        return (meter_html(ctx, st, model_name, session=session),
                gr.Button(interactive=nothing_to_compact(ctx, st, session=session) is None))

    listen(on_meter, [state, model], [meter, compact_btn])  # follows the tab's state (webui.gui.state_hub)
    model.change(on_meter, [state, model], [meter, compact_btn], api_visibility="private", show_progress="hidden")

    def on_take_compact(tab_id, request: gr.Request):
        key = tab_key(request, tab_id)
        if ctx.busy(key):
            gr.Warning(html.escape(t(handlers.BUSY_NOTICE)), title="anycode")
            return gr.skip(), gr.skip()
        return gr.Textbox(submit_btn=False, stop_btn=t("stop")), ctx.begin_run(key, COMPACT_COMMAND).id

    compact_btn.click(on_take_compact, tab, [box, pending], queue=False, **stream_args).then(
        on_send, send_inputs, view_outputs, **stream_args).then(on_sent, [tab, pending, box], box, **stream_args)
