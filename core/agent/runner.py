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
from typing import Any, Callable

import openai

from core.agent.compaction import CompactionEvent, CompactionFinished, make_guard, overflow_of
from core.agent.loop import AgentEvent, RoundCompleted
from core.agent.memory_job import REMEMBER_SPEC, SessionMemory
from core.agent.definitions import Definitions, addressed_agent, agent_system_prompt, load_definitions
from core.agent.subagents import TaskAgentRun, default_tools
from core.agent.persist import store_messages
from core.memory.context import session_context, with_memory_section
from core.agent.config import NOT_CONFIGURED_MESSAGE
from core.errors import ModelContextExceeded, ModelError, ModelNotConfigured, SessionConflict
from core.session.keys import SessionKey
from core.session.text import is_blank
from core.session.manager import SessionManager
from core.session.models import Session
from core.agent.prompts import system_prompt
from core.agent.repair import closing_results, sanitize_text
from core.session.store import SessionStore
from core.storage import Storage
from core.agent.titles import start_title_generation
from core.agent.tools import ToolError, Workspace
from core.agent import approval as approvals
from core.agent import checkpoints
from core.agent import slots
from core.agent.workspace import check_workspace
from core.session.entries import message_entry, reply_error_entry
from core.memory.secrets import hide_secrets

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


@dataclass
class ReplyKeptAsVersion:
    """Someone else (another tab, process or machine) wrote in the session while this reply was
    being written, so its round could not land where the reply started: it was stored as a
    version of the conversation instead (issue 25; :meth:`SessionManager.keep_as_version`), and
    the rest of this turn is stored there too. Yielded just before that round's RoundCompleted.

    ``key``: the version now holding the reply; ``of``: the session it was written for;
    ``number``/``count``: it is version ``number`` of the conversation's ``count`` versions."""

    key: SessionKey
    of: SessionKey
    number: int
    count: int


@dataclass
class AgentAnswering:
    """The message this turn answers starts with ``@name`` (issue 30): the defined agent ``name``
    answers it, with ``model``; its replies are stored with ``"agent": name``. Yielded after
    UserMessageSaved, before the loop's events."""

    name: str
    model: str


RunnerEvent = (AgentEvent | CompactionEvent | UserMessageSaved | TitleStarted | MemoryStarted
               | ReplyKeptAsVersion | AgentAnswering)


def _open_workspace(cwd: str | None) -> Workspace | None:
    if not cwd:
        return None
    try:
        return Workspace(cwd)
    except ToolError as err:
        log.warning("session workspace unavailable, tools disabled: %s", err)
        return None


def run_session_stream(key: SessionKey, store: SessionStore, user_input: str | None, *,
                       client: openai.OpenAI | None, **kwargs) -> Iterator[RunnerEvent]:
    """:func:`_run_session_stream` (the turn itself; arguments, events and errors documented
    there) while holding the turn on the model server (core.agent.slots): on a server serving
    one request at a time, background requests wait until the turn's last round."""
    return slots.holding_turn(_run_session_stream(key, store, user_input, client=client, **kwargs), client,
                              until=lambda event: isinstance(event, (MemoryStarted, TitleStarted)))


