"""Sub-agents: the ``task`` tool (design article, the SubAgent remarks: an independent task
string, its own messages, records under the parent session's subpath, not polluting it).

A ``task`` call (``{"description": short label, "prompt": the full task}``) runs a sub-agent loop
with its own messages — the sub-agent system prompt and the task — the workspace tools (the
``task`` tool too only while the depth allows, default 1: sub-agents start none), its own
iteration limit and model. Its final answer comes back to the parent as the call's tool result
(capped like every tool result); the parent conversation holds only the call and the result.

Records. Each run is stored at ``SessionKey(project, session_id, "subagents/<id>")``
(:mod:`core.session.subagents`): created whole with its header (naming the parent's tool call
id and the description), system prompt and task, then appended round by round like a session
(``core.agent.persist``), so a crash loses at most the round in flight. Before the first task
of a round starts, the parent's assistant message holding the calls is stored on its own (a
``RoundCompleted`` with just that message): a crash mid-task then leaves the call in the parent
(closed as interrupted on resume, as every dangling call is) beside the sub-agent's record.

Parallel. All task calls of one assistant message start together (at most ``concurrency`` at a
time, the rest queued); their progress is yielded as :class:`SubagentEvent`\\ s while the parent
waits for each result in call order. Stop (the parent's cancel flag, or its generator closed)
cancels every one of them; each keeps what it had done (its interrupted round stored) and the
parent's calls get "interrupted" results.

Settings (environment): ``ANYCODE_SUBAGENT_MODEL`` (default: the chat model),
``ANYCODE_SUBAGENT_DEPTH`` (how deep sub-agents may nest; default 1, 0 turns the task tool off,
at most :data:`MAX_DEPTH`),
``ANYCODE_SUBAGENT_MAX_ITERATIONS`` (model calls per sub-agent, default 20),
``ANYCODE_SUBAGENT_CONCURRENCY`` (sub-agents running at once per message, default 3).
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from core.agent.definitions import AgentDefinition, Definitions, agent_system_prompt, agents_listing
from core.agent.experts import Consultation
from core.agent.events import AgentEvent, RoundCompleted, SubagentEvent, SubagentFinished, SubagentStarted
from core.agent.loop import AgentRun
from core.agent.persist import store_messages
from core.agent.prompts import subagent_system_prompt
from core.agent.repair import interrupted_result, sanitize_text
from core.agent.tools import TOOL_SPECS, ToolError, arguments_object, cap_output
from core.errors import AnycodeError, ExpertBusy, ModelError, SessionExists
from core.session.entries import header_entry, message_entry
from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.session.experts import expert_session_id
from core.session.subagents import record_subpath, stopped_report
from core.storage import Storage

log = logging.getLogger(__name__)

TASK_TOOL = "task"
_POLL_SECONDS = 0.1
# How long Stop waits for stopped sub-agents to store what they did (seconds).
STOP_WAIT_SECONDS = 10.0
MAX_DESCRIPTION_CHARS = 120

# The OpenAI `tools=` entry of the task tool (per the chat completions API's function tools).
TASK_TOOL_SPEC: dict = {"type": "function", "function": {
    "name": TASK_TOOL,
    "description": (
        "Hand a self-contained piece of work (searching or surveying files, a focused change) to a "
        "sub-agent. It does not see this conversation: put everything it needs in 'prompt'. It can "
        "use the workspace tools and returns its final answer as this tool's result. Several task "
        "calls in one reply run at the same time."),
    "parameters": {"type": "object", "properties": {
        "description": {"type": "string", "description": "A short label (3-7 words) shown to the user"},
        "prompt": {"type": "string", "description": "The full task: what to do and what to report back"}},
        "required": ["description", "prompt"]}}}


MAX_DEPTH = 5  # deeper nesting only multiplies cost; 1,000 levels ended in a RecursionError
MAX_CONCURRENCY = 8  # sub-agents of one reply running at once, whatever is asked: the rest queue


def _env_int(name: str, default: int, minimum: int, maximum: int | None = None) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        log.warning("%s=%r is not a whole number; using %d", name, raw, default)
        return default
    if value < minimum:
        log.warning("%s=%r is below %d; using %d", name, raw, minimum, default)
        return default
    if maximum is not None and value > maximum:
        log.warning("%s=%r is above the ceiling of %d; using %d", name, raw, maximum, maximum)
        return maximum
    return value


@dataclass(frozen=True)
class SubagentConfig:
    """How sub-agents run: ``model`` (None: the parent's model), ``max_depth`` (0: no task tool),
    ``max_iterations`` (model calls per sub-agent), ``concurrency`` (running at once per message)."""

    model: str | None = None
    max_depth: int = 1
    max_iterations: int = 20
    concurrency: int = 3

    @classmethod
    def from_env(cls) -> "SubagentConfig":
        """Read the ``ANYCODE_SUBAGENT_*`` variables (see the module docstring); bad values are
        logged and the defaults used."""
        return cls(model=os.environ.get("ANYCODE_SUBAGENT_MODEL", "").strip() or None,
                   max_depth=_env_int("ANYCODE_SUBAGENT_DEPTH", 1, 0, MAX_DEPTH),
                   max_iterations=_env_int("ANYCODE_SUBAGENT_MAX_ITERATIONS", 20, 1),
                   concurrency=_env_int("ANYCODE_SUBAGENT_CONCURRENCY", 3, 1, MAX_CONCURRENCY))


def task_tool_spec(agents: Definitions | None = None) -> dict:
    """The ``task`` tool's OpenAI entry: :data:`TASK_TOOL_SPEC`, and with defined ``agents``
    (issue 30) an ``agent`` parameter (one of their names) and their list in the description
    (``core.agent.definitions.agents_listing``: name and description, budgeted)."""
    if not agents:
        return TASK_TOOL_SPEC
    fn = TASK_TOOL_SPEC["function"]
    properties = {**fn["parameters"]["properties"], "agent": {
        "type": "string", "enum": sorted(agents.agents),
        "description": "Optional: the named agent to hand the task to (default: a generic sub-agent)"}}
    description = (fn["description"] + " Named agents (pass 'agent'; without it a generic sub-agent "
                   "runs):\n" + agents_listing(agents))
    return {"type": "function", "function": {**fn, "description": description,
                                             "parameters": {**fn["parameters"], "properties": properties}}}


def default_tools(config: SubagentConfig | None = None, depth: int = 0,
                  agents: Definitions | None = None) -> list[dict]:
    """The tools of an agent at ``depth`` (0: the main conversation): the workspace tools, plus
    ``task`` while ``depth`` is below the configured maximum (listing ``agents``, issue 30)."""
    config = config or SubagentConfig.from_env()
    return [*TOOL_SPECS, task_tool_spec(agents)] if depth < config.max_depth else list(TOOL_SPECS)


class _AnySet:
    """Looks like a ``threading.Event`` to the loop: set when any of ``events`` is."""

    def __init__(self, *events: Any):
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


@dataclass
class _Job:
    call_id: str
    description: str
    prompt: str
    subpath: str = ""
    agent: AgentDefinition | None = None  # a named agent's definition (issue 30); None: generic
    result: str = ""
    is_error: bool = True
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


def parse_task_arguments(raw: str | None) -> tuple[str, str]:
    """``(description, prompt)`` from a task call's raw JSON arguments. Raises ``ValueError``
    with a sentence for the model (bad JSON, a missing or empty ``prompt``)."""
    description, prompt, _ = parse_task_call(raw)
    return description, prompt


def parse_task_call(raw: str | None, agents: Definitions | None = None
                    ) -> tuple[str, str, AgentDefinition | None]:
    """``(description, prompt, agent)`` from a task call's raw JSON arguments; ``agent`` is the
    definition named by its ``agent`` argument (None without one). Raises ``ValueError`` with a
    sentence for the model (bad JSON, no ``prompt``, an agent no definition names)."""
    try:
        args = arguments_object(raw)
    except ToolError as err:
        raise ValueError(str(err)) from None
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("A non-empty 'prompt' string is required: the full task for the sub-agent.")
    description = args.get("description")
    description = " ".join(description.split()) if isinstance(description, str) else ""
    if not description:
        description = " ".join(prompt.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    name = args.get("agent")
    agent = None
    if isinstance(name, str) and name.strip():
        agent = (agents.agents if agents else {}).get(name.strip())
        if agent is None:
            known = ", ".join(sorted(agents.agents)) if agents else ""
            raise ValueError(f"No agent is named {name.strip()!r}; "
                             + (f"the agents are: {known}." if known else "no agents are defined: omit 'agent'."))
    return sanitize_text(description), sanitize_text(prompt), agent


class TaskAgentRun(AgentRun):
    """An :class:`AgentRun` whose ``task`` calls run sub-agents recorded under session ``key``.

    Extra arguments: ``key`` (the main session's key), ``manager`` (the
    :class:`~core.session.manager.SessionManager` that writes the records: the turn's),
    ``storage`` (the services beside the sessions: reply leases for expert sessions, the data
    folder), ``config``
    (:class:`SubagentConfig`; default from the environment), ``depth`` (0 for the main
    conversation), ``parent_subpath`` (the record this run writes, for a nested sub-agent) and
    ``agents`` (the defined agents a task call may name, :mod:`core.agent.definitions`).
    Everything else is :class:`AgentRun`'s; ``task`` calls are run only when ``tools`` offers it.
    """

    def __init__(self, messages: list[dict], *, key: SessionKey, manager: SessionManager, storage: Storage,
                 config: SubagentConfig | None = None, depth: int = 0,
                 parent_subpath: str | None = None, agents: Definitions | None = None, **kwargs: Any):
        super().__init__(messages, **kwargs)
        self.agents = agents
        self.key = key.parent
        self.manager = manager
        self.storage = storage
        self.config = config or SubagentConfig.from_env()
        self.depth = depth
        self.parent_subpath = parent_subpath
        self._slots = threading.Semaphore(self.config.concurrency)
        self._updates: queue.Queue = queue.Queue()
        self._jobs: dict[str, _Job] = {}
        self._stop = threading.Event()  # set when this run stops its sub-agents (Stop, closed)
        self._head: dict | None = None  # the round's assistant message, stored before its tasks

    # --- the loop's hooks ------------------------------------------------------------------

    def _offers_task(self) -> bool:
        return any((t.get("function") or {}).get("name") == TASK_TOOL for t in self.tools if isinstance(t, dict))

    def _call_tool(self, cid: str, name: str, args: str) -> Iterator[AgentEvent]:
        if name != TASK_TOOL or not self._offers_task():
            return (yield from super()._call_tool(cid, name, args))
        if cid not in self._jobs:
            yield from self._start_round_tasks()
        job = self._jobs.get(cid)
        if job is None:  # cannot happen: every task call of the round has a job
            return interrupted_result(cid)["content"], True
        try:
            while not job.done.is_set():
                if self._is_cancelled():
                    self._stop_all()
                    break
                try:
                    item = self._updates.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    continue
                yield item
            yield from self._drain()
        except GeneratorExit:
            self._stop_all()
            raise
        if not job.done.is_set():
            return self._interrupted_content(cid), True
        return job.result, job.is_error

    def _interrupted_content(self, cid: str) -> str:
        """A task call stopped before its sub-agent finished: what it did and found up to the
        stop, from its record (:func:`core.session.subagents.stopped_report`); a finished
        sub-agent's own result; else the plain "interrupted" text."""
        job = self._jobs.get(cid)
        if job is None or not job.subpath:
            return super()._interrupted_content(cid)
        if job.done.is_set() and job.result:
            return job.result
        return cap_output(self._stopped_report(job))

    def _stopped_report(self, job: _Job) -> str:
        try:
            record = self.manager.get(self._record_key(job.subpath))
        except (AnycodeError, OSError) as err:
            log.warning("cannot read the record of stopped sub-agent %s: %s", job.subpath, err)
            return interrupted_result(job.call_id)["content"]
        return stopped_report(record.messages)

    def _finish_round(self, new: list[dict], pending: Any = None) -> RoundCompleted:
        if self._head is not None and new and new[0] is self._head:
            new = new[1:]  # already stored before the tasks started
        self._head = None
        self._jobs = {}
        return super()._finish_round(new, pending)

    def interrupted_round(self) -> list[dict]:
        """As :meth:`AgentRun.interrupted_round`, without the assistant message already stored."""
        out = super().interrupted_round()
        if self._head is not None and out and out[0] is self._head:
            out = out[1:]
        return out

    def events(self) -> Iterator[AgentEvent]:
        """:meth:`AgentRun.events`; sub-agents still running when it ends (closed, an error) are
        stopped and keep what they did."""
        try:
            yield from super().events()
        finally:
            self._stop_all()

    # --- running sub-agents ----------------------------------------------------------------

    def _drain(self) -> Iterator[Any]:
        while True:
            try:
                yield self._updates.get_nowait()
            except queue.Empty:
                return

    def _start_round_tasks(self) -> Iterator[AgentEvent]:
        """Store the round's assistant message, then start a sub-agent for each of its task calls."""
        assistant = self._assistant
        if assistant is None:
            return
        if self._head is None and not self._resumed:  # a resumed round's message is stored
            self._head = assistant
            self.messages.append(assistant)
            end, self._end = self._end, None
            requested, usage = self._take_request()  # the request's tokens go with its reply
            yield RoundCompleted(messages=[assistant], end=end, requested=requested, usage=usage)
        for call in assistant.get("tool_calls") or []:
            fn = call.get("function") or {}
            cid = call.get("id")
            if fn.get("name") != TASK_TOOL or cid in self._jobs or cid in self._answered_before:
                continue
            try:
                description, prompt, agent = parse_task_call(fn.get("arguments"), self.agents)
            except ValueError as err:
                job = _Job(cid, "", "", result=cap_output(f"Error: {err}"), is_error=True)
                job.done.set()
                self._jobs[cid] = job
                continue
            job = _Job(cid, description, prompt, agent=agent)
            self._jobs[cid] = job
            try:
                self._create_record(job)
            except (AnycodeError, OSError, ValueError) as err:
                log.warning("cannot create the sub-agent record for %s: %s", cid, err)
                job.result = cap_output(f"Error: the sub-agent could not start: its record could not be saved ({err}).")
                job.done.set()
                continue
            yield SubagentStarted(cid, job.subpath, description, self.parent_subpath)
            job.thread = threading.Thread(target=self._run_job, args=(job,), name=f"subagent-{cid}", daemon=True)
            job.thread.start()

    def _record_key(self, subpath: str) -> SessionKey:
        return SessionKey(self.key.project_key, self.key.session_id, subpath)

    def _create_record(self, job: _Job) -> None:
        """Write the record's header, system prompt and task, whole (sets ``job.subpath``). A
        named agent's record names it (``subagent.agent``; an expert's also ``subagent.expert``:
        its session's id, issue 30)."""
        root = self.workspace.root if self.workspace is not None else ""
        now = time.time()
        messages = [{"role": "system", "content": self._system_prompt(job)},
                    {"role": "user", "content": job.prompt}]
        for attempt in range(20):
            subpath = record_subpath(job.call_id, attempt)
            header = header_entry(self.key.session_id, self.key.project_key, root or None, created_at=now)
            header["subagent"] = {"id": subpath.rsplit("/", 1)[-1], "tool_call_id": job.call_id,
                                  "description": job.description, "model": self._model(job),
                                  "parent": self.parent_subpath, "depth": self.depth + 1}
            if job.agent is not None:
                header["subagent"]["agent"] = job.agent.name
                if job.agent.expert:
                    header["subagent"]["expert"] = expert_session_id(job.agent.name)
            try:
                self.manager.create_whole(self._record_key(subpath),
                                          [header, *(message_entry(m, ts=now) for m in messages)])
            except SessionExists:
                continue
            job.subpath = subpath
            return
        raise SessionExists(f"{self.key.session_id}/{record_subpath(job.call_id)}")

    def _system_prompt(self, job: _Job | None = None) -> str:
        """A sub-agent's system prompt: anycode's sub-agent instructions, plus a named agent's own
        (:func:`core.agent.definitions.agent_system_prompt`)."""
        base = subagent_system_prompt(self.workspace.root if self.workspace is not None else "")
        return agent_system_prompt(job.agent, base) if job is not None and job.agent is not None else base

    def _model(self, job: _Job | None = None) -> str:
        """The model of ``job``'s sub-agent: its agent's ``model``, else ``ANYCODE_SUBAGENT_MODEL``,
        else the parent's."""
        if job is not None and job.agent is not None and job.agent.model:
            return job.agent.model
        return self.config.model or self.model

    def _guard(self, key: SessionKey, manager: SessionManager, tools: list[dict], cancel: Any,
               model: str | None = None, compactions: list[dict] | None = None) -> Any:
        """The :class:`core.agent.compaction.ContextGuard` of a sub-agent's record (or an expert's
        session, with its ``compactions``), or None (logged) when it cannot be built."""
        from core.agent.compaction import ContextGuard
        from core.agent.context import context_window

        model = model or self._model()
        try:
            window = context_window(self.client, model, data_dir=self.storage.data_dir).tokens
        except Exception as err:  # noqa: BLE001 -- the sub-agent runs without one
            log.warning("sub-agent %s: no context guard (%s)", key.subpath or key.session_id, err)
            return None
        name = f"{key.session_id}/{key.subpath}" if key.subpath else key.session_id
        return ContextGuard(name, list(compactions or []), self.client, model,
                            lambda entry, count: manager.add_compaction(key, entry, count),
                            tools=tools, cancel=cancel, window=window, data_dir=self.storage.data_dir)

    def _run_job(self, job: _Job) -> None:
        try:
            with self._slots:
                job.result, job.is_error = self._run_subagent(job)
        except BaseException as err:  # noqa: BLE001 -- a thread must report, never die silently
            log.exception("sub-agent %s failed", job.subpath)
            job.result, job.is_error = f"Error: the sub-agent failed ({type(err).__name__}: {err}).", True
        finally:
            job.result = cap_output(sanitize_text(job.result))
            self._updates.put(SubagentFinished(job.call_id, job.subpath, job.result, job.is_error))
            job.done.set()

    def _run_subagent(self, job: _Job) -> tuple[str, bool]:
        """Run the sub-agent of ``job`` to its end, storing each round; ``(result, is_error)``.
        An expert agent's run is a consultation in its own session (:mod:`core.agent.experts`)."""
        if job.agent is not None and job.agent.expert:
            root = self.workspace.root if self.workspace is not None else ""
            consultation = Consultation.open(self.storage, self.key.project_key, job.agent, root or None,
                                             self._system_prompt(job), manager=self.manager,
                                             cancel=_AnySet(self.cancel, self._stop))
            try:
                with consultation:  # waits its turn (raises ExpertBusy only while waiting)
                    return self._run_loop(job, consultation)
            except ExpertBusy as busy:  # the other consultation goes on; this task says why it did not
                return f"Error: {busy}", True
        return self._run_loop(job, None)

    def _run_loop(self, job: _Job, expert: Consultation | None) -> tuple[str, bool]:
        key = self._record_key(job.subpath)
        manager = self.manager
        cancel = _AnySet(self.cancel, self._stop)
        if cancel.is_set():
            return interrupted_result(job.call_id)["content"], True
        system = self._system_prompt(job)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": job.prompt}]
        depth = self.depth + 1
        model = self._model(job)
        tools = default_tools(self.config, depth, self.agents)
        if job.agent is not None:
            tools = job.agent.filter_tools(tools)
        kwargs = dict(client=self.client, model=model, tools=tools,
                      max_iterations=self.config.max_iterations, cancel=cancel, workspace=self.workspace,
                      # a sub-agent cannot pause for approval: its side effects run only where the
                      # parent's would run without asking (core.agent.approval)
                      gate=self.gate.for_subagent() if self.gate is not None else None,
                      registry=self.registry, workspace_problem=self.workspace_problem)
        saved = len(messages)  # of the record
        if expert is not None:
            # The expert's whole session is its context: its earlier consultations, then this task.
            expert.ask(job.prompt)
            messages = expert.messages
            guard = self._guard(expert.key, expert.manager, tools, cancel, model, expert.session().compactions)
            if guard is not None:
                guard.system_refresh = lambda _stored: system  # the definition as it is now
        else:
            # A sub-agent's requests keep to the window like the main conversation's (issue 27): its
            # own guard, compaction entries in its record, usage counted apart from the parent's.
            guard = self._guard(key, manager, tools, cancel, model)
        kwargs["context"] = guard
        if depth < self.config.max_depth and any((t.get("function") or {}).get("name") == TASK_TOOL for t in tools):
            run: AgentRun = TaskAgentRun(messages, key=self.key, manager=self.manager, storage=self.storage,
                                         config=self.config, depth=depth, parent_subpath=job.subpath, agents=self.agents, **kwargs)
        else:
            run = AgentRun(messages, **kwargs)
        start = len(messages)
        try:
            for event in run.events():
                if isinstance(event, RoundCompleted):
                    if expert is not None:
                        expert.store_round(event.messages, end=event.end)
                    store_messages(manager, key, event.messages, saved_count=saved, end=event.end)
                    if run.last_reply is not None and guard is not None:
                        guard.record(len(run.messages) - len(event.messages), run.messages, run.last_reply.usage)
                    saved += len(event.messages)
                self._updates.put(SubagentEvent(job.call_id, job.subpath, event))
        except BaseException as err:
            partial = run.interrupted_round()
            if partial:
                try:
                    store_messages(manager, key, partial, saved_count=saved)
                    if expert is not None:
                        expert.store_round(partial)
                except Exception as store_err:  # noqa: BLE001 -- the original error matters more
                    log.warning("could not store the interrupted round of %s: %s", key, store_err)
            if isinstance(err, ModelError):
                log.warning("sub-agent %s: model error: %s", key, err)
                return f"Error: the sub-agent's model call failed: {err}", True
            if isinstance(err, (AnycodeError, OSError)):
                log.warning("sub-agent %s: %s", key, err)
                return f"Error: the sub-agent stopped: {err}", True
            raise
        if run.cancelled or cancel.is_set():
            return self._stopped_report(job), True
        last = run.messages[-1] if run.messages else {}
        text = last.get("content") if isinstance(last.get("content"), str) else ""
        if last.get("role") == "assistant" and not last.get("tool_calls"):
            return text or "(the sub-agent gave an empty answer)", False
        note = (f"The sub-agent stopped after {self.config.max_iterations} model calls without a "
                "final answer.")
        said = [m.get("content") for m in run.messages[start:]
                if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m.get("content").strip()]
        return (note + (f" Its last words: {said[-1]}" if said else "")), True

    def _stop_all(self) -> None:
        """Cancel every sub-agent of this run and wait (up to :data:`STOP_WAIT_SECONDS`) until each
        stored what it did."""
        if not self._jobs:
            return
        self._stop.set()
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        for job in list(self._jobs.values()):
            if job.thread is not None:
                job.thread.join(max(0.0, deadline - time.monotonic()))
                if job.thread.is_alive():
                    log.warning("sub-agent %s did not stop within %.0f s", job.subpath, STOP_WAIT_SECONDS)
