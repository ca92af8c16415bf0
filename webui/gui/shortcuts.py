"""Keyboard shortcuts of the chat page and their help (issue 18), as in ChatGPT:

=====================  ===============================================================
Ctrl/⌘ + Shift + O     New chat
Ctrl/⌘ + K             Search chats (focuses the sidebar's search box, opening a narrow
                       window's drawer)
Esc                    Stop the reply while one streams (else: leave an open edit, or close
                       the drawer)
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
from webui.gui.assets import on_page_load, script

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
KEYS_JS = script("shortcuts.js")


def attach(demo) -> None:
    """Listen for the shortcuts on every page load of ``demo`` (a ``gr.Blocks``)."""
    on_page_load(demo, KEYS_JS)
