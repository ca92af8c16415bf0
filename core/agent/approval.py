"""Approval before side effects (issue 10, part 9): the agent asks before it changes anything.

A tool call whose :class:`~core.agent.tools.Tool` declares ``side_effects`` is not run until the
user allows it; read-only tools never ask. The turn pauses instead of blocking a thread: the loop
stores the round so far plus an ``approval`` *request* entry (the call and a preview of the change:
a unified diff, or the new file's content) and ends. The user's answer is stored as a decision entry
and the turn resumes from the stored session (:func:`core.agent.runner.run_session_stream` with
``user_input=None``), so a restart in between shows the same request again instead of losing the
turn. A denial (with the user's optional reason) becomes the call's tool result, so the model is
told; Stop denies and ends the turn; a new message instead of an answer denies too.

Entries (``"type": "approval"``, appended like every other entry, kept by every store):

```
{"type": "approval", "ts": 1764504000.1, "action": "request", "call_id": "call_1",
 "tool": "write_file", "arguments": "{...raw JSON...}", "preview": "--- a/x\\n+++ b/x\\n..."}
{"type": "approval", "ts": 1764504009.9, "action": "allow" | "deny", "call_id": "call_1",
 "scope": "once" | "chat" | "always", "reason": "use tabs"}   # reason only on deny, when typed
```

Who may allow. A session file can be copied, shared or hand-edited, so a decision *read from a
file* never authorizes a call: only decisions handed to the runner by the running app
(:class:`ApprovalPolicy`, filled from the user's click) do. Stored decisions only tell which
requests are answered. "Allow for this chat" and the per-chat switch live in the running app
(:class:`Grants`), like Claude Code's "don't ask again this session".

``ANYCODE_APPROVAL``: ``ask`` (default) or ``auto`` (never ask; every call runs).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from core.agent.tools import (DEFAULT_TOOLS, ToolError, ToolRegistry, Workspace, apply_arguments, cap_output,
                              parse_arguments)
from core.session.rounds import Round

log = logging.getLogger(__name__)

ENTRY_TYPE = "approval"
MODES = ("ask", "auto")
DEFAULT_MODE = "ask"
# "always": an MCP tool allowed in this project from now on (core.agent.mcp.trust, the running
# app's record; the entry only says what the user chose).
SCOPES = ("once", "chat", "always")
MAX_REASON_CHARS = 2000
NEW_MESSAGE_REASON = "The user sent a new message instead of answering."
STOP_REASON = "The user pressed Stop."
SUBAGENT_DENIED = ("Error: {tool} changes files and needs the user's approval, which a sub-agent cannot ask "
                   "for; nothing was changed. Report the change you would make in your answer instead.")


def approval_mode() -> str:
    """``$ANYCODE_APPROVAL``: ``"ask"`` (default) or ``"auto"``. Anything else is logged and
    treated as ``"ask"`` (a typo must never switch asking off)."""
    raw = os.environ.get("ANYCODE_APPROVAL", "").strip().lower()
    if not raw:
        return DEFAULT_MODE
    if raw not in MODES:
        log.warning("ANYCODE_APPROVAL=%r is not ask or auto; asking before changes", raw)
        return DEFAULT_MODE
    return raw


# --- entries ---------------------------------------------------------------------------------


def request_entry(call_id: str, tool: str, arguments: str, preview: str, *, ts: float | None = None) -> dict:
    """The entry storing a pending approval of tool call ``call_id`` (``arguments``: the model's
    raw JSON; ``preview``: the change as text)."""
    return {"type": ENTRY_TYPE, "ts": time.time() if ts is None else ts, "action": "request",
            "call_id": call_id, "tool": tool, "arguments": arguments, "preview": preview}


def decision_entry(call_id: str, allow: bool, *, scope: str = "once", reason: str | None = None,
                   ts: float | None = None) -> dict:
    """The entry storing the user's answer to the request of ``call_id``. ``scope``: ``"once"``,
    ``"chat"`` or ``"always"`` (an MCP tool; ValueError otherwise); ``reason`` (deny only) is cut
    to 2,000 characters."""
    if scope not in SCOPES:
        raise ValueError(f"approval scope must be one of {SCOPES}, not {scope!r}")
    entry = {"type": ENTRY_TYPE, "ts": time.time() if ts is None else ts,
             "action": "allow" if allow else "deny", "call_id": call_id, "scope": scope}
    reason = clean_reason(reason)
    if reason and not allow:
        entry["reason"] = reason
    return entry


def clean_reason(reason: str | None) -> str | None:
    """The typed reason stripped and cut to 2,000 characters; None when blank."""
    text = (reason or "").strip() if isinstance(reason, str) else ""
    return text[:MAX_REASON_CHARS] or None


def denied_result(tool: str, reason: str | None) -> str:
    """The tool result text the model reads for a denied call (the reason quoted when given)."""
    text = f"Error: the user denied this {tool} call; nothing was changed."
    reason = clean_reason(reason)
    if reason:
        text += f" The user's reason: {reason}"
    else:
        text += " Ask the user how to proceed instead of retrying it."
    return text


@dataclass(frozen=True)
class PendingApproval:
    """A tool call waiting for the user: ``arguments`` is the model's raw JSON, ``preview`` the
    change as plain text (never HTML), ``ts`` Unix seconds of the request."""

    call_id: str
    tool: str
    arguments: str
    preview: str
    ts: float = 0.0

    def entry(self) -> dict:
        """The request entry for this approval."""
        return request_entry(self.call_id, self.tool, self.arguments, self.preview, ts=self.ts or None)


@dataclass
class ApprovalState:
    """The fold of a session's entries as far as approvals go.

    ``requests``: call id -> the newest request; ``decided``: call ids whose newest request has an
    answer after it; ``answered``: call ids with a tool result message.
    """

    requests: dict[str, PendingApproval] = field(default_factory=dict)
    decided: dict[str, dict] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)

    @classmethod
    def from_entries(cls, entries: Iterable[Any]) -> "ApprovalState":
        """Fold ``entries`` (malformed approval entries are ignored)."""
        state = cls()
        for e in entries or []:
            if not isinstance(e, dict):
                continue
            if e.get("type") == "message" and isinstance(e.get("message"), dict):
                msg = e["message"]
                if msg.get("role") == "tool" and isinstance(msg.get("tool_call_id"), str):
                    state.answered.add(msg["tool_call_id"])
                continue
            if e.get("type") != ENTRY_TYPE or not isinstance(e.get("call_id"), str):
                continue
            cid, action = e["call_id"], e.get("action")
            if action == "request":
                state.requests[cid] = PendingApproval(
                    cid, str(e.get("tool") or ""), str(e.get("arguments") or ""),
                    str(e.get("preview") or ""), float(e["ts"]) if isinstance(e.get("ts"), (int, float)) else 0.0)
                state.decided.pop(cid, None)
            elif action in ("allow", "deny") and cid in state.requests:
                state.decided[cid] = e
        return state

    def pending(self) -> list[PendingApproval]:
        """Requests with neither an answer nor a tool result, oldest first."""
        return [p for cid, p in self.requests.items() if cid not in self.decided and cid not in self.answered]


# --- who decides -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """The user's answer to one call: ``allow``; ``reason`` (deny); ``scope`` once or chat."""

    allow: bool
    reason: str | None = None
    scope: str = "once"


