"""The approval card (Allow once / Allow for this chat / Deny with a reason), the per-chat
"Ask before changes" switch and the workspace notice, placed under the chat.

Thin over :mod:`webui.chat.approvals`. The change is shown in a ``gr.Code`` (plain text in an
editor view, never HTML), so a diff of an HTML file cannot inject markup into the page. An
answer resumes the paused turn through the app's own send chain (``continue_turn``), so the
resumed reply streams, can be stopped and is stored like any other. Stop while a card waits
denies it and ends the turn.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import approvals, handlers
from webui.gui.i18n_ui import tr
from webui.i18n import Msg, t

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

CARD_TITLE = Msg("approval_title")
REASON_PLACEHOLDER = Msg("approval_reason")


def build_ask_switch(ctx: WebContext) -> Any:
    """The per-chat "Ask before changes" checkbox (placed where this is called)."""
    return gr.Checkbox(label=tr("approval_ask_switch"), value=approvals.ap.approval_mode() == "ask",
                       elem_id="ac-ask", interactive=True)


def build_approval_card(ctx: WebContext) -> dict[str, Any]:
    """Create the card and the workspace notice (hidden) where this is called; returns the
    components for :func:`wire_approval_card`."""
    with gr.Column(visible=False, elem_id="ac-approval") as card:
        head = gr.Markdown("", elem_id="ac-approval-head")
        diff = gr.Code("", language=None, interactive=False, show_label=False, lines=3, max_lines=24,
                       elem_id="ac-approval-diff", show_line_numbers=False, wrap_lines=True)
        reason = gr.Textbox(placeholder=tr(REASON_PLACEHOLDER.key), show_label=False, container=False, max_lines=3,
                            elem_id="ac-approval-reason")
        with gr.Row(elem_id="ac-approval-buttons"):
            allow_once = gr.Button(tr("approval_allow_once"), variant="primary", size="sm", elem_id="ac-allow-once")
            allow_chat = gr.Button(tr("approval_allow_chat"), size="sm", elem_id="ac-allow-chat")
            # an MCP tool's call only (webui.chat.mcp): that tool, in this project, from now on
            allow_always = gr.Button(tr("approval_allow_always"), size="sm", visible=False, elem_id="ac-allow-always")
            deny = gr.Button(tr("approval_deny"), variant="stop", size="sm", elem_id="ac-deny")
    with gr.Row(visible=False, elem_id="ac-workspace", equal_height=True) as ws_row:
        ws_text = gr.Markdown("", elem_id="ac-workspace-text")
        ws_btn = gr.Button(tr("workspace_use_anyway"), size="sm", scale=0, min_width=190, elem_id="ac-workspace-use")
    call_id = gr.State(None)  # the call the card shows (answers name it, never "whatever is pending")
    return {"card": card, "head": head, "diff": diff, "reason": reason, "allow_once": allow_once,
            "allow_chat": allow_chat, "allow_always": allow_always, "deny": deny, "ws_row": ws_row, "ws_text": ws_text, "ws_btn": ws_btn,
            "call_id": call_id}


def _escape_md(text: str) -> str:
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>&" else ch for ch in text)


def wire_approval_card(ctx: WebContext, parts: dict[str, Any], *, state: Any, tab: Any, box: Any, pending: Any,
                       chat: Any, switch: Any, tab_key: Callable[[Any, Any], str], continue_turn: Callable[[Any], Any],
                       notify: Callable[..., None], listen: Callable[..., None]) -> Callable[[Any], Any]:
    """Wire the card. ``continue_turn(event)`` chains the app's streaming send after ``event``
    (for the run id put in ``pending``); ``tab_key(request, tab_id)`` names the tab's runs.
    Returns ``after_turn(event)``, which refreshes the card after a send chain."""
    card_outputs = [parts["card"], parts["head"], parts["diff"], parts["call_id"], parts["ws_row"],
                    parts["ws_text"], parts["ws_btn"], switch, box, parts["allow_always"]]

    def refresh(st):
        shown = approvals.view(ctx, st)
        p = shown.pending
        problem = shown.workspace_problem
        return (
            gr.Column(visible=p is not None),
            (t("mcp_approval_title", server=shown.mcp[0], tool=shown.mcp[1]) if shown.mcp
             else t(CARD_TITLE, tool=p.tool)) if p else "",
            shown.preview,
            p.call_id if p else None,
            gr.Row(visible=bool(problem)),
            t("workspace_tools_off", problem=_escape_md(problem)) if problem else "",
            gr.Button(visible=shown.choosable),
            gr.Checkbox(value=shown.ask, interactive=bool((st or {}).get("session"))),
            # A waiting card keeps the turn open: Stop (which denies it) instead of Send.
            gr.Textbox(submit_btn=False, stop_btn=t("stop")) if p else gr.skip(),
            gr.Button(visible=shown.mcp is not None),
        )

    common = {"api_visibility": "private", "show_progress": "hidden"}
    listen(refresh, state, card_outputs)  # follows the tab's state (webui.gui.state_hub)

    def after_turn(event):
        return event.then(refresh, state, card_outputs, **common)

    def answer(allow: bool, scope: str):
        def run(tab_id, st, cid, reason, request: gr.Request):
            notice = approvals.decide(ctx, st, cid, allow=allow, scope=scope, reason=reason)
            if notice:
                notify(notice)
                return gr.skip(), gr.skip(), gr.skip(), None
            run_id = handlers.take_retry(ctx, tab_key(request, tab_id))
            if run_id is None:
                notify(handlers.BUSY_NOTICE)
                return gr.skip(), gr.skip(), gr.skip(), None
            return (gr.Column(visible=False), "", gr.Textbox(submit_btn=False, stop_btn=t("stop")), run_id)
        return run

    for button, allow, scope in ((parts["allow_once"], True, "once"), (parts["allow_chat"], True, "chat"),
                                 (parts["allow_always"], True, "always"), (parts["deny"], False, "once")):
        event = button.click(answer(allow, scope), [tab, state, parts["call_id"], parts["reason"]],
                             [parts["card"], parts["reason"], box, pending], queue=False, **common)
        after_turn(continue_turn(event))

    def on_stop(tab_id, st, request: gr.Request):
        if ctx.running(tab_key(request, tab_id)) or not approvals.stop_pending(ctx, st):
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        shown = handlers.reload(ctx, st)
        return (shown.state, shown.rows, gr.Column(visible=False),
                gr.Textbox(submit_btn=True, stop_btn=False))

    box.stop(on_stop, [tab, state], [state, chat, parts["card"], box], **common)

    def on_switch(st, ask):
        approvals.set_ask(ctx, st, bool(ask))

    switch.input(on_switch, [state, switch], None, **common)

    def on_choose(st):
        notice = approvals.choose_workspace(ctx, st)
        notify(notice)
        return refresh(st)

    parts["ws_btn"].click(on_choose, state, card_outputs, **common)
    return after_turn