def _run_session_stream(
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
    confirm_memories: bool = False,
    agents: Definitions | None = None,
    storage: Storage | None = None,
) -> Iterator[RunnerEvent]:
    """Run one user turn on the stored session ``key``, yielding events as they happen.

    ``storage``: the :class:`~core.storage.Storage` whose ``sessions`` ``store`` is (its reply
    leases, checkpoint blobs, memory log and data folder serve the turn; ValueError when ``store``
    is not its ``sessions``). None: a storage over ``store`` alone, for a script holding one store
    of record; an app passes its own, so the services are shared (and a mirrored store always
    comes with its storage).

    ``confirm_memories``: a person can answer memory proposals (the web page): a fact the model
    wants to remember after the turn read files or tool output is kept as a proposal for them;
    without one (the CLI, scripts) it is refused (core.agent.memory_job, issue 28).

    Order: a system message first if the session has no messages (instructions + workspace
    path + the user's and project's memories + AGENTS.md/CLAUDE.md, see core.memory.context;
    a resumed session keeps the system message it was saved with); "interrupted" tool results for calls left dangling at the tail (appended, never
    rewritten); then the user message — all in ONE append, checked against ``expected_count``
    (the message count the caller loaded; SessionConflict if someone appended since) — then
    ``UserMessageSaved``. Then the agent loop's events (see core.agent.loop); each RoundCompleted is
    stored before it is yielded, checked against the history it continues: when someone else
    appended meanwhile (another tab, process or machine), the round is kept as a version of the
    conversation (:meth:`SessionManager.keep_as_version`) and :class:`ReplyKeptAsVersion` is
    yielded first — never a SessionConflict, never a round stored after another writer's
    messages; the rest of the turn goes to that version. Then, in ``auto`` memory mode, ``MemoryStarted`` (the memory
    extraction job, core.agent.memory_job). Last, if the session has no title yet, ``TitleStarted``.
    Unless ``ANYCODE_MEMORY=off``, the model also gets the ``remember`` tool.

    ``user_input`` None re-runs the model on the stored history (a retry after an error) without
    adding a message; when the turn was paused on an approval it resumes it (the paused call runs
    if ``approval`` holds the user's "allow" for it, gets a denied result on "deny", or pauses
    again). ``tools`` defaults to TOOL_SPECS plus the ``task``
    tool (sub-agents, :mod:`core.agent.subagents`); ``workspace`` to the session's project folder when
    :func:`core.agent.workspace.check_workspace` accepts it (else the tools are off and say why).
    ``agents``: the agent definitions the ``task`` tool names (default: those of the workspace
    and the user, :func:`core.agent.definitions.load_definitions`; issue 30).
    ``approval`` (default ``ApprovalPolicy.from_env()``): side-effect tools pause the turn on an
    approval request stored with the round (see :mod:`core.agent.approval`). A new message while
    an approval waits denies it.
    ``title_client``/``title_model`` default to ``client``/``model``; ``on_title(title, source,
    applied)`` is called from the title thread.

    Raises SessionNotFound, SessionConflict, ValueError (empty input), ModelNotConfigured when
    ``client`` is None (after saving the user message), and typed ModelErrors when the model
    fails — after storing what was done, including partial reply text; when no reply text came at
    all, a reply_error entry keeps why (secrets hidden; :func:`core.session.entries.reply_error_of`). Cancel (``cancel`` set, or
    this generator closed) stores the partial text the user saw and closes unfinished tool calls.
    """
    if user_input is not None and (not isinstance(user_input, str) or is_blank(user_input)):
        raise ValueError("The message is empty.")
    if storage is None:
        storage = Storage(store)
    elif storage.sessions is not store:
        raise ValueError(f"{store!r} is not the sessions of {storage!r}")
    manager = SessionManager(store)
    session = manager.get(key)
    messages = list(session.messages)
    workspace_problem = None
    if workspace is None:
        checked = check_workspace(key, session.cwd, origin=session.origin, protected_dirs=storage.protected_dirs())
        workspace, workspace_problem = checked.workspace, checked.problem
        if workspace_problem:
            log.warning("session %s: %s", key.session_id, workspace_problem)

    # Memory (issue 14): read into a NEW session's system prompt only (a resumed session keeps the
    # prompt it was saved with), written by a job after the exchange, and the `remember` tool.
    memory = SessionMemory.open(storage, key.project_key, key.session_id)
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
        check = expected_count
        if check is None and (closing or prefix_entries):
            # Results closing the stored tail's calls belong right after it: never after
            # someone else's messages, where they would be orphans.
            check = len(messages)
        if prefix_entries:  # approval answers and messages in one append
            count = store.append(key, [*prefix_entries, *(message_entry(m) for m in prefix)],
                                 expected_count=check)
        else:
            count = store_messages(manager, key, prefix, saved_count=len(messages), expected_count=check)
        if count != len(messages) + len(prefix):
            # Unchecked (no expected_count), and someone appended between our load and our
            # append: the stored history up to our message is what the reply answers.
            messages = manager.get(key).messages[:count - len(prefix)]
    elif expected_count is not None and expected_count != len(messages):
        raise SessionConflict(expected_count, len(messages))
    else:
        count = len(messages)
    messages += prefix
    if memory is not None:
        memory.message_index = len(messages) - 1
        memory.turn_messages = messages  # the live list: `remember` sees what the turn has read
        memory.can_confirm = confirm_memories
    if user_input is not None:
        yield UserMessageSaved(count)
    if client is None:
        err = ModelNotConfigured(NOT_CONFIGURED_MESSAGE)
        _note_failure(store, key, err, len(messages))
        raise err

    # Issue 30: the project's and the user's agent definitions, named by the task tool.
    agents = _agents_of(workspace, storage) if agents is None else agents
    tools = default_tools(agents=agents) if tools is None else tools
    # "@name ..." at the start of the message this turn answers: that agent answers, with its own
    # system prompt, model and tools, on the same messages (a retry or Regenerate of it too).
    speaker = addressed_agent(_last_user_text(messages), agents)
    chat_model = model
    if speaker is not None:
        model = speaker.model or model
        tools = speaker.filter_tools(tools)
        yield AgentAnswering(speaker.name, model)
    handlers = None
    if memory is not None and key.subpath is None and (speaker is None or speaker.allows("remember")):
        # (an agent whose definition lists its tools gets `remember` only when it lists it)
        tools, handlers = [*tools, REMEMBER_SPEC], memory.tool_handlers()
    # Issue 9: keeps every request inside the model's window (compacts first when needed).
    guard = make_guard(session, client=client, model=model, tools=tools, cancel=cancel, data_dir=storage.data_dir,
                       append=lambda entry, count: manager.add_compaction(key, entry, count))
    # Memories reach the model as they are at each request, not as the saved prompt has them
    # (a removed memory is never sent again; with memory off, none is; issue 28).
    guard.system_refresh = memory.refresh_system if memory is not None else (
        lambda text: with_memory_section(text, ""))
    if speaker is not None:
        refresh = guard.system_refresh
        guard.system_refresh = lambda text: agent_system_prompt(speaker, refresh(text))
    speaker_name = speaker.name if speaker is not None else None
    rounds = 0
    recovered = False
    # Issue 29: write_file reports each change; each stored round's changes become its checkpoint.
    recorder = checkpoints.attach(workspace, storage.blobs)
    while True:
        # TaskAgentRun: `task` calls run sub-agents recorded under this session (core.agent.subagents).
        run = TaskAgentRun(messages, key=key, storage=storage, client=client, model=model, tools=tools,
                           max_iterations=max_iterations - rounds, cancel=cancel, workspace=workspace,
                           tool_handlers=handlers, context=guard, agents=agents,
                           gate=approvals.ApprovalGate(approval), workspace_problem=workspace_problem)
        try:
            for event in run.events():
                if isinstance(event, RoundCompleted):
                    # Every round is checked against the history it continues: a round racing
                    # another writer's never lands after their messages; it is kept as a version.
                    # A store that fails (database killed, disk full) is retried and checked; if it
                    # gives up, the error carries the unsaved round (core.agent.persist).
                    if event.messages:
                        kept = _store_round(manager, key, event.messages, saved=len(messages), end=event.end,
                                            agent=speaker_name)
                        if kept is not None:
                            key = kept.key  # the rest of the turn (and its title) goes there
                            run.key = key  # sub-agent records of later task calls too
                            yield kept
                    if recorder is not None:
                        recorder.flush(store, key, at=len(messages) + len(event.messages))
                    if event.pending is not None and event.pending.call_id not in waiting:
                        # The waiting call's request, stored after its round (a restart shows it
                        # again; killed in between, the call is closed as interrupted like any other).
                        store.append(key, [event.pending.entry()])
                    if run.last_reply is not None:
                        guard.record(len(messages), messages, run.last_reply.usage)
                    if event.messages:
                        _store_usage(store, key, messages, event.messages, run.last_reply, chat_model)
                    messages.extend(event.messages)
                    rounds += 1
                yield event
            break
        except ModelError as err:
            # The request did not fit the window: compact harder and try once more, without
            # adding anything (the user message is stored once). Never a loop.
            overflow = None if recovered or run.interrupted_round() else overflow_of(err, guard)
            if overflow is False or overflow is None:
                partial = run.interrupted_round()
                _keep_partial(run, manager, key, messages, err, speaker_name)
                _flush_quietly(recorder, store, getattr(getattr(err, "kept_as", None), "key", key))
                if not partial:  # no reply at all: the session keeps why (a reload says so)
                    _note_failure(store, key, err, len(messages))
                raise
            recovered = True
            log.warning("session %s: the request did not fit the model's window (%s); compacting and retrying once",
                        key.session_id, err)
            done = False
            for event in guard.recover(messages, overflow if isinstance(overflow, ModelContextExceeded) else None):
                done = done or isinstance(event, CompactionFinished)
                yield event
            if not done:
                _note_failure(store, key, err, len(messages))
                raise
        except BaseException as original:
            # Generator closed (Stop), KeyboardInterrupt, a store failure: keep what the user saw.
            _keep_partial(run, manager, key, messages, original, speaker_name)
            _flush_quietly(recorder, store, getattr(getattr(original, "kept_as", None), "key", key))
            raise

    if rounds and memory is not None and key.subpath is None and not run.cancelled:
        job = memory.start_extraction(messages, client=title_client or client, model=title_model or chat_model,
                                      compactions=guard.compactions)
        if job is not None:
            yield MemoryStarted(job)
    if rounds and session.title_source is None:
        thread = start_title_generation(manager, key, messages, client=title_client or client,
                                        model=title_model or chat_model, on_done=on_title,
                                        compactions=guard.compactions, data_dir=storage.data_dir)
        yield TitleStarted(thread)


