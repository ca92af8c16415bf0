"""Generated titles reach the page as soon as they are stored (issue 18, item 4).

After the first exchange the runner generates a title in a background thread
(:class:`core.agent.runner.TitleStarted`). The send registers that thread here
(:meth:`TitleThreads.started`); when the tab's state says a title is awaited, a listener on the
state waits for the thread (at most :data:`PUSH_WAIT_SECONDS`) and pushes the stored title to the
title field, the sidebar and the export buttons at once. The page's 1.5 s poll
(``webui.app.TITLE_POLL_SECONDS``) stays the fallback: it runs only when no thread is known
(another process, a restarted app) or the title model is slower than the push wait.
"""
from __future__ import annotations

import html
import logging
import threading
import time
from typing import Any

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


def poll_needed(ctx: Any, state: dict[str, Any] | None) -> bool:
    """Whether the page's title poll should run for the tab's ``state``: a title is awaited and
    no title thread is registered for the session (with one, the push shows the title)."""
    state = state or {}
    return bool(state.get("title_wait")) and not ctx.titles.pending(state.get("session"))


def wait_for_title(ctx: Any, state: dict[str, Any] | None,
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
    from webui import handlers

    try:
        title, _ = handlers.title_status(ctx, state)
    except Exception as err:  # noqa: BLE001 -- the poll can still find it
        log.warning("cannot read the title of %s: %s", state["session"], err)
        return None, True
    log.info("title of %s %s after %.2f s", state["session"],
             "pushed to the page" if title else "not there yet (polling)", time.monotonic() - started)
    return title, title is None


def attach(ctx: Any, gr: Any, *, state: Any, title: Any, sessions: Any, timer: Any, md_btn: Any,
           jl_btn: Any, search: Any, show_archived: Any) -> None:
    """Push the title when the tab's state says one is awaited (a send just ended): the title
    field, the sidebar list, the poll timer (off, or on as the fallback) and the exports."""

    def on_state(st, query, archived):
        found = wait_for_title(ctx, st)
        if found is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        text, poll = found
        if poll:
            return gr.skip(), gr.skip(), gr.Timer(active=True), gr.skip(), gr.skip()
        from webui import handlers

        html_list = handlers.session_list_html(ctx, st["project"], query=query or "", archived=bool(archived),
                                               active=st["session"])
        md, jl = handlers.exports(ctx, st)  # the file names and headings carry the title
        # Seen about once in four runs with another browser on the machine: the list rendered here
        # still lacked the title the field got. Until that race is understood, a list without the
        # title keeps the poll on for one tick, whose list has it (the field is not touched again
        # unless the tick finds the title: see app.on_tick). The title is looked for escaped as
        # render.sidebar_html writes it (quotes too: "What's new" is listed as What&#x27;s new).
        listed = text is None or html.escape(text) in html_list
        return (text, html_list, gr.Timer(active=not listed), gr.DownloadButton(value=md),
                gr.DownloadButton(value=jl))

    # No concurrency limit: each call only waits for its own tab's thread (bounded).
    state.change(on_state, [state, search, show_archived], [title, sessions, timer, md_btn, jl_btn],
                 api_visibility="private", show_progress="hidden", concurrency_limit=None)

