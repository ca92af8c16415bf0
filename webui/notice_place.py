"""Where toasts sit (issue 18, item 3: a notice covers nothing).

Toasts (Gradio's ``.toast-wrap`` and the "Memory updated" toast) sit above the message box: clear
of the top bar's buttons and of the first messages' menus. But the controls under the chat are
not only the box: the approval card, the workspace notice (with its buttons), the "This chat is
archived" bar and the "No reply was saved" bar come and go above it, and a toast at a fixed
distance from the bottom covered their buttons (seen: a refusal toast over the archived bar's
Unarchive). A page script keeps the CSS variable ``--ac-toast-bottom`` at the height of
everything below the chat (plus a gap), so toasts stay above whatever is there; the CSS
(``assets/chat_state.css``) falls back to 110 px without it.
"""
from __future__ import annotations

from typing import Any

PLACE_TOASTS_JS = """
() => {
  const GAP = 10;
  const place = () => {
    const chat = document.getElementById('ac-chat');
    const main = document.getElementById('ac-main');
    if (!chat || !main) return;
    let item = chat;
    while (item.parentElement && item.parentElement !== main) item = item.parentElement;
    let top = window.innerHeight;
    for (let el = item.nextElementSibling; el; el = el.nextElementSibling) {
      const r = el.getBoundingClientRect();
      if (r.height > 0 && r.width > 0 && r.top < top) top = r.top;
    }
    const bottom = Math.max(GAP, Math.round(window.innerHeight - top + GAP));
    document.documentElement.style.setProperty('--ac-toast-bottom', bottom + 'px');
  };
  let queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; place(); }); } };
  new MutationObserver(later).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                      attributeFilter: ['class', 'style', 'hidden']});
  window.addEventListener('resize', later);
  place();
  return [];
}
"""


def add(demo: Any) -> None:
    """Run the placing script once the page has loaded (inside ``demo``'s Blocks context)."""
    demo.load(None, None, None, js=PLACE_TOASTS_JS)
