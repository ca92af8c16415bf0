"""Read Codex CLI sessions (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp": ISO 8601, "type": …, "payload": {…}}``: ``session_meta`` (``id``,
``cwd``, ``timestamp``), ``response_item`` (the OpenAI Responses API items: ``message`` with
``role`` and ``input_text``/``output_text`` blocks, ``function_call {name, arguments, call_id}``,
``function_call_output {call_id, output}``, ``custom_tool_call``/``custom_tool_call_output``,
``local_shell_call``, ``reasoning``), ``compacted`` (``message``: a summary), ``turn_context`` and
``event_msg`` (UI events, duplicates of the items; of them only ``thread_name_updated`` is read: the
latest ``thread_name`` becomes the title). Older rollouts have no envelope: the first
line is the meta (``id``, ``timestamp``, ``instructions``) and the others are items.

Mapping to OpenAI chat messages: user and assistant messages keep their text (the
``<environment_context>``/``<user_instructions>`` preambles Codex adds, and ``developer``/``system``
messages, are left out); consecutive calls become one assistant message with ``tool_calls``
(arguments as JSON text), each output a ``tool`` message with the same ``call_id``; reasoning is
dropped; a ``compacted`` line becomes a compaction entry. An output whose call is not open just before
it (an orphan) is named as a problem and skipped, so the imported history is a valid request.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterator

from core.importers.base import (ImportedMessage, ImportedSession, ImportProblem, inside, iso_seconds, iter_jsonl,
                                  outside_problem, refused_name)
from core.session.text import parse_json

log = logging.getLogger(__name__)

SOURCE = "codex"
_PREAMBLES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>")


def default_dir() -> Path:
    """Codex's sessions folder: ``$CODEX_HOME/sessions`` or ``~/.codex/sessions``."""
    base = os.environ.get("CODEX_HOME")
    return Path(base).expanduser() / "sessions" if base else Path.home() / ".codex" / "sessions"


def read_sessions(root: str | os.PathLike[str], *, project: str | None = None) -> Iterator[ImportedSession | ImportProblem]:
    """Yield the session of every ``*.jsonl`` rollout under ``root`` (or ``root`` itself, a file);
    with ``project`` (a folder path), only sessions recorded in that folder."""
    root = Path(root)
    if not root.exists():
        yield ImportProblem(str(root), 0, "no such folder (is Codex installed for this user?)")
        return
    files = [root] if root.is_file() else sorted(root.rglob("*.jsonl"))
    wanted = os.path.realpath(project) if project else None
    for path in files:
        if path != root and not inside(path, root):
            yield outside_problem(path)  # a link out of the folder given
            continue
        for item in read_rollout(path):
            if wanted and isinstance(item, ImportedSession) and (item.cwd is None or os.path.realpath(item.cwd) != wanted):
                continue
            yield item


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif "image" in str(block.get("type")):
                parts.append("[image]")
    return "\n".join(parts)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        # Older Codex stored {"output": "...", "metadata": {...}} as a JSON string.
        try:
            decoded = parse_json(output)
        except ValueError:
            return output
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            return decoded["output"]
        return output
    if isinstance(output, dict):
        body = output.get("content") if output.get("content") is not None else output.get("output")
        text = body if isinstance(body, str) else _text(body)
        return f"Error: {text}" if output.get("success") is False and not text.startswith("Error") else text
    return _text(output)