@dataclass
class ApprovalPolicy:
    """What the runner may run without asking: ``mode`` ``"ask"``/``"auto"`` and the answers the
    user just gave in the running app (call id -> :class:`Decision`)."""

    mode: str = DEFAULT_MODE
    decisions: dict[str, Decision] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> "ApprovalPolicy":
        """The policy of ``$ANYCODE_APPROVAL`` with no answers."""
        return cls(mode=approval_mode())


@dataclass(frozen=True)
class Verdict:
    """What to do with one call: ``"run"``, ``"deny"`` (``result`` is the tool result text) or
    ``"ask"`` (``pending`` is the request to store and show)."""

    action: str
    result: str = ""
    pending: PendingApproval | None = None


RUN = Verdict("run")


class ApprovalGate:
    """Decides, per tool call, run / deny / ask, from the tool's ``side_effects`` flag and the
    :class:`ApprovalPolicy`. Read-only and unknown tools always run (an unknown tool only
    produces an error result).

    ``extra``: the turn's tools from outside anycode (:class:`core.agent.mcp.turn.McpTurn`); its
    ``check(call_id, name, raw_arguments, policy, can_ask) -> Verdict | None`` decides its own
    tools' calls (None: not one of its tools)."""

    def __init__(self, policy: ApprovalPolicy | None = None, registry: ToolRegistry | None = None, *,
                 can_ask: bool = True, extra: Any = None):
        self.policy = policy or ApprovalPolicy.from_env()
        self.registry = registry or DEFAULT_TOOLS
        self.extra = extra
        # False for a sub-agent: it runs in a worker and cannot pause its parent's turn, so a
        # call that would ask is denied with a sentence telling it to leave the change to its parent.
        self.can_ask = can_ask

    def for_subagent(self) -> "ApprovalGate":
        """The gate of a sub-agent started by this run: the same mode, no answers (its call ids
        are its own) and no asking."""
        return ApprovalGate(ApprovalPolicy(mode=self.policy.mode), self.registry, can_ask=False)

    def check(self, call_id: str, name: str, raw_arguments: str | None, workspace: Workspace | None) -> Verdict:
        """The verdict for call ``call_id`` of tool ``name`` with the model's raw arguments."""
        tool = self.registry.get(name)
        if tool is None and self.extra is not None:
            verdict = self.extra.check(call_id, name, raw_arguments, self.policy, self.can_ask)
            if verdict is not None:
                return verdict
        if tool is None or not tool.side_effects or workspace is None:
            return RUN
        decision = self.policy.decisions.get(call_id)
        if decision is not None:
            return RUN if decision.allow else Verdict("deny", denied_result(name, decision.reason))
        if self.policy.mode == "auto":
            return RUN
        try:
            preview = checked_preview(self.registry, name, raw_arguments, workspace)
        except ToolError as err:
            # The tool layer refuses this call whatever the user answers (a path outside the
            # workspace, a folder as the file, bad arguments): its refusal is the result, as if
            # it had run, and nobody is asked to approve a change that cannot happen.
            log.info("call %s of %s refused before approval: %s", call_id, name, err)
            return Verdict("deny", cap_output(f"Error: {err}"))
        if not self.can_ask:
            return Verdict("deny", SUBAGENT_DENIED.format(tool=name))
        return Verdict("ask", pending=PendingApproval(call_id, name, raw_arguments or "", preview, time.time()))


