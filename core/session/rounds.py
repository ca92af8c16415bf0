"""What a turn stores at once: a :class:`Round`, written by
:meth:`core.session.manager.SessionManager.store_round` in ONE append (one lock, one fsync, one
outbox item on a mirrored store).

Why one append: a round's messages, the tokens its request used, the files it changed and the
approval it paused on belong together. Stored in parts, a crash between them kept a reply without
its checkpoint (a rewind then missed those files) or without its pending approval (the turn could
not resume), and every part cost its own lock, fsync and mirror copy.

The entries are built by the wing that knows them (``usage`` by :mod:`core.session.usage`,
``checkpoint`` by :mod:`core.agent.checkpoints`, ``approval`` by :mod:`core.agent.approval`); the
round only says which go together and in which order.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from core.session.entries import message_entry
from core.session.mcp_calls import mcp_calls_in


@dataclass(frozen=True)
class Round:
    """One round of a turn, as it is stored: ``messages`` (OpenAI chat messages: the assistant
    reply, then one tool result per call), ``end`` (how the first message, a reply the model did
    not finish, ended; see :func:`~core.session.entries.message_entry`), ``agent`` (the defined
    agent that wrote the assistant messages), ``usage`` (the ``usage`` entry of the model request
    whose reply this is; None for a round that made no request), ``checkpoint`` (the
    ``checkpoint`` entry of the files the round changed; None when it changed none) and
    ``approval`` (the ``approval`` request entry of the call it paused on) and ``mcp`` (``{call
    id: {"server", "tool"}}`` of the calls that went to MCP servers, recorded on the assistant
    message holding each call: :mod:`core.session.mcp_calls`).

    ``answers``: approval decision entries stored just before the messages — what opens a turn
    that replaced waiting approvals with a new message (denied), or what Stop stores when it ends
    a turn paused on one. The same one-append rule holds for them.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    end: str | None = None
    agent: str | None = None
    usage: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None
    answers: tuple[dict[str, Any], ...] = ()
    mcp: dict[str, dict[str, str]] | None = None

    def entries(self, *, ts: float | None = None) -> list[dict[str, Any]]:
        """The entries to append, in order: answers, messages (stamped ``ts``, default now), usage,
        checkpoint, approval request. Raises ``ValueError`` for a message without a role or an
        entry of the wrong type (an ``approval`` that is not a request, answers that are not
        decisions) — nothing is stored then."""
        now = time.time() if ts is None else ts
        for entry, kind in ((self.usage, "usage"), (self.checkpoint, "checkpoint"), (self.approval, "approval")):
            if entry is not None and (not isinstance(entry, dict) or entry.get("type") != kind):
                raise ValueError(f"a round's {kind} must be a {kind} entry")
        if self.approval is not None and self.approval.get("action") != "request":
            raise ValueError("a round's approval must be a request entry")
        if any(not isinstance(a, dict) or a.get("type") != "approval" or a.get("action") not in ("allow", "deny")
               for a in self.answers):
            raise ValueError("a round's answers must be approval decision entries")
        out = list(self.answers)
        out += [message_entry(m, ts=now, end=self.end if i == 0 else None,
                              agent=self.agent if m.get("role") == "assistant" else None,
                              mcp=mcp_calls_in(m, self.mcp))
                for i, m in enumerate(self.messages)]
        out += [e for e in (self.usage, self.checkpoint, self.approval) if e is not None]
        return out

    @property
    def empty(self) -> bool:
        """True when there is nothing to store."""
        return not (self.messages or self.answers or self.usage or self.checkpoint or self.approval)
