"""The web UI's languages on the Gradio side: ``gr.I18n`` built from the catalogue
(:mod:`webui.i18n`), the page script that tells the server the browser's languages and time zone,
the language setting, and the relabelling of static labels when a setting overrides the browser.

How a language reaches the page:
- Static component labels are ``gr.I18n`` keys (:func:`tr`); Gradio's frontend translates them
  in the browser's language (``navigator.language``: exact code, else its primary subtag).
- Everything the server renders (the session list, notices, toasts, buttons changed by handlers)
  uses :func:`webui.i18n.t` with the request's language (:func:`webui.i18n.request_lang`).
- When those differ (the page's language setting, or ``ANYCODE_LANG``), a load event sets the
  static labels to the server's translation (:func:`attach`).
"""
from __future__ import annotations

import json
import re
from typing import Any

import gradio as gr
from gradio.i18n import I18nData

from webui import i18n
from webui.gui.assets import script

_I18N: gr.I18n | None = None  # built once by gradio_i18n()
_MARKER = re.compile(r'__i18n__(\{[^{}]*\})')
# Props of a component that may hold a translated static label.
LABEL_PROPS = ("value", "label", "placeholder", "info")

# Tell the server the browser's languages and time zone with every request, as cookies (no
# per-tab state). Run by the page's first load event before its request (COOKIE_JS: on a first
# visit Gradio sends its load events before it adds ``head``), and by ``head`` on every page.
_SET_COOKIES = "\n" + script("set_cookies.js", TZ=i18n.TZ_COOKIE, NAV=i18n.NAV_COOKIE)
HEAD = "<script>(function () {" + _SET_COOKIES + "})();</script>"
COOKIE_JS = "() => {" + _SET_COOKIES + "  return [];\n}"

# The language setting: kept in a cookie (so every later request carries it), then the page
# reloads in that language.
SET_LANG_JS = script("set_language.js", LANG_COOKIE=i18n.LANG_COOKIE)


def gradio_i18n() -> gr.I18n:
    """A ``gr.I18n`` with every plain string of every catalogue (plural entries are the
    server's). Each language is also registered under its primary subtag (``zh`` for ``zh-CN``)
    when no catalogue has that code, so ``zh-TW`` or ``zh-Hans`` browsers fall back to it the
    way svelte-i18n does (``zh-TW`` → ``zh`` → ``en``)."""
    global _I18N
    if _I18N is None:
        translations: dict[str, dict[str, str]] = {}
        for code, entries in i18n.catalogues().items():
            plain = {k: v for k, v in entries.items() if isinstance(v, str)}
            translations[code] = plain
        for code in list(translations):
            primary = code.split("-")[0]
            if primary not in translations:
                translations[primary] = translations[code]
        _I18N = gr.I18n(**translations)
    return _I18N


def tr(key: str) -> I18nData:
    """A static label for a component constructor: translated by Gradio's frontend."""
    if key not in i18n.catalogues()[i18n.DEFAULT_LANG]:
        raise KeyError(f"unknown UI string {key!r}")
    return gradio_i18n()(key)


def server_text(value: Any, language: str) -> Any:
    """``value`` with its i18n markers replaced by the server's translation in ``language``
    (a value without one unchanged)."""
    if isinstance(value, I18nData):
        return i18n.t(value.key, language)
    if isinstance(value, str) and "__i18n__" in value:
        return _MARKER.sub(lambda m: i18n.t(json.loads(m.group(1))["key"], language), value)
    return value


def labelled(demo: gr.Blocks, skip: tuple = ()) -> list[tuple[Any, dict[str, Any]]]:
    """``[(component, {prop: marked value})]`` of ``demo``'s components built with :func:`tr`
    labels, leaving out ``skip`` (components whose labels the handlers set themselves)."""
    skipped = {id(c) for c in skip}
    found = []
    for block in demo.blocks.values():
        if id(block) in skipped or not isinstance(block, gr.components.Component):
            continue
        props = {}
        for prop in LABEL_PROPS:
            value = getattr(block, prop, None)
            if isinstance(value, I18nData) or (isinstance(value, str) and "__i18n__" in value):
                props[prop] = value
        if props:
            found.append((block, props))
    return found


def attach(demo: gr.Blocks, skip: tuple = (), progress_on: Any = None) -> None:
    """On page load, when the request's language (setting, ``ANYCODE_LANG``) is not the one
    Gradio's frontend picked from the browser, set every static label in the request's
    language. Call at the end of ``build_app`` inside the Blocks.

    ``progress_on``: the one component the event's (hidden) progress is kept on, instead of
    its ~45 outputs (issue 32). Gradio's page keeps a loading status for every component that
    was ever an event's progress target, and on every status change of any event (several per
    event: the once-a-second live check, an open, a send) it pushes all of them again, copying
    each component's data as it does: these labels, relabelled at most once per page, were
    half of those copies for the page's whole life."""
    parts = labelled(demo, skip)
    if not parts:
        return
    outputs = [c for c, _props in parts]

    def relabel(request: gr.Request):
        wanted = i18n.request_lang(request)
        if wanted == i18n.browser_lang(request):
            return [gr.skip()] * len(parts)
        return [type(c)(**{p: server_text(v, wanted) for p, v in props.items()}) for c, props in parts]

    demo.load(relabel, None, outputs, api_visibility="private", show_progress="hidden",
              show_progress_on=[progress_on] if progress_on is not None else None)


# The language the page was built in (no request: ``ANYCODE_LANG`` or English): what needs no
# update on load when a request is in it.
_BUILT_LANG: list[str] = []


def built_lang() -> str:
    """The language of the labels the server put in the page's config (see :func:`add_language_setting`)."""
    return _BUILT_LANG[0] if _BUILT_LANG else i18n.request_lang(None)


def add_language_setting(demo: gr.Blocks) -> gr.Dropdown:
    """The language setting (sidebar foot): "Automatic (browser)" or a catalogue language. A
    choice is kept in a cookie and reloads the page in that language. Call inside the Blocks;
    the page's load event sets it with :func:`language_setting_update` (issue 32: one load
    event for the page, not one per feature)."""
    _BUILT_LANG[:] = [i18n.request_lang(None)]
    setting = gr.Dropdown(label=tr("language"), choices=_choices(), value="auto", elem_id="ac-lang",
                          interactive=True)
    setting.input(None, setting, None, js=SET_LANG_JS)
    return setting


def language_setting_update(request: gr.Request) -> Any:
    """The language setting for ``request``: its choices in the request's language and the
    setting chosen; ``gr.skip()`` when the page's config already shows exactly that."""
    chosen = i18n.setting_lang(request)
    if chosen is None and i18n.request_lang(request) == built_lang():
        return gr.skip()
    return gr.Dropdown(choices=_choices(), value=chosen or "auto")


def _choices() -> list[tuple[str, str]]:
    return [(i18n.t("language_auto"), "auto")] + [(i18n.language_name(c), c) for c in i18n.languages()]
