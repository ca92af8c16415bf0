"""Run the agent on a stored session (seed ``runSession``), persisting as it goes.

load → add the user message (persisted at once, so a failing model never loses what the user
typed) → agent loop → append each round (assistant message + its tool results, ONE append) as soon
as it completes. A crash or kill loses at most the round in flight. The loop itself knows nothing
of sessions; this module is the wrapper the design article describes, at per-round granularity.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable

import openai

from core.agent.loop import AgentEvent, RoundCompleted
from core.agent.subagents import TaskAgentRun, default_tools
from core.agent.persist import store_messages
from core.agent.config import NOT_CONFIGURED_MESSAGE
from core.errors import ModelNotConfigured, SessionConflict
from core.session.keys import SessionKey
from core.session.text import is_blank
from core.session.manager import SessionManager
from core.session.models import Session
from core.agent.prompts import system_prompt
from core.agent.repair import closing_results, sanitize_text
from core.session.store import SessionStore
from core.agent.titles import start_title_generation
from core.agent.tools import ToolError, Workspace
from core.agent import approval as approvals
from core.agent.workspace import check_workspace
from core.session.entries import message_entry

log = logging.getLogger(__name__)


@dataclass
class UserMessageSaved:
    """The user's message is stored; ``message_count`` is the session's message count now."""

    message_count: int


@dataclass
class TitleStarted:
    """A title is being generated in the background; ``thread.join(timeout)`` waits for it.

    Yielded last, after the final RoundCompleted, only when the session had no title yet.
    """

    thread: threading.Thread


RunnerEvent = AgentEvent | UserMessageSaved | TitleStarted


def _open_workspace(cwd: str | None) -> Workspace | None:
    if not cwd:
        return None
    try:
        return Workspace(cwd)
    except ToolError as err:
        log.warning("session workspace unavailable, tools disabled: %s", err)
        return None


def run_session_stream(
    key: SessionKey,
    store: SessionStore,
    user_input: str | None,
    *,
    client: openai.OpenAI | None,
    model: str,
    tools: list[dict] | None = None,
    workspace: Workspace | None = None,
    expected_count: int | None = None,
    cancel: threading.Event | None = None,
    title_client: openai.OpenAI | None = None,
    title_model: str | None = None,
    max_iterations: int = 20,
    on_title: Callable[[str, str, bool], None] | None = None,
    approval: approvals.ApprovalPolicy | None = None,
) -> Iterator[RunnerEvent]:
    """Run one user turn on the stored session ``key``, yielding events as they happen.

    Order: a system message first if the session has no messages (instructions + workspace
    path); "interrupted" tool results for calls left dangling at the tail (appended, never
    rewritten); then the user message — all in ONE append, checked against ``expected_count``
    (the message count the caller loaded; SessionConflict if someone appended since) — then
    ``UserMessageSaved``. Then the agent loop's events (see core.agent.loop); each RoundCompleted is
    stored before it is yielded. Last, if the session has no title yet, ``TitleStarted``.

    ``user_input`` None re-runs the model on the stored history (a retry after an error) without
    adding a message; when the turn was paused on an approval it resumes it (the paused call runs
    if ``approval`` holds the user's "allow" for it, gets a denied result on "deny", or pauses
    again). ``tools`` defaults to TOOL_SPECS plus the ``task``
    tool (sub-agents, :mod:`core.agent.subagents`); ``workspace`` to the session's project folder when
    :func:`core.agent.workspace.check_workspace` accepts it (else the tools are off and say why).
    ``approval`` (default ``ApprovalPolicy.from_env()``): side-effect tools pause the turn on an
    approval request stored with the round (see :mod:`core.agent.approval`). A new message while
    an approval waits denies it.
    ``title_client``/``title_model`` default to ``client``/``model``; ``on_title(title, source,
    applied)`` is called from the title thread.

    Raises SessionNotFound, SessionConflict, ValueError (empty input), ModelNotConfigured when
    ``client`` is None (after saving the user message), and typed ModelErrors when the model
    fails — after storing what was done, including partial reply text. Cancel (``cancel`` set, or
    this generator closed) stores the partial text the user saw and closes unfinished tool calls.
    """
    if user_input is not None and (not isinstance(user_input, str) or is_blank(user_input)):
        raise ValueError("The message is empty.")
    manager = SessionManager(store)
    session = manager.get(key)
    messages = list(session.messages)
    workspace_problem = None
    if workspace is None:
        checked = check_workspace(key, session.cwd)
        workspace, workspace_problem = checked.workspace, checked.problem
        if workspace_problem:
            log.warning("session %s: %s", key.session_id, workspace_problem)

    prefix: list[dict] = []
    prefix_entries: list[dict] = []  # approval answers stored with the prefix
    if not messages:
        prefix.append({"role": "system", "content": system_prompt(workspace.root if workspace else session.cwd or "")})
    state = approvals.ApprovalState.from_entries(store.load(key) or [])
    waiting = {p.call_id for p in state.pending()}
    closing = closing_results(messages)
    if user_input is None and any(r["tool_call_id"] in state.requests for r in closing):
        closing = []  # a turn paused on an approval: the loop resumes it
    elif waiting and closing:
        # A new message instead of an answer: the waiting calls are denied, the rest closed.
        prefix_entries = approvals.closing_denials(messages, state, approvals.NEW_MESSAGE_REASON, closing)
        closing = [e["message"] for e in prefix_entries if e.get("type") == "message"]
        prefix_entries = [e for e in prefix_entries if e.get("type") != "message"]
        waiting = set()
    prefix += closing
    if user_input is not None:
        prefix.append({"role": "user", "content": sanitize_text(user_input)})
    if prefix:
        if prefix_entries:  # approval answers and messages in one append
            count = store.append(key, [*prefix_entries, *(message_entry(m) for m in prefix)],
                                 expected_count=expected_count)
        else:
            count = store_messages(manager, key, prefix, saved_count=len(messages), expected_count=expected_count)
    elif expected_count is not None and expected_count != len(messages):
        raise SessionConflict(expected_count, len(messages))
    else:
        count = len(messages)
    messages += prefix
    if user_input is not None:
        yield UserMessageSaved(count)
    if client is None:
        raise ModelNotConfigured(NOT_CONFIGURED_MESSAGE)

    # TaskAgentRun: `task` calls run sub-agents recorded under this session (core.agent.subagents).
    run = TaskAgentRun(messages, key=key, store=store, client=client, model=model,
                       tools=default_tools() if tools is None else tools,
                       max_iterations=max_iterations, cancel=cancel, workspace=workspace,
                       gate=approvals.ApprovalGate(approval), workspace_problem=workspace_problem)
    rounds = 0
    try:
        for event in run.events():
            if isinstance(event, RoundCompleted):
                # The first round is checked too: a retry (no prefix) or a reply racing another
                # tab's must not land after someone else's answer (SessionConflict instead).
                first = len(messages) if rounds == 0 and expected_count is not None else None
                # A store that fails (database killed, disk full) is retried and checked; if it
                # gives up, the error carries the unsaved round (core.agent.persist).
                if event.messages:
                    store_messages(manager, key, event.messages, saved_count=len(messages), expected_count=first,
                                   end=event.end)
                if event.pending is not None and event.pending.call_id not in waiting:
                    # The waiting call's request, stored after its round (a restart shows it again;
                    # killed in between, the call is closed as interrupted like any dangling one).
                    store.append(key, [event.pending.entry()])
                messages.extend(event.messages)
                rounds += 1
            yield event
    except BaseException as original:
        # Model error, generator closed (Stop), KeyboardInterrupt: keep what the user already saw.
        partial = run.interrupted_round()
        if partial:
            try:
                store_messages(manager, key, partial, saved_count=len(messages))
                log.info("stored the interrupted round of %s (%d messages)", key.session_id, len(partial))
            except Exception as err:  # noqa: BLE001 -- the original error matters more
                log.warning("could not store the interrupted round of %s: %s", key.session_id, err)
                if hasattr(err, "unsaved"):  # the caller keeps it on screen and stores it later
                    original.unsaved, original.saved_count = err.unsaved, err.saved_count  # type: ignore[attr-defined]
        raise

    if rounds and session.title_source is None:
        thread = start_title_generation(manager, key, messages, client=title_client or client,
                                        model=title_model or model, on_done=on_title)
        yield TitleStarted(thread)


def run_session(
    key: SessionKey,
    store: SessionStore,
    user_input: str | None,
    *,
    client: openai.OpenAI | None,
    model: str,
    wait_for_title: float | None = None,
    **kwargs,
) -> Session:
    """Non-streaming :func:`run_session_stream` (same arguments and errors); the session after it.

    ``wait_for_title``: seconds to wait for the background title (None: don't wait).
    """
    for event in run_session_stream(key, store, user_input, client=client, model=model, **kwargs):
        if isinstance(event, TitleStarted) and wait_for_title is not None:
            event.thread.join(wait_for_title)
    return SessionManager(store).get(key)
