"""Gradio's page builder, served with one quadratic scan replaced by a lookup (issue 32).

While Gradio's client builds a page — twice per load: it makes its tree of blocks, then makes it
again when the page mounts — it gives each block the names of the events attached to it
(``find_attached_events`` in its ``core`` script) by scanning every event of the page: blocks ×
events steps, per build. A bare Gradio app of 36 blocks and 3 events does 108; anycode's page,
134 blocks and ~126 events, ~17,000, and measured in the page (Chromium, eight loads each,
medians) that scan is ~45–54 ms of the ~420 ms before the sidebar's first row is drawn.

The same answer comes from a map from block id to event names, built once per build (the page's
list of events is one array per build). This module serves Gradio's ``core`` script with that
method replaced, through an ASGI middleware placed inside anycode's security middleware (so the
script is answered under the same Host, Origin and header rules as every other response).
Nothing else of Gradio changes; the replacement keeps the original's order (the page's events in
order, the first target of an event naming the block) and ``tests/webui/server/test_gradio_patch.py``
checks it against the original on the app's own page.

Text-matched, with a way out: when Gradio's script does not hold the method as written here
(another Gradio release), the script is served unchanged and the log says so once. The scan is
Gradio's to fix upstream; this goes when it is fixed there.
"""
from __future__ import annotations

import hashlib
import logging
import os
from email.utils import formatdate
from functools import lru_cache
from importlib import resources
from typing import Any

from webui.server.stack import wrap_stack

log = logging.getLogger(__name__)

# The method as Gradio 6.31's build ships it (minified): every event filtered per block.
ORIGINAL = ("find_attached_events(e,t){let n=t.filter(t=>t.targets.find(([t])=>t===e.id))"
            ".map(t=>{let n=t.targets.find(([t])=>t===e.id);return n?n[1]:null}).filter(Boolean);"
            "return e.props.shared_props.attached_events=n,e}")
# The same answer through a map from block id to event names, made once per array of events
# (keyed by the array, and its length in case it grows) and kept while the array lives.
REPLACEMENT = ("find_attached_events(e,t){let c=(globalThis.__anycodeAttached??=new WeakMap),"
               "m=c.get(t);if(!m||m.size_of!==t.length){m=new Map;m.size_of=t.length;"
               "for(let d of t){let seen=new Set;for(let[i,v]of d.targets){if(seen.has(i))continue;"
               "seen.add(i);let l=m.get(i);l||m.set(i,l=[]);l.push(v)}}c.set(t,m)}"
               "return e.props.shared_props.attached_events=(m.get(e.id)||[]).filter(Boolean),e}")

ASSETS_PREFIX = "/assets/"  # where Gradio serves its built scripts (gradio.routes: build_resource)


@lru_cache(maxsize=1)
def patched_asset() -> tuple[str, bytes, str, str] | None:
    """``(file name, patched script, ETag, Last-Modified)`` of Gradio's ``core`` script (the date
    is the file's, as Gradio's own answer gives, so the browser caches it alike), or None when no script
    of this Gradio holds :data:`ORIGINAL` exactly once (logged; the page then gets Gradio's own).
    Read once per process."""
    folder = resources.files("gradio").joinpath("templates/frontend/assets")
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.startswith("core-") and p.name.endswith(".js"))
    except OSError as err:
        log.info("Gradio's page scripts served as they are (no assets folder: %s)", err)
        return None
    for name in names:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        if text.count(ORIGINAL) == 1:
            body = text.replace(ORIGINAL, REPLACEMENT).encode("utf-8")
            try:
                modified = formatdate(os.stat(str(folder.joinpath(name))).st_mtime, usegmt=True)
            except OSError:
                modified = formatdate(usegmt=True)
            return name, body, '"anycode-' + hashlib.sha256(body).hexdigest()[:32] + '"', modified
    log.info("Gradio's page scripts served as they are: no core script holds the scan this patch "
             "replaces (another Gradio release, %s)", ", ".join(names) or "no core script")
    return None


class PatchedAssets:
    """ASGI middleware answering ``GET``/``HEAD /assets/<core script>`` with :func:`patched_asset`
    (304 when the browser's ``If-None-Match`` already names it) and passing every other request,
    and every request when there is no patch, to ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        found = patched_asset()
        self.path = ASSETS_PREFIX + found[0] if found else None
        self.body, self.etag, self.modified = found[1:] if found else (b"", "", "")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (self.path is None or scope.get("type") != "http" or scope.get("path") != self.path
                or scope.get("method") not in ("GET", "HEAD")):
            await self.app(scope, receive, send)
            return
        sent_tag = dict(scope.get("headers") or []).get(b"if-none-match", b"").decode("latin-1")
        headers = [(b"content-type", b"text/javascript; charset=utf-8"), (b"etag", self.etag.encode()),
                   (b"last-modified", self.modified.encode())]
        if sent_tag == self.etag:
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers.append((b"content-length", str(len(self.body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else self.body})


def install(launch_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``launch_kwargs`` (for ``Blocks.launch``) with an ``app_kwargs`` lifespan that puts
    :class:`PatchedAssets` around the app's middleware stack before uvicorn accepts a connection
    (:func:`webui.server.stack.wrap_stack`). Give it the keyword arguments
    :func:`webui.server.security.install` returned: the security guard, installed first, is then
    put around this layer, so the patched script answers under the security rules too."""
    return wrap_stack(launch_kwargs, PatchedAssets, PatchedAssets)
