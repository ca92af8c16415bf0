"""Compaction entries and the model's view of a compacted session (store-independent).

A compaction never rewrites or removes a message. It is ONE appended entry::

    {"type": "compaction", "ts": 1764504000.5, "summary": "...", "first_kept_index": 12,
     "tokens_before": 30500, "tokens_after": 6100, "model": "gpt-4o-mini",
     "trigger": "auto" | "manual" | "overflow"}

``first_kept_index`` is the index (into the session's messages) of the first message the model
still sees verbatim; everything before it is represented by ``summary``. ``tokens_before`` /
``tokens_after`` are the request size in tokens (the server's count or anycode's estimate; None
when unknown, e.g. imported); ``"estimated": ["before", "after"]`` (optional) names the figures
that are anycode's estimates — an entry without it is read as both estimated.
:func:`shown_sizes` is the one rule for showing them (never "after" larger than "before"). The entry is appended after the messages it covers, so its place
in the file (``at``: how many messages precede it) is where a fork cut keeps or drops it.

``SessionManager.get`` / ``SessionStore.load`` still return every message;
:func:`model_view` is the separate function giving what is sent to the model. Only the LAST
compaction counts for the view: a later compaction summarises the previous summary plus the
messages that came after it, so it stands on its own.
"""
from __future__ import annotations

import time
from typing import Any, Iterable

from core.session.text import message_text

COMPACTION_TRIGGERS = ("auto", "manual", "overflow")
# How the summary is introduced to the model, inside the system message (one system message at
# the start: several local chat templates reject a system message anywhere else).
SUMMARY_HEADER = ("The earlier part of this conversation was summarised to fit the model's context "
                  "window. Summary of everything before the messages that follow:")


def compaction_entry(summary: str, first_kept_index: int, *, tokens_before: int | None,
                     tokens_after: int | None, model: str | None, trigger: str,
                     ts: float | None = None, estimated: list[str] | None = None) -> dict[str, Any]:
    """Build a compaction entry (shape in the module docstring); ``ts`` Unix seconds (default now).

    Raises ``ValueError`` for an empty summary, a negative index or an unknown trigger."""
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError("a compaction needs a non-empty summary")
    if not isinstance(first_kept_index, int) or isinstance(first_kept_index, bool) or first_kept_index < 0:
        raise ValueError(f"first_kept_index must be an int >= 0, not {first_kept_index!r}")
    if trigger not in COMPACTION_TRIGGERS:
        raise ValueError(f"trigger must be one of {COMPACTION_TRIGGERS}, not {trigger!r}")
    entry = {"type": "compaction", "ts": time.time() if ts is None else ts, "summary": summary,
             "first_kept_index": first_kept_index, "tokens_before": tokens_before,
             "tokens_after": tokens_after, "model": model, "trigger": trigger}
    if estimated is not None:
        entry["estimated"] = [e for e in estimated if e in ("before", "after")]
    return entry


def shown_sizes(compaction: dict[str, Any]) -> tuple[int, int, bool, bool] | None:
    """The figures a divider or export may show for ``compaction``: ``(before, after,
    before_estimated, after_estimated)``, or None when either is unknown or "after" is not
    smaller than "before" (a server's wrong or missing usage; an imported entry): such figures
    would read backwards, so none are shown (issue 27)."""
    before, after = compaction.get("tokens_before"), compaction.get("tokens_after")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (before, after)):
        return None
    if after >= before:
        return None
    estimated = compaction.get("estimated")
    marks = set(estimated) if isinstance(estimated, list) else {"before", "after"}
    return before, after, "before" in marks, "after" in marks


def compactions_of(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """The valid compaction entries of ``entries`` in file order, each a copy with one added key
    ``"at"``: how many message entries precede it. Malformed ones (no summary, an index that is
    not an int between 0 and ``at``) are skipped, so a hand-edited file never breaks the view."""
    out: list[dict[str, Any]] = []
    n = 0
    for e in entries:
        if not isinstance(e, dict):
            continue
        kind = e.get("type")
        if kind == "message":
            if isinstance(e.get("message"), dict):
                n += 1
        elif kind == "compaction":
            fki, summary = e.get("first_kept_index"), e.get("summary")
            if (isinstance(summary, str) and summary.strip() and isinstance(fki, int)
                    and not isinstance(fki, bool) and 0 <= fki <= n):
                out.append({**e, "at": n})
    return out


def latest_compaction(compactions: list[dict[str, Any]], upto: int | None = None) -> dict[str, Any] | None:
    """The last compaction (of :func:`compactions_of` output) placed at or before message count
    ``upto`` (None: any), or None."""
    for c in reversed(compactions):
        if upto is None or c.get("at", 0) <= upto:
            return c
    return None


def summary_message(system: dict[str, Any] | None, summary: str) -> dict[str, Any]:
    """The system message of a compacted view: the session's system prompt (if any) followed by
    :data:`SUMMARY_HEADER` and the summary."""
    base = message_text(system.get("content")) if system else ""
    text = f"{SUMMARY_HEADER}\n\n{summary.strip()}"
    return {"role": "system", "content": f"{base}\n\n{text}" if base else text}


def model_view(messages: list[dict[str, Any]], compactions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the model is sent for a session: its messages as they are when it was never compacted;
    otherwise the system prompt with the latest summary appended (one system message), then the
    messages from that compaction's ``first_kept_index`` on (any system message among them is
    dropped, it is already the first one). When no user message is among the kept ones (the cut
    fell inside one long turn of tool rounds), the turn's user message is restated first, so every
    request holds the user's request (issue 27).

    ``messages``: the session's full message list (``Session.messages``); ``compactions``:
    ``Session.compactions`` (:func:`compactions_of`). Returns a new list; inputs are not changed.
    """
    latest = latest_compaction(compactions, len(messages))
    if latest is None:
        return list(messages)
    first = min(int(latest["first_kept_index"]), len(messages))
    system = messages[0] if messages and messages[0].get("role") == "system" else None
    kept = [m for m in messages[first:] if m.get("role") != "system"]
    if not any(m.get("role") == "user" for m in kept):
        # The cut fell inside one long agentic turn: its user message was summarised. It is
        # restated, verbatim, before the kept rounds — chat templates that need a user turn
        # (Qwen3 on llama.cpp/vLLM: "No user query found in messages.", Zhipu, Gemini's OpenAI
        # endpoint) refuse a request without one, and the model must still see the task.
        asked = turn_user_message(messages, first)
        if asked is not None:
            kept = [asked, *kept]
    return [summary_message(system, latest["summary"]), *kept]


def turn_user_message(messages: list[dict[str, Any]], before: int) -> dict[str, Any] | None:
    """The user message of the turn message ``before`` belongs to: the last ``user`` message
    before index ``before`` (None when there is none)."""
    for i in range(min(before, len(messages)) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return messages[i]
    return None


def view_start(messages: list[dict[str, Any]], compactions: list[dict[str, Any]]) -> int:
    """The index of the first message the model sees verbatim (0 when never compacted)."""
    latest = latest_compaction(compactions, len(messages))
    return 0 if latest is None else min(int(latest["first_kept_index"]), len(messages))
