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

**The shell** (issue 32, round 22). Even so, the list is drawn only once Gradio has mounted the
page: 250–300 ms of script after the HTML arrived here, against ~140 ms for a bare Gradio app of
36 blocks. The page's HTML therefore also carries a *shell*: the sidebar as it will look (brand,
New chat, the search box, the same list), plain HTML drawn with the page's first paint, styled by
the same rules as the real one (``assets/style.css``, ``dark.css``, ``organise.css``, nested under
``#ac-shell``), in the dark theme when the page will be dark, and hidden on narrow windows (where
the sidebar starts closed). ``assets/js/shell.js`` takes it away in the first frame in which
Gradio's own list is drawn exactly where the shell's is, so the page never shows two lists, none,
or one that moves; a row or New chat clicked on the shell is clicked again on the real page once
its load has answered, and text typed into its search box is carried over and searched for then
(nothing clicked or typed is lost).
Gradio's template has no hook in its ``<body>``, so the template's source is extended as it is
loaded (text-matched, like the list: another Gradio without the mark gets no shell and a log line).
"""
from __future__ import annotations

import base64
import html as html_lib
import logging
import weakref
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import jinja2
from markupsafe import Markup

from webui.gui.assets import asset_text, script

log = logging.getLogger(__name__)

LIST_ELEM_ID = "ac-list"  # the sidebar list component (webui.gui.app)
SHELL_ID = "ac-shell"
TEMPLATE = "frontend/index.html"  # Gradio's page template (share.html is never served here)
SHELL_MARK = "<gradio-app"  # the shell goes just before Gradio's mount point in <body>
# The rules of the sidebar's look, in the order the page has them (webui.gui.app.CSS_FILES).
SHELL_CSS_FILES = ("style.css", "dark.css", "organise.css")
# Gradio's Base theme's font stack (the shell is drawn before the theme's CSS is there).
THEME_FONT = 'ui-sans-serif, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'


@dataclass(frozen=True)
class ShellLabels:
    """What the shell writes besides the list, in the page's language: the New chat button's
    label and the search box's placeholder; ``width`` is the sidebar's width in CSS pixels and
    ``narrow_px`` the window width at and below which the sidebar starts closed (no shell)."""

    new_chat: str
    search: str
    width: int
    narrow_px: int
    theme_key: str  # the localStorage key of the theme switch (webui.gui.theme_switch)


# Blocks → the function giving its first list for a request (str, or None: the load draws it)
_pages: weakref.WeakKeyDictionary[Any, Callable[[Any], str | None]] = weakref.WeakKeyDictionary()
# Blocks → the shell's labels for a request (no entry: no shell)
_shells: weakref.WeakKeyDictionary[Any, Callable[[Any], ShellLabels]] = weakref.WeakKeyDictionary()
_CACHED = "_anycode_first_list"  # the list computed for a request, kept on its scope's state


def install(demo: Any, list_for: Callable[[Any], str | None],
            shell_for: Callable[[Any], ShellLabels] | None = None) -> bool:
    """Make the HTML page of ``demo`` (a ``gr.Blocks``) carry its sidebar list: ``list_for`` gets
    the Starlette request of the page and returns the list's HTML, or None to leave it to the
    load event. It must be quick (it holds the page's HTML) and is never trusted not to fail:
    an error is logged and the page goes without. With ``shell_for`` (the request → its
    :class:`ShellLabels`), the page's body also carries the shell drawn from the same list (see
    the module's docstring). Returns False when Gradio's template filter was not found (nothing
    changed)."""
    try:
        from gradio import routes

        env = routes.templates.env
        original = env.filters["toorjson"]
    except (ImportError, AttributeError, KeyError) as err:
        log.info("the sidebar comes with the page's load event (no template filter to extend: %s)", err)
        return False
    _pages[demo] = list_for
    if shell_for is not None:
        _shells[demo] = shell_for
        _extend_template(env)
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
    target = _list_component(config)
    if target is None or request is None:
        return  # not an anycode page, or a login page (no components)
    html = _first_list(request)
    if isinstance(html, str):
        target["props"]["value"] = html


def _list_component(config: dict[str, Any]) -> dict[str, Any] | None:
    """The sidebar list's entry in a page's config, None on a page without it (a login page)."""
    return next((c for c in config.get("components") or ()
                 if isinstance(c, dict) and (c.get("props") or {}).get("elem_id") == LIST_ELEM_ID), None)


def _first_list(request: Any) -> str | None:
    """The first list of ``request``'s app (None: none, or it failed and the load draws it),
    computed once per request: the config and the shell both carry it."""
    scope = getattr(request, "scope", None)
    state = scope.setdefault("state", {}) if isinstance(scope, dict) else {}
    if _CACHED in state:
        return state[_CACHED]
    try:
        list_for = _pages.get(request.app.get_blocks())
        html = list_for(request) if list_for is not None else None
    except Exception as err:  # noqa: BLE001 -- the page is served without it: the load draws it
        log.warning("the page goes without its first list: %s", err)
        html = None
    state[_CACHED] = html if isinstance(html, str) else None
    return state[_CACHED]


class _ShellLoader(jinja2.BaseLoader):
    """A Jinja loader handing out Gradio's templates as they are, except the page's: there the
    shell's call goes just before Gradio's mount point (:data:`SHELL_MARK`)."""

    anycode_shell = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def get_source(self, environment: Any, template: str) -> tuple[str, str | None, Any]:
        source, filename, uptodate = self.inner.get_source(environment, template)
        if template == TEMPLATE:
            if SHELL_MARK in source:
                source = source.replace(SHELL_MARK, "{{ anycode_shell() }}" + SHELL_MARK, 1)
            else:
                log.info("the page has no shell: %r is not in Gradio's %s", SHELL_MARK, TEMPLATE)
        return source, filename, uptodate

    def list_templates(self) -> list[str]:
        return self.inner.list_templates()


def _extend_template(env: Any) -> None:
    """Put the shell's call into Gradio's page template (once per process)."""
    if getattr(env.loader, "anycode_shell", False):
        return
    env.loader = _ShellLoader(env.loader)
    env.globals["anycode_shell"] = jinja2.pass_context(_shell)
    if env.cache is not None:
        env.cache.clear()


def _shell(context: Any) -> Markup:
    """The shell's HTML for the page being rendered (Markup; empty for a page without a list:
    a login page, another app's page, a list that failed)."""
    request, config = context.get("request"), context.get("config")
    if request is None or not isinstance(config, dict) or _list_component(config) is None:
        return Markup("")
    html = _first_list(request)
    try:
        labels_for = _shells.get(request.app.get_blocks())
        labels = labels_for(request) if labels_for is not None and html is not None else None
    except Exception as err:  # noqa: BLE001 -- the page is served without it, as before the shell
        log.warning("the page goes without its shell: %s", err)
        labels = None
    return Markup(shell_html(html, labels)) if labels is not None else Markup("")


def shell_html(list_html: str, labels: ShellLabels) -> str:
    """The shell: a fixed column of ``labels.width`` px at the page's left holding the brand, a
    New chat button, the search box's look and ``list_html`` (the sidebar list's own HTML), with
    its style and ``assets/js/shell.js``. Text in ``labels`` is escaped here; ``list_html`` is
    trusted as the list component's value is (it escapes its titles)."""
    esc = html_lib.escape
    icon = "data:image/svg+xml;base64," + base64.b64encode(asset_text("new-chat.svg").encode()).decode()
    return (
        f'<div id="{SHELL_ID}"><style>{_shell_css(labels.width, labels.narrow_px)}</style>'
        f'<div class="ac-shell-in"><div class="ac-shell-block"><div class="ac-brand">{asset_text("icon.svg")}'
        '<span>anycode</span></div></div>'
        f'<div class="ac-shell-new" data-shell-new="1"><img src="{icon}" alt="">{esc(labels.new_chat)}</div>'
        f'<input class="ac-shell-search" type="search" placeholder="{esc(labels.search)}" '
        f'aria-label="{esc(labels.search)}" autocomplete="off">'
        f'<div class="ac-shell-block ac-shell-list">{list_html}</div></div>'
        f'<script>{script("shell.js", KEY=labels.theme_key, LIST=LIST_ELEM_ID)}</script></div>')


@lru_cache(maxsize=4)
def _shell_css(width: int, narrow_px: int) -> str:
    """The shell's style: its own frame (``assets/shell.css``, sizes filled in) and the page's
    rules for what it shows (:func:`shell_rules`) nested under ``#ac-shell`` (CSS nesting: they
    match nothing else)."""
    own = asset_text("shell.css").replace("__WIDTH__", str(width)).replace("__NARROW__", str(narrow_px))
    own = own.replace("__FONT__", THEME_FONT)
    return own + "#" + SHELL_ID + "{" + "".join(shell_rules(asset_text(name)) for name in SHELL_CSS_FILES) + "}"


# The classes of what the shell shows: the brand and the list's HTML (webui/render/rows.py).
SHELL_CLASSES = frozenset({"ac-brand", "ac-sessions", "ac-group", "ac-group-label", "ac-session", "ac-session-title",
                           "ac-session-meta", "ac-when", "ac-badge", "ac-remote-badge", "ac-pin", "ac-tag",
                           "ac-row-menu", "ac-more", "ac-empty", "ac-list-note", "active", "pinned", "ac-remote"})


def shell_rules(css: str) -> str:
    """The top-level rules of ``css`` that style the shell's content: each selector list naming
    only :data:`SHELL_CLASSES` (and ``.dark``), and the bare ``.dark`` rule (the dark theme's
    colour variables): 3.5 KB instead of the three files' 32 KB. With all of them nested under
    the shell (and a MutationObserver where assets/js/shell.js now looks once per frame),
    Gradio's mount beside it took 85 ms (14%) longer in the page (16 loads each); with these,
    12 ms (3%, the runs' noise). At-rules (``@media``) are left out: the shell is drawn for a
    moment, on a wide window. Parsed by tinycss2."""
    import tinycss2

    kept = []
    for rule in tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True):
        if rule.type != "qualified-rule":
            continue
        prelude = tinycss2.serialize(rule.prelude).strip()
        names = {tok.value for tok in rule.prelude if tok.type == "ident"}
        classes = {name for name in names if _after_dot(rule.prelude, name)}
        if prelude == ".dark" or (classes - {"dark"} and classes - {"dark"} <= SHELL_CLASSES
                                  and not any(tok.type == "hash" for tok in rule.prelude)):
            kept.append(prelude + "{" + tinycss2.serialize(rule.content) + "}")
    return "".join(kept)


def _after_dot(tokens: list[Any], name: str) -> bool:
    """Whether the identifier ``name`` appears in ``tokens`` right after a ``.`` (a class)."""
    return any(a.type == "literal" and a.value == "." and b.type == "ident" and b.value == name
               for a, b in zip(tokens, tokens[1:]))
