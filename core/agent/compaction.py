"""Automatic and manual compaction: summarising the older part of a session with the model.

The design article's pipeline — "Loop 运行 → Messages 达到阈值 → 压缩 → 继续 Loop → 最终 Messages
写入 Session": before each model request :class:`ContextGuard` checks how much of the window the
request would use (:func:`core.agent.context.context_usage` logic); past ``ANYCODE_COMPACT_AT``
(default 80%) it summarises the messages before the most recent turns and appends ONE
``compaction`` entry (:mod:`core.session.compaction`). No message is rewritten or removed; the
model is sent :func:`core.session.compaction.model_view` from then on.

Rules kept here:

* the cut is always at a user or assistant message, so an assistant message with tool calls
  stays with its tool results (both summarised, or both kept);
* the most recent turns stay verbatim: as many as fit :data:`KEEP_FRACTION` of the window
  (:data:`HARD_KEEP_FRACTION` when the server said the request did not fit), and at least the
  last turn's start;
* a repeated compaction summarises the previous summary plus what came after it;
* the summary request itself fits the window: a transcript too long for one request is
  summarised piece by piece, each piece folded into the running summary; single huge messages
  are cut in the transcript with a visible marker;
* the summary is written in the conversation's language and keeps goals, decisions,
  constraints, files touched, errors met and open tasks (:data:`SUMMARY_PROMPT`);
* a request-side copy of a message too large for the window is cut with a visible marker
  (:func:`cut_message`); the stored message is untouched.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import settings
from core.agent import context as ctx
from core.agent.events import (CompactionEvent, CompactionFinished, CompactionProgress, CompactionStarted,
                               RoundCompleted, TextDelta)
from core.agent.language import Language, conversation_language, language_instruction
from core.errors import CompactionFailed, ModelContextExceeded, ModelEmptyReply, ModelError, ModelServerError
from core.session.compaction import compaction_entry, latest_compaction, model_view, view_start
from core.session.export import message_text
from core.session.store import SessionStore

log = logging.getLogger(__name__)

KEEP_FRACTION = 0.25       # of the window, kept verbatim after an automatic/manual compaction
HARD_KEEP_FRACTION = 0.08  # after the server said the request did not fit
SINGLE_MESSAGE_FRACTION = 0.5  # a request-side message copy is cut above this share of the window
TRANSCRIPT_MESSAGE_CHARS = 4_000  # per message in the summary request (tool output is cut)
NOTHING_TO_COMPACT = "Nothing to compact yet: the conversation is only its latest turn."
LANGUAGE_MESSAGES = 200  # the latest messages the conversation's language is read from
CUT_MARKER = "\n\n[… {n:,} characters cut here by anycode to fit the model's context window …]\n\n"

SUMMARY_PROMPT = (
    "You are summarising the earlier part of a conversation between a user and anycode, a coding "
    "assistant with file tools, so the conversation can continue without it. Write the summary in "
    "the language the user writes in. Keep, as short bullet points under headings:\n"
    "- the user's goals and requests, in their own terms;\n"
    "- decisions taken and why;\n"
    "- constraints and preferences the user stated;\n"
    "- files read, created or changed (paths) and what changed;\n"
    "- errors met and how they were resolved (or not);\n"
    "- open tasks and the next step.\n"
    "Keep exact names, paths, numbers and commands. Leave out small talk and tool output that no "
    "longer matters. Do not address the user and do not continue the conversation. "
    "Use at most {words} words."
)


# --- where to cut ---------------------------------------------------------------------------------


def plan_cut(messages: list[dict], start: int, keep_tokens: int) -> int | None:
    """The new ``first_kept_index``: the earliest user/assistant message after ``start`` such that
    the messages from it on fit ``keep_tokens`` (estimated); when even the last turn is bigger,
    the start of the last turn (its user message, else its last assistant message). None when
    nothing after ``start`` can be summarised (only the last message is left)."""
    n = len(messages)
    while start < n and messages[start].get("role") == "system":
        start += 1  # the system prompt is never summarised: it stays first in the view
    bounds = [i for i in range(start + 1, n) if messages[i].get("role") in ("user", "assistant")]
    if not bounds:
        return None
    sizes = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        sizes[i] = sizes[i + 1] + ctx.estimate_message_tokens(messages[i])
    fitting = [i for i in bounds if sizes[i] <= keep_tokens]
    if fitting:
        # Prefer a turn start (a user message) when one fits: the model resumes at a question.
        users = [i for i in fitting if messages[i].get("role") == "user"]
        return users[0] if users else fitting[0]
    users = [i for i in bounds if messages[i].get("role") == "user"]
    return users[-1] if users and users[-1] > start else bounds[-1]


def can_compact(messages: list[dict], compactions: list[dict]) -> bool:
    """Whether a manual compaction (Compact, ``/compact``) would summarise anything: there is a
    message after the first one since the last compaction (``compactions``:
    ``Session.compactions``). False for an empty chat or one holding only its first message."""
    return plan_cut(messages, view_start(messages, compactions), 0) is not None


# --- the request side -----------------------------------------------------------------------------


def cut_text(text: str, max_tokens: int) -> str:
    """``text`` cut in the middle (the head two thirds, the tail one third) to about
    ``max_tokens`` estimated tokens, with a marker naming how much was cut; unchanged when it fits."""
    if ctx.estimate_text_tokens(text) <= max_tokens:
        return text
    # Estimated tokens per char of this text (>= 1/3), so the cut lands close to the budget; the
    # marker counts too, and a text whose head is denser than its average is cut again.
    per_char = ctx.estimate_text_tokens(text) / max(1, len(text))
    room = max_tokens - ctx.estimate_text_tokens(CUT_MARKER.format(n=len(text))) - 2
    keep = max(0, int(room / per_char))
    while True:
        head, tail = keep * 2 // 3, keep // 3
        cut = len(text) - head - tail
        out = text[:head] + CUT_MARKER.format(n=cut) + (text[-tail:] if tail else "")
        if keep == 0 or ctx.estimate_text_tokens(out) <= max_tokens:
            return out
        keep = int(keep * 0.9)


def cut_message(message: dict, max_tokens: int) -> dict:
    """A copy of ``message`` whose text is cut (:func:`cut_text`) when its estimate passes
    ``max_tokens``; ``message`` itself when it fits (the stored one is never changed)."""
    if ctx.estimate_message_tokens(message) <= max_tokens or not isinstance(message.get("content"), str):
        return message
    return {**message, "content": cut_text(message["content"], max_tokens)}


# --- the summary request ---------------------------------------------------------------------------


def _render(message: dict) -> str:
    role = message.get("role")
    text = message_text(message.get("content")).strip()
    if len(text) > TRANSCRIPT_MESSAGE_CHARS:
        text = cut_text(text, ctx.estimate_text_tokens(text[:TRANSCRIPT_MESSAGE_CHARS]))
    if role == "tool":
        return f"[tool result {message.get('tool_call_id', '')}]\n{text}"
    lines = [f"[{role}]\n{text}" if text else f"[{role}]"]
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
        args = str(fn.get("arguments", ""))[:TRANSCRIPT_MESSAGE_CHARS]
        lines.append(f"[tool call {fn.get('name', '')}] {args}")
    return "\n".join(lines)


def transcript_pieces(messages: list[dict], budget_tokens: int) -> list[str]:
    """The messages as a plain transcript, split into pieces of at most ``budget_tokens``
    (estimated), never inside a message (a message bigger than a piece is cut)."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for message in messages:
        if message.get("role") == "system":
            continue
        text = _render(message)
        tokens = ctx.estimate_text_tokens(text)
        if tokens > budget_tokens:
            text, tokens = cut_text(text, budget_tokens), budget_tokens
        if current and size + tokens > budget_tokens:
            pieces.append("\n\n".join(current))
            current, size = [], 0
        current.append(text)
        size += tokens
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def summary_words(window: int) -> int:
    """How long a summary may be, in words: about 8% of the window, between 150 and 1,500."""
    return max(150, min(1_500, int(window * 0.08 / 1.4)))


