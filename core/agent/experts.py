"""Expert agents (issue 30; the design article's "independent sessions"): an agent defined with
``mode: expert`` keeps one persistent session per project, and every ``task`` call to it is a
*consultation* appended there, so it sees its earlier consultations (from any chat of the
project), compacted like any long session.

Where: :func:`core.session.experts.expert_key` (``SessionKey(project, "expert-<name>")``), a real
main session of the store, not listed as a chat. Created whole on the first consultation with
its header (``"expert": {"name", "source"}``), a title entry (the agent's name, source
``user``: the title job never renames it) and the system message; then each consultation
appends the task (a user message, stored at once) and the expert's rounds as they complete.
The request's system prompt is the definition's as it is now (a changed file takes effect on
the next call), through the guard's ``system_refresh``.

Two consultations of one expert at once (two task calls in one reply, two chats, two processes on
one store) take turns: one lock per expert session in this process, and the session's reply lease
(:mod:`core.stores.leases`, the one a streaming reply holds) across processes and machines sharing
the store. Taking turns, not appending side by side, because one consultation's rounds in the
middle of another's would split a tool call from its result and break the session for the next
request. A consultation waits up to :data:`WAIT_SECONDS` (or until its run is stopped), then the
task ends with :class:`~core.errors.ExpertBusy`'s sentence. Should a writer ignore the lease, its
rounds are still appended, not dropped (``expected_count`` is not asked).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from core.agent.definitions import AgentDefinition
from core.agent.persist import store_messages
from core.errors import ExpertBusy, SessionExists
from core.session.entries import header_entry, message_entry, title_entry
from core.session.experts import HEADER_KEY, expert_key
from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.session.store import SessionStore
from core.storage import Storage
from core.stores.leases import HeldLease, LeaseBoard

WAIT_SECONDS = 300.0  # how long a consultation waits for another one of the same expert to end
POLL_SECONDS = 0.25

log = logging.getLogger(__name__)

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_of(key: SessionKey) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(key), threading.Lock())


def create_expert_session(manager: SessionManager, project_key: str, agent: AgentDefinition, cwd: str | None,
                          system: str) -> SessionKey:
    """The key of ``agent``'s expert session in ``project_key``, created whole through ``manager``
    (header, title, ``system`` message) when missing. Raises the store's errors."""
    key = expert_key(project_key, agent.name)
    if manager.store.exists(key):
        return key
    now = time.time()
    header = header_entry(key.session_id, project_key, cwd or None, created_at=now)
    header[HEADER_KEY] = {"name": agent.name, "source": agent.source}
    try:
        manager.create_whole(key, [header, title_entry(agent.name, "user", ts=now),
                                   message_entry({"role": "system", "content": system}, ts=now)])
    except SessionExists:
        pass  # another consultation created it meanwhile
    return key


@dataclass
class Consultation:
    """One call to an expert: its session's ``key``, ``messages`` (every message so far, the
    new task included once :meth:`ask` ran) and ``saved`` (how many are stored). Use as a
    context manager: entering takes the expert's turn (this process's lock, then the session's
    lease, waiting for another consultation to end: see the module docstring), leaving gives it
    back. Entering raises :class:`~core.errors.ExpertBusy` when the turn did not come within
    ``wait_seconds`` or ``cancel`` (anything with ``is_set()``) was set while waiting."""

    store: SessionStore
    key: SessionKey
    manager: SessionManager
    leases: LeaseBoard  # the storage's: the session's reply lease is the turn across processes
    messages: list[dict] = field(default_factory=list)
    saved: int = 0
    name: str = ""
    cancel: Any = None  # anything with is_set(): the run's stop
    wait_seconds: float = WAIT_SECONDS
    _lock: threading.Lock | None = None
    _lease: HeldLease | None = None

    @classmethod
    def open(cls, storage: Storage, project_key: str, agent: AgentDefinition, cwd: str | None,
             system: str, *, manager: SessionManager | None = None, cancel: Any = None,
             wait_seconds: float | None = None) -> "Consultation":
        """The consultation of ``agent`` in ``project_key`` of ``storage`` (its session created if
        missing); its turn not yet taken. ``manager``: the :class:`SessionManager` that writes it
        (the turn's; default the storage's own). ``wait_seconds``: how long entering waits for the
        turn (default :data:`WAIT_SECONDS`); ``cancel``: stops the wait when set."""
        manager = manager if manager is not None else storage.manager
        key = create_expert_session(manager, project_key, agent, cwd, system)
        wait = WAIT_SECONDS if wait_seconds is None else wait_seconds
        return cls(manager.store, key, manager, storage.leases, name=agent.name, cancel=cancel, wait_seconds=wait,
                   _lock=_lock_of(key))

    def __enter__(self) -> "Consultation":
        started = time.monotonic()
        if not self._lock.acquire(timeout=self.wait_seconds):
            raise ExpertBusy(self.name, time.monotonic() - started)
        try:
            self._lease = self._take_lease(started)
        except BaseException:
            self._lock.release()
            raise
        return self

    def _take_lease(self, started: float) -> HeldLease:
        while True:
            held = HeldLease.take(self.leases, self.key)
            if held is not None:
                return held
            waited = time.monotonic() - started
            if waited >= self.wait_seconds or (self.cancel is not None and self.cancel.is_set()):
                raise ExpertBusy(self.name, waited)
            time.sleep(POLL_SECONDS)

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._lease is not None:
                self._lease.release()
                self._lease = None
        finally:
            self._lock.release()

    def session(self) -> Any:
        """The expert's stored session (read now; compactions included)."""
        return self.manager.get(self.key)

    def ask(self, task: str) -> int:
        """Store the ``task`` as a user message after the session's messages (loaded now) and
        keep them in :attr:`messages`; returns the message count."""
        self.messages = list(self.session().messages)
        user = {"role": "user", "content": task}
        self.saved = store_messages(self.manager, self.key, [user], saved_count=len(self.messages))
        if self.saved != len(self.messages) + 1:  # another process consulted meanwhile: follow it
            self.messages = list(self.session().messages)
        else:
            self.messages.append(user)
        return self.saved

    def store_round(self, messages: list[dict], end: str | None = None) -> None:
        """Append a finished round of the expert (unchecked: see the module docstring)."""
        self.saved = store_messages(self.manager, self.key, messages, saved_count=self.saved, end=end)
