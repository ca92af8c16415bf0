"""A fake OpenAI-compatible chat completions server for tests (real HTTP on 127.0.0.1).

It is as strict as the real API about the requests it accepts, so a test that passes against it
means the product sends requests the real API would take. Built on Starlette + uvicorn (both
installed with Gradio) and run in a background thread, or as its own process.

Endpoints (all under ``/v1`` like the real API)
-----------------------------------------------
``POST /v1/chat/completions``
    Validates the request (see :func:`validate_chat_request`); an invalid one gets HTTP 400 with an
    OpenAI-shaped error ``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``.
    A valid one is answered with the next scripted reply, or, when the queue is empty, the auto
    reply. Requests whose first message is the title system prompt (it starts with
    ``"Generate a concise title"``) take replies from a separate *title* queue, so background
    title requests never steal a reply meant for the chat. Requests of a sub-agent (first message
    the sub-agent system prompt: it starts with ``"You are a sub-agent of anycode"``) take replies
    from the *subagent* queues: first a queue scripted for a task (``task="alpha"``: the sub-agent
    whose task text contains ``alpha``), else the common sub-agent queue; so parallel sub-agents
    each get their own script whatever order their requests arrive in.
    Memory extraction requests (first message starts with ``"You maintain the long-term
    memory"``) likewise take replies from a *memory* queue. Compaction summary requests (first
    message starts with ``"You are summarising the earlier part"``) take the *summary* queue; their
    auto reply is ``"Summary: goals so far; last request: <the transcript's last user line>"``.
``GET /v1/models``
    ``{"object": "list", "data": [{"id": ..., "object": "model", ...}]}`` for ``FakeOpenAI.models``.

Replies (JSON objects, the same in Python and over the control API)
-------------------------------------------------------------------
``{"text": "Hello"}``                          a text reply
``{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}, "id": "call_1"}],
  "text": "optional text before the calls"}``  tool calls (``arguments`` a dict or a raw string,
                                               ``id`` optional)
``{"error": 429, "message": "..."}``           an HTTP error with an OpenAI-shaped body
                                               (401, 429, 500, ...)
Optional keys on any reply: ``"delay": 0.05`` seconds to sleep before each streamed chunk (to test
Stop); ``"wait": 2.0`` seconds to sleep before answering at all (to test timeouts);
``"chunk": 3`` characters per streamed text/arguments piece (default 4); ``"drop_after": 2`` close
the connection after that many streamed chunks (a server dying mid-reply).

Quirk modes (``server.quirk = "<name>"``; one quirk at a time, reset after each test; otherwise the
server stays as strict as the real API; a reply-side quirk can also ride on one scripted reply as
``"quirk": "<name>"``, which is how a test drives a fake running as a subprocess). Each imitates what a popular local server really sends:

request side (answered with HTTP 400/422 as those servers do):
``no_null_content``        refuses ``"content": null`` on an assistant message (LM Studio, old llama.cpp)
``no_sampling``            refuses ``temperature``/``top_p`` (reasoning models), OpenAI-shaped ``param``
``no_stream_options``      refuses ``stream_options`` (message only, no ``param``)
``no_parallel_tool_calls`` refuses ``parallel_tool_calls`` with a 422 FastAPI ``detail`` (vLLM-style)
``no_stream``              refuses ``stream: true`` (HTTP 400 naming ``stream``)
reply side:
``same_index``     parallel tool calls streamed with the same ``index`` 0, different ids (vLLM, SGLang)
``no_index``       tool calls without ``index``, each whole in one delta (Ollama)
``missing_ids``    tool calls without ``id``
``repeated_ids``   every tool call of every reply has the id ``call_0``
``object_arguments`` arguments sent as JSON objects, not strings
``name_every_delta`` the id and name repeated in every argument delta
``nulls``          null and unknown fields everywhere (``content: null``, ``tool_calls: null``,
                   ``timings``, ``usage: null``, a chunk with ``choices: []``, ``delta: null``)
``no_end``         the stream stops with no ``finish_reason`` and no ``[DONE]``
``length``         ``finish_reason: "length"`` (output token limit)
``content_filter`` ``finish_reason: "content_filter"``
``json_body``      ignores ``stream: true`` and answers one JSON completion
``reasoning_only`` streams only ``reasoning_content``, then ``finish_reason: "length"``
``empty``          no text and no tool call, ``finish_reason: "stop"``
``error_event``    the text, then a ``data: {"error": {...}}`` event, then the end of the body (llama.cpp)

``no_usage``     never sends ``usage`` in the stream, even when ``stream_options.include_usage`` asks
               (most local servers before 2025, LM Studio)
``require_user``   refuses a request holding no ``user`` message: HTTP 400 "No user query found in
                   messages." (Qwen3 chat templates on llama.cpp and vLLM; Zhipu, Gemini likewise)
thinking mode (DeepSeek, Kimi K2, Qwen3 behind vLLM/SGLang reasoning parsers; the reasoning is a
reply's ``"reasoning"`` or "Thinking about: <last user words>"):
``reasoning_content``  streams the reasoning as ``reasoning_content`` deltas before the answer (and a
                   non-stream message carries it); accepts that key on assistant messages, but refuses
                   it on an assistant message of an earlier turn (before the last user message)
``reasoning``      the same with the ``reasoning`` key (vLLM's newer parser, OpenRouter)
``reasoning_required`` as ``reasoning_content``, and HTTP 400 when an assistant message with tool calls
                   after the last user message lacks its ``reasoning_content`` (DeepSeek V3.2 / Kimi
                   K2 thinking with tools)
``server.quirk`` may also be a set of names (a request-side and a reply-side mode together).
``server.refusal_delay`` seconds before a quirk's refusal is answered (requests racing each other).
``server.usage_factor`` scales the streamed ``prompt_tokens`` (0.1: a server whose usage is wrong).

One request at a time (``server.one_at_a_time = True``): a chat request arriving while a reply streams
aborts that reply's connection (llama-cpp-python's server, llama.cpp with one slot, LM Studio with
one instance); ``server.interrupted`` counts the aborted replies. ``server.slots = N`` makes
``GET /props`` answer ``{"total_slots": N}`` (llama.cpp's slot count).

Context window (``server.context_limit = N`` tokens; ``None``, the default, is unlimited). A request's
size is :func:`count_tokens` (JSON characters / 4, like a BPE tokenizer on English text and code);
streamed usage reports that count as ``prompt_tokens``. A request over the limit is answered the way
``server.context_style`` says:
``"openai"``       HTTP 400 ``{"error": {"message": "This model's maximum context length is N tokens.
                   However, your messages resulted in M tokens. ...", "type": "invalid_request_error",
                   "param": "messages", "code": "context_length_exceeded"}}`` (OpenAI, vLLM)
``"http_500"``     HTTP 500 whose message mentions the context size (llama.cpp server builds)
``"error_event"``  HTTP 200 and one ``data: {"error": {"type": "exceed_context_size_error", "n_ctx": N, ...}}``
                   event (llama.cpp server's streamed answer)
``"stream_break"`` HTTP 200, the role chunk, then the connection drops with no content
                   (llama-cpp-python past its window)
``server.window_api`` makes the window discoverable the way one real server tells it:
``"vllm"`` (``max_model_len`` in ``GET /v1/models``), ``"llamacpp"`` (``GET /props`` → ``n_ctx``),
``"lmstudio"`` (``GET /api/v0/models`` → ``loaded_context_length``), ``"ollama"`` (``POST /api/show`` →
``model_info["llama.context_length"]`` = 4 × the limit and ``parameters`` ``num_ctx <limit>``);
those paths answer 404 otherwise. Over-limit requests are logged with their status (400s count as rejections).

Auto mode (queue empty): a chat request is answered with the streamed text
``"You said: <last user message>"``; a title request with ``"Chat: <first words of the first user
message>"``; a memory request with ``{"add": [...], "remove": []}`` adding each sentence of the
exchange's user message that starts with "Convention:" or "Remember that" (the JSON inside a
```json fence with prose around it, as real models often answer); a sub-agent request with ``"Sub-agent report: <first words of its task>"``. To call the
``task`` tool, script a chat reply ``{"tool_calls": [{"name": "task", "arguments": {"description":
"...", "prompt": "..."}}]}``. So a browser test can run the app against this server without scripting anything.

Control API (for a server running as a subprocess)
--------------------------------------------------
``POST /_script``   body ``{"replies": [reply, ...], "kind": "chat" | "title" | "subagent" | "memory" | "summary",
                    "task": "alpha"}`` appends replies to a queue (``kind`` defaults to ``"chat"``; ``task``
                    only for sub-agents, optional); answers ``{"queued": n}``.
``GET /_requests``  every request received so far: ``[{"path", "body", "status", "error"}]``.
``POST /_reset``    empties the queues and the request log (keeps ``--api-key``).
``GET /_health``    ``{"ok": true}``.

Command line: ``python -m tests.support.fake_openai --port 0 [--script replies.json] [--title-script
titles.json] [--api-key KEY]`` prints ``READY http://127.0.0.1:<port>/v1`` on stdout once it
listens (port 0 picks a free port); a script file holds a JSON list of replies.

Pytest: the ``fake_openai`` fixture yields a running, freshly reset :class:`FakeOpenAI` and fails
the test at teardown if any request got a 400 (unless the test sets ``allow_rejections``).
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import re
import socket
import sys
import threading
import time
import uuid
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

log = logging.getLogger(__name__)

TITLE_PROMPT_PREFIX = "Generate a concise title"
SUBAGENT_PROMPT_PREFIX = "You are a sub-agent of anycode"  # core.agent.prompts.SUBAGENT_PROMPT_START
MEMORY_PROMPT_PREFIX = "You maintain the long-term memory"
SUMMARY_PROMPT_PREFIX = "You are summarising the earlier part"  # core.agent.compaction.SUMMARY_PROMPT

# Top-level request parameters of POST /v1/chat/completions (the real API rejects any other key
# with "Unrecognized request argument supplied").
ALLOWED_PARAMS = {
    "model", "messages", "stream", "stream_options", "temperature", "top_p", "n", "stop",
    "max_tokens", "max_completion_tokens", "presence_penalty", "frequency_penalty", "logit_bias",
    "logprobs", "top_logprobs", "user", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "seed", "metadata", "store", "reasoning_effort", "service_tier",
    "modalities", "prediction", "audio", "web_search_options", "verbosity", "safety_identifier",
    "prompt_cache_key",
}
# A function name the real API takes (longer or other characters: HTTP 400).
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Keys allowed inside one message, per role (the real API rejects unknown ones).
ALLOWED_MESSAGE_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}


class RequestInvalid(Exception):
    """A request the real API would reject with HTTP 400; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _check_content(content: Any, where: str, *, nullable: bool) -> None:
    if content is None:
        if not nullable:
            raise RequestInvalid(f"Invalid value for '{where}': expected a string, got null.", where)
        return
    if isinstance(content, str):
        return
    if isinstance(content, list) and content:
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in {"text", "image_url", "input_audio", "file", "refusal"}:
                raise RequestInvalid(f"Invalid content part at '{where}[{j}]'.", f"{where}[{j}]")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise RequestInvalid(f"Missing required parameter: '{where}[{j}].text'.", f"{where}[{j}].text")
        return
    raise RequestInvalid(f"Invalid type for '{where}': expected a string or an array of content parts.", where)


