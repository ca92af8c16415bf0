"""Reading replies from any OpenAI-compatible server, the way real servers send them.

The chat completions streaming format (server-sent events of ``chat.completion.chunk`` objects,
tool calls as deltas keyed by ``index``, a ``finish_reason``, then ``data: [DONE]``) is what
OpenAI sends. Local servers bend it, and this module accepts what they actually send:

* vLLM and SGLang stream parallel tool calls with the SAME ``index`` and different ids; Ollama
  sends tool calls with no ``index`` at all, each call whole in one delta (ollama/ollama#7881);
  some servers repeat the name in every delta, or send ids that are missing, empty, or reused
  (``"0"``, ``"call_0"`` in every reply). A new id at an index already in use starts a new call;
  calls without a usable id get a fresh unique one, so each tool result stays paired with its call.
* argument fragments that are JSON objects instead of strings become JSON text;
* unknown and null fields are ignored (llama.cpp adds ``timings``); reasoning servers' thinking
  (``reasoning_content`` — DeepSeek, Kimi, Qwen3 behind vLLM/SGLang — or ``reasoning``) is
  collected apart from the answer, with the key it came in (:attr:`Reply.reasoning_key`);
* a plain JSON completion answered to a stream request is read as the whole reply; a stream may
  also be NDJSON or carry an ``{"error": ...}`` event (llama.cpp, vLLM), which becomes a typed error;
* how the reply ended is kept (:attr:`Reply.end`): ``"complete"``, ``"length"`` (the output
  token limit), ``"content_filter"``, or ``"no_end"`` (the stream stopped without a finish reason
  or ``[DONE]``).

Requests are adapted to the server too (:func:`open_reply`): an optional parameter the server
rejects with HTTP 400/422 (``temperature``, ``stream_options``, ``parallel_tool_calls``, ...) is
dropped and the request retried; a 400 naming ``stream`` is retried once without streaming. Both
are remembered per (base URL, model) for the life of the process (:func:`compat_for`), so only the
first request pays for the discovery.
"""
from __future__ import annotations

import codecs
import importlib
import importlib.util
import json
import logging
import re
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import openai

from core.agent.config import describe_api_error
from core.agent.repair import sanitize_text
from core.errors import ModelError, ModelServerError

log = logging.getLogger(__name__)

# Request parameters a server may refuse without the request losing its meaning: dropped (and
# remembered) when a 400/422 names them. Per the chat completions API these are all optional.
OPTIONAL_PARAMS = ("temperature", "top_p", "stream_options", "parallel_tool_calls", "max_tokens",
                   "max_completion_tokens", "seed", "tool_choice", "reasoning_effort")
# finish_reason values meaning "the model did not finish": per the chat completions API
# ("length", "content_filter"); "max_tokens" is what some Anthropic-style gateways send.
_CUT_OFF = {"length": "length", "max_tokens": "length", "content_filter": "content_filter"}
# How a reply ended (Reply.end); every value but "complete" means the reply was cut off.
END_COMPLETE, END_LENGTH, END_FILTER, END_MISSING = "complete", "length", "content_filter", "no_end"
CUT_OFF_ENDS = (END_LENGTH, END_FILTER, END_MISSING)
# The HTTP library under the openai client: httpx, or httpx2 in newer openai releases. Transport
# errors while reading a body come from it unwrapped.
_HTTP_LIBS = [m for m in (importlib.util.find_spec(n) and importlib.import_module(n) for n in ("httpx2", "httpx")) if m]
_TIMEOUT_ERRORS = tuple(m.TimeoutException for m in _HTTP_LIBS)
_TRANSPORT_ERRORS = tuple(m.HTTPError for m in _HTTP_LIBS)
# Bytes of a non-SSE body kept to parse it as one JSON completion (a server ignoring stream=true).
_MAX_PLAIN_BODY = 16 * 1024 * 1024


