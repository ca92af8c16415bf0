"""The page's first view in the page itself (issue 32): the load event's answer written into the
config the page is served with.

Without this, the page came with empty components; once Gradio's front end had mounted them
(~0.5–1.5 s on this project's 2-core machine), its load event asked the server for the tab's view
— the sidebar list, the chat named by ``?session=``, the title, the project picker — and the
list appeared one round trip and one more render later (0.4–0.9 s). The bare Gradio app the
bench compares with has no load event at all: its values are in its config.

Here the ``GET /`` that serves the page computes that view (the same function the load event
runs, in the request's language and time zone) while Gradio builds the page, and writes it into
the ``window.gradio_config`` of the HTML: the front end mounts with the list and the chat already
in it. The view is kept under a one-time key, which the page's config also carries (a hidden
textbox, ``#ac-first-view``); the load event sends the key back and gets the same view's state
(ids, the list's change token — taken before the list was drawn, so a change in between is seen
by the first live check), its notice as a toast, and ``gr.skip()`` for everything already shown.
A page served without a key (``/config``, an expired or unknown key, a failed bake) gets the whole
view from the load event, as before.

The state itself (``gr.State``) cannot be in a config: it lives on the server per tab and is set
by the load event. Nothing here is shared between tabs: a key names one page load's view and is
taken once.
"""
from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import orjson

log = logging.getLogger(__name__)

KEY_SECONDS = 120.0  # a page's key is taken by its load event within a second or two: generous
MAX_KEPT = 64  # pages served but not yet loaded (a burst of reloads); the oldest go first
_CONFIG_START = b"window.gradio_config = "
_CONFIG_END = b";</script>"  # Gradio's toorjson escapes "<" in the JSON: this cannot occur inside


@dataclass
class FirstView:
    """One page load's view: ``outputs`` are the load event's values in its outputs' order (the
    model picker's is ``gr.skip()``: it may ask the model server, which a page must not wait
    for); ``notice`` is ``(text, level)`` to show as a toast, or None; ``complete`` is False when
    the request did not yet carry the browser's language and time zone (a first visit)."""

    outputs: tuple
    notice: tuple[Any, str] | None = None
    complete: bool = True


class FirstViews:
    """The views baked into pages served and not yet loaded: ``put`` gives a one-time key,
    ``take`` returns the view once (None for an unknown, taken or expired key). Thread-safe."""

    def __init__(self, seconds: float = KEY_SECONDS, kept: int = MAX_KEPT) -> None:
        self.seconds = seconds
        self.kept = kept
        self._lock = threading.Lock()
        self._views: OrderedDict[str, tuple[float, FirstView]] = OrderedDict()

    def put(self, view: FirstView) -> str:
        key = secrets.token_urlsafe(16)
        with self._lock:
            self._views[key] = (time.monotonic() + self.seconds, view)
            while len(self._views) > self.kept:
                self._views.popitem(last=False)
        return key

    def take(self, key: Any) -> FirstView | None:
        if not isinstance(key, str) or not key:
            return None
        with self._lock:
            found = self._views.pop(key, None)
            now = time.monotonic()
            for stale in [k for k, (until, _v) in self._views.items() if until < now]:
                del self._views[stale]
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def drop(self, key: str) -> None:
        with self._lock:
            self._views.pop(key, None)


def props_patch(payload: Any) -> dict[str, Any]:
    """The component props a load event's postprocessed output sets in the page: an update
    (``{"__type__": "update", ...}``) sets its props, a plain value the ``value`` prop."""
    if isinstance(payload, dict) and payload.get("__type__") == "update":
        return {k: v for k, v in payload.items() if k != "__type__"}
    return {"value": payload}


