"""Make any stored history a valid chat completions request.

A stored session can hold an assistant message whose tool calls never got results (Stop pressed
while a tool ran, a process killed, a torn write, a damaged line skipped on load, a hand-edited
file). The API rejects such a history with HTTP 400 (per the chat completions API, an assistant
message with ``tool_calls`` must be followed by a tool message for every call id, and a tool
message must answer a preceding call). Two remedies, by where the damage is:

* At the tail, :func:`closing_results` gives tool results saying the call was interrupted; the
  runner APPENDS them to the session (history is never rewritten), so the file itself heals.
* Anywhere else (a dangling call in the middle, an orphan tool result after a skipped line, an
  unknown key, two tool calls sharing one id), :func:`prepare_request` fixes only the request
  being sent, never the file.

Strings are sanitized too: a lone UTF-16 surrogate (e.g. from undecodable tool output) cannot be
encoded as UTF-8 JSON and becomes U+FFFD.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from core.session.entries import REASONING_KEYS
from core.session.text import clean_text
from core.session.tool_ids import unique_tool_call_ids

log = logging.getLogger(__name__)

INTERRUPTED_RESULT = "Error: this tool call was interrupted (stopped or crashed) before it returned a result."

# Keys the API accepts inside a message, per role (per the chat completions API reference).
_ALLOWED_KEYS = {
    "system": ("role", "content", "name"),
    "developer": ("role", "content", "name"),
    "user": ("role", "content", "name"),
    "assistant": ("role", "content", "name", "tool_calls", "refusal"),
    "tool": ("role", "content", "tool_call_id"),
}


def sanitize_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (so it encodes as UTF-8)."""
    return clean_text(text)


def sanitize(value: Any) -> Any:
    """A deep copy of a JSON-like value with :func:`sanitize_text` applied to every string."""
    if isinstance(value, str):
        return sanitize_text(value)
    if isinstance(value, dict):
        return {sanitize(k): sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitize(v) for v in value]
    return value


def interrupted_result(call_id: str) -> dict:
    """The tool message that closes a call that never returned."""
    return {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED_RESULT}


def _call_ids(message: dict) -> list[str]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"]]


def closing_results(messages: list[dict]) -> list[dict]:
    """Tool results to APPEND so the tail of ``messages`` has no unanswered tool call.

    Looks at the last assistant message when only tool messages follow it; returns an
    "interrupted" tool message for each of its call ids that has no result yet (in call order),
    or ``[]`` when nothing is dangling at the tail.
    """
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        role = msg.get("role") if isinstance(msg, dict) else None
        if role == "tool":
            continue
        if role != "assistant":
            return []
        answered = {m.get("tool_call_id") for m in messages[i + 1:] if isinstance(m, dict)}
        return [interrupted_result(cid) for cid in dict.fromkeys(_call_ids(msg)) if cid not in answered]
    return []


def _clean_tool_calls(calls: Any) -> list[dict]:
    """Well-formed, de-duplicated tool calls (``{"id", "type": "function", "function"}``)."""
    out, seen = [], set()
    if not isinstance(calls, list):
        return out
    for call in calls:
        if not isinstance(call, dict):
            continue
        fn = call.get("function")
        cid = call.get("id")
        if not isinstance(cid, str) or not cid or cid in seen or not isinstance(fn, dict) \
                or not isinstance(fn.get("name"), str) or not fn["name"]:
            continue
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {})
        seen.add(cid)
        out.append({"id": cid, "type": "function", "function": {"name": fn["name"], "arguments": args}})
    return out


def _content_ok(content: Any) -> bool:
    return isinstance(content, str) or (isinstance(content, list) and bool(content)
                                        and all(isinstance(p, dict) and "type" in p for p in content))


def _clean_message(msg: Any, reasoning: bool = False) -> dict | None:
    """The message with only API keys (and, with ``reasoning``, an assistant message's reasoning
    field), or None when it cannot be sent at all."""
    if not isinstance(msg, dict) or msg.get("role") not in _ALLOWED_KEYS:
        return None
    role = msg["role"]
    out = {k: msg[k] for k in _ALLOWED_KEYS[role] if k in msg and msg[k] is not None}
    if reasoning and role == "assistant":
        out.update({k: msg[k] for k in REASONING_KEYS if isinstance(msg.get(k), str) and msg[k]})
    if role == "assistant":
        calls = _clean_tool_calls(msg.get("tool_calls"))
        if calls:
            out["tool_calls"] = calls
            # "" rather than null: LM Studio and older llama.cpp servers refuse a null content
            # (lmstudio-bug-tracker#261); OpenAI takes both.
            if not _content_ok(out.get("content")):
                out["content"] = ""
        else:
            out.pop("tool_calls", None)
            if not _content_ok(out.get("content")):
                out["content"] = str(out.get("content") or "")
        return out
    if role == "tool":
        if not isinstance(out.get("tool_call_id"), str):
            return None
        if not _content_ok(out.get("content")):
            out["content"] = str(out.get("content") or "")
        return out
    if not _content_ok(out.get("content")):
        if out.get("content") is None:
            return None
        out["content"] = str(out["content"])
    if "name" in out and not isinstance(out["name"], str):
        out.pop("name")
    return out


def prepare_request(messages: list[dict]) -> list[dict]:
    """A new message list, valid for the chat completions API, built from a stored history.

    Tool-call ids are first made unique across the history
    (:func:`core.session.tool_ids.unique_tool_call_ids`: a strict server refuses the whole request
    over one repeated id). Then it keeps every message that can be sent, in order, with only the
    keys the API accepts; after each assistant message with tool calls it keeps the tool results
    that answer those calls (first result per id), adds an "interrupted" result for each call left
    unanswered (a dangling call in the middle of the history), and drops tool messages that answer
    nothing (orphans).
    Strings are sanitized (:func:`sanitize`). The input is not modified; the stored file is never
    touched.

    Reasoning (``reasoning_content`` / ``reasoning``, stored on an assistant message when a
    thinking-mode server sent it) goes back only on the assistant messages after the last user
    message — the current turn's tool rounds — as DeepSeek's thinking mode and Kimi K2 require
    (HTTP 400 without it there) and never elsewhere (deepseek-reasoner refuses it from earlier
    turns; other servers do not know the key).
    """
    messages = unique_tool_call_ids(messages)
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"),
                    default=-1)
    cleaned = [m for m in (_clean_message(x, i > last_user) for i, x in enumerate(messages)) if m is not None]
    out: list[dict] = []
    i = 0
    dropped = added = 0
    while i < len(cleaned):
        msg = cleaned[i]
        i += 1
        if msg["role"] == "tool":
            dropped += 1  # a tool result with no assistant call right before it
            continue
        out.append(msg)
        if msg["role"] != "assistant" or "tool_calls" not in msg:
            continue
        wanted = [c["id"] for c in msg["tool_calls"]]
        results: dict[str, dict] = {}
        while i < len(cleaned) and cleaned[i]["role"] == "tool":
            tool_msg = cleaned[i]
            i += 1
            cid = tool_msg["tool_call_id"]
            if cid in wanted and cid not in results:
                results[cid] = tool_msg
            else:
                dropped += 1
        for cid in wanted:
            if cid not in results:
                added += 1
            out.append(results.get(cid) or interrupted_result(cid))
    if dropped or added:
        log.info("request repaired: %d orphan tool result(s) dropped, %d missing result(s) added", dropped, added)
    return sanitize(out)
