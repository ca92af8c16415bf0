"""Run the agent on a stored session (seed ``runSession``), storing as it goes.

A turn is a few named phases, each a short function over one :class:`_Turn` (the OpenAI Agents
SDK's ``run_internal`` is the model):

1. **prepare** (:func:`_prepare`): load the session, check its workspace, open its memory, read
   which approvals wait;
2. **open** (:func:`_open_turn`): store what opens the turn — a system message for a new session,
   results closing calls left dangling, denials of approvals a new message replaced, the user's
   message — in ONE append, at once, so a failing model never loses what the user typed;
3. **equip** (:func:`_choose_agent`, :func:`_equip`): the answering agent (``@name``), its tools,
   the window guard, the checkpoint recorder;
4. **run rounds** (:func:`_run_rounds`): the agent loop, compacting and trying once more when a
   request did not fit, keeping the partial round when it stops;
5. **store a round** (:func:`_store_round`): each finished round — its messages, the usage of the
   request it made, the checkpoint of the files it changed and the approval it paused on — is ONE
   append through the caller's :class:`~core.session.manager.SessionManager`, before its
   ``RoundCompleted`` is yielded, or a version of the conversation when someone else wrote first;
6. **after the turn** (:func:`_after_turn`): the memory and title jobs, in the background.

A crash or kill loses at most the round in flight. The loop itself knows nothing of sessions.
Every event is a class of :mod:`core.agent.events`.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import openai

from core.agent import approval as approvals
from core.agent import checkpoints
from core.agent import slots
from core.agent.compaction import ContextGuard, make_guard, overflow_of
from core.agent.config import NOT_CONFIGURED_MESSAGE
from core.agent.context import estimate_tokens
from core.agent.definitions import (AgentDefinition, Definitions, addressed_agent, agent_system_prompt,
                                    load_definitions)
from core.agent.events import (AgentAnswering, CompactionFinished, MemoryStarted, ReplyKeptAsVersion, RoundCompleted,
                               TitleStarted, TurnEvent, UserMessageSaved)
from core.agent.memory_job import REMEMBER_SPEC, SessionMemory
from core.agent.persist import store_round
from core.agent.prompts import system_prompt
from core.agent.repair import closing_results, sanitize_text
from core.agent.subagents import TaskAgentRun, default_tools
from core.agent.titles import start_title_generation
from core.agent.tools import Workspace
from core.agent.workspace import check_workspace
from core.errors import ModelContextExceeded, ModelError, ModelNotConfigured, SessionConflict
from core.memory.context import session_context, with_memory_section
from core.memory.secrets import hide_secrets
from core.session.entries import reply_error_entry
from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.session.models import Session
from core.session.rounds import Round
from core.session.store import SessionStore
from core.storage import Storage
from core.session.text import is_blank
from core.session.usage import usage_entry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnOptions:
    """How one turn runs; every field but ``model`` has a default. Documented one by one on
    :func:`run_session_stream`, which takes them as keyword arguments."""

    model: str
    tools: list[dict] | None = None
    workspace: Workspace | None = None
    expected_count: int | None = None
    cancel: threading.Event | None = None
    title_client: openai.OpenAI | None = None
    title_model: str | None = None
    max_iterations: int = 20
    on_title: Callable[[str, str, bool], None] | None = None
    approval: approvals.ApprovalPolicy | None = None
    confirm_memories: bool = False
    agents: Definitions | None = None
    extra_tools: Callable[..., Any] | None = None
    storage: Storage | None = None


@dataclass
class _Turn:
    """What one turn knows while it runs. ``key`` moves to a version when a round is kept as one
    (the rest of the turn is stored there); ``messages`` is the stored history the next round
    continues."""

    key: SessionKey
    manager: SessionManager
    storage: Storage
    client: openai.OpenAI | None
    options: TurnOptions
    session: Session
    messages: list[dict]
    entries: list[dict]  # the session's entries as loaded at the start (until the opening read them)
    workspace: Workspace | None = None
    workspace_problem: str | None = None
    memory: SessionMemory | None = None
    waiting: set[str] = field(default_factory=set)  # approvals pending, already stored
    model: str = ""  # the answering model (an addressed agent's own, else the chat's)
    tools: list[dict] = field(default_factory=list)
    handlers: dict | None = None
    agents: Definitions | None = None
    speaker: AgentDefinition | None = None
    guard: ContextGuard | None = None
    recorder: checkpoints.Recorder | None = None
    extra: Any = None  # the MCP servers' offer for this turn (core.agent.mcp.turn.McpTurn), or None
    rounds: int = 0

    @property
    def agent_name(self) -> str | None:
        """The defined agent answering (``@name``), marked on its replies; None for the chat's own."""
        return self.speaker.name if self.speaker is not None else None