def checked_preview(registry: ToolRegistry, name: str, raw_arguments: str | None, workspace: Workspace) -> str:
    """The change call ``name(raw_arguments)`` would make, as text for the user (see
    :func:`preview_of`). Raises :class:`ToolError` with the tool's own sentence when the tool
    would refuse the call (bad arguments, a path outside the workspace, a folder as the file);
    an :class:`OSError` reading the current file, or a bug in the preview (any other
    ``TypeError``), only says the change cannot be shown: the user still decides."""
    tool, args = parse_arguments(name, raw_arguments, registry)
    if tool.preview is None:
        return json.dumps(args, indent=2, ensure_ascii=False)
    try:
        return apply_arguments(tool, tool.preview, workspace, args)
    except (OSError, TypeError) as err:
        return f"(the change cannot be shown: {err})\n\n{raw_arguments or ''}"


def preview_of(registry: ToolRegistry, name: str, raw_arguments: str | None, workspace: Workspace) -> str:
    """The change call ``name(raw_arguments)`` would make, as text for the user: the tool's
    ``preview`` (a diff for ``write_file``), else its arguments as indented JSON. A preview that
    fails says why (the user still decides)."""
    try:
        return checked_preview(registry, name, raw_arguments, workspace)
    except ToolError as err:
        return f"(the change cannot be shown: {err})\n\n{raw_arguments or ''}"