def _last_user_text(messages: list[dict]) -> str | None:
    """The text of the last user message of ``messages`` (None when there is none or it is not
    plain text)."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return m.get("content") if isinstance(m.get("content"), str) else None
    return None


def _agents_of(workspace: Workspace | None, storage: Storage) -> Definitions:
    """The agent definitions for a turn in ``workspace`` (:func:`core.agent.definitions.load_definitions`;
    without a workspace the user's only, from ``<data dir>/agents``)."""
    return load_definitions(workspace.root if workspace is not None else None, user_dir=storage.data_dir / "agents")


def _store_round(manager: SessionManager, key: SessionKey, new: list[dict], *, saved: int,
                 end: str | None = None, agent: str | None = None) -> ReplyKeptAsVersion | None:
    """Append a finished round after the ``saved`` messages it continues (its replies marked
    with ``agent``, the defined agent answering, issue 30); when someone else appended since
    (:class:`SessionConflict`), keep it as a version instead and say so (the event). Raises the
    store's errors (with ``unsaved``, :func:`store_messages`)."""
    try:
        store_messages(manager, key, new, saved_count=saved, expected_count=saved, end=end, agent=agent)
        return None
    except SessionConflict as err:
        log.warning("session %s: %s; keeping the reply as a version", key.session_id, err)
    version = manager.keep_as_version(key, saved, new, end=end, agent=agent)
    number, count, _ = manager.version_number(version.key)
    return ReplyKeptAsVersion(version.key, key, number, count)


def _store_usage(store: Any, key: Any, before: list[dict], new: list[dict], reply: Any, model: str) -> None:
    """Append the round's usage entry (core.session.usage): the server's ``usage`` of the reply,
    else an estimate marked so. Never fails the turn (a usage figure is not worth a lost reply)."""
    from core.agent.context import estimate_tokens
    from core.session.usage import usage_entry

    usage = getattr(reply, "usage", None) if reply is not None else None
    try:
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            entry = usage_entry(len(before) + len(new), model, usage["prompt_tokens"],
                                int(usage.get("completion_tokens") or 0), estimated=False)
        else:
            entry = usage_entry(len(before) + len(new), model, estimate_tokens(before), estimate_tokens(new[:1]),
                                estimated=True)
        store.append(key, [entry])
    except Exception as err:  # noqa: BLE001 -- see the docstring
        log.warning("session %s: could not store the reply's usage (%s)", getattr(key, "session_id", key), err)


def _flush_quietly(recorder: checkpoints.Recorder | None, store: SessionStore, key: SessionKey) -> None:
    """The checkpoint of files changed in a round that was cut short (after its partial round)."""
    if recorder is None:
        return
    try:
        recorder.flush(store, key)
    except Exception as err:  # noqa: BLE001 -- the original error matters more
        log.warning("could not store the checkpoint of %s's interrupted round: %s", key.session_id, err)


def _note_failure(store: SessionStore, key: SessionKey, err: ModelError, at: int) -> None:
    """Append a reply_error entry (:func:`core.session.entries.reply_error_entry`): the turn on
    ``key`` failed with ``err`` after ``at`` stored messages and stored no reply, so the page can
    still say why after a reload. Secrets in the reason and the server's message are hidden
    (:func:`core.memory.secrets.hide_secrets`). Never raises: the model's error matters more."""
    try:
        entry = reply_error_entry(type(err).__name__, hide_secrets(str(err)), at,
                                  status=getattr(err, "status_code", None),
                                  detail=hide_secrets(str(getattr(err, "detail", "") or "")))
        store.append(key, [entry])
    except Exception as failure:  # noqa: BLE001 -- the original error matters more
        log.warning("could not store why the reply in %s failed: %s", key.session_id, failure)


def _keep_partial(run: TaskAgentRun, manager: SessionManager, key: SessionKey, messages: list[dict],
                  original: BaseException, agent: str | None = None) -> None:
    """Store the round in flight (the partial text the user saw, closed tool calls) after ``original``
    stopped the run — as a version when someone else wrote meanwhile (then attached to
    ``original`` as ``kept_as``); a failure to store is attached to ``original``
    (``unsaved``/``saved_count``)."""
    partial = run.interrupted_round()
    if not partial:
        return
    try:
        kept = _store_round(manager, key, partial, saved=len(messages), agent=agent)
        if kept is not None:
            original.kept_as = kept  # type: ignore[attr-defined]
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
    """Non-streaming :func:`run_session_stream` (same arguments and errors); the session after it
    (the version holding the reply when it was kept as one, :class:`ReplyKeptAsVersion`).

    ``wait_for_title`` / ``wait_for_memory``: seconds to wait for the background title / memory
    extraction (None: don't wait).
    """
    for event in run_session_stream(key, store, user_input, client=client, model=model, **kwargs):
        if isinstance(event, ReplyKeptAsVersion):
            key = event.key  # the reply is there
        if isinstance(event, TitleStarted) and wait_for_title is not None:
            event.thread.join(wait_for_title)
        if isinstance(event, MemoryStarted) and wait_for_memory is not None:
            event.thread.join(wait_for_memory)
    return SessionManager(store).get(key)
