"""The top bar on one row at any width (issue 31, item 5): on a bar too narrow for the title,
the model, the context meter and the actions, the actions (Compact, Archive, the downloads,
Delete) fold into a "⋯" menu, then the meter too; the title keeps the rest and ends in an
ellipsis, the whole of it in its ``title`` attribute (shown on hover).

The fold is measured, not a fixed breakpoint: a row that would push the title under
:data:`TITLE_MIN_PX` folds (so a longer language or a wide sidebar folds earlier). The "⋯" is a
real ``<button>`` (``aria-expanded``, ``aria-controls="ac-actions"``), a disclosure: Enter or a
click opens it with the focus on its first item, Esc or a click elsewhere closes it (the focus
back on "⋯"), picking an item closes it. The menu's items are the bar's own Gradio buttons, moved
by CSS only (``assets/layout.css``), so their events are the same at every width. This module is
the markup and the page script (``assets/js/topbar_menu.js``), run once on load.
"""
from __future__ import annotations

from typing import Any

import gradio as gr

from webui.gui.assets import on_page_load, script
from webui.gui.i18n_ui import tr

# Below this the title would show a word or two: fold the actions (then the meter) into the menu.
TITLE_MIN_PX = 110

TOPBAR_MENU_JS = script("topbar_menu.js", TITLE_MIN=TITLE_MIN_PX)


def build_more_button() -> gr.HTML:
    """The "⋯" button (hidden while the bar is wide enough); call inside the top bar's Row. Its
    accessible name is the translated "More actions" (a visually hidden span; the page script
    copies it into ``title``)."""
    return gr.HTML(
        '<button id="ac-more" type="button" aria-haspopup="true" aria-expanded="false" '
        'aria-controls="ac-actions"><span aria-hidden="true">⋯</span>'
        '<span class="ac-sr">' + tr("more_actions") + "</span></button>",
        elem_id="ac-more-box", min_width=0, scale=0)


def attach(demo: Any) -> None:
    """Run the fold-and-menu script on every page load of ``demo`` (a ``gr.Blocks``)."""
    on_page_load(demo, TOPBAR_MENU_JS)