def summary_cap(window: int) -> int:
    """The most estimated tokens a summary may take, whatever the model wrote: 2.5 tokens per
    allowed word (:func:`summary_words`; the estimate counts about 2 per English word), at most
    15% of the window. A longer summary (a small model ignoring the limit, an imported one) is
    cut to this when stored, re-sent or shown to the model (issue 27: no request past the window)."""
    return max(96, min(int(summary_words(window) * 2.5), int(window * 0.15)))


def cap_summary(text: str, window: int) -> str:
    """``text`` cut (:func:`cut_text`, with a marker) to :func:`summary_cap` of ``window``."""
    return cut_text(text, summary_cap(window))


def fit_request(messages: list[dict], budget: int, tools: list[dict] | None = None,
                floor: int = 160) -> list[dict]:
    """``messages`` (a request's, not stored) with the largest texts cut until the request's
    estimate (:func:`core.agent.context.estimate_tokens` with ``tools``) is at most ``budget``
    tokens; no message is cut below ``floor`` tokens, none is dropped, their order and tool-call
    pairing are kept. The last line of defence after compaction (issue 27): a request never
    passes the window anycode believes in. Returns a new list (unchanged copies when it fits);
    when even the floors do not fit, the smallest request it could make."""
    out = list(messages)
    total = ctx.estimate_tokens(out, tools)
    for _ in range(4 * len(out) + 4):
        if total <= budget:
            break
        sizes = [(ctx.estimate_message_tokens(m), i) for i, m in enumerate(out)
                 if isinstance(m.get("content"), str) and ctx.estimate_message_tokens(m) > floor]
        if not sizes:
            break
        size, i = max(sizes)
        target = max(floor, size - (total - budget) - 16)
        cut = cut_message(out[i], target)
        if cut is out[i]:
            break
        out[i] = cut
        total = ctx.estimate_tokens(out, tools)
    return out