def run_session_stream(key: SessionKey, sessions: SessionManager | SessionStore, user_input: str | None, *,
                       client: openai.OpenAI | None, **options: Any) -> Iterator[TurnEvent]:
    """Run one user turn on the stored session ``key``, yielding events as they happen
    (:mod:`core.agent.events`), while holding the turn on the model server (core.agent.slots: on
    a server serving one request at a time, background requests wait until the turn's last round).

    ``sessions``: the caller's :class:`SessionManager` — the only writer of the session, its fold
    memo shared with the caller's reads (the web page passes its own) — or a bare store, for
    scripts (a manager is made for it). ``options``: the fields of :class:`TurnOptions`:

    - ``model`` (required); ``title_client``/``title_model``: the title and memory jobs' (default
      ``client``/``model``); ``on_title(title, source, applied)``: called from the title thread;
    - ``expected_count``: the message count the caller loaded (SessionConflict if someone appended
      since, with nothing stored); ``cancel``: Stop;
    - ``tools``: default TOOL_SPECS plus the ``task`` tool (sub-agents,
      :mod:`core.agent.subagents`); ``workspace``: default the session's project folder when
      :func:`core.agent.workspace.check_workspace` accepts it (else the tools are off and say
      why); ``max_iterations``: model calls per turn (20);
    - ``agents``: the agent definitions the ``task`` tool and ``@name`` name (default: those of
      the workspace and the user, :func:`core.agent.definitions.load_definitions`);
    - ``approval`` (default ``ApprovalPolicy.from_env()``): side-effect tools pause the turn on an
      approval request stored with the round (:mod:`core.agent.approval`); a new message while an
      approval waits denies it;
    - ``confirm_memories``: a person can answer memory proposals (the web page): a fact the model
      wants to remember after the turn read files or tool output is kept as a proposal for them;
      without one (the CLI, scripts) it is refused (core.agent.memory_job);
    - ``extra_tools``: tools from outside anycode for this turn — ``extra_tools(workspace,
      messages, cancel)`` returns an offer (:class:`core.agent.mcp.turn.McpTurn`: the MCP servers'
      tools, their handlers, the servers' instructions, the approval check of their calls and the
      record of which server each call went to) or None; it never raises;
    - ``storage``: the :class:`~core.storage.Storage` whose ``sessions`` the manager writes (its
      reply leases, checkpoint blobs, memory log and data folder serve the turn; ValueError when
      the manager's store is not its ``sessions``). None: a storage over the manager's store
      alone, for a script holding one store of record; an app passes its own, so the services
      are shared (and a mirrored store always comes with its storage).

    Order: a system message first if the session has no messages (instructions + workspace path
    + the user's and project's memories + AGENTS.md/CLAUDE.md, see core.memory.context; a resumed
    session keeps the system message it was saved with); "interrupted" tool results for calls left
    dangling at the tail (appended, never rewritten); then the user message — all in ONE append,
    checked against ``expected_count`` — then ``UserMessageSaved``. ``AgentAnswering`` when the
    message starts with ``@name``. Then the loop's events; each round is stored (one append:
    messages, the usage of the request it made, its checkpoint, its pending approval) before its
    ``RoundCompleted`` is yielded, checked against the history it continues: when someone else
    appended meanwhile, the round is kept as a version (:meth:`SessionManager.keep_as_version`)
    and ``ReplyKeptAsVersion`` is yielded first — never a SessionConflict, never a round stored
    after another writer's messages; the rest of the turn goes to that version. Then, in ``auto``
    memory mode, ``MemoryStarted``; last, if the session has no title yet, ``TitleStarted``.
    Unless ``ANYCODE_MEMORY=off``, the model also gets the ``remember`` tool.

    ``user_input`` None re-runs the model on the stored history (a retry after an error) without
    adding a message; when the turn was paused on an approval it resumes it (the paused call runs
    if ``approval`` holds the user's "allow" for it, gets a denied result on "deny", or pauses
    again).

    Raises SessionNotFound, SessionConflict, ValueError (empty input), TypeError (an unknown
    option), ModelNotConfigured when ``client`` is None (after saving the user message), and typed
    ModelErrors when the model fails — after storing what was done, including partial reply text;
    when no reply text came at all, a reply_error entry keeps why (secrets hidden;
    :func:`core.session.entries.reply_error_of`). Cancel (``cancel`` set, or this generator
    closed) stores the partial text the user saw and closes unfinished tool calls."""
    turn = _run_turn(key, SessionManager.of(sessions), user_input, client, TurnOptions(**options))
    return slots.holding_turn(turn, client, until=lambda event: isinstance(event, (MemoryStarted, TitleStarted)))


