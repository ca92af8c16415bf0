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
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import openai

from core.agent.config import describe_api_error
from core.agent.repair import interrupted_result, prepare_request, sanitize_text
from core.agent.tools import Workspace, run_tool

log = logging.getLogger(__name__)

# How often a silent model call checks the cancel flag (seconds).
_POLL_SECONDS = 0.1
_STARTED = object()  # the server answered with headers: failures from now on are mid-reply
_END = object()


@dataclass
class TextDelta:
    """A piece of the assistant's reply text, in order."""

    text: str


@dataclass
class ToolCallStarted:
    """The loop is about to run a tool; ``arguments`` is the model's raw JSON string."""

    call_id: str
    name: str
    arguments: str


@dataclass
class ToolCallFinished:
    """A tool returned (``is_error`` when it failed or was interrupted); ``result`` is the text
    stored in the tool message (capped)."""

    call_id: str
    name: str
    result: str
    is_error: bool


@dataclass
class RoundCompleted:
    """One round is over: its new messages (the assistant message, then one tool message per
    tool call), ready to be persisted together."""

    messages: list[dict]


AgentEvent = TextDelta | ToolCallStarted | ToolCallFinished | RoundCompleted


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
                 tool_handlers: dict | None = None):
        self.messages = list(messages)
        # Tools bound to the session rather than the workspace (e.g. ``remember``): name ->
        # handler(raw_arguments) -> (result text, is_error).
        self.tool_handlers = dict(tool_handlers or {})
        self.client = client
        self.model = model
        self.tools = list(tools or [])
        self.max_iterations = max_iterations
        self.cancel = cancel
        self.workspace = workspace
        self.cancelled = False
        self._reset_round()

    def _reset_round(self) -> None:
        self._text: list[str] = []
        self._assistant: dict | None = None
        self._results: list[dict] = []

    def _is_cancelled(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            self.cancelled = True
        return self.cancelled

    def interrupted_round(self) -> list[dict]:
        """Messages to persist for the round in flight if it stops now (``[]`` if nothing)."""
        if self._assistant is not None:
            done = {m["tool_call_id"] for m in self._results}
            missing = [interrupted_result(c["id"]) for c in self._assistant["tool_calls"] if c["id"] not in done]
            return [self._assistant, *self._results, *missing]
        text = "".join(self._text)
        return [{"role": "assistant", "content": text}] if text else []

    def _finish_round(self, new: list[dict]) -> RoundCompleted:
        self.messages.extend(new)
        self._reset_round()  # before yielding: a caller closing us now must not persist it twice
        return RoundCompleted(messages=new)

    def _direct_chunks(self, kwargs: dict) -> Iterator:
        try:
            stream = self.client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise describe_api_error(exc) from exc
        try:
            yield from stream
        except openai.OpenAIError as exc:
            raise describe_api_error(exc, mid_reply=True) from exc
        finally:
            stream.close()

    def _chunks(self, kwargs: dict) -> Iterator:
        """The chunks of one streamed reply; ends early, without error, once cancelled.

        With a cancel flag, the HTTP request runs in a daemon thread so Stop takes effect within
        ~0.1 s even while the server is silent (a local model loading, a long time to first
        token); the abandoned request is closed as soon as it yields again. Raises ModelError.
        """
        if self.cancel is None:
            yield from self._direct_chunks(kwargs)
            return
        items: queue.Queue = queue.Queue()
        stop = threading.Event()

        def produce() -> None:
            stream = None
            try:
                stream = self.client.chat.completions.create(**kwargs)
                if stop.is_set():
                    return  # Stop was pressed while we waited for the server
                items.put(_STARTED)
                for chunk in stream:
                    if stop.is_set():
                        return
                    items.put(chunk)
                items.put(_END)
            except BaseException as exc:  # noqa: BLE001 -- handed to the consumer thread
                items.put(exc)
            finally:
                if stream is not None:
                    stream.close()

        threading.Thread(target=produce, name="model-stream", daemon=True).start()
        started = False
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
                if item is _STARTED:
                    started = True
                elif isinstance(item, openai.OpenAIError):
                    raise describe_api_error(item, mid_reply=started) from item
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            stop.set()

    def _stream_reply(self) -> Iterator[TextDelta]:
        """Stream one model reply into the round state; stops early when cancelled."""
        kwargs = {"model": self.model, "messages": prepare_request(self.messages), "stream": True}
        if self.tools:
            kwargs["tools"] = self.tools
        calls: dict[int, dict] = {}
        chunks = self._chunks(kwargs)
        try:
            for chunk in chunks:
                if self._is_cancelled():
                    return
                if not chunk.choices:
                    continue  # e.g. a usage-only chunk
                delta = chunk.choices[0].delta
                if delta is None:
                    continue
                if delta.content:
                    self._text.append(delta.content)
                    yield TextDelta(delta.content)
                for part in delta.tool_calls or []:
                    # Per the streaming API, tool calls arrive as deltas keyed by `index`; the
                    # id and name come first, the arguments in pieces. Some servers omit `index`
                    # and send whole calls: treat each new id as a new call.
                    index = part.index
                    if index is None:
                        index = len(calls) if (part.id and all(c["id"] != part.id for c in calls.values())) \
                            else max(calls, default=0)
                    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                    if part.id:
                        call["id"] = part.id
                    if part.function is not None:
                        # Some servers repeat the full name in every delta; don't double it.
                        if part.function.name and part.function.name != call["name"]:
                            call["name"] += part.function.name
                        if part.function.arguments:
                            call["arguments"] += part.function.arguments
        finally:
            chunks.close()  # releases the HTTP response now, not at garbage collection
        if self._is_cancelled():
            return
        text = sanitize_text("".join(self._text))
        tool_calls = [
            {"id": c["id"] or f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": c["name"], "arguments": sanitize_text(c["arguments"])}}
            for _, c in sorted(calls.items()) if c["name"]
        ]
        if tool_calls:
            # Per the API, content is null when an assistant message only calls tools.
            self._assistant = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
        else:
            self._assistant = {"role": "assistant", "content": text}

    def events(self) -> Iterator[AgentEvent]:
        """Run the loop, yielding events; raises a typed ModelError when the model call fails."""
        for _ in range(self.max_iterations):
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
            for call in assistant["tool_calls"]:
                cid, name, args = call["id"], call["function"]["name"], call["function"]["arguments"]
                if self._is_cancelled():
                    result, is_error = interrupted_result(cid)["content"], True
                else:
                    yield ToolCallStarted(cid, name, args)
                    if name in self.tool_handlers:
                        result, is_error = self.tool_handlers[name](args)
                    elif self.workspace is None:
                        result, is_error = "Error: no workspace is open, so tools cannot run.", True
                    else:
                        result, is_error = run_tool(self.workspace, name, args)
                    result = sanitize_text(result)
                self._results.append({"role": "tool", "tool_call_id": cid, "content": result})
                yield ToolCallFinished(cid, name, result, is_error)
            yield self._finish_round([assistant, *self._results])
            if self.cancelled:
                return
        log.warning("agent loop stopped after %d iterations with tool calls still pending", self.max_iterations)


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