def summary_prompt(words: int, language: Language | None = None) -> str:
    """The summary request's system message: :data:`SUMMARY_PROMPT` for ``words`` words and the
    sentence naming the conversation's language (issue 20; :mod:`core.agent.language`)."""
    return f"{SUMMARY_PROMPT.format(words=words)}\n{language_instruction('the summary', language)}"


def _summary_messages(previous: str | None, piece: str, words: int, language: Language | None = None) -> list[dict]:
    parts = []
    if previous:
        parts.append("Summary of the conversation so far:\n\n" + previous.strip())
    parts.append("Conversation to summarise" + (" (it continues from the summary above)" if previous else "")
                 + ":\n\n" + piece)
    parts.append("Write the updated summary now." if previous else "Write the summary now.")
    return [{"role": "system", "content": summary_prompt(words, language)},
            {"role": "user", "content": "\n\n".join(parts)}]


def summarize(messages: list[dict], previous: str | None, *, client: Any, model: str, window: int,
              cancel: threading.Event | None = None, language: Language | None = None
              ) -> Iterator[CompactionProgress | str]:
    """Summarise ``messages`` (continuing ``previous``, the last summary) with the model, yielding
    :class:`CompactionProgress` while it streams and, last, the summary text. Yields no text when
    cancelled. ``language``: the conversation's (None: detected from ``messages``), named in the
    prompt. Raises :class:`CompactionFailed` (one sentence, with the server's reason)."""
    from core.agent.loop import AgentRun  # loop imports nothing of ours

    words = summary_words(window)
    if language is None:
        language = conversation_language(messages)
    overhead = ctx.estimate_text_tokens(summary_prompt(words, language)) + 2 * words + 64
    # The running summary is re-sent with every piece: it is counted at its cap (and cut to it),
    # so a long previous summary, an imported one or a model that ignored the length limit can
    # never push a summary request past the window (issue 27).
    cap = summary_cap(window)
    budget = max(256, int(window * 0.75) - overhead - cap)
    pieces = transcript_pieces(messages, budget)
    summary = cap_summary(previous, window) if previous else previous
    n = 0
    while n < len(pieces):
        piece = pieces[n]
        n += 1
        request = _summary_messages(summary, piece, words, language)
        if ctx.estimate_tokens(request) > window - ctx.reply_reserve(window):
            request = fit_request(request, window - ctx.reply_reserve(window))
        run = AgentRun(request, client=client, model=model, tools=None, max_iterations=1, cancel=cancel)
        chars = 0
        text = ""
        try:
            for event in run.events():
                if isinstance(event, TextDelta):
                    chars += len(event.text)
                    yield CompactionProgress(chars, n, len(pieces))
                elif isinstance(event, RoundCompleted):
                    text = str(event.messages[0].get("content") or "")
        except ModelEmptyReply as err:
            raise CompactionFailed(f"Summarising the earlier messages failed: the model sent an empty summary "
                                   f"({err}). Nothing was changed; your message is kept.") from err
        except ModelContextExceeded as err:
            # The server's window is smaller than believed: the piece is summarised in halves.
            halves = _halves(piece)
            if len(halves) < 2 or len(pieces) > 64:
                raise CompactionFailed(f"Summarising the earlier messages failed: {err} Nothing was changed; "
                                       "your message is kept.") from err
            log.info("a summary request did not fit the server's window; summarising that part in halves")
            n -= 1
            pieces[n:n + 1] = halves
            continue
        except ModelError as err:
            raise CompactionFailed(f"Summarising the earlier messages failed: {err} Nothing was changed; your "
                                   "message is kept.") from err
        if run.cancelled or (cancel is not None and cancel.is_set()):
            return
        if not text.strip():
            raise CompactionFailed("Summarising the earlier messages failed: the model sent an empty summary. "
                                   "Nothing was changed; your message is kept.")
        summary = cap_summary(text.strip(), window)
    if summary:
        yield summary