def _run_turn(key: SessionKey, manager: SessionManager, user_input: str | None, client: openai.OpenAI | None,
              options: TurnOptions) -> Iterator[TurnEvent]:
    """The turn's phases, in order (see the module docstring)."""
    if user_input is not None and (not isinstance(user_input, str) or is_blank(user_input)):
        raise ValueError("The message is empty.")
    turn = _prepare(key, manager, client, options)
    yield from _open_turn(turn, user_input)
    if client is None:
        err = ModelNotConfigured(NOT_CONFIGURED_MESSAGE)
        _note_failure(turn, err)
        raise err
    yield from _choose_agent(turn)
    _equip(turn)
    run = yield from _run_rounds(turn)
    yield from _after_turn(turn, run)


# --- prepare and open the turn -------------------------------------------------------------------


def _prepare(key: SessionKey, manager: SessionManager, client: openai.OpenAI | None,
             options: TurnOptions) -> _Turn:
    """Load the session (one read), check its workspace and open its memory. Raises
    SessionNotFound, ValueError (a storage whose sessions are not the manager's store)."""
    storage = options.storage
    if storage is None:
        storage = Storage.over(manager.store)
    elif storage.sessions is not manager.store:
        raise ValueError(f"{manager.store!r} is not the sessions of {storage!r}")
    entries = manager.store.load(key)
    session = manager.get(key, entries=entries)
    turn = _Turn(key, manager, storage, client, options, session, list(session.messages), entries or [],
                 workspace=options.workspace)
    if turn.workspace is None:
        checked = check_workspace(key, session.cwd, origin=session.origin, protected_dirs=storage.protected_dirs())
        turn.workspace, turn.workspace_problem = checked.workspace, checked.problem
        if turn.workspace_problem:
            log.warning("session %s: %s", key.session_id, turn.workspace_problem)
    # Memory: read into a NEW session's system prompt only (a resumed session keeps the prompt it
    # was saved with), written by a job after the exchange, and the `remember` tool.
    turn.memory = SessionMemory.open(storage, key.project_key, key.session_id)
    return turn


def _opening(turn: _Turn, user_input: str | None) -> tuple[Round, bool]:
    """What opens the turn, as one :class:`Round`, and whether it closes the stored tail (results
    for its dangling calls, denials of its waiting approvals: they belong right after it)."""
    messages = turn.messages
    prefix: list[dict] = []
    if not messages:
        root = turn.workspace.root if turn.workspace else turn.session.cwd or ""
        context = (turn.memory.context(root) if turn.memory else session_context([], root)).text
        prefix.append({"role": "system", "content": system_prompt(root) + (f"\n\n{context}" if context else "")})
    state = approvals.ApprovalState.from_entries(turn.entries)
    turn.entries = []  # read once: a long session's entries are not held for the whole turn
    turn.waiting = {p.call_id for p in state.pending()}
    closing = closing_results(messages)
    answers: tuple[dict, ...] = ()
    if user_input is None and any(r["tool_call_id"] in state.requests for r in closing):
        closing = []  # a turn paused on an approval: the loop resumes it
    elif turn.waiting and closing:
        # A new message instead of an answer: the waiting calls are denied, the rest closed.
        denied = approvals.closing_round(state, approvals.NEW_MESSAGE_REASON, closing)
        closing, answers = denied.messages, denied.answers
        turn.waiting = set()
    prefix += closing
    if user_input is not None:
        prefix.append({"role": "user", "content": sanitize_text(user_input)})
    return Round(prefix, answers=answers), bool(closing or answers)


