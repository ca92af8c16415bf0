"""The user's reply first: background requests never overlap it on a one-request-at-a-time server.

Some OpenAI-compatible servers serve one request at a time and abort the generation that is
streaming when another request arrives: llama-cpp-python's server (its ``interrupt_requests``,
on by default), llama.cpp's ``llama-server`` with one slot, LM Studio with one model instance.
There, a title or memory request (issue 27, kind 7) sent while the user's reply streams cuts that
reply ("The connection to the model server broke in the middle of the reply").

Per server (base URL) this module knows how many requests it serves at once:

1. ``ANYCODE_MAX_PARALLEL_REQUESTS`` (a whole number >= 1; applies to every server);
2. learnt this run: a reply that broke while a background request to the same server was in
   flight means "one at a time" (:func:`learn_serial`);
3. what the server says: llama.cpp's ``GET /props`` ``total_slots`` (asked once per server);
4. otherwise unknown, taken as "several" (OpenAI, vLLM, Ollama serve requests side by side).

On a server that serves one at a time:

* a **turn** (:func:`turn`, held by the runner from the user message to the last round) makes
  background requests wait until it is over — between rounds too, while tools run;
* a **foreground** request (:func:`foreground`, the chat reply, a compaction summary) waits for a
  request already in flight to finish (a background one cannot be taken back; it is short: a
  title is capped at 200 tokens; another tab's reply or a parallel sub-agent's would be cut too)
  and then goes; the server never sees two at once;
* a **background** request (:func:`background`, titles and memory) waits until no turn and no
  other request is running, then goes; several wait their turn one by one.

Whatever the server, a foreground ticket records whether a background request was in flight
while it ran (:attr:`Ticket.overlapped`): the loop retries such a broken reply once
(core.agent.loop) after :func:`learn_serial`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

ENV = "ANYCODE_MAX_PARALLEL_REQUESTS"
# A background request gives up waiting after this long and goes anyway (a turn left open by a
# caller that never closed its generator must not hold titles back for ever).
BACKGROUND_WAIT_SECONDS = 600.0
# A foreground request waits at most this long for a background request already in flight.
FOREGROUND_WAIT_SECONDS = 600.0
_POLL = 0.1


def env_limit() -> int | None:
    """``ANYCODE_MAX_PARALLEL_REQUESTS`` as a whole number >= 1, or None (unset or invalid, logged)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        log.warning("%s=%r is not a whole number; ignored", ENV, raw)
        return None
    if value < 1:
        log.warning("%s=%r is below 1; ignored", ENV, raw)
        return None
    return value


@dataclass
class Ticket:
    """One foreground request's place: ``overlapped`` is True when a background request to the
    same server was in flight at any moment while it ran."""

    server: "ServerSlots"
    started_background: int
    busy_at_start: bool
    closed: bool = False

    @property
    def overlapped(self) -> bool:
        with self.server.cond:
            return (self.busy_at_start or self.server.background > 0
                    or self.server.background_started != self.started_background)

    def close(self) -> None:
        """The request is over (safe to call twice)."""
        if self.closed:
            return
        self.closed = True
        with self.server.cond:
            self.server.foreground -= 1
            self.server.cond.notify_all()


class ServerSlots:
    """What one server (base URL) is doing now: turns, foreground and background requests in
    flight, and how many it serves at once (:meth:`limit`)."""

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.cond = threading.Condition()
        self.turns = 0
        self.foreground = 0
        self.background = 0
        self.background_started = 0  # every background request ever started (overlap detection)
        self.learnt: int | None = None
        self.said: int | None = None
        self.asked = False

    def limit(self, client: Any = None) -> int | None:
        """Requests served at once: 1 for "one at a time", None when unknown (see the module
        docstring for the order)."""
        from_env = env_limit()
        if from_env is not None:
            return from_env
        if self.learnt is not None:
            return self.learnt
        if not self.asked and client is not None:
            self.asked = True
            self.said = probe_slots(client)
        return self.said

    def serial(self, client: Any = None) -> bool:
        """True when the server serves one request at a time."""
        return self.limit(client) == 1


_SERVERS: dict[str, ServerSlots] = {}
_LOCK = threading.Lock()


def _base(client: Any) -> str:
    return str(getattr(client, "base_url", "") or "").rstrip("/")


def slots_for(client: Any) -> ServerSlots:
    """The :class:`ServerSlots` of ``client``'s base URL (one per process)."""
    base = _base(client)
    with _LOCK:
        return _SERVERS.setdefault(base, ServerSlots(base))


