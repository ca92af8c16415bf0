"""Narrow windows (a phone on the LAN, a split screen): the sidebar becomes a drawer (issue 18).

Below :data:`BREAKPOINT_PX` Gradio's own sidebar overlays the whole page, and it started open on
every load and stayed over the chat after a chat was picked, with the message box under it. Here,
as in ChatGPT on a phone: the sidebar starts closed, its toggle is a menu button at the top left,
it closes when a conversation (or a message search result) is picked, New chat or Memory is
pressed, Esc is pressed, or the dimmed chat behind it is tapped. The sizes are in
``assets/layout.css``; this module is the page script, run once on load (no server round trip).

The sidebar is opened and closed by clicking Gradio's own toggle button, so Gradio's idea of
whether it is open never disagrees with what is shown.
"""
from __future__ import annotations

from typing import Any

from webui.gui.assets import on_page_load, script

# Gradio's sidebar breakpoint (its CSS: ``@media (width<=768px)``, where it overlays the page);
# assets/layout.css uses the same number.
BREAKPOINT_PX = 768

# Clicks in the sidebar after which the user wants to see the chat.
CLOSING_CLICKS = "#ac-list [data-sid], #ac-new, #ac-search-results [data-hit], #ac-memory-open"

NARROW_JS = script("narrow.js", PX=BREAKPOINT_PX, CLOSING=CLOSING_CLICKS)


def attach(demo: Any) -> None:
    """Run the drawer script on every page load of ``demo`` (a ``gr.Blocks``)."""
    on_page_load(demo, NARROW_JS)
