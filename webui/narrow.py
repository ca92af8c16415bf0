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

# Gradio's sidebar breakpoint (its CSS: ``@media (width<=768px)``, where it overlays the page);
# assets/layout.css uses the same number.
BREAKPOINT_PX = 768

# Clicks in the sidebar after which the user wants to see the chat.
CLOSING_CLICKS = "#ac-list [data-sid], #ac-new, #ac-search-results [data-hit], #ac-memory-open"

NARROW_JS = """
() => {
  const narrow = window.matchMedia('(max-width: %(px)dpx)');
  const bar = () => document.getElementById('ac-sidebar');
  const toggle = () => { const b = bar(); return b && b.querySelector(':scope > .toggle-button'); };
  const isOpen = () => { const b = bar(); return !!b && b.classList.contains('open'); };
  const close = () => { if (isOpen() && toggle()) toggle().click(); };
  window.acSidebar = {narrow: () => narrow.matches, isOpen, close,
                      open: () => { if (!isOpen() && toggle()) toggle().click(); }};
  const started = Date.now();
  const init = () => {
    if (!toggle() && Date.now() - started < 10000) { setTimeout(init, 50); return; }
    if (narrow.matches) close();
    // shown (and animated) only once it is closed: no drawer flashing over the page on load
    setTimeout(() => { if (bar()) bar().dataset.acReady = '1'; }, 60);
  };
  init();
  document.addEventListener('click', (e) => {
    if (!narrow.matches || !isOpen() || !e.target.closest) return;
    if (e.target.closest('%(closing)s')) { setTimeout(close, 0); return; }
    if (!e.target.closest('#ac-sidebar')) {
      // a tap on the dimmed chat behind the drawer closes it and does nothing else
      e.preventDefault(); e.stopPropagation(); close();
    }
  }, true);
  return [];
}
""" % {"px": BREAKPOINT_PX, "closing": CLOSING_CLICKS}


def attach(demo: Any) -> None:
    """Run the drawer script on every page load of ``demo`` (a ``gr.Blocks``)."""
    demo.load(None, None, None, js=NARROW_JS)
