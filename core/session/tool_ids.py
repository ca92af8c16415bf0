"""Tool-call ids made unique across a history, the results following their calls.

A strict chat completions server refuses a whole request whose history holds two tool calls with
one id (HTTP 400 "Duplicate tool_call id"): the id is how a result names the call it answers. Such
histories exist — imported from a tool that numbered calls per turn (``call_0`` in every reply), a
server that sent the same id twice, a hand-edited file — so the rule is applied where a history
enters anycode (:func:`core.importers.base.import_sessions`) and again to every request
(:func:`core.agent.repair.prepare_request`), whatever the stored history holds.

The rule: the first call with an id keeps it; each later call with an id already used (earlier in
the history, or earlier in the same message) gets ``<id>~<n>``, the smallest ``n`` ≥ 2 no other
call or result of the history uses. A tool result after an assistant message answers, among that
message's calls carrying the id it names, the first one not answered yet, so two results named
``call_0`` after two calls ``call_0`` answer one each, in order. The same history always gives the
same ids (a re-import compares equal to the first one).
"""
from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def _calls(message: Any) -> list[Any]:
    calls = message.get("tool_calls") if isinstance(message, dict) and message.get("role") == "assistant" else None
    return calls if isinstance(calls, list) else []


def unique_tool_call_ids(messages: list[Any]) -> list[Any]:
    """``messages`` (OpenAI chat messages) with every repeated tool-call id renamed, and the tool
    results that answer a renamed call following it (rules in the module docstring). Messages
    that change are copies; the others are the very objects given (stored entries are shared
    read-only), and the list is new. Anything that is not a well-formed call is left as it is."""
    used: set[str] = set()
    taken: set[str] = set()  # every id the history names, so a new one collides with none
    for m in messages:
        for call in _calls(m):
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                taken.add(call["id"])
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            taken.add(m["tool_call_id"])
    out: list[Any] = []
    pending: dict[str, list[str]] = {}  # id as written -> ids of the last call message's calls not answered yet
    renamed = 0
    for m in messages:
        calls = _calls(m)
        if calls:
            pending = {}
            new_calls = []
            changed = False
            for call in calls:
                cid = call.get("id") if isinstance(call, dict) else None
                if not isinstance(cid, str) or not cid:
                    new_calls.append(call)
                    continue
                new_id = cid
                if cid in used:
                    n = 2
                    while f"{cid}~{n}" in taken:
                        n += 1
                    new_id = f"{cid}~{n}"
                    taken.add(new_id)
                    call = {**call, "id": new_id}
                    changed = True
                    renamed += 1
                used.add(new_id)
                pending.setdefault(cid, []).append(new_id)
                new_calls.append(call)
            out.append({**m, "tool_calls": new_calls} if changed else m)
            continue
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            waiting = pending.get(m["tool_call_id"])
            if waiting:
                new_id = waiting.pop(0)
                out.append(m if new_id == m["tool_call_id"] else {**m, "tool_call_id": new_id})
                continue
            out.append(m)
            continue
        if isinstance(m, dict) and m.get("role") in ("user", "assistant", "system", "developer"):
            pending = {}
        out.append(m)
    if renamed:
        log.info("%d repeated tool-call id(s) renamed", renamed)
    return out