def read_rollout(path: str | os.PathLike[str]) -> Iterator[ImportedSession | ImportProblem]:
    """The session in one rollout file, plus a problem for each unreadable line; a rollout with
    no conversation yields nothing, one whose session id is a path (absolute, ``..``,
    separators, NUL: :func:`core.importers.base.unsafe_name`) one problem naming it."""
    path = Path(path)
    meta: dict[str, Any] = {}
    meta_line = 0
    messages: list[ImportedMessage] = []
    extras: list[tuple[int, dict[str, Any]]] = []
    thread_name: str | None = None  # the latest name the user (or Codex) gave the thread
    try:
        lines = list(iter_jsonl(str(path)))
    except OSError as err:
        yield ImportProblem(str(path), 0, f"cannot be read ({err.strerror or err})")
        return
    for item in lines:
        if isinstance(item, ImportProblem):
            yield item
            continue
        lineno, rec = item
        if not isinstance(rec, dict):
            yield ImportProblem(str(path), lineno, "not a JSON object")
            continue
        if "payload" in rec and isinstance(rec.get("type"), str):
            kind, payload, ts = rec["type"], rec.get("payload"), iso_seconds(rec.get("timestamp"))
        elif not meta and "id" in rec and "type" not in rec:
            kind, payload, ts = "session_meta", rec, iso_seconds(rec.get("timestamp"))
        else:
            kind, payload, ts = "response_item", rec, iso_seconds(rec.get("timestamp"))
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            if not meta:
                meta, meta_line = payload, lineno
        elif kind == "event_msg" and payload.get("type") == "thread_name_updated":
            name = payload.get("thread_name")
            thread_name = " ".join(name.split())[:200] if isinstance(name, str) and name.strip() else thread_name
        elif kind == "compacted" and isinstance(payload.get("message"), str):
            extras.append((len(messages), {"type": "compaction", "ts": ts, "summary": payload["message"],
                                           "first_kept_index": len(messages), "tokens_before": None,
                                           "tokens_after": None, "model": None, "trigger": "auto"}))
        elif kind == "response_item":
            try:
                _item(payload, ts, messages)
            except (TypeError, ValueError) as err:
                yield ImportProblem(str(path), lineno, f"an item could not be read ({err})")
    if not any(m.message["role"] in ("user", "assistant") for m in messages):
        return
    source_id = meta.get("id") or path.stem
    source_id = str(source_id) if isinstance(source_id, int) else source_id
    refused = refused_name(str(path), meta_line, "session id", source_id)
    if refused is not None:
        yield refused
        return
    title = next((m.message["content"] for m in messages if m.message["role"] == "user"), None)
    if title:
        title = " ".join(title.split())[:80]
    title = thread_name or title
    yield ImportedSession(SOURCE, source_id, str(path), messages, title=title,
                          cwd=meta.get("cwd") if isinstance(meta.get("cwd"), str) else None,
                          created_at=iso_seconds(meta.get("timestamp")), extra_entries=extras)


def _item(p: dict[str, Any], ts: float | None, out: list[ImportedMessage]) -> None:
    kind = p.get("type")
    if kind == "message":
        role = p.get("role")
        text = _text(p.get("content"))
        if role not in ("user", "assistant") or not text.strip():
            return
        if role == "user" and text.lstrip().startswith(_PREAMBLES):
            return
        out.append(ImportedMessage({"role": role, "content": text}, ts))
        return
    call: dict[str, Any] | None = None
    if kind in ("function_call", "custom_tool_call"):
        args = p.get("arguments") if kind == "function_call" else p.get("input")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {}, ensure_ascii=False)
        if kind == "custom_tool_call":
            args = json.dumps({"input": args}, ensure_ascii=False)
        call = {"id": str(p.get("call_id") or p.get("id")), "type": "function",
                "function": {"name": str(p.get("name") or "tool"), "arguments": args}}
    elif kind == "local_shell_call":
        call = {"id": str(p.get("call_id") or p.get("id")), "type": "function",
                "function": {"name": "shell", "arguments": json.dumps(p.get("action") or {}, ensure_ascii=False)}}
    if call is not None:
        last = out[-1].message if out else None
        if last is not None and last["role"] == "assistant" and not _answered(out):
            last.setdefault("tool_calls", []).append(call)  # parallel calls of one turn
        else:
            out.append(ImportedMessage({"role": "assistant", "content": None, "tool_calls": [call]}, ts))
        return
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        call_id = str(p.get("call_id"))
        if call_id not in _open_calls(out):
            # A result must follow the assistant message that made its call (chat completions API):
            # an orphan (its call on a line that was lost, or in another rollout) would make every
            # request of the resumed chat invalid, so it is named and skipped instead.
            raise ValueError(f"a tool output answers no earlier call (call_id {call_id}); skipped")
        out.append(ImportedMessage({"role": "tool", "tool_call_id": call_id,
                                    "content": _output_text(p.get("output"))}, ts))


def _open_calls(out: list[ImportedMessage]) -> set[str]:
    """The call ids a tool result may answer now: those of the last assistant message with tool
    calls, when only its results follow it, less the ones already answered."""
    answered: set[str] = set()
    for m in reversed(out):
        if m.message["role"] == "tool":
            answered.add(m.message["tool_call_id"])
            continue
        if m.message["role"] == "assistant" and m.message.get("tool_calls"):
            return {c["id"] for c in m.message["tool_calls"]} - answered
        return set()
    return set()


def _answered(out: list[ImportedMessage]) -> bool:
    """Whether the last message is a tool result (so a new call starts a new assistant turn)."""
    return bool(out) and out[-1].message["role"] == "tool"
