"""The sidebar in the page's first paint (issue 32).

A bare Gradio page shows what it was built with as soon as its components are mounted; anycode's
sidebar list came only with the answer of the page's load event, a queued round trip later
(~100 ms here, and the page's main thread busy with the load's other outputs meanwhile): page load
→ sidebar took 2.7–3.0× the bare app's. So the page's HTML now carries the list itself: Gradio
embeds its config in the page (``window.gradio_config``, rendered by its Jinja template through the
``toorjson`` filter), and that filter is wrapped here to fill the list component's value for the
request being answered — the project and open chat of its ``?session=``, in its language and time
zone (cookies). The load's answer then draws the same list again, and a list changed in between
is corrected by it, as before.

Gradio has no per-request hook for its config, so this wraps one of its internals, with a way
out: when the filter is not where it was (another Gradio version), :func:`install` says so in
the log and the list comes with the load, as before. The config is a per-request copy
(``get_page_config``), so the app's own config is never touched.
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable

log = logging.getLogger(__name__)

LIST_ELEM_ID = "ac-list"  # the sidebar list component (webui.gui.app)

# Blocks → the function giving its first list for a request (str, or None: the load draws it)
_pages: weakref.WeakKeyDictionary[Any, Callable[[Any], str | None]] = weakref.WeakKeyDictionary()


def install(demo: Any, list_for: Callable[[Any], str | None]) -> bool:
    """Make the HTML page of ``demo`` (a ``gr.Blocks``) carry its sidebar list: ``list_for`` gets
    the Starlette request of the page and returns the list's HTML, or None to leave it to the
    load event. It must be quick (it holds the page's HTML) and is never trusted not to fail:
    an error is logged and the page goes without. Returns False when Gradio's template filter
    was not found (nothing changed)."""
    try:
        import jinja2
        from gradio import routes

        env = routes.templates.env
        original = env.filters["toorjson"]
    except (ImportError, AttributeError, KeyError) as err:
        log.info("the sidebar comes with the page's load event (no template filter to extend: %s)", err)
        return False
    _pages[demo] = list_for
    if getattr(original, "anycode_first_paint", False):
        return True  # another app of this process installed it: one wrapper serves every page

    @jinja2.pass_context
    def toorjson(context: Any, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("components"), list):
            _fill(value, context.get("request"))
        return original(value)

    toorjson.anycode_first_paint = True  # type: ignore[attr-defined]
    env.filters["toorjson"] = toorjson
    # Jinja binds a filter's calling convention when it compiles a template: one compiled
    # before this (another app of the process served a page) must be compiled again.
    if env.cache is not None:
        env.cache.clear()
    return True


def _fill(config: dict[str, Any], request: Any) -> None:
    """Put the first list of ``request``'s app into ``config`` (the page's copy), if it has one."""
    target = next((c for c in config["components"]
                   if isinstance(c, dict) and (c.get("props") or {}).get("elem_id") == LIST_ELEM_ID), None)
    if target is None or request is None:
        return  # not an anycode page, or a login page (no components)
    try:
        list_for = _pages.get(request.app.get_blocks())
        html = list_for(request) if list_for is not None else None
    except Exception as err:  # noqa: BLE001 -- the page is served without it: the load draws it
        log.warning("the page goes without its first list: %s", err)
        return
    if isinstance(html, str):
        target["props"]["value"] = html
