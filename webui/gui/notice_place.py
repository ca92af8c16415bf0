"""Where toasts sit (issue 18, item 3: a notice covers nothing).

Toasts (Gradio's ``.toast-wrap``) sit above the message box: clear
of the top bar's buttons and of the first messages' menus. But the controls under the chat are
not only the box: the approval card, the workspace notice (with its buttons), the "This chat is
archived" bar and the "No reply was saved" bar come and go above it, and a toast at a fixed
distance from the bottom covered their buttons (seen: a refusal toast over the archived bar's
Unarchive). A page script keeps the CSS variable ``--ac-toast-bottom`` at the height of
everything below the chat (plus a gap), so toasts stay above whatever is there; the CSS
(``assets/chat_state.css``) falls back to 110 px without it. "Memory updated" is no toast but a
bar under the chat (:mod:`webui.gui.memory`; issue 31, item 7), so it is among what they stay above.
"""
from __future__ import annotations

from typing import Any

from webui.gui.assets import on_page_load, script

PLACE_TOASTS_JS = script("place_toasts.js")


def add(demo: Any) -> None:
    """Run the placing script once the page has loaded (inside ``demo``'s Blocks context)."""
    on_page_load(demo, PLACE_TOASTS_JS)
