"""Gradio's page builder, served with two of its load-time costs taken out (issue 32).

Measured in the page (Chromium, CPU profiles and alternating loads, medians), pieces of Gradio's
own client grow with the page's blocks and events, and anycode's page has many more than a bare
app (134 blocks and ~125 events against 36 and 3):

- **the attached-events scan** (``find_attached_events`` in the ``core`` script): while it builds
  the page's tree of blocks it gives each block the names of its events by scanning *every* event
  of the page — blocks × events steps, per build (twice per load). ~45–54 ms of the ~420 ms before
  the sidebar's first row. Served as a map from block id to event names, built once per array of
  events.
- **event arguments looked up for events that have none** (``set_event_args``, ``Blocks``): for
  every target of every event, at each build and at each dispatch, the target's state is found by
  walking the whole tree — then dropped when the event has no arguments (anycode's events have
  none). Served answering "nothing to restore" before the walk for those. ~14 ms.

Each is one text replacement in one script (:data:`PATCHES`): the same answers, in the same
order; ``tests/webui/server/test_gradio_patch.py`` runs Gradio's original and the replacement side
by side in Chromium. The scripts are served through an ASGI middleware placed inside anycode's
security middleware (same Host, Origin and header rules as every response).

Not patched, though measured (~20 ms): Gradio builds the tree twice per load (again in an effect
as the page mounts). Skipping that second build is *not* the same page: it also hands each block
its props once more when it first mounts, and a block first shown later (a dropdown in a panel
opened after the load) then sent a label where its value belongs — adding a memory failed with
"not in the list of choices" (the full browser suite caught it).

Text-matched, with a way out: a replacement whose original text is not found exactly once in its
script (another Gradio release) is left out and the log says so; a script none of whose
replacements match is served as Gradio ships it. These are Gradio's to fix upstream; each goes
when it is fixed there.
"""
from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from email.utils import formatdate
from functools import lru_cache
from importlib import resources
from typing import Any

from webui.server.stack import wrap_stack

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Patch:
    """One text replacement in one of Gradio's built scripts: ``script`` is the start of the
    script's file name (``"core-"``: ``core-<hash>.js``), ``original`` the minified text as
    Gradio 6.31's build ships it (matched exactly, once), ``replacement`` what is served instead."""

    name: str
    script: str
    original: str
    replacement: str


ATTACHED_EVENTS = Patch(
    "attached-events lookup", "core-",
    # every event filtered per block
    "find_attached_events(e,t){let n=t.filter(t=>t.targets.find(([t])=>t===e.id))"
    ".map(t=>{let n=t.targets.find(([t])=>t===e.id);return n?n[1]:null}).filter(Boolean);"
    "return e.props.shared_props.attached_events=n,e}",
    # the same answer through a map from block id to event names, made once per array of events
    # (keyed by the array, and its length in case it grows) and kept while the array lives
    "find_attached_events(e,t){let c=(globalThis.__anycodeAttached??=new WeakMap),"
    "m=c.get(t);if(!m||m.size_of!==t.length){m=new Map;m.size_of=t.length;"
    "for(let d of t){let seen=new Set;for(let[i,v]of d.targets){if(seen.has(i))continue;"
    "seen.add(i);let l=m.get(i);l||m.set(i,l=[]);l.push(v)}}c.set(t,m)}"
    "return e.props.shared_props.attached_events=(m.get(e.id)||[]).filter(Boolean),e}")

EVENT_ARGS = Patch(
    "no lookup for no event arguments", "Blocks-",
    # the target's state (a walk of the whole tree) is fetched before the arguments are looked at
    "async set_event_args(e,t){let n={},r=await this.get_state_cb?.(e);",
    # an event without arguments gets the original's answer for it (nothing to restore) at once
    "async set_event_args(e,t){if(Object.keys(t).length===0)return()=>{};"
    "let n={},r=await this.get_state_cb?.(e);")

PATCHES = (ATTACHED_EVENTS, EVENT_ARGS)

ASSETS_PREFIX = "/assets/"  # where Gradio serves its built scripts (gradio.routes: build_resource)


@dataclass(frozen=True)
class Served:
    """One patched script as the middleware answers it: its body, the ETag (from the body) and
    Last-Modified (the file's date, as Gradio's own answer gives, so the browser caches it alike),
    and the names of the patches it holds."""

    body: bytes
    etag: str
    modified: str
    patches: tuple[str, ...]


def _assets_folder() -> Any:
    return resources.files("gradio").joinpath("templates/frontend/assets")


@lru_cache(maxsize=1)
def patched_assets() -> dict[str, Served]:
    """``{file name: Served}`` for each of Gradio's scripts that one of :data:`PATCHES` applies to
    (empty when none does: the page then gets Gradio's own). A patch applies when its original
    text is found exactly once in exactly one script whose name starts with its ``script``; one
    that does not is left out and logged. Read once per process."""
    folder = _assets_folder()
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".js"))
    except OSError as err:
        log.info("Gradio's page scripts served as they are (no assets folder: %s)", err)
        return {}
    texts: dict[str, str] = {}
    applied: dict[str, list[str]] = {}
    for patch in PATCHES:
        hits = []
        for name in (n for n in names if n.startswith(patch.script)):
            if name not in texts:
                texts[name] = folder.joinpath(name).read_text(encoding="utf-8")
            if texts[name].count(patch.original) == 1:
                hits.append(name)
        if len(hits) != 1:
            log.info("Gradio's page scripts served without the %s patch: its original text is not "
                     "found exactly once in one %s* script (another Gradio release)", patch.name, patch.script)
            continue
        texts[hits[0]] = texts[hits[0]].replace(patch.original, patch.replacement)
        applied.setdefault(hits[0], []).append(patch.name)
    served = {}
    for name, patch_names in applied.items():
        body = texts[name].encode("utf-8")
        try:
            modified = formatdate(os.stat(str(folder.joinpath(name))).st_mtime, usegmt=True)
        except OSError:
            modified = formatdate(usegmt=True)
        served[name] = Served(body, '"anycode-' + hashlib.sha256(body).hexdigest()[:32] + '"', modified,
                              tuple(patch_names))
    return served


class PatchedAssets:
    """ASGI middleware answering ``GET``/``HEAD /assets/<script>`` for each script of
    :func:`patched_assets` (304 when the browser's ``If-None-Match`` already names it) and passing
    every other request, and every request when nothing is patched, to ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.served = {ASSETS_PREFIX + name: found for name, found in patched_assets().items()}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        found = self.served.get(scope.get("path")) if scope.get("type") == "http" else None
        if found is None or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        sent_tag = dict(scope.get("headers") or []).get(b"if-none-match", b"").decode("latin-1")
        headers = [(b"content-type", b"text/javascript; charset=utf-8"), (b"etag", found.etag.encode()),
                   (b"last-modified", found.modified.encode())]
        if sent_tag == found.etag:
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers.append((b"content-length", str(len(found.body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else found.body})


def install(launch_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``launch_kwargs`` (for ``Blocks.launch``) with an ``app_kwargs`` lifespan that puts
    :class:`PatchedAssets` around the app's middleware stack before uvicorn accepts a connection
    (:func:`webui.server.stack.wrap_stack`). Give it the keyword arguments
    :func:`webui.server.security.install` returned: the security guard, installed first, is then
    put around this layer, so the patched script answers under the security rules too."""
    return wrap_stack(launch_kwargs, PatchedAssets, PatchedAssets)