def _open_turn(turn: _Turn, user_input: str | None) -> Iterator[UserMessageSaved]:
    """Store the turn's opening in one append (checked against ``expected_count``; a tail it
    closes is checked against the history as loaded even without one) and yield
    ``UserMessageSaved`` for a new message. Raises SessionConflict."""
    opening, closes_tail = _opening(turn, user_input)
    expected = turn.options.expected_count
    saved = len(turn.messages)
    if opening.messages:
        if expected is None and closes_tail:
            # Results closing the stored tail's calls belong right after it: never after
            # someone else's messages, where they would be orphans.
            expected = saved
        count = store_round(turn.manager, turn.key, opening, saved_count=saved, expected_count=expected)
        if count != saved + len(opening.messages):
            # Unchecked, and someone appended between our load and our append: the stored
            # history up to our message is what the reply answers.
            turn.messages = turn.manager.get(turn.key).messages[:count - len(opening.messages)]
        turn.messages += opening.messages
    elif expected is not None and expected != saved:
        raise SessionConflict(expected, saved)
    else:
        count = saved
    if turn.memory is not None:
        turn.memory.message_index = len(turn.messages) - 1
        turn.memory.turn_messages = turn.messages  # the live list: `remember` sees what the turn has read
        turn.memory.can_confirm = turn.options.confirm_memories
    if user_input is not None:
        yield UserMessageSaved(count)


def _choose_agent(turn: _Turn) -> Iterator[AgentAnswering]:
    """The agent definitions, the answering agent (``@name`` at the start of the message this
    turn answers: its own system prompt, model and tools, on the same messages — a retry or
    Regenerate of it too) and the tools; yields ``AgentAnswering`` for an addressed agent."""
    options = turn.options
    turn.agents = _agents_of(turn.workspace, turn.storage) if options.agents is None else options.agents
    tools = default_tools(agents=turn.agents) if options.tools is None else options.tools
    # Tools of the project's MCP servers (core.agent.mcp), offered beside anycode's own (an
    # addressed agent's tool list filters them too).
    extra = options.extra_tools
    turn.extra = extra(turn.workspace, turn.messages, options.cancel) if extra is not None else None
    if turn.extra is not None:
        tools = [*tools, *turn.extra.specs]
    turn.speaker = addressed_agent(_last_user_text(turn.messages), turn.agents)
    turn.model = options.model
    if turn.speaker is not None:
        turn.model = turn.speaker.model or options.model
        tools = turn.speaker.filter_tools(tools)
        yield AgentAnswering(turn.speaker.name, turn.model)
    if (turn.memory is not None and turn.key.subpath is None
            and (turn.speaker is None or turn.speaker.allows("remember"))):
        # (an agent whose definition lists its tools gets `remember` only when it lists it)
        tools, turn.handlers = [*tools, REMEMBER_SPEC], turn.memory.tool_handlers()
    if turn.extra is not None:
        turn.handlers = {**(turn.handlers or {}), **turn.extra.handlers}
    turn.tools = tools