def splice_config(body: bytes, patches: dict[int, dict[str, Any]]) -> bytes | None:
    """``body`` (Gradio's page HTML) with ``patches`` (component id → props) applied to the
    config it embeds; None when the body has no config or the config lacks one of the
    components (a sign-in page, another page of the app)."""
    from gradio.routes import toorjson  # the filter Gradio's template writes the config with

    start = body.find(_CONFIG_START)
    if start < 0:
        return None
    start += len(_CONFIG_START)
    end = body.find(_CONFIG_END, start)
    if end < 0:
        return None
    config = orjson.loads(body[start:end])
    by_id = {c.get("id"): c for c in config.get("components") or ()}
    if any(cid not in by_id for cid in patches):
        return None
    for cid, props in patches.items():
        by_id[cid].setdefault("props", {}).update(props)
    return body[:start] + str(toorjson(config)).encode() + body[end:]


Baker = Callable[[Any], Awaitable[dict[int, dict[str, Any]] | None]]


class FirstViewMiddleware:
    """ASGI middleware that bakes the first view into ``GET /`` (see the module docstring).

    ``bake(request)`` (a Starlette request) returns the patches for the page's config, or None;
    it runs while the app builds the page. Any failure serves the page as the app made it (its
    load event then fills it), after a log line."""

    def __init__(self, app: Any, bake: Baker) -> None:
        self.app = app
        self.bake = bake

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "GET" or scope.get("path") != "/":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        baking = asyncio.ensure_future(self.bake(Request(scope)))
        start: dict | None = None
        chunks: list[bytes] = []

        async def keep(message: dict) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            else:  # pragma: no cover -- nothing else is sent for a page
                await send(message)

        try:
            await self.app(scope, receive, keep)
        except BaseException:
            baking.cancel()
            raise
        body = b"".join(chunks)
        if start is None:  # pragma: no cover -- the app always starts its answer
            baking.cancel()
            return
        try:
            patches = await baking
        except Exception:  # noqa: BLE001 -- the page still works through its load event
            log.exception("the first view could not be baked into the page")
            patches = None
        headers = list(start.get("headers") or ())
        html = any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in headers)
        if patches and start.get("status") == 200 and html:
            try:
                spliced = splice_config(body, patches)
            except Exception:  # noqa: BLE001
                log.exception("the page's config could not be read to bake its first view")
                spliced = None
            if spliced is not None:
                body = spliced
                headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def baker(demo: Any, load_fn: Callable[..., Any], first: Callable[[Any], FirstView], views: FirstViews,
          key_box: Any, outputs: list[Any], baked: list[Any]) -> Baker:
    """The ``bake`` of :class:`FirstViewMiddleware` for a page whose load event runs ``load_fn``
    (its outputs: ``outputs``): ``first(request)`` computes the view as the load event would, in
    the request's language and time zone; its values for ``baked`` components go through Gradio's
    own postprocessing (what the load event's answer would carry), and the key it is kept under
    into ``key_box``."""
    import anyio
    import gradio as gr
    from gradio.context import LocalContext
    from gradio.state_holder import SessionState

    from webui import i18n

    block_fn = next(fn for fn in demo.fns.values() if fn.fn is load_fn)
    baked_at = [(outputs.index(c), c._id) for c in baked]

    def compute(request: Any, cookies: Any) -> FirstView:
        token = LocalContext.request.set(request)  # what i18n reads the language and zone from
        try:
            view = first(request)
        finally:
            LocalContext.request.reset(token)
        view.complete = bool(cookies.get(i18n.NAV_COOKIE)) and bool(cookies.get(i18n.TZ_COOKIE))
        return view

    async def bake(starlette_request: Any) -> dict[int, dict[str, Any]] | None:
        request = gr.Request(request=starlette_request)
        view = await anyio.to_thread.run_sync(compute, request, starlette_request.cookies)
        payloads = await demo.postprocess_data(block_fn, list(view.outputs), SessionState(demo))
        patches = {cid: props_patch(payloads[i]) for i, cid in baked_at}
        patches = {cid: props for cid, props in patches.items() if props}
        patches[key_box._id] = {"value": views.put(view)}
        return patches

    return bake


def install(page_bake: Baker) -> Callable[[Any], Any]:
    """A wrapper of an ASGI app in :class:`FirstViewMiddleware` (for
    :func:`webui.server.security.install`'s ``inner``)."""
    return lambda app: FirstViewMiddleware(app, page_bake)
