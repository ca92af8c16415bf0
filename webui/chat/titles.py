"""Generated titles reach the page as soon as they are stored (issue 18, item 4).

After the first exchange the runner generates a title in a background thread
(:class:`core.agent.runner.TitleStarted`). The send registers that thread here
(:meth:`TitleThreads.started`); when the tab's state says a title is awaited, a listener on the
state waits for the thread (at most :data:`PUSH_WAIT_SECONDS`) and pushes the stored title to the
title field, the sidebar and the export buttons at once. The page's 1.5 s poll
(``webui.gui.app.TITLE_POLL_SECONDS``) stays the fallback: it runs only when no thread is known
(another process, a restarted app) or the title model is slower than the push wait.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

PUSH_WAIT_SECONDS = 8.0  # how long the push waits for a title thread before the poll takes over
KEEP_SECONDS = 120.0  # a registration nobody took (the tab closed) is dropped after this long


class TitleThreads:
    """The running app's title threads by session id, each taken once by the tab that sent the
    message. Thread-safe; entries older than :data:`KEEP_SECONDS` are dropped on the next
    registration (a tab closed before its title came never leaks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, tuple[threading.Thread, float]] = {}

    def started(self, session_id: str, thread: threading.Thread, now: float | None = None) -> None:
        """Register the title thread of ``session_id`` (from ``TitleStarted.thread``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            for sid, (_, at) in list(self._threads.items()):
                if now - at > KEEP_SECONDS:
                    del self._threads[sid]
            self._threads[session_id] = (thread, now)

    def pending(self, session_id: str | None) -> bool:
        """True when a title thread of ``session_id`` is registered and not yet taken."""
        with self._lock:
            return bool(session_id) and session_id in self._threads

    def take(self, session_id: str | None) -> threading.Thread | None:
        """The registered thread of ``session_id`` (removed from the registry), or None."""
        if not session_id:
            return None
        with self._lock:
            entry = self._threads.pop(session_id, None)
        return entry[0] if entry else None


def poll_needed(ctx: WebContext, state: dict[str, Any] | None) -> bool:
    """Whether the page's title poll should run for the tab's ``state``: a title is awaited and
    no title thread is registered for the session (with one, the push shows the title)."""
    state = state or {}
    return bool(state.get("title_wait")) and not ctx.titles.pending(state.get("session"))


def wait_for_title(ctx: WebContext, state: dict[str, Any] | None,
                   timeout: float = PUSH_WAIT_SECONDS) -> tuple[str | None, bool] | None:
    """Wait (at most ``timeout`` seconds) for the title thread registered for the tab's session.

    Returns None when there is nothing to push (no title awaited, or no thread registered: the
    poll, if any, is already running); else ``(stored title or None, poll)`` where ``poll`` says
    the page must fall back to polling (the title did not come in time). Never raises: a store
    failure leaves it to the poll."""
    state = state or {}
    if not state.get("session") or not state.get("title_wait"):
        return None
    thread = ctx.titles.take(state["session"])
    if thread is None:
        return None
    started = time.monotonic()
    thread.join(timeout)

    try:
        title, _ = title_status(ctx, state)
    except Exception as err:  # noqa: BLE001 -- the poll can still find it
        log.warning("cannot read the title of %s: %s", state["session"], err)
        return None, True
    log.info("title of %s %s after %.2f s", state["session"],
             "pushed to the page" if title else "not there yet (polling)", time.monotonic() - started)
    return title, title is None


def title_status(ctx: WebContext, state: dict[str, Any], now: float | None = None) -> tuple[str | None, bool]:
    """While a generated title is awaited: ``(title or None, still waiting)``. Cheap: reads the
    list metadata, not the messages."""
    now = time.time() if now is None else now
    if not state.get("session") or not state.get("title_wait"):
        return None, False
    for meta in ctx.manager.list(state["project"], archived=False) + \
            ctx.manager.list(state["project"], archived=True):
        if meta.id == state["session"]:
            if meta.title and meta.title_source == "fallback":
                return None, False  # no title came: the field keeps showing the localised label
            if meta.title:
                return meta.title, False
            break
    return None, now < state["title_wait"]