def _halves(piece: str) -> list[str]:
    """``piece`` split in two at the message boundary nearest its middle (or its middle)."""
    if len(piece) < 200:
        return [piece]
    middle = len(piece) // 2
    at = piece.rfind("\n\n", 0, middle)
    at = at if at > len(piece) // 4 else middle
    return [piece[:at], piece[at:].lstrip("\n")]


# --- the guard the runner hands to the loop ---------------------------------------------------------


@dataclass
class ContextGuard:
    """Keeps one session's requests inside the model's window (see the module docstring).

    Built by the runner with the session's ``messages`` and ``compactions`` (kept up to date
    here); :meth:`view` is what the loop sends, :meth:`before_request` compacts when the next
    request would pass the threshold, :meth:`recover` compacts harder after an overflow.
    ``append(entry, message_count)`` stores a compaction entry (the runner's checked append).
    ``data_dir``: where a window learnt from the server is remembered (the storage's data
    folder; :func:`core.agent.context.remember_window`).
    """

    session_id: str
    compactions: list[dict]
    client: Any
    model: str
    append: Any
    tools: list[dict] | None = None
    cancel: threading.Event | None = None
    window: int = ctx.DEFAULT_WINDOW
    compact_at: float = field(default_factory=settings.compact_at)
    tracker: ctx.UsageTracker = field(default_factory=lambda: ctx.TRACKER)
    last_request_tokens: int = 0
    # The system message as it goes out (the runner's: the memories current at each request).
    system_refresh: Any = None
    data_dir: Path | None = None

    def start(self, messages: list[dict]) -> int:
        """The index of the first message the model sees verbatim."""
        return view_start(messages, self.compactions)

    def _model_view(self, messages: list[dict]) -> list[dict]:
        """The model view with the latest summary cut to :func:`summary_cap` (an imported or
        older summary may be longer than this window allows)."""
        latest = latest_compaction(self.compactions, len(messages))
        compactions = self.compactions
        if latest is not None and ctx.estimate_text_tokens(str(latest["summary"])) > summary_cap(self.window):
            compactions = [*self.compactions, {**latest, "summary": cap_summary(str(latest["summary"]), self.window)}]
        return model_view(messages, compactions)

    def budget(self) -> int:
        """The most estimated tokens a request may hold: the window less the reply's reserve."""
        return self.window - ctx.reply_reserve(self.window)

    def view(self, messages: list[dict]) -> list[dict]:
        """The request's messages: the model view, each message cut to at most half the window,
        then the largest ones cut further while the request's estimate passes :meth:`budget`
        (:func:`fit_request`): no request is sent past the window anycode believes in."""
        limit = int(self.window * SINGLE_MESSAGE_FRACTION)
        out = [cut_message(m, limit) for m in self._model_view(messages)]
        if self.system_refresh is not None and out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": self.system_refresh(out[0].get("content"))}
        if ctx.estimate_tokens(out, self.tools) > self.budget():
            out = fit_request(out, self.budget(), self.tools)
        self.last_request_tokens = ctx.estimate_tokens(out, self.tools)
        return out

    def used(self, messages: list[dict]) -> tuple[int, bool]:
        """``(tokens, exact)`` the next request would use (see UsageTracker.used)."""
        return self.tracker.used(self.session_id, self.start(messages), messages,
                                 model_view(messages, self.compactions), self.tools)

    def record(self, covered: int, messages: list[dict], usage: Any) -> None:
        """Remember the server's ``prompt_tokens`` for a request that held ``messages[:covered]``."""
        if isinstance(usage, dict):
            self.tracker.record(self.session_id, self.start(messages), covered, usage.get("prompt_tokens"))

    def limit(self) -> int:
        """Tokens a request may use before compaction: the threshold, less the reply's reserve
        when that is smaller."""
        return min(int(self.window * self.compact_at), self.window - ctx.reply_reserve(self.window))

    def before_request(self, messages: list[dict]) -> Iterator[CompactionEvent]:
        """Compact (trigger ``auto``) when the next request would pass :meth:`limit` (by the
        server's count where there is one), or its estimate would pass :meth:`budget`."""
        used, _ = self.used(messages)
        if used <= self.limit() and ctx.estimate_tokens(self._model_view(messages), self.tools) <= self.budget():
            return
        yield from self.compact(messages, "auto", tokens_before=used)

    def recover(self, messages: list[dict], err: ModelContextExceeded | None) -> Iterator[CompactionEvent]:
        """After the server said the request did not fit: learn the window when it named one
        (remembered per base URL and model), else assume a smaller one than the failed request,
        then compact harder (trigger ``overflow``)."""
        base = getattr(self.client, "base_url", "")
        named = err.window if err is not None else None
        if named and named < self.window or named and not settings.context_window_override():
            ctx.remember_window(base, self.model, named, self.data_dir)
            self.window = named
        elif self.last_request_tokens:
            # The server did not say: the window is below what was just sent (the estimate
            # over-counts by about a third, hence 0.7).
            self.window = min(self.window, max(512, int(self.last_request_tokens * 0.7)))
        used, _ = self.used(messages)
        yield from self.compact(messages, "overflow", tokens_before=used, keep_fraction=HARD_KEEP_FRACTION)

    def compact(self, messages: list[dict], trigger: str, *, tokens_before: int | None = None,
                keep_fraction: float = KEEP_FRACTION) -> Iterator[CompactionEvent]:
        """Summarise the older messages and append the compaction entry; yields events. Yields
        nothing (and appends nothing) when there is nothing to summarise or it was cancelled.
        Raises :class:`CompactionFailed`."""
        start = self.start(messages)
        # What stays in every request whatever is kept (system prompt, tools, the summary at its
        # cap): the kept messages get at most half of the room left, so the view after the
        # compaction fits with room to grow.
        system = messages[:1] if messages and messages[0].get("role") == "system" else []
        room = self.limit() - ctx.estimate_tokens(system, self.tools) - summary_cap(self.window)
        keep = max(128, min(int(self.window * keep_fraction), room // 2))
        cut = plan_cut(messages, start, keep)
        if cut is None:
            log.info("session %s: nothing to compact (%d messages since the last compaction)",
                     self.session_id, len(messages) - start)
            return
        used, exact = self.used(messages)
        if tokens_before is None:
            tokens_before = used
        yield CompactionStarted(trigger, cut - start, tokens_before)
        previous = latest_compaction(self.compactions, len(messages))
        summary = None
        # The conversation's language from its latest user messages (kept ones included): the
        # summary is read in the conversation from then on.
        language = conversation_language(messages[max(0, len(messages) - LANGUAGE_MESSAGES):])
        for item in summarize(messages[start:cut], previous["summary"] if previous else None,
                              client=self.client, model=self.model, window=self.window, cancel=self.cancel,
                              language=language):
            if isinstance(item, str):
                summary = item
            else:
                yield item
        if summary is None:  # cancelled
            return
        entry = compaction_entry(summary, cut, tokens_before=tokens_before, tokens_after=None,
                                 model=self.model, trigger=trigger)
        trial = [*self.compactions, {**entry, "at": len(messages)}]
        after = ctx.estimate_tokens(model_view(messages, trial), self.tools)
        # "after" is always anycode's estimate; "before" the server's count when it gave one. A
        # server whose usage is wrong (or absent) could make the divider read backwards, so the
        # two are then compared on the same footing: both estimated (issue 27, kind 6).
        estimated = ["after"] if exact else ["before", "after"]
        if after >= tokens_before:
            tokens_before = max(tokens_before, ctx.estimate_tokens(self._model_view(messages), self.tools))
            estimated = ["before", "after"]
        entry.update(tokens_before=tokens_before, tokens_after=after, estimated=estimated)
        self.append(entry, len(messages))
        self.compactions.append({**entry, "at": len(messages)})
        log.info("session %s compacted (%s): messages %d..%d summarised, %s -> %s tokens", self.session_id,
                 trigger, start, cut - 1, tokens_before, entry["tokens_after"])
        yield CompactionFinished(entry)


def make_guard(session: Any, *, client: Any, model: str, append: Any, tools: list[dict] | None = None,
               cancel: threading.Event | None = None, data_dir: Path | None = None) -> ContextGuard:
    """A :class:`ContextGuard` for ``session`` (a core.session.models.Session) with the model's
    window (:func:`core.agent.context.context_window`; learnt ones kept in ``data_dir``, the
    storage's data folder)."""
    window = ctx.context_window(client, model, data_dir=data_dir)
    return ContextGuard(session.id, list(session.compactions), client, model, append, tools=tools,
                        cancel=cancel, window=window.tokens, data_dir=data_dir)


def overflow_of(err: ModelError, guard: ContextGuard) -> ModelContextExceeded | bool | None:
    """Whether a failed request means "it did not fit the window": the error itself
    (:class:`ModelContextExceeded`, also when a 500 or a stream error said so), True when a
    stream broke or ended with no content at all while the request was large for what anycode
    believes the window is (how llama.cpp-based servers show an overflow), else None."""
    if isinstance(err, ModelContextExceeded):
        return err
    over = ctx.overflow_error(getattr(err, "status_code", None) if isinstance(getattr(err, "status_code", None), int)
                              else None, f"{err} {getattr(err, 'detail', '') or ''}")
    if over is not None:
        return over
    broke = isinstance(err, ModelEmptyReply) and err.end == "no_end" or (
        isinstance(err, ModelServerError) and "broke in the middle" in str(err))
    if broke and guard.last_request_tokens >= 1024:
        return True
    return None


def compact_session(key: Any, sessions: Any, *, client: Any, model: str, cancel: threading.Event | None = None,
                    trigger: str = "manual", data_dir: Path | None = None) -> Iterator[CompactionEvent]:
    """Compact a stored session now (the Compact button, ``/compact``, ``anycode sessions
    compact``): summarise everything before the most recent turns, append the entry, yield the
    events. ``sessions``: the caller's SessionManager (the writer), or a store (one is made);
    ``data_dir``: the storage's, where a learnt window is kept.
    Checked against the message count it was computed on (``SessionConflict`` if the
    session grew meanwhile). Raises ``SessionNotFound``, :class:`CompactionFailed` (also "nothing
    to compact yet" when only the last turn is there), ``ModelNotConfigured`` without a client."""
    from core.agent.config import NOT_CONFIGURED_MESSAGE
    from core.agent.tools import TOOL_SPECS
    from core.errors import ModelNotConfigured
    from core.session.manager import SessionManager

    if client is None:
        raise ModelNotConfigured(NOT_CONFIGURED_MESSAGE)
    manager = SessionManager.of(sessions)
    session = manager.get(key)
    guard = make_guard(session, client=client, model=model, tools=TOOL_SPECS, cancel=cancel, data_dir=data_dir,
                       append=lambda entry, count: manager.add_compaction(key, entry, count))
    messages = session.messages
    if not can_compact(messages, guard.compactions):
        raise CompactionFailed(NOTHING_TO_COMPACT)
    yield from guard.compact(messages, trigger)
