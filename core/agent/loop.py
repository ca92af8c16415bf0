"""The agent loop (seed chapter 1's ``agentLoop``), streaming, knowing nothing of sessions.

Call the model; append its message; stop when it makes no tool calls; otherwise run each tool call
and append a ``tool`` message for each; repeat (at most ``max_iterations`` model calls). The
streaming form yields events so a UI can show text as it arrives and a session layer can persist
each round as soon as it completes (:class:`RoundCompleted`).
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

import openai

from core.agent import slots
from core.agent.config import BROKEN_REPLY
from core.errors import ModelEmptyReply, ModelError
from core.agent.repair import interrupted_result, prepare_request, sanitize_text
from core.agent.stream import END_COMPLETE, END_FILTER, END_LENGTH, END_MISSING, Reply, ReplyReader, open_reply
from core.agent.approval import ApprovalGate, PendingApproval
from core.agent.events import (AgentEvent, ApprovalRequested, ReasoningDelta, ReplyRestarted, RoundCompleted, TextDelta,
                               ToolCallFinished, ToolCallStarted)
from core.agent.tools import ToolRegistry, Workspace, run_tool

log = logging.getLogger(__name__)

# How often a silent model call checks the cancel flag (seconds).
_POLL_SECONDS = 0.1
_END = object()


class AgentRun:
    """One run of the loop over a copy of ``messages``; see :func:`agent_loop_stream`.

    ``messages`` (the full list so far) grows as rounds complete. :meth:`interrupted_round`
    tells a caller whose iteration stopped early (generator closed, model error) what the round in
    flight would persist: the partial assistant text the user already saw, or the assistant
    message with its finished tool results plus "interrupted" results for the rest.
    """

    def __init__(self, messages: list[dict], *, client: openai.OpenAI, model: str,
                 tools: list[dict] | None, max_iterations: int = 20,
                 cancel: threading.Event | None = None, workspace: Workspace | None = None,
                 gate: ApprovalGate | None = None, registry: ToolRegistry | None = None,
                 workspace_problem: str | None = None,
                 tool_handlers: dict | None = None, context: Any = None):
        self.messages = list(messages)
        # Tools bound to the session rather than the workspace (e.g. ``remember``): name ->
        # handler(raw_arguments) -> (result text, is_error).
        self.tool_handlers = dict(tool_handlers or {})
        # Optional window keeper (core.agent.compaction.ContextGuard): ``view(messages)`` is what
        # is sent, ``before_request(messages)`` may compact first and yields its events.
        self.context = context
        # gate None: every call runs (a library caller's choice); the runner always passes one.
        self.gate = gate
        self.registry = registry
        self.workspace_problem = workspace_problem
        self._resumed = False  # the round in flight continues a stored assistant message
        self.client = client
        self.model = model
        self.tools = list(tools or [])
        self.max_iterations = max_iterations
        self.cancel = cancel
        self.workspace = workspace
        self.cancelled = False
        self.last_reply: Reply | None = None  # the last reply read whole (its usage, how it ended)
        self._reset_round()

    def _reset_round(self) -> None:
        self._resumed = False
        self._answered_before: set[str] = set()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_key = "reasoning_content"
        self._assistant: dict | None = None
        self._results: list[dict] = []
        self._end: str | None = None
        # The reply of the round in flight read whole, while no stored round carries its usage:
        # each request's tokens go with exactly one round (RoundCompleted.requested).
        self._request: Reply | None = None

    def _is_cancelled(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            self.cancelled = True
        return self.cancelled

    def interrupted_round(self) -> list[dict]:
        """Messages to persist for the round in flight if it stops now (``[]`` if nothing)."""
        if self._assistant is not None:
            done = {m["tool_call_id"] for m in self._results} | self._answered_before
            missing = [{"role": "tool", "tool_call_id": c["id"], "content": self._interrupted_content(c["id"])}
                       for c in self._assistant["tool_calls"] if c["id"] not in done]
            head = [] if self._resumed else [self._assistant]
            return [*head, *self._results, *missing]
        text = "".join(self._text)
        if not text:
            return []
        partial = {"role": "assistant", "content": text}
        if "".join(self._reasoning).strip():
            partial[self._reasoning_key] = sanitize_text("".join(self._reasoning))
        return [partial]

    def _interrupted_content(self, cid: str) -> str:
        """The tool result of call ``cid`` stopped before it returned (sub-agents say more)."""
        return interrupted_result(cid)["content"]

    def unstored_request(self) -> tuple[bool, dict | None]:
        """``(requested, usage)`` of the round in flight: whether it holds the reply of a model
        request that no completed round carried yet (see :attr:`RoundCompleted.requested`), and
        that request's ``usage`` as the server sent it. A reply cut before its end has none."""
        if self._request is None:
            return False, None
        return True, self._request.usage

    def _take_request(self) -> tuple[bool, dict | None]:
        """:meth:`unstored_request`, handed over to the round being completed (once)."""
        requested = self.unstored_request()
        self._request = None
        return requested

    def _finish_round(self, new: list[dict], pending: PendingApproval | None = None) -> RoundCompleted:
        end = self._end
        requested, usage = self._take_request()
        self.messages.extend(new)
        self._reset_round()  # before yielding: a caller closing us now must not persist it twice
        return RoundCompleted(messages=new, end=end, pending=pending, requested=requested, usage=usage)

    def _direct_chunks(self, params: dict) -> Iterator:
        opened = open_reply(self.client, params)
        try:
            yield from opened.chunks()
        finally:
            opened.close()

    def _chunks(self, params: dict) -> Iterator:
        """The JSON chunks of one reply (``"[DONE]"`` for the sentinel; see
        :mod:`core.agent.stream`); ends early, without error, once cancelled.

        With a cancel flag, the HTTP request runs in a daemon thread so Stop takes effect within
        ~0.1 s even while the server is silent (a local model loading, a long time to first
        token); the abandoned request is closed as soon as it yields again. Raises ModelError.
        """
        if self.cancel is None:
            yield from self._direct_chunks(params)
            return
        items: queue.Queue = queue.Queue()
        stop = threading.Event()

        def produce() -> None:
            opened = None
            try:
                opened = open_reply(self.client, params)
                if stop.is_set():
                    return  # Stop was pressed while we waited for the server
                for chunk in opened.chunks():
                    if stop.is_set():
                        return
                    items.put(chunk)
                items.put(_END)
            except BaseException as exc:  # noqa: BLE001 -- handed to the consumer thread
                items.put(exc)
            finally:
                if opened is not None:
                    opened.close()

        threading.Thread(target=produce, name="model-stream", daemon=True).start()
        try:
            while True:
                try:
                    item = items.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    if self._is_cancelled():
                        return
                    continue
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()

    def _used_ids(self) -> set[str]:
        return {c["id"] for m in self.messages if isinstance(m, dict)
                for c in (m.get("tool_calls") or []) if isinstance(c, dict) and isinstance(c.get("id"), str)}

    def _stream_reply(self) -> Iterator[TextDelta | ReplyRestarted]:
        """Stream one model reply into the round state; stops early when cancelled.

        A reply that broke while a background request to the same server was in flight (a
        server serving one request at a time, core.agent.slots) is asked again once, after a
        :class:`ReplyRestarted`, before any error reaches the user.

        Raises ModelEmptyReply when the reply has neither text nor a tool call (nothing is
        saved: a blank answer would look like a finished one)."""
        history = self.context.view(self.messages) if self.context is not None else self.messages
        # Usage in the stream (per the chat completions API) is the real token count the context
        # meter and compaction rest on; a server refusing the option gets it dropped (stream.py).
        params = {"model": self.model, "messages": prepare_request(history),
                  "stream_options": {"include_usage": True}}
        if self.tools:
            params["tools"] = self.tools
        for attempt in (1, 2):
            reader = ReplyReader(self._used_ids())
            ticket = slots.foreground(self.client, self.cancel)
            try:
                chunks = self._chunks(params)
                try:
                    for chunk in chunks:
                        if self._is_cancelled():
                            return
                        if chunk == "[DONE]":
                            reader.done()
                            continue
                        for text in reader.feed(chunk):
                            self._text.append(text)
                            yield TextDelta(text)
                        for thought in reader.new_reasoning:
                            self._reasoning_key = reader.reasoning_key
                            self._reasoning.append(thought)
                            yield ReasoningDelta(thought)
                finally:
                    chunks.close()  # releases the HTTP response now, not at garbage collection
            except ModelError as err:
                if attempt == 1 and str(err) == BROKEN_REPLY and ticket.overlapped and not self._is_cancelled():
                    yield self._restart(str(err))
                    continue
                raise
            finally:
                ticket.close()
            if self._is_cancelled():
                return
            reply = reader.reply()
            # llama-cpp-python ends an interrupted stream with [DONE] and no finish reason.
            if attempt == 1 and reply.finish_reason is None and reply.end == END_COMPLETE and ticket.overlapped:
                yield self._restart("the reply ended without a finish reason")
                continue
            break
        self.last_reply = reply
        if reply.empty:
            raise empty_reply_error(reply)
        self._request = reply
        if reply.tool_calls:
            # Content "" rather than null: LM Studio and older llama.cpp refuse a null content
            # (lmstudio-bug-tracker#261); the API takes both.
            self._assistant = {"role": "assistant", "content": reply.text, "tool_calls": reply.tool_calls}
        else:
            self._assistant = {"role": "assistant", "content": reply.text}
        if reply.reasoning.strip():
            # Stored with the message under the key the server used: thinking-mode servers
            # (DeepSeek, Kimi K2, Qwen3 with a reasoning parser) want it back within the turn's
            # tool rounds (core.agent.repair.prepare_request sends it there and nowhere else).
            self._assistant[reply.reasoning_key] = sanitize_text(reply.reasoning)
        self._end = reply.end if reply.cut_off else None

    def _restart(self, why: str) -> ReplyRestarted:
        """Learn that the server serves one request at a time and void the round's text."""
        log.warning("the reply broke while a background request ran (%s); asking again once", why)
        slots.learn_serial(self.client)
        self._text = []
        self._reasoning = []
        return ReplyRestarted(why)

    def _unanswered_tail(self) -> tuple[dict, set[str]] | None:
        """The last assistant message with tool calls when only some of its calls have results
        after it (a round paused on an approval): ``(message, answered call ids)``; else None."""
        answered: set[str] = set()
        for msg in reversed(self.messages):
            role = msg.get("role") if isinstance(msg, dict) else None
            if role == "tool":
                answered.add(msg.get("tool_call_id"))
                continue
            if role == "assistant" and msg.get("tool_calls"):
                ids = [c.get("id") for c in msg["tool_calls"] if isinstance(c, dict)]
                if any(i not in answered for i in ids):
                    return msg, answered
            return None
        return None

    def events(self) -> Iterator[AgentEvent]:
        """Run the loop, yielding events; raises a typed ModelError when the model call fails.

        A history ending in an assistant message whose tool calls are not all answered (a round
        paused on an approval) first finishes that round; then the model is called as usual."""
        tail = self._unanswered_tail()
        if tail is not None and not self._is_cancelled():
            self._assistant, self._answered_before = tail
            self._resumed = True
            calls = [c for c in tail[0]["tool_calls"] if c.get("id") not in tail[1]]
            paused = yield from self._run_calls(calls)
            if paused or self.cancelled:
                return
        for _ in range(self.max_iterations):
            if self._is_cancelled():
                return
            if self.context is not None:
                yield from self.context.before_request(self.messages)
                if self._is_cancelled():
                    return
            yield from self._stream_reply()
            if self._assistant is None:  # cancelled while streaming: keep the text already shown
                partial = self.interrupted_round()
                if partial:
                    yield self._finish_round(partial)
                return
            assistant = self._assistant
            if "tool_calls" not in assistant:
                yield self._finish_round([assistant])
                return
            paused = yield from self._run_calls(assistant["tool_calls"])
            if paused or self.cancelled:
                return
        log.warning("agent loop stopped after %d iterations with tool calls still pending", self.max_iterations)

    def _run_calls(self, calls: list[dict]) -> Iterator[AgentEvent]:
        """Run ``calls`` of the round's assistant message in order and finish the round; returns
        True when it paused on an approval (the round so far is completed with ``pending``)."""
        assistant = self._assistant
        for call in calls:
            cid, name, args = call["id"], call["function"]["name"], call["function"]["arguments"]
            if self._is_cancelled():
                result, is_error = self._interrupted_content(cid), True
            else:
                verdict = (self.gate.check(cid, name, args, self.workspace)
                           if self.gate is not None else None)
                if verdict is not None and verdict.action == "ask":
                    yield ToolCallStarted(cid, name, args)
                    yield ApprovalRequested(verdict.pending)
                    head = [] if self._resumed else [assistant]
                    yield self._finish_round([*head, *self._results], pending=verdict.pending)
                    return True
                yield ToolCallStarted(cid, name, args)
                if verdict is not None and verdict.action == "deny":
                    result, is_error = verdict.result, True
                else:
                    result, is_error = yield from self._call_tool(cid, name, args)
                result = sanitize_text(result)
            self._results.append({"role": "tool", "tool_call_id": cid, "content": result})
            yield ToolCallFinished(cid, name, result, is_error)
        head = [] if self._resumed else [assistant]
        yield self._finish_round([*head, *self._results])
        return False

    def _call_tool(self, cid: str, name: str, args: str) -> Iterator[AgentEvent]:
        """Run one tool call (already approved); returns ``(result, is_error)``. A generator so
        that a tool running a while can report progress as events (core.agent.subagents: the
        ``task`` tool). Runs in a worker with a time limit; Stop ends it at once."""
        if name in self.tool_handlers:
            return self.tool_handlers[name](args)
        if self.workspace is None:
            if self.workspace_problem:
                return f"Error: {self.workspace_problem}", True
            return "Error: no workspace is open, so tools cannot run.", True
        return run_tool(self.workspace, name, args, registry=self.registry, cancel=self.cancel)
        yield  # noqa -- unreachable: makes this a generator


