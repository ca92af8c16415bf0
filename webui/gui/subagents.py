"""The read-only transcript of a sub-agent: a drawer over the right of the page, opened by the link
of a task step (the plain functions are :mod:`webui.chat.subagents`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat.subagents import transcript
from webui.gui.assets import script
from webui.gui.i18n_ui import tr
from webui.render.tool_steps import LINK_PREFIX

if TYPE_CHECKING:
    from webui.chat.context import WebContext

# A click on a transcript link (inside the chat or the panel) becomes a ``select`` event whose
# value is the task call id; the page never navigates. Capturing at the document: the chat's
# Markdown is re-rendered on every update, so listeners on the links themselves would be lost.
LINKS_JS = script("subagent_links.js", LINK_PREFIX=LINK_PREFIX)

# The panel is a drawer over the right side of the page (the chat stays where it is).
PANEL_CSS = """<style>
#ac-transcript { position: fixed; top: 0; right: 0; width: min(760px, 96vw); height: 100vh; z-index: 60;
  background: var(--background-fill-primary); box-shadow: -4px 0 24px rgba(0,0,0,.18);
  padding: 12px 16px; overflow: auto; }
</style>"""


def build_transcript_panel(ctx: WebContext, *, state: Any, notify: Callable[..., None]) -> Any:
    """Place the transcript panel (hidden until a link is clicked) and wire the link clicks.
    ``notify(sentence)`` shows a notice. Returns the panel's column."""
    links = gr.HTML(PANEL_CSS, js_on_load=LINKS_JS, elem_id="ac-subagent-links", padding=False)
    with gr.Column(visible=False, elem_id="ac-transcript") as panel:
        with gr.Row(equal_height=True):
            heading = gr.Markdown("", elem_id="ac-transcript-heading")
            close = gr.Button(tr("close"), size="sm", scale=0, min_width=80, elem_id="ac-transcript-close")
        chat = gr.Chatbot(elem_id="ac-transcript-chat", show_label=False, height="calc(100vh - 120px)",
                          layout="bubble", buttons=["copy"], group_consecutive_messages=False)

    def on_open(st, evt: gr.SelectData):
        shown = transcript(ctx, st, str(evt.value or ""))
        if shown.notice:
            notify(shown.notice)
            return gr.skip(), gr.skip(), gr.skip()
        return gr.Column(visible=True), shown.heading, shown.rows

    links.select(on_open, [state], [panel, heading, chat], api_visibility="private")
    close.click(lambda: gr.Column(visible=False), None, panel, api_visibility="private")
    return panel
