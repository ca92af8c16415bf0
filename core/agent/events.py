"""Every event of a turn, in one module that imports no ``openai``: what the agent loop, the
runner, compaction and sub-agents yield while a turn runs, and what the web page and the command
line match on (``match event: case TextDelta(text=text): ...``).

Why one light module: the page recognises events by their class, so the classes must be
importable wherever the page is, without the model client; and one union (:data:`TurnEvent`)
says everything a caller of :func:`core.agent.runner.run_session_stream` may receive.

The order a turn yields them in is documented on ``run_session_stream``; in short:
``UserMessageSaved`` → ``AgentAnswering`` (``@name``) → per request: compaction events,
``ReasoningDelta``/``TextDelta``/``ReplyRestarted`` while the reply streams, then per tool
call ``ToolCallStarted`` … ``ToolCallFinished`` (a ``task`` call's sub-agent events between
them, an ``ApprovalRequested`` instead of running a call that needs the user) → per stored round
``ReplyKeptAsVersion`` (when it had to be) and ``RoundCompleted`` → ``MemoryStarted`` →
``TitleStarted``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from core.session.keys import SessionKey

if TYPE_CHECKING:  # a value type of the approval wing: only named here, never needed at run time
    from core.agent.approval import PendingApproval

# --- the agent loop (core.agent.loop) ----------------------------------------------------------


@dataclass
class TextDelta:
    """A piece of the assistant's reply text, in order."""

    text: str


@dataclass
class ReasoningDelta:
    """A piece of the model's thinking (``reasoning_content`` / ``reasoning`` of a thinking-mode
    server), shown apart from the answer; stored on the assistant message (not its text)."""

    text: str


@dataclass
class ReplyRestarted:
    """The reply being streamed broke because a background request reached a server that serves
    one request at a time (core.agent.slots); it is asked again once. The text shown so far for
    this round is void: the new reply's TextDeltas follow."""

    reason: str


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
class ApprovalRequested:
    """The loop paused on ``pending``, a call that needs the user's approval
    (:mod:`core.agent.approval`). The round so far is completed with it (``RoundCompleted.pending``)."""

    pending: PendingApproval


@dataclass
class RoundCompleted:
    """One round is over: its new messages (the assistant message, then one tool message per
    tool call), ready to be stored together — by the runner, before this event reaches its caller.

    ``end``: how the round's assistant reply ended when the model did not finish it
    (``"length"``, ``"content_filter"``, ``"no_end"``; see core.agent.stream.Reply.end), None
    when it finished. ``pending``: the round paused on this approval; the loop has ended and
    resumes from the stored session once the user answers.

    ``requested``: the round holds the reply of a model request this run made, and ``usage`` is
    that request's ``usage`` as the server sent it (None when it sent none). Each request's reply
    is in exactly one round — a task round's assistant message, stored on its own before its
    sub-agents start, carries it; the rest of that round does not; a round resumed after an
    approval made no request — so a turn counts each request's tokens once."""

    messages: list[dict]
    end: str | None = None
    pending: PendingApproval | None = None
    requested: bool = False
    usage: dict | None = None


# --- compaction (core.agent.compaction) ----------------------------------------------------------


@dataclass
class CompactionStarted:
    """Compaction began: ``messages`` older messages are being summarised (``trigger`` auto,
    manual or overflow); ``tokens_before`` the request size that triggered it."""

    trigger: str
    messages: int
    tokens_before: int


@dataclass
class CompactionProgress:
    """The summary is arriving: ``chars`` written so far (piece ``piece`` of ``pieces``)."""

    chars: int
    piece: int = 1
    pieces: int = 1


@dataclass
class CompactionFinished:
    """The compaction entry was appended (``entry``: as stored, see core.session.compaction)."""

    entry: dict


# --- sub-agents (core.agent.subagents) ------------------------------------------------------------


@dataclass
class SubagentStarted:
    """A sub-agent began (or was queued) for task call ``call_id``; its record is at ``subpath``.
    ``parent``: the subpath of the record whose call started it (None: the main conversation)."""

    call_id: str
    subpath: str
    description: str
    parent: str | None = None


@dataclass
class SubagentEvent:
    """Something the sub-agent of task call ``call_id`` did: ``event`` is its own loop event
    (TextDelta, ToolCallStarted, ToolCallFinished, RoundCompleted, or a nested SubagentStarted /
    SubagentEvent / SubagentFinished of its own sub-agents)."""

    call_id: str
    subpath: str
    event: Any


@dataclass
class SubagentFinished:
    """The sub-agent of ``call_id`` ended; ``result`` is what its parent receives."""

    call_id: str
    subpath: str
    result: str
    is_error: bool


# --- the turn (core.agent.runner) ---------------------------------------------------------------


@dataclass
class UserMessageSaved:
    """The user's message is stored; ``message_count`` is the session's message count now."""

    message_count: int


@dataclass
class AgentAnswering:
    """The message this turn answers starts with ``@name``: the defined agent ``name`` answers
    it, with ``model``; its replies are stored with ``"agent": name``. Yielded after
    UserMessageSaved, before the loop's events."""

    name: str
    model: str


@dataclass
class ReplyKeptAsVersion:
    """Someone else (another tab, process or machine) wrote in the session while this reply was
    being written, so its round could not land where the reply started: it was stored as a
    version of the conversation instead (:meth:`core.session.manager.SessionManager.keep_as_version`),
    and the rest of this turn is stored there too. Yielded just before that round's RoundCompleted.

    ``key``: the version now holding the reply; ``of``: the session it was written for;
    ``number``/``count``: it is version ``number`` of the conversation's ``count`` versions."""

    key: SessionKey
    of: SessionKey
    number: int
    count: int


@dataclass
class MemoryStarted:
    """The memory extraction job runs in the background (``thread.join(timeout)`` waits for it).
    Yielded after the final RoundCompleted (before TitleStarted) in ``auto`` memory mode."""

    thread: threading.Thread


@dataclass
class TitleStarted:
    """A title is being generated in the background; ``thread.join(timeout)`` waits for it.
    Yielded last, after the final RoundCompleted, only when the session had no title yet."""

    thread: threading.Thread


# --- the unions -----------------------------------------------------------------------------------

#: What the agent loop (:class:`core.agent.loop.AgentRun`) yields.
AgentEvent = Union[TextDelta, ReasoningDelta, ReplyRestarted, ToolCallStarted, ToolCallFinished,
                   ApprovalRequested, RoundCompleted]
#: What a compaction yields (:class:`core.agent.compaction.ContextGuard`, ``compact_session``).
CompactionEvent = Union[CompactionStarted, CompactionProgress, CompactionFinished]
#: What a run with sub-agents adds (:class:`core.agent.subagents.TaskAgentRun`).
SubagentUpdate = Union[SubagentStarted, SubagentEvent, SubagentFinished]
#: Everything a turn yields (:func:`core.agent.runner.run_session_stream`).
TurnEvent = Union[AgentEvent, CompactionEvent, SubagentUpdate, UserMessageSaved, AgentAnswering,
                  ReplyKeptAsVersion, MemoryStarted, TitleStarted]