def _equip(turn: _Turn) -> None:
    """The window guard (every request inside the model's window, compacting first when needed)
    and the checkpoint recorder (``write_file`` reports each change to it)."""
    manager, key = turn.manager, turn.key
    turn.guard = make_guard(turn.session, client=turn.client, model=turn.model, tools=turn.tools,
                            cancel=turn.options.cancel, data_dir=turn.storage.data_dir,
                            append=lambda entry, count: manager.add_compaction(key, entry, count))
    # Memories reach the model as they are at each request, not as the saved prompt has them (a
    # removed memory is never sent again; with memory off, none is).
    turn.guard.system_refresh = turn.memory.refresh_system if turn.memory is not None else (
        lambda text: with_memory_section(text, ""))
    if turn.speaker is not None:
        refresh, speaker = turn.guard.system_refresh, turn.speaker
        turn.guard.system_refresh = lambda text: agent_system_prompt(speaker, refresh(text))
    if turn.extra is not None:  # the MCP servers' instructions, at request time (never stored)
        before_extra, extra = turn.guard.system_refresh, turn.extra
        turn.guard.system_refresh = lambda text: extra.system_refresh(before_extra(text))
    turn.recorder = checkpoints.attach(turn.workspace, turn.storage.blobs)


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


# --- run the rounds ------------------------------------------------------------------------------


def _new_run(turn: _Turn) -> TaskAgentRun:
    """The loop over the stored history; ``task`` calls run sub-agents recorded under this session
    (core.agent.subagents), written by the turn's manager."""
    options = turn.options
    return TaskAgentRun(turn.messages, key=turn.key, manager=turn.manager, storage=turn.storage, client=turn.client, model=turn.model,
                        tools=turn.tools, max_iterations=options.max_iterations - turn.rounds,
                        cancel=options.cancel, workspace=turn.workspace, tool_handlers=turn.handlers,
                        context=turn.guard, agents=turn.agents, gate=approvals.ApprovalGate(options.approval, extra=turn.extra),
                        workspace_problem=turn.workspace_problem)


def _run_rounds(turn: _Turn) -> Generator[TurnEvent, None, TaskAgentRun]:
    """Run the loop, storing each round before yielding its ``RoundCompleted``; returns the last
    run. A request that did not fit the window is compacted harder and tried once more, without
    adding anything (the user message is stored once), never in a loop. Any other end —
    a model error, Stop (this generator closed), a store failure — keeps what the user saw."""
    recovered = False
    while True:
        run = _new_run(turn)
        try:
            for event in run.events():
                if isinstance(event, RoundCompleted):
                    yield from _store_round(turn, run, event)
                yield event
            return run
        except ModelError as err:
            if not (yield from _recover(turn, run, err, recovered)):
                raise
            recovered = True
        except BaseException as original:
            _keep_partial(turn, run, original)
            raise


def _recover(turn: _Turn, run: TaskAgentRun, err: ModelError, recovered: bool) -> Generator[TurnEvent, None, bool]:
    """After ``err`` ended the run: when it means the request did not fit the window (and
    nothing of the round was shown, and this is the first time), compact harder (yielding the
    compaction's events) and return True to try once more; else keep the partial round, store
    why the turn failed when it stored no reply, and return False (the caller raises ``err``)."""
    partial = bool(run.interrupted_round())
    overflow = None if recovered or partial else overflow_of(err, turn.guard)
    if overflow is False or overflow is None:
        _keep_partial(turn, run, err)
        if not partial:  # no reply at all: the session keeps why (a reload says so)
            _note_failure(turn, err)
        return False
    log.warning("session %s: the request did not fit the model's window (%s); compacting and retrying once",
                turn.key.session_id, err)
    done = False
    for event in turn.guard.recover(turn.messages, overflow if isinstance(overflow, ModelContextExceeded) else None):
        done = done or isinstance(event, CompactionFinished)
        yield event
    if not done:
        _note_failure(turn, err)
    return done


# --- store a round -------------------------------------------------------------------------------


