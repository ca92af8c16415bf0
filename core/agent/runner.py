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

from core.agent.compaction import CompactionEvent, CompactionFinished, make_guard, overflow_of
from core.agent.loop import AgentEvent, RoundCompleted
from core.agent.memory_job import REMEMBER_SPEC, SessionMemory
from core.agent.subagents import TaskAgentRun, default_tools
from core.agent.persist import store_messages
from core.memory.context import session_context
from core.agent.config import NOT_CONFIGURED_MESSAGE
from core.errors import ModelContextExceeded, ModelError, ModelNotConfigured, SessionConflict
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


@dataclass
class MemoryStarted:
    """The memory extraction job runs in the background (``thread.join(timeout)`` waits for it).

    Yielded after the final RoundCompleted (before TitleStarted) in ``auto`` memory mode."""

    thread: threading.Thread


RunnerEvent = AgentEvent | CompactionEvent | UserMessageSaved | TitleStarted | MemoryStarted


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
    path + the user's and project's memories + AGENTS.md/CLAUDE.md, see core.memory.context;
    a resumed session keeps the system message it was saved with); "interrupted" tool results for calls left dangling at the tail (appended, never
    rewritten); then the user message — all in ONE append, checked against ``expected_count``
    (the message count the caller loaded; SessionConflict if someone appended since) — then
    ``UserMessageSaved``. Then the agent loop's events (see core.agent.loop); each RoundCompleted is
    stored before it is yielded. Then, in ``auto`` memory mode, ``MemoryStarted`` (the memory
    extraction job, core.agent.memory_job). Last, if the session has no title yet, ``TitleStarted``.
    Unless ``ANYCODE_MEMORY=off``, the model also gets the ``remember`` tool.

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

    # Memory (issue 14): read into a NEW session's system prompt only (a resumed session keeps the
    # prompt it was saved with), written by a job after the exchange, and the `remember` tool.
    memory = SessionMemory.open(store, key.project_key, key.session_id)
    prefix: list[dict] = []
    prefix_entries: list[dict] = []  # approval answers stored with the prefix
    if not messages:
        root = workspace.root if workspace else session.cwd or ""
        context = (memory.context(root) if memory else session_context([], root)).text
        prefix.append({"role": "system", "content": system_prompt(root) + (f"\n\n{context}" if context else "")})
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
    if memory is not None:
        memory.message_index = len(messages) - 1
    if user_input is not None:
        yield UserMessageSaved(count)
    if client is None:
        raise ModelNotConfigured(NOT_CONFIGURED_MESSAGE)

    tools = default_tools() if tools is None else tools
    handlers = None
    if memory is not None and key.subpath is None:
        tools, handlers = [*tools, REMEMBER_SPEC], memory.tool_handlers()
    # Issue 9: keeps every request inside the model's window (compacts first when needed).
    guard = make_guard(session, client=client, model=model, tools=tools, cancel=cancel,
                       append=lambda entry, count: manager.add_compaction(key, entry, count))
    rounds = 0
    recovered = False
    while True:
        # TaskAgentRun: `task` calls run sub-agents recorded under this session (core.agent.subagents).
        run = TaskAgentRun(messages, key=key, store=store, client=client, model=model, tools=tools,
                           max_iterations=max_iterations - rounds, cancel=cancel, workspace=workspace,
                           tool_handlers=handlers, context=guard,
                           gate=approvals.ApprovalGate(approval), workspace_problem=workspace_problem)
        try:
            for event in run.events():
                if isinstance(event, RoundCompleted):
                    # The first round is checked too: a retry (no prefix) or a reply racing another
                    # tab's must not land after someone else's answer (SessionConflict instead).
                    first = len(messages) if rounds == 0 and expected_count is not None else None
                    # A store that fails (database killed, disk full) is retried and checked; if it
                    # gives up, the error carries the unsaved round (core.agent.persist).
                    if event.messages:
                        store_messages(manager, key, event.messages, saved_count=len(messages),
                                       expected_count=first, end=event.end)
                    if event.pending is not None and event.pending.call_id not in waiting:
                        # The waiting call's request, stored after its round (a restart shows it
                        # again; killed in between, the call is closed as interrupted like any other).
                        store.append(key, [event.pending.entry()])
                    if run.last_reply is not None:
                        guard.record(len(messages), messages, run.last_reply.usage)
                    messages.extend(event.messages)
                    rounds += 1
                yield event
            break
        except ModelError as err:
            # The request did not fit the window: compact harder and try once more, without
            # adding anything (the user message is stored once). Never a loop.
            overflow = None if recovered or run.interrupted_round() else overflow_of(err, guard)
            if overflow is False or overflow is None:
                _keep_partial(run, manager, key, messages, err)
                raise
            recovered = True
            log.warning("session %s: the request did not fit the model's window (%s); compacting and retrying once",
                        key.session_id, err)
            done = False
            for event in guard.recover(messages, overflow if isinstance(overflow, ModelContextExceeded) else None):
                done = done or isinstance(event, CompactionFinished)
                yield event
            if not done:
                raise
        except BaseException as original:
            # Generator closed (Stop), KeyboardInterrupt, a store failure: keep what the user saw.
            _keep_partial(run, manager, key, messages, original)
            raise

    if rounds and memory is not None and key.subpath is None and not run.cancelled:
        job = memory.start_extraction(messages, client=title_client or client, model=title_model or model,
                                      compactions=guard.compactions)
        if job is not None:
            yield MemoryStarted(job)
    if rounds and session.title_source is None:
        thread = start_title_generation(manager, key, messages, client=title_client or client,
                                        model=title_model or model, on_done=on_title,
                                        compactions=guard.compactions)
        yield TitleStarted(thread)


def _keep_partial(run: TaskAgentRun, manager: SessionManager, key: SessionKey, messages: list[dict],
                  original: BaseException) -> None:
    """Store the round in flight (the partial text the user saw, closed tool calls) after ``original``
    stopped the run; a failure to store is attached to ``original`` (``unsaved``/``saved_count``)."""
    partial = run.interrupted_round()
    if not partial:
        return
    try:
        store_messages(manager, key, partial, saved_count=len(messages))
        log.info("stored the interrupted round of %s (%d messages)", key.session_id, len(partial))
    except Exception as err:  # noqa: BLE001 -- the original error matters more
        log.warning("could not store the interrupted round of %s: %s", key.session_id, err)
        if hasattr(err, "unsaved"):  # the caller keeps it on screen and stores it later
            original.unsaved, original.saved_count = err.unsaved, err.saved_count  # type: ignore[attr-defined]


def run_session(
    key: SessionKey,
    store: SessionStore,
    user_input: str | None,
    *,
    client: openai.OpenAI | None,
    model: str,
    wait_for_title: float | None = None,
    wait_for_memory: float | None = None,
    **kwargs,
) -> Session:
    """Non-streaming :func:`run_session_stream` (same arguments and errors); the session after it.

    ``wait_for_title`` / ``wait_for_memory``: seconds to wait for the background title / memory
    extraction (None: don't wait).
    """
    for event in run_session_stream(key, store, user_input, client=client, model=model, **kwargs):
        if isinstance(event, TitleStarted) and wait_for_title is not None:
            event.thread.join(wait_for_title)
        if isinstance(event, MemoryStarted) and wait_for_memory is not None:
            event.thread.join(wait_for_memory)
    return SessionManager(store).get(key)
