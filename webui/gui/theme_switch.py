"""Dark mode: the page follows the system's light/dark setting, or the choice made with the switch
in the sidebar, remembered in this browser (issue 18).

Gradio already follows ``prefers-color-scheme`` by putting the class ``dark`` on ``<body>`` (its
theme's variables switch with it); the colours of our own CSS have their dark counterparts in
``assets/dark.css``. The choice — ``system`` (the default), ``light`` or ``dark`` — is kept in
``localStorage`` under :data:`STORAGE_KEY` (per browser and address, never sent to the server),
and applied by :data:`HEAD_JS`, which runs in the page's ``<head>``: it keeps ``<body>``'s class in
step with the choice whatever sets it (Gradio's load, Gradio's own listener for a system change),
so a chosen dark page never flashes light on load.
"""
from __future__ import annotations

import html

from webui.i18n import t
from webui.gui.assets import script

STORAGE_KEY = "anycode-theme"
CHOICES = ("system", "light", "dark")

# Catalogue keys (webui/locales) of the switch's group label, buttons and tooltips.
GROUP_LABEL = "theme"
LABELS = {"system": "theme_system", "light": "theme_light", "dark": "theme_dark"}
TITLES = {"system": "theme_system_title", "light": "theme_light_title", "dark": "theme_dark_title"}

# Icons drawn with currentColor, so they have the text's colour (and contrast) in both themes.
_ICONS = {
    "system": "<svg viewBox='0 0 24 24' width='15' height='15' fill='none' stroke='currentColor' stroke-width='2' "
              "stroke-linecap='round' stroke-linejoin='round' aria-hidden='true'><rect x='3' y='4' width='18' "
              "height='12' rx='2'/><path d='M8 20h8M12 16v4'/></svg>",
    "light": "<svg viewBox='0 0 24 24' width='15' height='15' fill='none' stroke='currentColor' stroke-width='2' "
             "stroke-linecap='round' aria-hidden='true'><circle cx='12' cy='12' r='4'/><path d='M12 2v2M12 20v2"
             "M4.9 4.9l1.4 1.4M17.7 17.7l1.4 1.4M2 12h2M20 12h2M4.9 19.1l1.4-1.4M17.7 6.3l1.4-1.4'/></svg>",
    "dark": "<svg viewBox='0 0 24 24' width='15' height='15' fill='none' stroke='currentColor' stroke-width='2' "
            "stroke-linecap='round' stroke-linejoin='round' aria-hidden='true'><path d='M21 12.8A9 9 0 1 1 11.2 3"
            "a7 7 0 0 0 9.8 9.8z'/></svg>",
}

HEAD_JS = "<script>\n" + script("theme_head.js", KEY=STORAGE_KEY) + "</script>"

# Wires the switch's buttons (js_on_load of its gr.HTML: ``element`` is the component's root).
SWITCH_JS = script("theme_switch.js")


def switch_html() -> str:
    """The switch in the request's language: a group of three toggle buttons (System, Light,
    Dark), each an icon with its name as accessible name and a tooltip; the pressed one is the
    current choice (set by the page script)."""
    out = [f'<div class="ac-theme" role="group" aria-label="{html.escape(t(GROUP_LABEL))}">']
    for choice in CHOICES:
        out.append(f'<button type="button" class="ac-theme-btn" data-ac-theme="{choice}" aria-pressed="false" '
                   f'aria-label="{html.escape(t(LABELS[choice]))}" title="{html.escape(t(TITLES[choice]))}">'
                   f'{_ICONS[choice]}</button>')
    out.append("</div>")
    return "".join(out)
