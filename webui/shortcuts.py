"""Keyboard shortcuts of the chat page and their help (issue 18), as in ChatGPT:

=====================  ===============================================================
Ctrl/⌘ + Shift + O     New chat
Ctrl/⌘ + K             Search chats (focuses the sidebar's search box, opening a narrow
                       window's drawer)
Esc                    Stop the reply while one streams (else: close the drawer)
↑                      in an empty message box: edit your last message (the chat's Edit)
? or Ctrl/⌘ + /        this help
=====================  ===============================================================

Everything happens in the page (one ``keydown`` listener, :data:`KEYS_JS`): each shortcut clicks
the button a mouse user would (New chat, Stop, the message's Edit), so it behaves exactly like
the click and needs no server code. The help is a modal ``<dialog>`` (Esc and its Close button
close it), opened by the sidebar's Keyboard shortcuts button too.
"""
from __future__ import annotations

import html

from webui.i18n import t

# The help's rows: the keys (key caps are not translated; MOD is shown as ⌘ on a Mac, the page
# script swaps it) and the catalogue key (webui/locales) of what they do.
MOD = "Ctrl"
ROWS = (
    ((MOD, "Shift", "O"), "new_chat"),
    ((MOD, "K"), "search_chats"),
    (("Esc",), "shortcut_stop"),
    (("↑",), "shortcut_edit_last"),
    (("Enter",), "shortcut_send"),
    (("Shift", "Enter"), "shortcut_new_line"),
    ((MOD, "/"), "shortcut_help"),
)

_KEYBOARD_ICON = ("<svg viewBox='0 0 24 24' width='15' height='15' fill='none' stroke='currentColor' stroke-width='2' "
                  "stroke-linecap='round' aria-hidden='true'><rect x='2' y='6' width='20' height='12' rx='2'/>"
                  "<path d='M6 10h.01M10 10h.01M14 10h.01M18 10h.01M7 14h10'/></svg>")


def help_html() -> str:
    """The Keyboard shortcuts button and its dialog (closed), in the request's language: a table
    of what each shortcut does and its keys (``<kbd>``)."""
    rows = []
    for keys, what in ROWS:
        shown = " + ".join(f"<kbd{' data-ac-mod' if k == MOD else ''}>{html.escape(k)}</kbd>" for k in keys)
        rows.append(f"<tr><td>{html.escape(t(what))}</td><td class='ac-keys'>{shown}</td></tr>")
    title = html.escape(t("shortcuts_title"))
    return (f'<button type="button" class="ac-shortcuts-open" id="ac-shortcuts-open" title="{title}">'
            f'{_KEYBOARD_ICON}<span>{html.escape(t("shortcuts_button"))}</span></button>'
            f'<dialog id="ac-shortcuts" aria-labelledby="ac-shortcuts-title">'
            f'<h2 id="ac-shortcuts-title">{title}</h2>'
            f'<table>{"".join(rows)}</table>'
            f'<form method="dialog"><button class="ac-shortcuts-close">{html.escape(t("close"))}</button>'
            f'</form></dialog>')


# The page's keydown listener (run once per page load). ``capture``: the message box's own Enter
# and Gradio's handlers see the key after us, and only when we did not take it.
KEYS_JS = """
() => {
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
  const dialog = () => document.getElementById('ac-shortcuts');
  const showHelp = () => {
    const d = dialog();
    if (!d) return;
    if (mac) d.querySelectorAll('[data-ac-mod]').forEach((k) => { k.textContent = '\u2318'; });
    if (!d.open) d.showModal();
  };
  const editable = (el) => !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  const box = () => document.querySelector('#ac-input textarea');
  const click = (sel) => { const b = document.querySelector(sel); if (b) b.click(); return !!b; };
  const editLast = () => {
    const rows = document.querySelectorAll('#ac-chat .message-row.user-row');
    if (!rows.length) return false;
    let n = rows[rows.length - 1].nextElementSibling;
    while (n && !n.classList.contains('message-buttons')) n = n.nextElementSibling;
    if (!n) return false;
    // Gradio names the button "Edit" (translated when the page is): else it is the last icon
    // button outside the feedback menu (Copy, Edit, then the menu).
    const own = [...n.querySelectorAll('button.icon-button')].filter((b) => !b.closest('.extra-feedback'));
    const edit = n.querySelector('button[aria-label="Edit"]') || (own.length >= 2 ? own[own.length - 1] : null);
    if (!edit || edit.disabled) return false;
    edit.click();
    const started = Date.now();
    const focus = () => {  // the editor replaces the bubble on the next render
      const t = document.querySelector('#ac-chat .message-row.user-row textarea');
      if (t) { t.focus(); t.setSelectionRange(t.value.length, t.value.length); return; }
      if (Date.now() - started < 8000) setTimeout(focus, 30);
    };
    focus();
    return true;
  };
  document.addEventListener('keydown', (e) => {
    if (e.isComposing || e.defaultPrevented) return;
    const mod = mac ? e.metaKey : e.ctrlKey;
    const key = (e.key || '').toLowerCase();
    const helpOpen = dialog() && dialog().open;
    if (mod && e.shiftKey && !e.altKey && (key === 'o' || e.code === 'KeyO')) {
      e.preventDefault();
      if (helpOpen) dialog().close();
      if (click('#ac-new')) setTimeout(() => { const b = box(); if (b) b.focus(); }, 50);
      return;
    }
    if (mod && !e.shiftKey && !e.altKey && (key === 'k' || e.code === 'KeyK')) {
      e.preventDefault();
      if (helpOpen) dialog().close();
      if (window.acSidebar && window.acSidebar.narrow() && !window.acSidebar.isOpen()) window.acSidebar.open();
      const s = document.querySelector('#ac-search input, #ac-search textarea');
      if (s) { s.focus(); s.select(); }
      return;
    }
    if (mod && !e.altKey && (key === '/' || e.code === 'Slash')) {
      e.preventDefault();
      if (helpOpen) dialog().close(); else showHelp();
      return;
    }
    if (helpOpen) return;  // the dialog's own keys (Esc closes it)
    if (key === 'escape') {
      const stop = document.querySelector('#ac-input button.stop-button');
      if (stop && stop.offsetParent !== null) { e.preventDefault(); stop.click(); return; }
      if (window.acSidebar && window.acSidebar.narrow() && window.acSidebar.isOpen()) { window.acSidebar.close(); }
      return;
    }
    if (e.key === '?' && !mod && !e.altKey && !editable(e.target)) { e.preventDefault(); showHelp(); return; }
    if (e.key === 'ArrowUp' && !mod && !e.shiftKey && !e.altKey && e.target === box() && !box().value) {
      if (document.querySelector('#ac-input button.stop-button')) return;  // a reply is streaming
      if (editLast()) e.preventDefault();
    }
  }, true);
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#ac-shortcuts-open')) showHelp();
  });
  return [];
}
"""


def attach(demo) -> None:
    """Listen for the shortcuts on every page load of ``demo`` (a ``gr.Blocks``)."""
    demo.load(None, None, None, js=KEYS_JS)