def _store_round(turn: _Turn, run: TaskAgentRun, event: RoundCompleted) -> Iterator[ReplyKeptAsVersion]:
    """Store ``event``'s round — its messages, the usage of the request it made, the checkpoint of
    the files it changed, the approval it paused on — in ONE append after the stored history it
    continues; yields ``ReplyKeptAsVersion`` when someone else appended meanwhile and it was kept
    as a version instead (the rest of the turn goes there). A store that fails (database killed,
    disk full) is retried and checked; if it gives up, the error carries the unsaved round
    (core.agent.persist) and the round's file changes wait for the next checkpoint."""
    saved = len(turn.messages)
    files = turn.recorder.drain() if turn.recorder is not None else []
    pending = event.pending if event.pending is not None and event.pending.call_id not in turn.waiting else None
    # The waiting call's request goes with its round: a restart shows it again, a kill loses both
    round = Round(event.messages, end=event.end, agent=turn.agent_name,
                  usage=_usage_of(turn, event.messages, event.requested, event.usage),
                  checkpoint=checkpoints.checkpoint_entry(saved + len(event.messages), files) if files else None,
                  approval=pending.entry() if pending is not None else None, mcp=_mcp_calls(turn, event.messages))
    try:
        if round.messages:
            kept = _store_checked(turn, round, saved)
            if kept is not None:
                turn.key = run.key = kept.key  # the rest of the turn (its title, sub-agent records) goes there
                yield kept
        elif not round.empty:  # a paused round whose messages were stored before (a task round's head)
            turn.manager.store_round(turn.key, round)
    except BaseException:
        if turn.recorder is not None:
            turn.recorder.give_back(files)
        raise
    if event.requested:
        turn.guard.record(saved, turn.messages, event.usage)
    turn.messages.extend(event.messages)
    turn.rounds += 1


def _mcp_calls(turn: _Turn, messages: list[dict]) -> dict[str, dict[str, str]] | None:
    """``{call id: {"server", "tool"}}`` of the calls in ``messages`` that went to MCP servers
    (:mod:`core.session.mcp_calls`); None in a turn without them."""
    return turn.extra.calls_in(messages) if turn.extra is not None else None


def _usage_of(turn: _Turn, new: list[dict], requested: bool, usage: Any) -> dict | None:
    """The ``usage`` entry (core.session.usage) of the request whose reply heads ``new``: the
    server's count, else an estimate marked so; None when the round made no request. Never fails
    the turn (a usage figure is not worth a lost reply)."""
    if not requested or not new:
        return None
    at = len(turn.messages) + len(new)
    try:
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            return usage_entry(at, turn.options.model, usage["prompt_tokens"],
                               int(usage.get("completion_tokens") or 0), estimated=False)
        return usage_entry(at, turn.options.model, estimate_tokens(turn.messages), estimate_tokens(new[:1]),
                           estimated=True)
    except Exception as err:  # noqa: BLE001 -- see the docstring
        log.warning("session %s: no usage for the reply (%s)", turn.key.session_id, err)
        return None


def _store_checked(turn: _Turn, round: Round, saved: int) -> ReplyKeptAsVersion | None:
    """Append ``round`` after the ``saved`` messages it continues; when someone else appended
    since (:class:`SessionConflict`), keep it as a version instead and say so (the event). Raises
    the store's errors (with ``unsaved``, :func:`core.agent.persist.store_round`)."""
    try:
        store_round(turn.manager, turn.key, round, saved_count=saved, expected_count=saved)
        return None
    except SessionConflict as err:
        log.warning("session %s: %s; keeping the reply as a version", turn.key.session_id, err)
    version = turn.manager.keep_as_version(turn.key, saved, round)
    number, count, _ = turn.manager.version_number(version.key)
    return ReplyKeptAsVersion(version.key, turn.key, number, count)


def _keep_partial(turn: _Turn, run: TaskAgentRun, original: BaseException) -> None:
    """Store the round in flight after ``original`` stopped the run — the partial text the user
    saw, closed tool calls, the usage of its request when its reply came whole, the files it
    changed — as a version when someone else wrote meanwhile (then attached to ``original`` as
    ``kept_as``); a failure to store is attached to ``original`` (``unsaved``/``saved_count``).
    Never raises: ``original`` matters more."""
    partial = run.interrupted_round()
    files = turn.recorder.drain() if turn.recorder is not None else []
    saved = len(turn.messages)
    if not partial:
        _checkpoint_quietly(turn, files)
        return
    requested, usage = run.unstored_request()
    round = Round(partial, agent=turn.agent_name, usage=_usage_of(turn, partial, requested, usage),
                  checkpoint=checkpoints.checkpoint_entry(saved + len(partial), files) if files else None,
                  mcp=_mcp_calls(turn, partial))
    try:
        kept = _store_checked(turn, round, saved)
        if kept is not None:
            original.kept_as = kept  # type: ignore[attr-defined]
        log.info("stored the interrupted round of %s (%d messages)", turn.key.session_id, len(partial))
    except Exception as err:  # noqa: BLE001 -- the original error matters more
        log.warning("could not store the interrupted round of %s: %s", turn.key.session_id, err)
        if hasattr(err, "unsaved"):  # the caller keeps it on screen and stores it later
            original.unsaved, original.saved_count = err.unsaved, err.saved_count  # type: ignore[attr-defined]
        _checkpoint_quietly(turn, files)


