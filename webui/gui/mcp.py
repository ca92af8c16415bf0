"""The Tools panel on the page: the project's MCP servers (the plain functions are
:mod:`webui.chat.mcp`).

The sidebar's **Tools** button opens a panel above the chat: each configured server with where it
is configured, what it runs, its state (running, waits for your approval, failed and why…), its
tools and instructions; **Approve this project's MCP servers** while the project's configuration
waits for approval (with the commands it would run); **Test** a server (start it, list its
tools); the "Run read-only tools without asking" switch. Nothing is started to draw the panel.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import mcp
from webui.gui.i18n_ui import tr
from webui.i18n import t

if TYPE_CHECKING:
    from webui.chat.context import WebContext


def build_tools_panel(ctx: WebContext, *, button_slot: Any, panel_slot: Any) -> dict[str, Any]:
    """Place the Tools button (in ``button_slot``, the sidebar's foot) and the panel (in
    ``panel_slot``, a hidden column above the chat); returns the parts for :func:`wire_tools_panel`."""
    parts: dict[str, Any] = {"panel": panel_slot}
    with button_slot:
        parts["open"] = gr.Button(tr("mcp_tools"), size="sm", variant="secondary", elem_id="ac-tools-open")
    with panel_slot:
        with gr.Row(elem_id="ac-tools-head"):
            gr.Markdown(tr("mcp_heading"), elem_id="ac-tools-title")
            parts["refresh"] = gr.Button(tr("mcp_refresh"), size="sm", scale=0, min_width=80, elem_id="ac-tools-refresh")
            parts["close"] = gr.Button(tr("close"), size="sm", scale=0, min_width=70, elem_id="ac-tools-close")
        parts["approval"] = gr.Markdown("", visible=False, elem_id="ac-tools-approval")
        parts["approve"] = gr.Button(tr("mcp_approve"), variant="primary", size="sm", visible=False,
                                     elem_id="ac-tools-approve")
        parts["listing"] = gr.HTML("", elem_id="ac-tools-list")
        with gr.Row(equal_height=True, elem_id="ac-tools-test-row"):
            parts["server"] = gr.Dropdown(choices=[], value=None, label=tr("mcp_server_pick"), scale=3,
                                          elem_id="ac-tools-server", interactive=True)
            parts["test"] = gr.Button(tr("mcp_test"), size="sm", scale=0, min_width=80, elem_id="ac-tools-test")
        parts["trust"] = gr.Checkbox(label=tr("mcp_trust_read_only"), info=tr("mcp_trust_info"),
                                     elem_id="ac-tools-trust", interactive=True)
    return parts


def wire_tools_panel(ctx: WebContext, parts: dict[str, Any], *, state: Any, notify: Callable[..., None]) -> None:
    """Open, refresh and close the panel; Approve, Test and the read-only switch."""
    outputs = [parts["approval"], parts["approve"], parts["listing"], parts["server"], parts["trust"]]
    common = {"api_visibility": "private", "show_progress": "hidden"}

    def shown(st: Any, pick: Any = None) -> tuple:
        view = mcp.panel(ctx, st)
        chosen = pick if pick in view.servers else (view.servers[0] if view.servers else None)
        return (gr.Markdown(view.approval, visible=bool(view.approval)), gr.Button(visible=bool(view.approval)),
                view.html, gr.Dropdown(choices=view.servers, value=chosen),
                gr.Checkbox(value=view.trust_read_only, interactive=not view.trust_locked,
                            info=t("mcp_trust_locked") if view.trust_locked else t("mcp_trust_info")))

    def on_open(st):
        return (gr.Column(visible=True), *shown(st))

    parts["open"].click(on_open, state, [parts["panel"], *outputs], **common)
    parts["refresh"].click(lambda st, pick: shown(st, pick), [state, parts["server"]], outputs, **common)
    parts["close"].click(lambda: gr.Column(visible=False), None, parts["panel"], **common)

    def on_approve(st, pick):
        notify(mcp.approve(ctx, st), "info")
        return shown(st, pick)

    parts["approve"].click(on_approve, [state, parts["server"]], outputs, **common)

    def on_test(st, pick):
        sentence, ok = mcp.test(ctx, st, pick)
        notify(sentence, "info" if ok else "warning")
        return shown(st, pick)

    parts["test"].click(on_test, [state, parts["server"]], outputs, api_visibility="private")

    def on_trust(on):
        notice = mcp.set_trust_read_only(ctx, bool(on))
        if notice:
            notify(notice)

    parts["trust"].input(on_trust, parts["trust"], None, **common)