def _check_tool_calls(calls: Any, where: str) -> list[str]:
    if not isinstance(calls, list) or not calls:
        raise RequestInvalid(
            f"Invalid '{where}': empty array. Expected an array with minimum length 1.", where)
    ids = []
    for j, call in enumerate(calls):
        w = f"{where}[{j}]"
        if not isinstance(call, dict) or set(call) - {"id", "type", "function"}:
            raise RequestInvalid(f"Invalid '{w}': unexpected keys.", w)
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise RequestInvalid(f"Missing required parameter: '{w}.id'.", f"{w}.id")
        if call.get("type") != "function":
            raise RequestInvalid(f"Invalid value for '{w}.type': expected 'function'.", f"{w}.type")
        fn = call.get("function")
        if not isinstance(fn, dict) or set(fn) - {"name", "arguments"}:
            raise RequestInvalid(f"Invalid '{w}.function'.", f"{w}.function")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestInvalid(f"Missing required parameter: '{w}.function.name'.", f"{w}.function.name")
        if not isinstance(fn.get("arguments"), str):
            raise RequestInvalid(f"Missing required parameter: '{w}.function.arguments'.", f"{w}.function.arguments")
        ids.append(call["id"])
    return ids


def validate_chat_request(body: Any, assistant_keys: frozenset[str] = frozenset()) -> None:
    """Raise :class:`RequestInvalid` for a chat completions body the real API would reject.

    Rules (from the OpenAI chat completions API reference and its observed 400 errors): the body
    is an object with only known parameters; ``model`` a non-empty string; ``messages`` a non-empty
    array of messages with a known role and only that role's keys; content a string or content
    parts (assistant content may be null only with ``tool_calls``); an assistant message with
    ``tool_calls`` must be followed by tool messages answering every call id before any other
    message; a tool message must answer a call of the preceding assistant message; no tool call id
    may appear twice in the request ("Duplicate tool_call id", as strict servers answer); no string may
    hold a lone UTF-16 surrogate; ``tools`` entries are ``{"type": "function", "function": {...}}``
    whose ``name`` matches ``^[a-zA-Z0-9_-]{1,64}$``.
    ``assistant_keys``: extra keys a thinking-mode server takes on assistant messages
    (``reasoning_content``, ``reasoning``).
    """
    if not isinstance(body, dict):
        raise RequestInvalid("We could not parse the JSON body of your request.")
    if _has_lone_surrogate(body):
        raise RequestInvalid("We could not parse the JSON body of your request: invalid Unicode (lone surrogate).")
    unknown = sorted(set(body) - ALLOWED_PARAMS)
    if unknown:
        raise RequestInvalid(f"Unrecognized request argument supplied: {unknown[0]}", unknown[0])
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestInvalid("you must provide a model parameter", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestInvalid("Missing required parameter: 'messages'.", "messages")
    if "temperature" in body and not (isinstance(body["temperature"], (int, float)) and 0 <= body["temperature"] <= 2):
        raise RequestInvalid("Invalid 'temperature': must be between 0 and 2.", "temperature")
    if "tools" in body:
        tools = body["tools"]
        if not isinstance(tools, list) or not tools:
            raise RequestInvalid("Invalid 'tools': empty array. Expected an array with minimum length 1.", "tools")
        for j, tool in enumerate(tools):
            fn = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict) \
                    or not isinstance(fn.get("name"), str) or set(fn) - {"name", "description", "parameters", "strict"}:
                raise RequestInvalid(f"Invalid 'tools[{j}]'.", f"tools[{j}]")
            if not TOOL_NAME.match(fn["name"]):
                raise RequestInvalid(
                    f"Invalid 'tools[{j}].function.name': string does not match pattern. Expected a string that "
                    "matches the pattern '^[a-zA-Z0-9_-]+$'." if len(fn["name"]) <= 64 else
                    f"Invalid 'tools[{j}].function.name': string too long. Expected a string with maximum length 64, "
                    f"but got a string with length {len(fn['name'])} instead.", f"tools[{j}].function.name")
            if "parameters" in fn and (not isinstance(fn["parameters"], dict) or fn["parameters"].get("type") != "object"):
                raise RequestInvalid(f"Invalid schema for function '{fn['name']}'.", f"tools[{j}].function.parameters")

    pending: set[str] = set()      # call ids of the last assistant message still waiting for a result
    answerable: set[str] = set()   # call ids a tool message may answer right now
    seen_ids: set[str] = set()     # every tool call id of the request: one id names one call
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise RequestInvalid(f"Invalid type for '{where}': expected an object.", where)
        role = msg.get("role")
        if role not in ALLOWED_MESSAGE_KEYS:
            raise RequestInvalid(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.",
                f"{where}.role")
        extra = sorted(set(msg) - ALLOWED_MESSAGE_KEYS[role] - (assistant_keys if role == "assistant" else set()))
        if extra:
            raise RequestInvalid(f"Unrecognized request argument supplied: {where}.{extra[0]}", f"{where}.{extra[0]}")
        if role != "tool" and pending:
            raise RequestInvalid(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(sorted(pending))}",
                f"{where}.role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str):
                raise RequestInvalid(f"Missing required parameter: '{where}.tool_call_id'.", f"{where}.tool_call_id")
            if call_id not in answerable:
                raise RequestInvalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    f"{where}.role")
            _check_content(msg.get("content"), f"{where}.content", nullable=False)
            pending.discard(call_id)
            continue
        answerable = set()
        if role == "assistant":
            if "tool_calls" in msg and msg["tool_calls"] is not None:
                ids = _check_tool_calls(msg["tool_calls"], f"{where}.tool_calls")
                for j, cid in enumerate(ids):
                    if cid in seen_ids:
                        raise RequestInvalid(f"Duplicate tool_call id: '{cid}' appears more than once in messages.",
                                             f"{where}.tool_calls[{j}].id")
                    seen_ids.add(cid)
                pending = set(ids)
                answerable = set(ids)
                _check_content(msg.get("content"), f"{where}.content", nullable=True)
            else:
                if "content" not in msg:
                    raise RequestInvalid(f"Missing required parameter: '{where}.content'.", f"{where}.content")
                _check_content(msg.get("content"), f"{where}.content", nullable=False)
        else:
            if "content" not in msg:
                raise RequestInvalid(f"Missing required parameter: '{where}.content'.", f"{where}.content")
            _check_content(msg["content"], f"{where}.content", nullable=False)
    if pending:
        raise RequestInvalid(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(sorted(pending))}",
            "messages")


