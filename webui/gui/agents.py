"""The sidebar's Agents section (issue 30) and the read-only drawer a click on an agent opens (the
plain functions are :mod:`webui.chat.agents`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import agents as agents_chat
from webui.gui.assets import script
from webui.gui.i18n_ui import tr

if TYPE_CHECKING:
    from webui.chat.context import WebContext

LIST_JS = script("agents_list.js")

PANEL_CSS = """<style>
#ac-agent-panel { position: fixed; top: 0; right: 0; width: min(760px, 96vw); height: 100vh; z-index: 60;
  background: var(--background-fill-primary); box-shadow: -4px 0 24px rgba(0,0,0,.18);
  padding: 12px 16px; overflow: auto; }
.ac-agent-row { display: flex; flex-direction: column; padding: 4px 8px; border-radius: 6px; cursor: pointer; }
.ac-agent-row:hover, .ac-agent-row:focus { background: var(--background-fill-secondary); }
.ac-agent-meta { opacity: .7; }
#ac-agent-popup { position: fixed; z-index: 80; min-width: 160px; padding: 4px; border-radius: 8px;
  background: var(--background-fill-primary); border: 1px solid var(--border-color-primary);
  box-shadow: 0 4px 16px rgba(0,0,0,.15); }
.ac-agent-choice { padding: 4px 10px; border-radius: 6px; cursor: pointer; }
.ac-agent-choice.active, .ac-agent-choice:hover { background: var(--background-fill-secondary); }
</style>"""


def build_agents_section(ctx: WebContext, *, slot: Any, state: Any, notify: Callable[..., None],
                         listen: Callable[..., None]) -> Any:
    """Place the Agents section in ``slot`` (the sidebar's) and its drawer (here: fixed over the
    right of the page); the list follows the tab's state (its project; an expert consulted).
    Returns the section's HTML component."""
    with slot:
        listing = gr.HTML("", js_on_load=LIST_JS, elem_id="ac-agents", padding=False)
    gr.HTML(PANEL_CSS, js_on_load=None, padding=False)
    with gr.Column(visible=False, elem_id="ac-agent-panel") as panel:
        with gr.Row(equal_height=True):
            heading = gr.Markdown("", elem_id="ac-agent-heading")
            close = gr.Button(tr("close"), size="sm", scale=0, min_width=80, elem_id="ac-agent-close")
        chat = gr.Chatbot(elem_id="ac-agent-chat", show_label=False, height="calc(100vh - 140px)",
                          layout="bubble", buttons=["copy"], group_consecutive_messages=False)

    def on_list(st):
        project = (st or {}).get("project") or ctx.project_key
        return agents_chat.section_html(agents_chat.section(ctx, project))

    def on_open(st, evt: gr.SelectData):
        shown = agents_chat.open_agent(ctx, st, str(evt.value or ""))
        if shown.notice:
            notify(shown.notice)
            return gr.skip(), gr.skip(), gr.skip()
        return gr.Column(visible=True), shown.heading, shown.rows

    listen(on_list, [state], listing)  # follows the tab's state (webui.gui.state_hub)
    listing.select(on_open, [state], [panel, heading, chat], api_visibility="private")
    close.click(lambda: gr.Column(visible=False), None, panel, api_visibility="private")
    return listing