def agent_loop_stream(messages: list[dict], *, client: openai.OpenAI, model: str, tools: list[dict] | None,
                      max_iterations: int = 20, cancel: threading.Event | None = None,
                      workspace: Workspace | None = None) -> Iterator[AgentEvent]:
    """Run the agent loop over ``messages`` (not modified), yielding TextDelta, ToolCallStarted,
    ToolCallFinished and RoundCompleted events.

    ``tools`` is the OpenAI ``tools=`` list (e.g. ``core.agent.tools.TOOL_SPECS``; None/[] for none),
    run inside ``workspace``. Requests use ``stream=True`` (chat completions streaming, tool-call
    deltas accumulated by index) and are repaired first (:func:`core.agent.repair.prepare_request`).
    When ``cancel`` is set the loop stops at the next chunk or tool: the partial text becomes an
    assistant message and calls not yet run get "interrupted" results, in a last RoundCompleted.
    Raises a typed ModelError (see :func:`core.agent.config.describe_api_error`) when the model fails.
    """
    run = AgentRun(messages, client=client, model=model, tools=tools, max_iterations=max_iterations,
                   cancel=cancel, workspace=workspace)
    yield from run.events()


def agent_loop(messages: list[dict], *, client: openai.OpenAI, model: str, tools: list[dict] | None,
               max_iterations: int = 20, cancel: threading.Event | None = None,
               workspace: Workspace | None = None) -> list[dict]:
    """The seed's ``agentLoop``: the full message list (``messages`` plus every new message).

    Same arguments, behaviour and errors as :func:`agent_loop_stream`, without the events.
    """
    run = AgentRun(messages, client=client, model=model, tools=tools, max_iterations=max_iterations,
                   cancel=cancel, workspace=workspace)
    for _ in run.events():
        pass
    return run.messages


def empty_reply_error(reply: Reply) -> ModelEmptyReply:
    """The error for a reply with no text and no tool call, saying why when the server told us."""
    if reply.reasoning.strip() and reply.end == END_LENGTH:
        why = ("The model spent its whole output budget reasoning and wrote no answer. Try again, ask "
               "for something shorter, or raise the server's output token limit.")
    elif reply.reasoning.strip():
        why = "The model only reasoned and wrote no answer; try again."
    elif reply.end == END_LENGTH:
        why = ("The model reached its output token limit before writing anything (the conversation may "
               "fill its context window); try again, or start a new chat.")
    elif reply.end == END_FILTER:
        why = "The model server's content filter withheld the reply; rephrase and try again."
    elif reply.end == END_MISSING:
        why = ("The model server ended the reply without sending anything (no text, no end marker). "
               "Often the conversation no longer fits the model's context window: start a new chat or "
               "use a model with a larger context; otherwise try again and check the server's log.")
    else:
        why = (f"The model sent an empty reply (finish_reason {reply.finish_reason or 'none'}); nothing "
               "was saved. Try again, or pick another model.")
    return ModelEmptyReply(why, reply.end)