# --- answers recorded for a session ----------------------------------------------------------


def closing_round(state: ApprovalState, reason: str, interrupted: Iterable[dict]) -> Round:
    """What ends a turn paused on approvals without running anything, stored in one append
    (:meth:`core.session.manager.SessionManager.store_round`): a deny decision for each pending
    request (the round's ``answers``), then the tail's closing tool results in call order
    (``interrupted``: :func:`core.agent.repair.closing_results` of the session's messages), a
    denied text for pending calls."""
    pending = {p.call_id: p for p in state.pending()}
    now = time.time()
    answers = tuple(decision_entry(cid, False, reason=reason, ts=now) for cid in pending)
    results = []
    for result in interrupted:
        cid = result.get("tool_call_id")
        if cid in pending:
            result = {"role": "tool", "tool_call_id": cid, "content": denied_result(pending[cid].tool, reason)}
        results.append(result)
    return Round(results, answers=answers)


class Grants:
    """What the user allowed in this running app: per session (``str(SessionKey)``) "Allow for
    this chat" / the per-chat switch and one-shot answers waiting for the resumed run; per slot
    (the web UI uses ``"<project key>\n<folder>"``) a workspace folder chosen by hand. Thread-safe; nothing here is written to a session file (a
    file must never grant itself permissions)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chat_mode: dict[str, str] = {}
        self._decisions: dict[str, dict[str, Decision]] = {}
        self._workspaces: dict[str, str] = {}
        self._tools: dict[str, set[str]] = {}

    def chat_mode(self, session: str) -> str | None:
        """``"ask"``/``"auto"`` set for this chat, or None (the global mode applies)."""
        with self._lock:
            return self._chat_mode.get(session)

    def set_chat_mode(self, session: str, mode: str) -> None:
        """Set the per-chat switch (``"ask"`` or ``"auto"``; ValueError otherwise)."""
        if mode not in MODES:
            raise ValueError(f"approval mode must be one of {MODES}, not {mode!r}")
        with self._lock:
            self._chat_mode[session] = mode

    def decide(self, session: str, call_id: str, decision: Decision) -> None:
        """Remember the user's answer for the run that resumes the turn (and "for this chat")."""
        with self._lock:
            self._decisions.setdefault(session, {})[call_id] = decision
            if decision.allow and decision.scope == "chat":
                self._chat_mode[session] = "auto"

    def allow_tool(self, session: str, tool: str) -> None:
        """"Allow for this chat" on an MCP tool's call: that tool (its offered name) runs without
        asking in this chat for the rest of this running app — only that tool, unlike the per-chat
        switch, since an MCP tool can do anything its server can."""
        with self._lock:
            self._tools.setdefault(session, set()).add(tool)

    def allowed_tools(self, session: str) -> frozenset[str]:
        """The MCP tools allowed for this chat (:meth:`allow_tool`)."""
        with self._lock:
            return frozenset(self._tools.get(session, ()))

    def policy(self, session: str, default_mode: str | None = None) -> ApprovalPolicy:
        """The policy for the next run of ``session``; its one-shot answers are handed over once."""
        with self._lock:
            mode = self._chat_mode.get(session) or default_mode or approval_mode()
            return ApprovalPolicy(mode=mode, decisions=self._decisions.pop(session, {}))

    def choose_workspace(self, slot: str, path: str) -> None:
        """The user chose ``path`` as the workspace of ``slot`` despite the check's warning."""
        with self._lock:
            self._workspaces[slot] = path

    def workspace(self, slot: str) -> str | None:
        """The folder chosen by hand for ``slot``, or None."""
        with self._lock:
            return self._workspaces.get(slot)