@dataclass
class Reply:
    """One model reply, read whole.

    ``text``: the reply text; ``tool_calls``: OpenAI tool calls (``{"id", "type": "function",
    "function": {"name", "arguments": JSON text}}``) with unique ids; ``finish_reason`` as the
    server sent it (None when it sent none); ``end``: see :data:`CUT_OFF_ENDS`; ``reasoning``:
    the model's thinking (never part of ``text``), ``reasoning_key`` the field it came in
    (``"reasoning_content"`` or ``"reasoning"``; the loop stores it on the assistant message
    under that key, core.agent.repair sends it back where the server's rule says); ``usage``:
    the server's token counts when it sent them (``prompt_tokens``, ``completion_tokens``, ...).
    """

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    finish_reason: str | None = None
    end: str = END_COMPLETE
    reasoning: str = ""
    usage: dict | None = None
    reasoning_key: str = "reasoning_content"

    @property
    def cut_off(self) -> bool:
        """True when the model did not finish the reply (see :data:`CUT_OFF_ENDS`)."""
        return self.end in CUT_OFF_ENDS

    @property
    def empty(self) -> bool:
        """True when there is neither text (beyond whitespace) nor a tool call."""
        return not self.text.strip() and not self.tool_calls


def _json_complete(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _text_of(value: Any) -> str:
    """Text of a content field: a string, or the text parts of a content-part list."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _arguments_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)  # Ollama-style object arguments
    except (TypeError, ValueError):
        return ""


class ReplyReader:
    """Fold streamed chunks (parsed JSON objects) into a :class:`Reply`.

    ``feed(chunk)`` returns the text pieces that chunk added (for live display); ``done()`` marks
    the ``[DONE]`` sentinel; ``reply()`` returns the reply. ``used_ids``: tool-call ids already in
    the conversation, never handed out again (servers that number calls per reply reuse them).
    Raises :class:`ModelServerError` for an error object inside the stream.
    """

    def __init__(self, used_ids: Iterable[str] = ()):
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_key = "reasoning_content"
        self.new_reasoning: list[str] = []  # the reasoning pieces the last feed() added
        self._calls: list[dict] = []       # {"id", "name", "args", "object"} in order of appearance
        self._by_index: dict[int, int] = {}  # server index -> position in _calls of its latest call
        self._finish: str | None = None
        self._done = False
        self._usage: dict | None = None
        self._used = set(used_ids)

    # --- feeding ---------------------------------------------------------------------------
    def feed(self, chunk: Any) -> list[str]:
        """Fold one chunk in; return the reply text it added (possibly ``[]``; the reasoning it
        added is in :attr:`new_reasoning`)."""
        self.new_reasoning = []
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error") is not None:
            raise stream_error(chunk["error"])
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return []
        added: list[str] = []
        for choice in choices:
            # Only the first choice is ours (n=1); a missing index means the first.
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = choice.get("message")  # a whole message (non-stream body, some servers)
            if isinstance(delta, dict):
                added += self._delta(delta)
            if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
                self._finish = choice["finish_reason"]
        return added

    @property
    def reasoning_key(self) -> str:
        """The field the reasoning came in (``"reasoning_content"`` until one arrives)."""
        return self._reasoning_key

    def done(self) -> None:
        """The server sent ``data: [DONE]``."""
        self._done = True

    def _delta(self, delta: dict) -> list[str]:
        added = []
        text = _text_of(delta.get("content"))
        if text:
            self._text.append(text)
            added.append(text)
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str) and delta[key]:
                self._reasoning.append(delta[key])
                self._reasoning_key = key
                self.new_reasoning.append(delta[key])
        calls = delta.get("tool_calls")
        if isinstance(calls, dict):
            calls = [calls]
        if isinstance(calls, list):
            for n, part in enumerate(calls):
                if isinstance(part, dict):
                    self._tool_part(part, n if len(calls) > 1 else None)
        legacy = delta.get("function_call")  # the deprecated single function call
        if isinstance(legacy, dict):
            self._tool_part({"index": 0, "function": legacy}, None)
        return added

    def _tool_part(self, part: dict, position: int | None) -> None:
        index = part.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = None
        pid = part.get("id") if isinstance(part.get("id"), str) and part["id"] else None
        fn = part.get("function") if isinstance(part.get("function"), dict) else {}
        name = fn.get("name") if isinstance(fn.get("name"), str) and fn["name"] else None
        raw_args = fn.get("arguments")
        args = _arguments_text(raw_args)
        whole = isinstance(raw_args, (dict, list))

        call = self._target(index, pid, name, args, position)
        if call is None:
            call = {"id": pid or "", "name": "", "args": "", "object": False}
            self._calls.append(call)
            if index is not None:
                self._by_index[index] = len(self._calls) - 1
        if pid and not call["id"]:
            call["id"] = pid
        if name and name != call["name"]:
            # A name in pieces (rare) is joined; the same name repeated in every delta is not.
            call["name"] = call["name"] + name if not call["args"] else call["name"] or name
        if whole:
            call["args"], call["object"] = args, True  # an object is always the whole arguments
        elif args:
            call["args"] += args

    def _target(self, index: int | None, pid: str | None, name: str | None, args: str,
                position: int | None) -> dict | None:
        """The call a tool-call delta continues, or None when it starts a new one."""
        if index is not None:
            if index not in self._by_index:
                return None
            call = self._calls[self._by_index[index]]
            if pid and call["id"] and pid != call["id"]:
                return None  # a new id at an index already in use: a new call (vLLM, SGLang)
            if self._starts_new(call, pid, name, args):
                return None
            return call
        if position is not None and pid is None:
            # Several calls without index in one delta: one call per list item, in order.
            return None
        if pid is not None:
            for call in reversed(self._calls):
                if call["id"] == pid:
                    return None if self._starts_new(call, pid, name, args) else call
            return None  # Ollama: a new id, no index
        if not self._calls:
            return None
        call = self._calls[-1]
        return None if self._starts_new(call, pid, name, args) else call

    @staticmethod
    def _starts_new(call: dict, pid: str | None, name: str | None, args: str) -> bool:
        """A delta whose name differs from a call that already has complete arguments is a new
        call (servers that reuse one index and one id, or none, for every call)."""
        if not call["name"] or not call["args"] or not _json_complete(call["args"]):
            return False
        if name and name != call["name"]:
            return True
        # The same call repeated whole (name and full arguments again) adds nothing new; fresh
        # arguments after complete ones are a second call of the same tool.
        return bool(name and args and _json_complete(args) and args != call["args"])

    # --- result ----------------------------------------------------------------------------
    def reply(self) -> Reply:
        """The reply so far, with unique tool-call ids and arguments as JSON text."""
        calls, seen = [], set(self._used)
        for c in self._calls:
            if not c["name"]:
                continue  # a fragment no name ever arrived for cannot be called
            cid = c["id"]
            if not cid or cid in seen:
                cid = f"call_{uuid.uuid4().hex[:24]}"
            seen.add(cid)
            args = sanitize_text(c["args"]) if c["args"].strip() else "{}"
            calls.append({"id": cid, "type": "function", "function": {"name": c["name"], "arguments": args}})
        finish = self._finish
        if finish in _CUT_OFF:
            end = _CUT_OFF[finish]
        elif finish is None and not self._done:
            end = END_MISSING
        else:
            end = END_COMPLETE
        return Reply(text=sanitize_text("".join(self._text)), tool_calls=calls, finish_reason=finish,
                     end=end, reasoning="".join(self._reasoning), usage=self._usage,
                     reasoning_key=self._reasoning_key)


def stream_error(error: Any) -> ModelServerError:
    """A typed error for an ``{"error": ...}`` object sent inside a stream (llama.cpp, vLLM)."""
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg") or json.dumps(error)[:200]
    else:
        message = str(error)
    message = " ".join(str(message).split())[:300]
    err = ModelServerError(f"The model server failed while answering ({message}); try again in a moment.")
    err.status_code = error.get("code") if isinstance(error, dict) and isinstance(error.get("code"), int) else None  # type: ignore[attr-defined]
    err.detail = message  # type: ignore[attr-defined]
    return err


# --- server-sent events ------------------------------------------------------------------------


def sse_events(chunks: Iterable[bytes]) -> Iterator[Any]:
    """Parse a streamed body into its JSON events; ``"[DONE]"`` for the sentinel.

    Accepts server-sent events split at any byte (even inside a UTF-8 character), events without
    the blank line between them, comment/keep-alive lines, ``event: error`` events, and NDJSON
    (one JSON object per line, no ``data:``). A body that holds no event at all but is one JSON
    object (a plain completion, or an error object) yields that object. Lines that are not JSON
    are skipped with a log line.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    data: list[str] = []
    event_name = ""
    plain: list[str] = []
    plain_size = 0
    seen = False

    def dispatch() -> Iterator[Any]:
        nonlocal data, event_name, seen
        if not data:
            return
        text, name = "\n".join(data), event_name
        data, event_name = [], ""
        seen = True
        if text.strip() == "[DONE]":
            yield "[DONE]"
            return
        try:
            value = json.loads(text)
        except ValueError:
            log.info("skipping a stream event that is not JSON: %.200r", text)
            return
        if name == "error" and isinstance(value, dict) and "error" not in value:
            value = {"error": value}
        yield value

    def lines(text: str) -> Iterator[Any]:
        nonlocal event_name, plain_size
        for line in text.split("\n"):
            line = line.rstrip("\r")
            if not seen and plain_size < _MAX_PLAIN_BODY:
                plain.append(line)
                plain_size += len(line) + 1
            if not line:
                yield from dispatch()
            elif line.startswith(":"):
                continue  # a comment / keep-alive
            elif line.startswith("data:"):
                value = line[5:].removeprefix(" ")
                if data and _json_complete("\n".join(data)):
                    yield from dispatch()  # no blank line between two events
                data.append(value)
            elif line.startswith("event:"):
                event_name = line[6:].strip()
            elif line.startswith(("{", "[")) and _json_complete(line) and not data:
                data.append(line)  # NDJSON
                yield from dispatch()

    for chunk in chunks:
        if not chunk:
            continue
        pending += decoder.decode(chunk)
        if "\n" in pending:
            complete, pending = pending.rsplit("\n", 1)
            yield from lines(complete)
    pending += decoder.decode(b"", final=True)
    if pending:
        yield from lines(pending)
    yield from dispatch()
    if not seen and plain:
        body = "\n".join(plain).strip()
        if body:
            try:
                yield json.loads(body)
            except ValueError:
                log.info("the model server's answer is neither a stream nor JSON: %.200r", body)


def completion_as_chunk(body: dict) -> dict:
    """A non-stream ``chat.completion`` body as one chunk :class:`ReplyReader` can fold: each
    choice's ``message`` becomes its ``delta`` (tool calls numbered by position)."""
    choices = []
    for choice in body.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        delta = dict(message)
        if isinstance(message.get("tool_calls"), list):
            delta["tool_calls"] = [dict(c, index=n) if isinstance(c, dict) else c
                                   for n, c in enumerate(message["tool_calls"])]
        choices.append({"index": choice.get("index", 0), "delta": delta,
                        "finish_reason": choice.get("finish_reason")})
    out = {"choices": choices}
    if isinstance(body.get("usage"), dict):
        out["usage"] = body["usage"]
    if body.get("error") is not None:
        out["error"] = body["error"]
    return out


# --- what a server accepts, remembered -----------------------------------------------------------


@dataclass
class ServerCompat:
    """What one (base URL, model) was found to refuse: ``dropped`` parameter names, and
    ``no_stream`` when it refuses ``stream: true``."""

    dropped: set[str] = field(default_factory=set)
    no_stream: bool = False


# A process-wide cache, not session state: what a server refuses does not change between chats,
# and re-discovering it would cost a failed request per message.
_COMPAT: dict[tuple[str, str], ServerCompat] = {}
_COMPAT_LOCK = threading.Lock()


def compat_for(base_url: Any, model: str) -> ServerCompat:
    """The remembered :class:`ServerCompat` of ``model`` at ``base_url`` (created empty)."""
    key = (str(base_url).rstrip("/"), model)
    with _COMPAT_LOCK:
        return _COMPAT.setdefault(key, ServerCompat())


def forget_compat() -> None:
    """Forget everything remembered about servers (tests, or a server that was upgraded)."""
    with _COMPAT_LOCK:
        _COMPAT.clear()


_STREAM_WORD = re.compile(r"(?<![\w.])stream(?![\w])")


def rejected_param(exc: openai.APIStatusError, params: dict) -> str | None:
    """The request parameter a 400/422 answer blames, if it is one we sent: the error's
    ``param`` field (OpenAI), else a parameter named in its message (vLLM, llama.cpp, LM Studio)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    param = err.get("param")
    if isinstance(param, str) and param in params:
        return param
    detail = body.get("detail")  # FastAPI/pydantic validation errors (vLLM, llama-cpp-python)
    texts = [str(err.get("message") or ""), str(exc.message or ""), json.dumps(detail) if detail else ""]
    text = " ".join(texts).lower()
    for name in params:
        if name in OPTIONAL_PARAMS and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text):
            return name
    if "stream" in params and _STREAM_WORD.search(text.replace("stream_options", "")):
        return "stream"
    return None


def _request_of(exc: Exception) -> Any:
    try:
        return exc.request  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # raised without its request
        return None


class OpenedReply:
    """An answered request: iterate :meth:`chunks` for its JSON chunks, then :meth:`close`."""

    def __init__(self, manager: Any, response: Any, streamed: bool):
        self._manager = manager
        self._response = response
        self.streamed = streamed

    def chunks(self) -> Iterator[Any]:
        """The reply's JSON chunks (a plain completion comes as one chunk); ``"[DONE]"`` for the
        sentinel. Raises a typed ModelError when the connection breaks mid-reply."""
        try:
            for event in sse_events(self._response.iter_bytes()):
                if isinstance(event, dict) and event.get("object") == "chat.completion" or (
                        isinstance(event, dict) and any(isinstance(c, dict) and isinstance(c.get("message"), dict)
                                                        for c in event.get("choices") or [])):
                    yield completion_as_chunk(event)
                    yield "[DONE]"  # a whole completion is a finished reply
                else:
                    yield event
        except _TIMEOUT_ERRORS as exc:
            raise describe_api_error(openai.APITimeoutError(request=_request_of(exc)), mid_reply=True) from exc
        except _TRANSPORT_ERRORS as exc:
            raise describe_api_error(openai.APIConnectionError(message=str(exc), request=_request_of(exc)),
                                     mid_reply=True) from exc

    def close(self) -> None:
        """Release the HTTP response (safe to call twice)."""
        try:
            self._manager.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 -- closing a broken connection may fail; nothing to save
            log.debug("closing the model response failed", exc_info=True)


# The request's bulky parts, sent as the client's ``extra_body`` (see :func:`_untransformed`).
_AS_GIVEN = ("messages", "tools")


def _untransformed(kwargs: dict) -> dict:
    """``create()`` keywords sending ``messages`` and ``tools`` as given: the client's own
    ``create`` walks every message through its typed-dict transform first, 0.3–1 s for a
    1,000-message chat on two busy cores (issue 32: most of the wait for the first token), although
    no field of a chat message or tool has anything to transform (no aliases, no base64 or date
    formats). ``extra_body`` takes the keys' place in the same JSON body, byte for byte."""
    bulky = {k: kwargs[k] for k in _AS_GIVEN if k in kwargs}
    if not bulky:
        return kwargs
    rest = {k: v for k, v in kwargs.items() if k not in bulky}
    # merged into an extra_body a caller gave (server-specific fields), never replacing it
    return {**rest, "messages": [], "extra_body": {**(rest.get("extra_body") or {}), **bulky}}


def open_reply(client: openai.OpenAI, params: dict, *, stream: bool = True) -> OpenedReply:
    """Send a chat completions request the server accepts and return the open response.

    ``params``: the request (``model``, ``messages``, ...) without ``stream``. Parameters the
    server refused before for this (base URL, model) are left out; a 400/422 naming one of
    :data:`OPTIONAL_PARAMS` drops it and retries; one naming ``stream`` retries without
    streaming (and without ``stream_options``). What was learnt is remembered
    (:func:`compat_for`). Raises a typed ModelError (see
    :func:`core.agent.config.describe_api_error`) for any other failure.
    """
    compat = compat_for(client.base_url, str(params.get("model")))
    reconnected = False
    for _ in range(len(OPTIONAL_PARAMS) + 3):
        streamed = stream and not compat.no_stream
        with _COMPAT_LOCK:  # another thread may be adding to it
            dropped = set(compat.dropped)
        kwargs = {k: v for k, v in params.items() if k not in dropped}
        if not streamed:
            kwargs.pop("stream_options", None)
        kwargs["stream"] = streamed
        manager = client.chat.completions.with_streaming_response.create(**_untransformed(kwargs))
        try:
            response = manager.__enter__()
        except openai.APIStatusError as exc:
            if exc.status_code in (400, 422):
                param = rejected_param(exc, kwargs)
                if param == "stream" and streamed:
                    log.warning("%s refuses streaming for %s; asking without streaming from now on",
                                client.base_url, params.get("model"))
                    compat.no_stream = True
                    continue
                # The decision rests on the request that failed (it carried the parameter), not
                # on the shared memory of the server: another request racing this one (the title
                # and memory jobs at once) may have learnt the same quirk a moment ago, and this
                # request must still be retried without it (issue 27, kind 5).
                if param in OPTIONAL_PARAMS and param in kwargs:
                    with _COMPAT_LOCK:
                        learnt = param not in compat.dropped
                        compat.dropped.add(param)
                    if learnt:
                        log.warning("%s refuses %r for %s; leaving it out from now on",
                                    client.base_url, param, params.get("model"))
                    continue
            raise describe_api_error(exc) from exc
        except openai.APIConnectionError as exc:
            if not reconnected and not isinstance(exc, openai.APITimeoutError):
                # llama-cpp-python closes a keep-alive connection after a failed stream; the
                # client's next request on it fails at once. One fresh connection tells a stale
                # connection from a server that is really gone.
                reconnected = True
                log.info("the model server dropped the connection (%s); trying once more", exc)
                continue
            raise describe_api_error(exc) from exc
        except openai.OpenAIError as exc:
            raise describe_api_error(exc) from exc
        return OpenedReply(manager, response, streamed)
    raise ModelError("The model server refused every form of the request; check the model name and settings.")


def read_reply(client: openai.OpenAI, params: dict, *, stream: bool = False,
               used_ids: Iterable[str] = ()) -> Reply:
    """Send ``params`` (see :func:`open_reply`) and read the whole reply (titles, tests).

    Raises a typed ModelError."""
    opened = open_reply(client, params, stream=stream)
    reader = ReplyReader(used_ids)
    try:
        for chunk in opened.chunks():
            if chunk == "[DONE]":
                reader.done()
            else:
                reader.feed(chunk)
    finally:
        opened.close()
    return reader.reply()
