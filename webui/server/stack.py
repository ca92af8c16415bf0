"""Putting an ASGI middleware around a Gradio app's whole middleware stack.

Gradio adds its CORS middleware as the outermost layer when it launches, out of reach of
``app_kwargs["middleware"]``; a layer that must see every request (anycode's security guard,
the patched Gradio script) is put around the built stack from the app's lifespan instead, before
uvicorn accepts a connection.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable


def wrap_stack(launch_kwargs: dict[str, Any], kind: type, make: Callable[[Any], Any]) -> dict[str, Any]:
    """``launch_kwargs`` (for ``Blocks.launch``) with an ``app_kwargs`` lifespan that puts
    ``make(stack)`` — an ASGI middleware of type ``kind`` — around the app's middleware stack
    (once: not when the stack already is a ``kind``), then runs the lifespan ``launch_kwargs``
    already had. That earlier lifespan wraps what this one made, so of two layers installed one
    after the other, the first installed is the outermost."""
    app_kwargs = dict(launch_kwargs.get("app_kwargs") or {})
    inner_lifespan = app_kwargs.get("lifespan")

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        stack = app.middleware_stack or app.build_middleware_stack()
        if not isinstance(stack, kind):
            app.middleware_stack = make(stack)
        if inner_lifespan is not None:
            async with inner_lifespan(app) as state:
                yield state
        else:
            yield None

    app_kwargs["lifespan"] = lifespan
    return {**launch_kwargs, "app_kwargs": app_kwargs}
