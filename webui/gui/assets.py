"""Files of the ``assets`` package the page is made of: its CSS, icons and JavaScript.

The page's scripts live in ``assets/js/*.js`` (read once, when a module of :mod:`webui.gui` is
imported), like its CSS in ``assets/*.css``: JavaScript is edited, linted and read as JavaScript,
not as Python strings. A script that needs a value of the Python side (a breakpoint, a cookie
name) names it ``__NAME__``; :func:`script` puts the value in.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


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
