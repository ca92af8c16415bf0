"""Files of the ``assets`` package the page is made of: its CSS, icons and JavaScript.

The page's scripts live in ``assets/js/*.js`` (read once, when a module of :mod:`webui.gui` is
imported), like its CSS in ``assets/*.css``: JavaScript is edited, linted and read as JavaScript,
not as Python strings. A script that needs a value of the Python side (a breakpoint, a cookie
name) names it ``__NAME__``; :func:`script` puts the value in.
"""
from __future__ import annotations

import weakref
from functools import lru_cache
from importlib import resources
from typing import Any

# Blocks → the scripts to run once its page has loaded, in the order they were added
_page_scripts: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def asset_text(name: str) -> str:
    """Text of a file of the ``assets`` package (found through the package, not the cwd)."""
    return resources.files("assets").joinpath(name).read_text(encoding="utf-8")


def asset_path(name: str) -> str:
    """A filesystem path of an ``assets`` file (Gradio's favicon and button icons want paths)."""
    return str(resources.files("assets").joinpath(name))


@lru_cache(maxsize=None)
def _script_text(name: str) -> str:
    return asset_text(f"js/{name}")


def script(name: str, **values: object) -> str:
    """The JavaScript of ``assets/js/<name>`` with each ``__KEY__`` replaced by ``str(values[key])``.

    Raises ``KeyError`` when the file names a placeholder not given, or a value given is not used
    (a renamed placeholder would otherwise leave the page with ``__KEY__`` in its code)."""
    text = _script_text(name)
    for key, value in values.items():
        token = f"__{key}__"
        if token not in text:
            raise KeyError(f"assets/js/{name} has no placeholder {token}")
        text = text.replace(token, str(value))
    import re

    left = re.findall(r"__[A-Z][A-Z0-9_]*__", text)
    if left:
        raise KeyError(f"assets/js/{name}: no value for {sorted(set(left))}")
    return text


def signal_answered(dependency: Any, event: str) -> None:
    """Fire the window event ``event`` in the page once the answer to ``dependency`` (what a Gradio
    event listener returns) is drawn, whether it succeeded or failed: a list's script that holds
    the clicks made meanwhile sends the next one then (``session_list.js``, ``search_results.js``,
    ``memory_panel.js``). Gradio runs ``then`` after a success only, hence ``failure`` too."""
    js = f"() => {{ window.dispatchEvent(new Event({event!r})); }}"
    for after in (dependency.then, dependency.failure):
        after(None, None, None, js=js)


def on_page_load(demo: Any, js: str) -> None:
    """Run ``js`` (an arrow function of no arguments, as :func:`script` gives) in the page of
    ``demo`` (a ``gr.Blocks``) once it has loaded. Every script added this way runs from one
    Gradio load event, made by :func:`wire_page_scripts` once the page is built: each event is
    work for the page's load in Gradio's client — every component of the page looks through every
    event (issue 32: eight load events of one script each cost ~5 ms of the load). In order of
    addition; one that throws is logged in the browser's console and the others still run."""
    _page_scripts.setdefault(demo, []).append(js)


def page_scripts_js(scripts: list[str]) -> str:
    """One arrow function running each of ``scripts`` (arrow functions) in turn, each in its own
    ``try``: a failing script is logged in the console and leaves the next ones to run."""
    calls = "".join(f"  try {{ ({js.strip()})(); }} catch (err) {{ console.error(err); }}\n" for js in scripts)
    return "() => {\n" + calls + "  return [];\n}"


def wire_page_scripts(demo: Any) -> None:
    """The one load event running what :func:`on_page_load` added for ``demo``; call it once,
    inside ``demo``'s Blocks context, after the last script was added (nothing when none was)."""
    scripts = _page_scripts.pop(demo, [])
    if scripts:
        demo.load(None, None, None, js=page_scripts_js(scripts))