def forget() -> None:
    """Forget every server's state (tests)."""
    with _LOCK:
        _SERVERS.clear()


def probe_slots(client: Any) -> int | None:
    """llama.cpp's ``GET /props`` ``total_slots`` at ``client``'s server, or None (no such
    endpoint, no answer in 2 s). Never raises."""
    from core.agent.context import _get_json, _positive, _Unreachable

    root = re.sub(r"/v1$", "", _base(client))
    try:
        props = _get_json(client, f"{root}/props")
    except _Unreachable:
        return None
    except Exception:  # noqa: BLE001 -- a probe only means "unknown" when it fails
        log.debug("asking %s/props for its slots failed", root, exc_info=True)
        return None
    slots = _positive(props.get("total_slots")) if isinstance(props, dict) else None
    if slots:
        log.info("%s serves %d request(s) at a time (GET /props)", root, slots)
    return slots


def learn_serial(client: Any) -> None:
    """Remember (for this run) that ``client``'s server serves one request at a time: a reply
    broke while a background request to it was in flight."""
    server = slots_for(client)
    with server.cond:
        if server.learnt != 1:
            log.warning("%s broke a reply while a background request ran: it serves one request at a time; "
                        "background requests now wait for replies", server.base_url)
        server.learnt = 1
        server.cond.notify_all()


@contextlib.contextmanager
def turn(client: Any) -> Iterator[None]:
    """Hold a user's turn on ``client``'s server: background requests wait until it ends (on a
    one-at-a-time server). The server's limit is found out here, before the turn's first request."""
    if client is None:
        yield
        return
    server = slots_for(client)
    server.limit(client)
    with server.cond:
        server.turns += 1
    try:
        yield
    finally:
        with server.cond:
            server.turns -= 1
            server.cond.notify_all()


def foreground(client: Any, cancel: Any = None) -> Ticket:
    """Start a foreground request (the user's reply): on a one-at-a-time server, first wait (at
    most :data:`FOREGROUND_WAIT_SECONDS`, or until ``cancel`` is set) for the requests in flight
    (a background one, another tab's reply, a parallel sub-agent's). :meth:`Ticket.close` it when
    the reply is read."""
    server = slots_for(client)
    serial = server.serial(client)
    deadline = time.monotonic() + FOREGROUND_WAIT_SECONDS
    with server.cond:
        while serial and (server.background or server.foreground) and time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                break
            server.cond.wait(_POLL)
        server.foreground += 1
        return Ticket(server, server.background_started, server.background > 0)


@contextlib.contextmanager
def background(client: Any) -> Iterator[None]:
    """Run a background request (title, memory): on a one-at-a-time server, wait until no turn
    and no other request is running (at most :data:`BACKGROUND_WAIT_SECONDS`)."""
    server = slots_for(client)
    serial = server.serial(client)
    deadline = time.monotonic() + BACKGROUND_WAIT_SECONDS
    with server.cond:
        while serial and (server.turns or server.foreground or server.background):
            if time.monotonic() >= deadline:
                log.warning("a background request to %s waited %.0f s for replies to end; sending it now",
                            server.base_url, BACKGROUND_WAIT_SECONDS)
                break
            server.cond.wait(_POLL)
            serial = server.serial()
        server.background += 1
        server.background_started += 1
    try:
        yield
    finally:
        with server.cond:
            server.background -= 1
            server.cond.notify_all()


class _Hold:
    def __init__(self, server: ServerSlots):
        self.server = server
        self.held = True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with self.server.cond:
            self.server.turns -= 1
            self.server.cond.notify_all()


def holding_turn(events: Iterator[Any], client: Any, until: Any = None) -> Iterator[Any]:
    """Yield ``events`` (a turn's event generator) while holding the turn on ``client``'s server
    (see :func:`turn`); the hold ends at the first event for which ``until(event)`` is true (the
    background jobs starting: they must not wait for a turn that waits for them), when the events
    end, fail, or this generator is closed (then ``events`` is closed too)."""
    if client is None:
        yield from events
        return
    server = slots_for(client)
    server.limit(client)
    with server.cond:
        server.turns += 1
    hold = _Hold(server)
    try:
        for event in events:
            if until is not None and until(event):
                hold.release()
            yield event
    finally:
        hold.release()
        close = getattr(events, "close", None)
        if close is not None:
            close()