def _error_body(message: str, etype: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


_ERROR_TYPES = {
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"), 429: ("requests", "rate_limit_exceeded"),
}


def quirk_names(quirk: Any) -> frozenset[str]:
    """The quirk modes in force: ``server.quirk`` (or a reply's ``"quirk"``) is one name, or a
    set/list of names when a test combines a request-side and a reply-side mode."""
    if not quirk:
        return frozenset()
    if isinstance(quirk, str):
        return frozenset({quirk})
    return frozenset(str(q) for q in quirk)


def _reasoning_field(quirks: frozenset[str]) -> str | None:
    """The delta/message key a thinking-mode quirk streams its reasoning in, or None."""
    if "reasoning" in quirks:
        return "reasoning"
    if quirks & {"reasoning_content", "reasoning_required"}:
        return "reasoning_content"
    return None


def _reasoning_keys(quirks: frozenset[str]) -> frozenset[str]:
    field = _reasoning_field(quirks)
    return frozenset({field}) if field else frozenset()


def _thought(body: dict, reply: dict) -> str:
    """The reasoning a thinking-mode fake sends: the reply's ``"reasoning"``, else one made-up line."""
    if isinstance(reply.get("reasoning"), str):
        return reply["reasoning"]
    last = next((_text_of(m.get("content")) for m in reversed(body.get("messages") or [])
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    return "Thinking about: " + " ".join(last.split()[:6])


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class FakeOpenAI:
    """A running fake server: ``base_url`` (ends in ``/v1``), reply queues, and a request log.

    ``push(*replies, kind="chat")`` scripts replies; ``requests`` lists every request received as
    ``{"path", "body", "status", "error"}``; ``chat_requests()`` the accepted chat bodies;
    ``rejected()`` the 400s. ``api_key``, when set, is enforced like the real API (401 otherwise).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.host = host
        self.port = port or _free_port(host)
        self.models = ["gpt-4o-mini", "fake-large"]
        self.api_key: str | None = None
        self.allow_rejections = False
        self.quirk: str | None = None  # see "Quirk modes" in the module docstring
        self.context_limit: int | None = None  # tokens; see "Context window" in the module docstring
        self.context_style = "openai"
        self.window_api: str | None = None
        # One request at a time (llama-cpp-python's server, llama.cpp with one slot): a chat request
        # arriving while a reply streams aborts that reply's connection; counted in `interrupted`.
        self.refusal_delay = 0.0  # seconds before a quirk's refusal is sent (racing requests)
        self.usage_factor = 1.0  # streamed prompt_tokens = the count times this (a server counting wrong)
        self.one_at_a_time = False
        self.slots: int | None = None  # GET /props answers {"total_slots": slots} when set
        self.interrupted = 0
        self._streams: set[asyncio.Event] = set()
        self.requests: list[dict] = []
        # Bumped by clear(): a slow request from an earlier test must not land in this test's log.
        self._generation = 0
        # "subagent:<text>" queues serve the sub-agent whose task contains <text>.
        self._queues: dict[str, collections.deque] = {"chat": collections.deque(), "title": collections.deque(),
                                                      "subagent": collections.deque(),
                                                      "memory": collections.deque(),
                                                      "summary": collections.deque()}
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/props", self._props, methods=["GET"]),
            Route("/api/show", self._ollama_show, methods=["POST"]),
            Route("/api/v0/models", self._lmstudio_models, methods=["GET"]),
            Route("/_script", self._script, methods=["POST"]),
            Route("/_requests", self._requests, methods=["GET"]),
            Route("/_reset", self._reset, methods=["POST"]),
            Route("/_health", self._health, methods=["GET"]),
        ])

    # --- Python control -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def client(self, *, timeout: float = 10.0, max_retries: int = 0, api_key: str = "sk-test") -> "openai.OpenAI":
        """A real openai client pointed at this server (no retries by default: tests stay fast)."""
        import openai

        return openai.OpenAI(api_key=api_key, base_url=self.base_url, timeout=timeout, max_retries=max_retries)

    def push(self, *replies: dict, kind: str = "chat", task: str | None = None) -> None:
        """Queue replies (see the module docstring for their shape) for chat, title, memory, summary or
        sub-agent requests; ``task`` (sub-agents only): for the sub-agent whose task text contains it."""
        kinds = ("chat", "title", "memory", "subagent", "summary")
        if kind not in kinds or (task is not None and (kind != "subagent" or not task)):
            raise ValueError(f"kind must be one of {kinds} (task only for sub-agents), not {kind!r}")
        name = f"subagent:{task}" if task else kind
        with self._lock:
            self._queues.setdefault(name, collections.deque()).extend(replies)

    def clear(self) -> None:
        """Forget queued replies and logged requests (what ``POST /_reset`` does)."""
        with self._lock:
            for name in [n for n in self._queues if n.startswith("subagent:")]:
                del self._queues[name]
            for q in self._queues.values():
                q.clear()
            self.requests.clear()
            self._generation += 1

    def reset(self) -> None:
        """:meth:`clear`, and also drop the enforced API key, rejection flag and model list changes."""
        self.clear()
        self.api_key = None
        self.allow_rejections = False
        self.quirk = None
        self.context_limit = None
        self.context_style = "openai"
        self.window_api: str | None = None
        self.refusal_delay = 0.0
        self.usage_factor = 1.0
        self.one_at_a_time = False
        self.slots = None
        self.interrupted = 0
        self.models = ["gpt-4o-mini", "fake-large"]

    def chat_requests(self, kind: str | None = "chat") -> list[dict]:
        """Bodies of accepted chat completion requests; ``kind`` "chat", "title", "memory" or None for all."""
        with self._lock:
            out = [r["body"] for r in self.requests
                   if r["path"] == "/v1/chat/completions" and r["status"] == 200]
        if kind is None:
            return out
        return [b for b in out if (self._kind(b) == kind)]

    def rejected(self) -> list[dict]:
        """Logged requests answered with HTTP 400 (requests the real API would refuse)."""
        with self._lock:
            return [r for r in self.requests if r["status"] == 400]

    def pending(self, kind: str = "chat", task: str | None = None) -> int:
        """How many scripted replies of ``kind`` (and ``task``, see :meth:`push`) are still queued."""
        with self._lock:
            return len(self._queues.get(f"subagent:{task}" if task else kind, ()))

    def start(self) -> "FakeOpenAI":
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning",
                                lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-openai", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- HTTP handlers --------------------------------------------------------------------
    @staticmethod
    def _kind(body: dict) -> str:
        msgs = body.get("messages") or []
        first = msgs[0] if msgs and isinstance(msgs[0], dict) else {}
        if first.get("role") == "system" and _text_of(first.get("content")).startswith(TITLE_PROMPT_PREFIX):
            return "title"
        if first.get("role") == "system" and _text_of(first.get("content")).startswith(SUBAGENT_PROMPT_PREFIX):
            return "subagent"
        if first.get("role") == "system" and _text_of(first.get("content")).startswith(MEMORY_PROMPT_PREFIX):
            return "memory"
        if first.get("role") == "system" and _text_of(first.get("content")).startswith(SUMMARY_PROMPT_PREFIX):
            return "summary"
        return "chat"

    def _next_reply(self, body: dict, kind: str) -> dict | None:
        with self._lock:
            if kind == "subagent":
                task = next((_text_of(m.get("content")) for m in body["messages"] if m.get("role") == "user"), "")
                for name, q in self._queues.items():
                    if name.startswith("subagent:") and q and name[len("subagent:"):] in task:
                        return q.popleft()
            return self._queues[kind].popleft() if self._queues[kind] else None

    def _log(self, path: str, body: Any, status: int, error: str | None = None,
             generation: int | None = None) -> None:
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            self.requests.append({"path": path, "body": body, "status": status, "error": error})

    def _auth_error(self, request: Request) -> JSONResponse | None:
        if self.api_key is None:
            return None
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse(_error_body(
                "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error", None, "invalid_api_key"), status_code=401)
        return None

    async def _models(self, request: Request):
        denied = self._auth_error(request)
        self._log("/v1/models", None, denied.status_code if denied else 200)
        if denied:
            return denied
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": 1700000000, "owned_by": "fake",
             **({"max_model_len": self.context_limit} if self.window_api == "vllm" and self.context_limit else {})}
            for m in self.models]})

    def _window_route(self, api: str) -> bool:
        return self.window_api == api and self.context_limit is not None

    async def _props(self, request: Request):
        if self.slots is not None and not self._window_route("llamacpp"):
            return JSONResponse({"total_slots": self.slots})
        if not self._window_route("llamacpp"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"default_generation_settings": {"n_ctx": self.context_limit},
                             "total_slots": self.slots or 1})

    async def _ollama_show(self, request: Request):
        if not self._window_route("ollama"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"model_info": {"general.architecture": "llama",
                                            "llama.context_length": 4 * self.context_limit},
                             "parameters": f"num_ctx                        {self.context_limit}\nstop \"<|eot|>\""})

    async def _lmstudio_models(self, request: Request):
        if not self._window_route("lmstudio"):
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "state": "loaded", "max_context_length": 4 * self.context_limit,
             "loaded_context_length": self.context_limit} for m in self.models]})

    async def _chat(self, request: Request):
        generation = self._generation
        raw = await request.body()
        try:
            # The real API parses strict JSON; Python's json accepts lone-surrogate escapes, which
            # validate_chat_request then rejects as the real API does.
            body = json.loads(raw)
        except ValueError:
            self._log("/v1/chat/completions", raw.decode("utf-8", "replace"), 400, "bad json")
            return JSONResponse(_error_body("We could not parse the JSON body of your request.",
                                            "invalid_request_error"), status_code=400)
        denied = self._auth_error(request)
        if denied:
            self._log("/v1/chat/completions", body, 401, "auth")
            return denied
        refusal = self._quirk_refusal(body)
        if refusal is not None:
            status, payload, message = refusal
            if self.refusal_delay:
                await asyncio.sleep(self.refusal_delay)
            self._log("/v1/chat/completions", body, status, message)
            return JSONResponse(payload, status_code=status)
        if self.one_at_a_time:
            for running in list(self._streams):
                running.set()  # the reply streaming now is aborted, as llama-cpp-python does
        try:
            validate_chat_request(body, _reasoning_keys(quirk_names(self.quirk)))
        except RequestInvalid as err:
            log.warning("fake OpenAI rejected a request: %s", err.message)
            self._log("/v1/chat/completions", body, 400, err.message)
            return JSONResponse(_error_body(err.message, "invalid_request_error", err.param), status_code=400)
        over = self._over_limit(body, generation)
        if over is not None:
            return over
        kind = self._kind(body)
        reply = self._next_reply(body, kind)
        if reply is None:
            reply = self._auto_reply(body, kind)
        if reply.get("wait"):
            try:
                await asyncio.sleep(float(reply["wait"]))
            except asyncio.CancelledError:
                # The server is shutting down while the client already gave up (a timeout or
                # Stop test): nobody is listening, so end quietly instead of a traceback.
                return JSONResponse(_error_body("server shutting down", "server_error"), status_code=503)
        if "error" in reply:
            status = int(reply["error"])
            etype, code = _ERROR_TYPES.get(status, ("server_error", None))
            message = reply.get("message") or {
                401: "Incorrect API key provided.", 429: "Rate limit reached for requests.",
            }.get(status, "The server had an error while processing your request.")
            self._log("/v1/chat/completions", body, status, message, generation)
            return JSONResponse(_error_body(message, etype, None, code), status_code=status)
        self._log("/v1/chat/completions", body, 200, None, generation)
        if body.get("stream") and "json_body" not in quirk_names(reply.get("quirk", self.quirk)):
            return StreamingResponse(self._stream(body, reply), media_type="text/event-stream")
        return JSONResponse(self._completion(body, reply))

    def _over_limit(self, body: dict, generation: int):
        """The answer to a request past :attr:`context_limit` (see the module docstring), or None."""
        if self.context_limit is None:
            return None
        tokens = count_tokens(body)
        if tokens <= self.context_limit:
            return None
        limit = self.context_limit
        if self.context_style == "http_500":
            message = f"the request exceeds the available context size ({tokens} tokens > n_ctx {limit}), try increasing it"
            self._log("/v1/chat/completions", body, 500, message, generation)
            return JSONResponse({"error": {"code": 500, "message": message, "type": "server_error"}}, status_code=500)
        if self.context_style == "error_event":
            self._log("/v1/chat/completions", body, 200, "context overflow: error event", generation)
            error = {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": limit}

            async def error_stream():
                yield "data: " + json.dumps({"error": error}) + "\n\n"

            return StreamingResponse(error_stream(), media_type="text/event-stream")
        if self.context_style == "stream_break":
            self._log("/v1/chat/completions", body, 200, "context overflow: stream dropped", generation)

            async def broken():
                yield "data: " + json.dumps({"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0,
                                             "model": body["model"], "choices": [{"index": 0, "delta": {
                                                 "role": "assistant", "content": ""}, "finish_reason": None}]}) + "\n\n"
                raise ConnectionAbortedError("llama_decode failed: context overflow")

            return StreamingResponse(broken(), media_type="text/event-stream")
        message = (f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                   f"{tokens} tokens. Please reduce the length of the messages.")
        self._log("/v1/chat/completions", body, 400, message, generation)
        return JSONResponse(_error_body(message, "invalid_request_error", "messages", "context_length_exceeded"),
                            status_code=400)

    def _quirk_refusal(self, body: Any) -> tuple[int, dict, str] | None:
        """(status, body, log message) when the current request-side quirk refuses ``body``."""
        quirk = quirk_names(self.quirk)
        if not isinstance(body, dict) or not quirk:
            return None
        if "no_null_content" in quirk and any(
                isinstance(m, dict) and m.get("role") == "assistant" and "content" in m and m["content"] is None
                for m in body.get("messages") or []):
            message = "Invalid 'content': 'content' field must be a string or an array of objects."
            return 400, {"error": message}, message  # LM Studio's shape: a bare string
        if "no_sampling" in quirk:
            for name in ("temperature", "top_p"):
                if name in body:
                    message = (f"Unsupported parameter: '{name}' is not supported with this model.")
                    return 400, _error_body(message, "invalid_request_error", name, "unsupported_parameter"), message
        if "no_stream_options" in quirk and "stream_options" in body:
            message = "Unrecognized request argument supplied: stream_options"
            return 400, _error_body(message, "invalid_request_error"), message
        if "no_parallel_tool_calls" in quirk and "parallel_tool_calls" in body:
            detail = [{"type": "extra_forbidden", "loc": ["body", "parallel_tool_calls"],
                       "msg": "Extra inputs are not permitted", "input": body["parallel_tool_calls"]}]
            return 422, {"detail": detail}, "parallel_tool_calls: extra inputs are not permitted"
        if "no_stream" in quirk and body.get("stream"):
            message = "Unsupported value: 'stream' does not support true with this model. Supported values are: false."
            return 400, _error_body(message, "invalid_request_error", "stream", "unsupported_value"), message
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        if "require_user" in quirk and not any(m.get("role") == "user" for m in messages):
            # Qwen3's chat template (llama.cpp, vLLM) raises this when no user turn is left.
            message = "No user query found in messages."
            return 400, _error_body(message, "invalid_request_error"), message
        field = _reasoning_field(quirk)
        if field:
            last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
            for i, m in enumerate(messages):
                if m.get("role") != "assistant":
                    continue
                if i < last_user and field in m:
                    # deepseek-reasoner: reasoning of an earlier turn must not come back.
                    message = (f"The {field} of a previous turn must not be sent back (messages[{i}]); "
                               "remove it from earlier turns.")
                    return 400, _error_body(message, "invalid_request_error", f"messages[{i}].{field}"), message
                if "reasoning_required" in quirk and i > last_user and m.get("tool_calls") \
                        and not isinstance(m.get(field), str):
                    # DeepSeek V3.2 / Kimi K2 thinking: the turn's tool rounds need their reasoning.
                    message = (f"Missing `{field}` field in the assistant message at message index {i}. "
                               "In thinking mode the reasoning of this turn's tool calls must be passed back.")
                    return 400, _error_body(message, "invalid_request_error", f"messages[{i}].{field}"), message
        return None

    @staticmethod
    def _auto_reply(body: dict, kind: str) -> dict:
        messages = body["messages"]
        if kind == "summary":
            # The newest user request seen in the transcript, so a test can tell summaries apart.
            transcript = _text_of(messages[-1].get("content"))
            asked = [line for line in transcript.splitlines()
                     if line and not line.startswith(("[", "Write the", "Summary of", "Conversation to"))]
            return {"text": "Summary: goals so far; last request: " + (asked[-1][:80] if asked else "none")}
        if kind == "title":
            first_user = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
            words = first_user.split()[:5]
            return {"text": "Chat: " + " ".join(words) if words else "Chat"}
        if kind == "subagent":
            task = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
            return {"text": "Sub-agent report: " + " ".join(task.split()[:8])}
        last_user = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        if kind == "memory":
            exchange = last_user.split("Latest exchange:", 1)[-1]
            said = " ".join(line[len("USER: "):] for line in exchange.splitlines() if line.startswith("USER: "))
            facts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", said)
                     if p.strip().lower().startswith(("convention:", "remember that"))]
            # Prose around a fenced block, as real models often answer.
            return {"text": "Here is the memory update:\n```json\n" + json.dumps({"add": facts, "remove": []})
                            + "\n```\nLet me know if anything else should be remembered."}
        return {"text": f"You said: {last_user}"}

    @staticmethod
    def _calls(reply: dict) -> list[dict]:
        calls = []
        for n, call in enumerate(reply.get("tool_calls") or []):
            args = call.get("arguments", {})
            calls.append({
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}_{n}",
                "type": "function",
                "function": {"name": call["name"],
                             "arguments": args if isinstance(args, str) else json.dumps(args)},
            })
        return calls

    def _completion(self, body: dict, reply: dict) -> dict:
        calls = self._calls(reply)
        text = reply.get("text") or ""
        message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else ""), "refusal": None}
        field = _reasoning_field(quirk_names(reply.get("quirk", self.quirk)))
        if field:
            message[field] = _thought(body, reply)
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"], "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _stream_pieces(self, body: dict, reply: dict) -> list[str]:
        """The SSE events of a streamed reply, shaped by the current quirk."""
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        size = max(1, int(reply.get("chunk", 4)))
        # A reply may carry its own (the control API's way).
        quirk = quirk_names(reply.get("quirk", self.quirk))

        def chunk(delta: dict | None, finish: str | None = None, **extra: Any) -> str:
            data = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": body["model"],
                    "system_fingerprint": "fp_fake",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
            if "nulls" in quirk:
                data.update({"usage": None, "timings": {"predicted_n": 1}, "service_tier": None})
                if isinstance(delta, dict):
                    delta = {"role": None, "content": None, "tool_calls": None, "reasoning_content": None,
                             "function_call": None, **delta}
                    data["choices"][0]["delta"] = delta
            return f"data: {json.dumps(data)}\n\n"

        pieces = [chunk({"role": "assistant", "content": "", "refusal": None})]
        if "nulls" in quirk:
            pieces.append(chunk(None))
            pieces.append("data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": created,
                                                 "model": body["model"], "choices": []}) + "\n\n")
        if "reasoning_only" in quirk:
            thought = "Let me think about this carefully. " * 3
            pieces += [chunk({"reasoning_content": thought[i:i + size]}) for i in range(0, len(thought), size)]
            pieces.append(chunk({}, "length"))
            pieces.append("data: [DONE]\n\n")
            return pieces
        field = _reasoning_field(quirk)
        if field:  # a thinking-mode server: the reasoning streams first, beside the answer
            thought = _thought(body, reply)
            pieces += [chunk({field: thought[i:i + size]}) for i in range(0, len(thought), size)]
        text = "" if "empty" in quirk else reply.get("text") or ""
        pieces += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
        if "error_event" in quirk:
            pieces.append("data: " + json.dumps({"error": {"code": 500, "message": "llama_decode failed: out of memory",
                                                           "type": "server_error"}}) + "\n\n")
            return pieces
        calls = self._calls(reply)
        for index, call in enumerate(calls):
            name, args = call["function"]["name"], call["function"]["arguments"]
            call_id = None if "missing_ids" in quirk else "call_0" if "repeated_ids" in quirk else call["id"]
            head: dict[str, Any] = {"index": 0 if "same_index" in quirk else index, "type": "function",
                                    "function": {"name": name, "arguments": ""}}
            if call_id is not None:
                head["id"] = call_id
            if "no_index" in quirk:
                whole = {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                pieces.append(chunk({"tool_calls": [whole]}))
                continue
            if "object_arguments" in quirk:
                head["function"]["arguments"] = json.loads(args) if args.strip() else {}
                pieces.append(chunk({"tool_calls": [head]}))
                continue
            pieces.append(chunk({"tool_calls": [head]}))
            for i in range(0, len(args), size):
                part: dict[str, Any] = {"index": head["index"], "function": {"arguments": args[i:i + size]}}
                if "name_every_delta" in quirk:
                    part = {"index": head["index"], "id": call_id, "type": "function",
                            "function": {"name": name, "arguments": args[i:i + size]}}
                pieces.append(chunk({"tool_calls": [part]}))
        if "no_end" in quirk:
            return pieces
        finish = next((f for f in ("length", "content_filter") if f in quirk), "tool_calls" if calls else "stop")
        pieces.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage") and "no_usage" not in quirk:
            prompt, completion = max(1, int(count_tokens(body) * self.usage_factor)), max(1, len(text) // 4)
            pieces.append("data: " + json.dumps({
                "id": cid, "object": "chat.completion.chunk", "created": created, "model": body["model"],
                "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                         "total_tokens": prompt + completion}}) + "\n\n")
        pieces.append("data: [DONE]\n\n")
        return pieces

    async def _stream(self, body: dict, reply: dict):
        delay = float(reply.get("delay", 0))
        drop_after = reply.get("drop_after")
        aborted = asyncio.Event()
        self._streams.add(aborted)
        try:
            for n, piece in enumerate(self._stream_pieces(body, reply)):
                if aborted.is_set():
                    with self._lock:
                        self.interrupted += 1
                    raise ConnectionAbortedError("fake server: another request arrived (one at a time)")
                if drop_after is not None and n >= int(drop_after):
                    # An exception inside the body iterator makes uvicorn abort the connection, like a
                    # server process dying mid-reply.
                    raise ConnectionAbortedError("fake server dropped the connection")
                if delay:
                    await asyncio.sleep(delay)
                yield piece
        finally:
            self._streams.discard(aborted)

    # --- control API ----------------------------------------------------------------------
    async def _script(self, request: Request):
        data = await request.json()
        replies = data.get("replies", [])
        kind = data.get("kind", "chat")
        task = data.get("task")
        if not isinstance(replies, list) or not isinstance(task, (str, type(None))):
            return JSONResponse({"error": "body must be {'replies': [...], 'kind': 'chat'|'title'|'memory'|'subagent'}"},
                                status_code=400)
        try:
            self.push(*replies, kind=kind, task=task)
        except ValueError as err:
            return JSONResponse({"error": str(err)}, status_code=400)
        return JSONResponse({"queued": self.pending(kind, task)})

    async def _requests(self, request: Request):
        with self._lock:
            return JSONResponse(list(self.requests))

    async def _reset(self, request: Request):
        self.clear()
        return JSONResponse({"ok": True})

    async def _health(self, request: Request):
        return JSONResponse({"ok": True})


def count_tokens(body: dict) -> int:
    """The fake's token count of a chat request: the JSON characters of its messages and tools / 4
    (about what a BPE tokenizer gives for English text and code)."""
    size = len(json.dumps(body.get("messages") or [], ensure_ascii=False))
    if body.get("tools"):
        size += len(json.dumps(body["tools"], ensure_ascii=False))
    return size // 4


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


try:  # the fixtures need pytest; `python -m tests.support.fake_openai` (a manual trial) does not
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    @pytest.fixture(scope="session")
    def _fake_openai_server():
        server = FakeOpenAI().start()
        yield server
        server.stop()

    @pytest.fixture
    def fake_openai(_fake_openai_server):
        """A running :class:`FakeOpenAI`, reset for this test; fails the test if any request got a 400."""
        server = _fake_openai_server
        server.reset()
        yield server
        bad = server.rejected()
        allowed = server.allow_rejections
        server.reset()
        if bad and not allowed:
            pytest.fail(f"the product sent {len(bad)} request(s) the real API would reject: "
                        + "; ".join(r["error"] for r in bad))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server for anycode tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="JSON file: a list of chat replies to queue")
    parser.add_argument("--title-script", help="JSON file: a list of title replies to queue")
    parser.add_argument("--api-key", help="require this API key (401 otherwise)")
    args = parser.parse_args(argv)
    server = FakeOpenAI(args.host, args.port)
    server.api_key = args.api_key
    for path, kind in ((args.script, "chat"), (args.title_script, "title")):
        if path:
            with open(path, encoding="utf-8") as fh:
                server.push(*json.load(fh), kind=kind)
    server.start()
    print(f"READY {server.base_url}", flush=True)
    try:
        while server._thread.is_alive():
            server._thread.join(0.5)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
