"""Sub-agent records: where a sub-agent's run is stored under its parent session, and how to find it.

The design article reserves ``SessionKey.subpath`` for this: a sub-agent (a ``task`` tool call)
keeps its own messages in a record at ``SessionKey(project, session_id, "subagents/<id>")``,
never in the main conversation, and the main list never shows it. The record is an ordinary entry
list (:mod:`core.session.entries`) whose header carries a ``subagent`` object naming the parent's
tool call::

    {"type": "header", "version": 1, "id": "<parent session id>", "project_key": "...", "cwd": "...",
     "created_at": 1764504000.1, "subagent": {"id": "call_ab12", "tool_call_id": "call_ab12",
     "description": "Survey the tests", "model": "gpt-4o-mini", "parent": null, "depth": 1}}

``parent`` is the subpath of the record whose task call started this one (a sub-agent of a
sub-agent), or null for a call of the main conversation. Store-independent rules only: the store
is reached through its protocol plus ``list_subpaths(key)`` (every store has it).
"""
from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any, Iterable

from core.errors import InvalidSessionKey
from core.session.keys import SessionKey
from core.session.store import SessionStore

log = logging.getLogger(__name__)

SUBAGENT_DIR = "subagents"
# Call ids this safe and short are used as the record's name as they are (readable on disk).
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}\Z")


def record_subpath(call_id: str, attempt: int = 0) -> str:
    """The subpath of the record of tool call ``call_id``: ``subagents/<call id>`` when the id is a
    short safe name, else ``subagents/call-<24 hex digits of its SHA-256>``; ``attempt`` > 0 adds
    ``-<attempt + 1>`` (a second record for the same id, which only a hand-edited history makes)."""
    name = call_id if isinstance(call_id, str) and _SAFE_ID.match(call_id) else \
        "call-" + hashlib.sha256(str(call_id).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{SUBAGENT_DIR}/{name}" + (f"-{attempt + 1}" if attempt else "")


def subagent_info(entries: Iterable[Any] | None) -> dict[str, Any] | None:
    """The ``subagent`` object of a record's header (see the module docstring), or None."""
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("type") == "header":
            info = entry.get("subagent")
            return info if isinstance(info, dict) else None
    return None


@dataclass
class SubagentRecord:
    """One stored sub-agent run: its ``key`` (with subpath), the parent's ``tool_call_id``, its
    ``description``, the ``parent`` record's subpath (None: the main conversation) and ``entries``."""

    key: SessionKey
    tool_call_id: str | None
    description: str
    parent: str | None
    entries: list[dict[str, Any]]


def subagent_records(store: SessionStore, key: SessionKey) -> list[SubagentRecord]:
    """Every sub-agent record of main session ``key`` (sorted by subpath; records that vanish
    meanwhile are left out)."""
    out = []
    for sub in store.list_subpaths(key.parent):
        try:
            sub_key = SessionKey(key.project_key, key.session_id, sub)
        except InvalidSessionKey:
            continue
        entries = store.load(sub_key)
        if entries is None:
            continue
        info = subagent_info(entries) or {}
        call = info.get("tool_call_id")
        parent = info.get("parent")
        out.append(SubagentRecord(sub_key, call if isinstance(call, str) else None,
                                  str(info.get("description") or info.get("name") or sub),
                                  parent if isinstance(parent, str) else None, entries))
    return out


def find_record(store: SessionStore, key: SessionKey, call_id: str) -> SubagentRecord | None:
    """The record of the task call ``call_id`` of session ``key`` (its usual name first, then a
    search through every record's header), or None."""
    guess = SessionKey(key.project_key, key.session_id, record_subpath(call_id))
    entries = store.load(guess)
    info = subagent_info(entries)
    if entries is not None and info is not None and info.get("tool_call_id") == call_id:
        parent = info.get("parent")
        return SubagentRecord(guess, call_id, str(info.get("description") or ""),
                              parent if isinstance(parent, str) else None, entries)
    for rec in subagent_records(store, key):
        if rec.tool_call_id == call_id:
            return rec
    return None


def records_for_calls(records: list[SubagentRecord], call_ids: set[str]) -> list[SubagentRecord]:
    """The records of ``records`` started by one of ``call_ids`` (calls of the main conversation),
    plus, transitively, the records their own task calls started (their ``parent`` is kept)."""
    kept = [r for r in records if r.parent is None and r.tool_call_id in call_ids]
    chosen = {r.key.subpath for r in kept}
    grew = True
    while grew:
        grew = False
        for r in records:
            if r.key.subpath not in chosen and r.parent in chosen:
                kept.append(r)
                chosen.add(r.key.subpath)
                grew = True
    return kept


def tool_call_ids(messages: Iterable[Any]) -> set[str]:
    """The ids of every tool call in ``messages`` (OpenAI chat messages)."""
    return {c["id"] for m in messages if isinstance(m, dict)
            for c in (m.get("tool_calls") or []) if isinstance(c, dict) and isinstance(c.get("id"), str)}


STOPPED_LEAD = "Interrupted: the user stopped this sub-agent before it finished."
STEP_ARGS_CHARS = 160
STEP_RESULT_CHARS = 200
LAST_TEXT_CHARS = 2_000


def _one_line(text: Any, limit: int) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def stopped_report(messages: list[dict[str, Any]]) -> str:
    """What a stopped sub-agent did and found, from its record's ``messages`` (system prompt and
    task first): :data:`STOPPED_LEAD`, then its steps in order (``N. tool(arguments) -> first
    words of the result``, or "no result: stopped"), then its last text. The parent's tool
    result for the task call, so the next turn can build on the work (issue 27)."""
    results = {m.get("tool_call_id"): m.get("content") for m in messages
               if isinstance(m, dict) and m.get("role") == "tool"}
    steps: list[str] = []
    last_text = ""
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        text = m.get("content")
        if isinstance(text, str) and text.strip():
            last_text = text.strip()
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
            result = results.get(call.get("id") if isinstance(call, dict) else None)
            outcome = (_one_line(result, STEP_RESULT_CHARS) if isinstance(result, str) and result.strip()
                       and not result.startswith("Error: this tool call was interrupted") else "no result: stopped")
            steps.append(f"{len(steps) + 1}. {fn.get('name', 'tool')}({_one_line(fn.get('arguments'), STEP_ARGS_CHARS)})"
                         f" -> {outcome}")
    parts = [STOPPED_LEAD]
    parts.append(f"Steps it finished or started ({len(steps)}):\n" + "\n".join(steps) if steps
                 else "It had not run any step yet.")
    if last_text:
        if len(last_text) > LAST_TEXT_CHARS:
            last_text = last_text[:LAST_TEXT_CHARS - 1] + "…"
        parts.append(f"Its last text:\n{last_text}")
    return "\n\n".join(parts)


RECORD_ENTRY = "subagent_record"


def export_entries(store: SessionStore, key: SessionKey) -> list[dict[str, Any]]:
    """The session's entries followed by one ``{"type": "subagent_record", "subpath", "entries"}``
    entry per sub-agent record, for the JSONL export: a type the fold ignores, so the file stays a
    valid session file while carrying its sub-agents' runs. Raises ``SessionNotFound`` via the
    caller when the session is missing (returns ``[]`` here)."""
    entries = store.load(key.parent) or []
    return [*entries, *({"type": RECORD_ENTRY, "subpath": r.key.subpath, "entries": r.entries}
                        for r in subagent_records(store, key))]