def _checkpoint_quietly(turn: _Turn, files: list[dict]) -> None:
    """The checkpoint of files changed by a round whose messages went without it (cut short
    before any, or not stored), at the stored message count. Never raises."""
    if not files:
        return
    try:
        count = len(turn.manager.get(turn.key).messages)
        turn.manager.add_checkpoint(turn.key, checkpoints.checkpoint_entry(count, files))
    except Exception as err:  # noqa: BLE001 -- the original error matters more
        log.warning("could not store the checkpoint of %s's interrupted round: %s", turn.key.session_id, err)


def _note_failure(turn: _Turn, err: ModelError) -> None:
    """Append a reply_error entry (:func:`core.session.entries.reply_error_entry`): the turn
    failed with ``err`` after the stored messages and stored no reply, so the page can still say
    why after a reload. Secrets in the reason and the server's message are hidden
    (:func:`core.memory.secrets.hide_secrets`). Never raises: the model's error matters more."""
    try:
        entry = reply_error_entry(type(err).__name__, hide_secrets(str(err)), len(turn.messages),
                                  status=getattr(err, "status_code", None),
                                  detail=hide_secrets(str(getattr(err, "detail", "") or "")))
        turn.manager.add_reply_error(turn.key, entry)
    except Exception as failure:  # noqa: BLE001 -- the original error matters more
        log.warning("could not store why the reply in %s failed: %s", turn.key.session_id, failure)


# --- after the turn ------------------------------------------------------------------------------


def _after_turn(turn: _Turn, run: TaskAgentRun) -> Iterator[MemoryStarted | TitleStarted]:
    """The background jobs of a turn that stored a round: the memory extraction (``auto``
    memory mode, not after Stop) and, for an untitled session, its title."""
    if not turn.rounds:
        return
    client = turn.options.title_client or turn.client
    model = turn.options.title_model or turn.options.model
    if turn.memory is not None and turn.key.subpath is None and not run.cancelled:
        job = turn.memory.start_extraction(turn.messages, client=client, model=model,
                                           compactions=turn.guard.compactions)
        if job is not None:
            yield MemoryStarted(job)
    if turn.session.title_source is None:
        thread = start_title_generation(turn.manager, turn.key, turn.messages, client=client, model=model,
                                        on_done=turn.options.on_title, compactions=turn.guard.compactions,
                                        data_dir=turn.storage.data_dir)
        yield TitleStarted(thread)


def run_session(key: SessionKey, sessions: SessionManager | SessionStore, user_input: str | None, *,
                client: openai.OpenAI | None, model: str, wait_for_title: float | None = None,
                wait_for_memory: float | None = None, **options: Any) -> Session:
    """Non-streaming :func:`run_session_stream` (same arguments and errors); the session after it
    (the version holding the reply when it was kept as one, :class:`ReplyKeptAsVersion`).

    ``wait_for_title`` / ``wait_for_memory``: seconds to wait for the background title / memory
    extraction (None: don't wait).
    """
    manager = SessionManager.of(sessions)
    for event in run_session_stream(key, manager, user_input, client=client, model=model, **options):
        if isinstance(event, ReplyKeptAsVersion):
            key = event.key  # the reply is there
        if isinstance(event, TitleStarted) and wait_for_title is not None:
            event.thread.join(wait_for_title)
        if isinstance(event, MemoryStarted) and wait_for_memory is not None:
            event.thread.join(wait_for_memory)
    return manager.get(key)
