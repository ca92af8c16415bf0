"""Sending a message and streaming its reply: the input box hands its text over (:func:`take`),
the send runs it (:func:`send_taken` / :func:`send`) and yields :class:`~webui.chat.views.SendUpdate`s,
Stop ends it (:func:`stop`), a switch of conversation supersedes it (:func:`leave`).

Plain functions over :class:`~webui.chat.context.WebContext` and :mod:`core.agent.runner`; the
page's wiring is :mod:`webui.gui.send`.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.agent.events import (AgentAnswering, CompactionFinished, CompactionProgress, CompactionStarted,
                               ReasoningDelta, ReplyKeptAsVersion, ReplyRestarted, RoundCompleted, SubagentEvent,
                               SubagentFinished, SubagentStarted, TextDelta, TitleStarted, ToolCallFinished,
                               ToolCallStarted, TurnEvent, UserMessageSaved)
from core.errors import AnycodeError, ModelError, SessionConflict, SessionNotFound, StoreUnavailable
from core.session.keys import SessionKey
from core.session.text import clean_text, is_blank
from webui import i18n
from webui.chat import approvals, live, mcp
from webui.chat import archived as archived_chat
from webui.chat import compaction as compaction_ui
from webui.chat.subagents import LiveSubagents
from webui.chat.views import (
    SendUpdate,
    SessionView,
    _error_row,
    _key,
    new_chat,
    project_cwd,
    reload,
    shown_from,
    shown_title,
    storage_notice,
    tab_state,
)
from webui.i18n import Msg
from webui.render import rows as render
from webui.text import chat_text
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import Run, WebContext

log = logging.getLogger(__name__)

TITLE_WAIT_SECONDS = 45.0  # how long the sidebar polls for a generated title after a reply
STREAM_MIN_INTERVAL = 0.04  # seconds between streamed UI updates (coalesces tiny text deltas)
BUSY_NOTICE = Msg("busy_notice")
CONFLICT_NOTICE = Msg("conflict_notice")
NOTHING_TO_SEND_NOTICE = Msg("nothing_to_send")  # only spaces or invisible characters in the box
SENT_AFTER_NOTICE = Msg("sent_after_other")  # "This chat had new messages from another tab; yours was sent after them"
SWITCH_WAIT_SECONDS = 10.0  # a switch waits this long for a stopped reply to be stored
STOP_GRACE_SECONDS = 2.0  # a message taken while a reply runs waits this long for a Stop on its way
DOUBLE_SUBMIT_SECONDS = 3.0  # the same text sent again this soon while it is pending: ignored
# One hand-over at a time: the repeat check and the new run are one step, or a double Enter taken
# by two workers at once (Enter is one queued event, issue 32) would be sent twice.
_TAKE_LOCK = threading.Lock()
GONE_CHECK_SECONDS = 2.0  # how often a streaming reply looks whether its chat was deleted elsewhere
QUEUE_WAIT_SECONDS = 30.0  # a message sent right after Stop waits this long for the stopped run
# The user's message is held back this long for the reply's first token, so both reach the page
# in one chat render (issue 32: every new value re-renders the whole shown chat in the browser).


class _LiveRows:
    """The rows of the reply being streamed, built from agent events."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._steps: dict[str, int] = {}
        self._args: dict[str, str] = {}
        self._subagents = LiveSubagents()
        self._text: dict[int, str] = {}  # row index -> the reply text as streamed
        self._shown: dict[int, chat_text.StreamedReply] = {}
        self._stale: set[int] = set()  # text rows whose content is behind their text
        self._reply_start: int | None = None  # first row of the reply streaming now (issue 27)
        self._thinking: int | None = None  # its "Thinking" row, while the reasoning streams
        self._thought = ""
        self._label = ""  # the answering agent's name above its text ("@name", issue 30)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The rows; a text row's content is rendered here, when read (about every
        STREAM_MIN_INTERVAL), not on every delta."""
        for i in self._stale:
            self._rows[i]["content"] = self._label + self._shown.setdefault(i, chat_text.StreamedReply()).render(
                self._text[i])
        self._stale.clear()
        return self._rows

    def apply(self, event: TurnEvent) -> bool:
        """Fold one turn event in; return True when it changed what is shown."""
        match event:
            case AgentAnswering(name=name):  # "@name": that agent answers (core.agent.runner)
                self._label = render.agent_label(name)
                return False
            case CompactionStarted() | CompactionProgress() | CompactionFinished():  # summarising first
                return compaction_ui.apply_event(self.rows, event)
            case SubagentStarted() | SubagentEvent() | SubagentFinished():  # a task step's sub-agent at work
                return self._subagents.apply(self.rows, self._steps, event)
            case ReasoningDelta(text=text):  # a thinking-mode model's reasoning: a Thinking step
                return self._reasoning(text)
            case ReplyRestarted():  # the reply broke and is asked again: what it showed is void
                self._restart()
                return True
            case RoundCompleted():  # the reply is over: its Thinking step too
                self._reply_start = None
                return self._end_thinking()
            case TextDelta(text=text):
                return self._add_text(text)
            case ToolCallStarted():
                self._reply_start = None
                self._end_thinking()
                self._tool_started(event)
                return True
            case ToolCallFinished():
                self._tool_finished(event)
                return True
        return False

    def _reasoning(self, text: str) -> bool:
        if not text:
            return False
        if self._reply_start is None:
            self._reply_start = len(self._rows)
        if self._thinking is None:
            self._thinking, self._thought = len(self._rows), ""
            self._rows.append({})
        self._thought += text
        self._rows[self._thinking] = render.thinking_step(self._thought, self._thinking, done=False)
        return True

    def _restart(self) -> None:
        if self._reply_start is not None:
            del self._rows[self._reply_start:]
            for index in [i for i in self._text if i >= self._reply_start]:
                self._text.pop(index)
                self._shown.pop(index, None)
                self._stale.discard(index)
        self._reply_start = self._thinking = None

    def _end_thinking(self) -> bool:
        """Close the Thinking step of the reply that just ended; True when there was one."""
        if self._thinking is None:
            return False
        self._rows[self._thinking] = render.thinking_step(self._thought, self._thinking)
        self._thinking = None
        return True

    def _add_text(self, text: str) -> bool:
        if not text:
            return False
        if self._reply_start is None:
            self._reply_start = len(self._rows)
        last = self._rows[-1] if self._rows else None
        if last is None or last.get("metadata"):
            self._rows.append({"role": "assistant", "content": ""})
            self._text[len(self._rows) - 1] = ""
        self._text[len(self._rows) - 1] += text
        # shown as the stored reply will be: HTML as text, remote images as links
        self._stale.add(len(self._rows) - 1)
        return True

    def _tool_started(self, event: ToolCallStarted) -> None:
        self._args[event.call_id] = event.arguments
        row = render.tool_step(event.call_id, event.name, event.arguments)
        if event.call_id in self._steps:  # a task step its sub-agent's start already showed
            self.rows[self._steps[event.call_id]] = row
        else:
            self._steps[event.call_id] = len(self.rows)
            self.rows.append(row)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        row = render.tool_step(event.call_id, event.name, self._args.get(event.call_id, ""),
                               event.result, event.is_error)
        if event.call_id in self._steps:
            self.rows[self._steps[event.call_id]] = row
        else:
            self.rows.append(row)


def too_long_notice(ctx: WebContext, text: str, model: str | None) -> str | None:
    """The sentence refusing ``text`` when that message alone cannot fit the model's context
    window with room for the reply (the estimate and window of the context meter and of
    compaction: :mod:`core.agent.context`), else None. A real server rejects such a request
    after the message was stored; compaction cannot shrink the newest message either.

    Only a window already known is used (set, learnt, cached from the meter's probe, or the
    model family's): this runs on every send before the box is handed over, and asking the
    server here cost up to four probe timeouts per send while it was unreachable (trial 11).
    A window not known yet refuses nothing: the request's own overflow handling answers."""
    from core.agent.context import context_window, estimate_message_tokens, reply_reserve

    tokens = estimate_message_tokens({"role": "user", "content": text})
    found = context_window(ctx.client(), model or ctx.model_config().model, probe=False, data_dir=ctx.storage.data_dir)
    window = found.tokens
    if found.source == "default" or tokens <= window - reply_reserve(window):
        return None
    # rounded like "about 262,000": the estimate is no exact count
    about = round(tokens, -3) if tokens >= 1000 else tokens
    return i18n.t("err_message_too_long", tokens=about, window=window)


def take(ctx: WebContext, tab: str, text: str | None, model: str | None = None) -> tuple[Any, str | None]:
    """The input box hands over ``text`` (Enter or the send arrow): ``(run id, None)`` when it is
    accepted (the box is cleared; :func:`send_taken` sends it), ``(None, notice)`` when it is
    refused and must stay in the box (a reply is still being written and was not stopped, the
    message alone is larger than ``model``'s context window, or it holds only invisible
    characters). A message sent right after Stop is accepted: it goes out as soon as the
    stopped reply has been stored."""
    if is_blank(text):
        # Whitespace and zero-width characters only: nothing to send. A box of spaces looks
        # empty and says nothing (as an empty one); pasted invisible characters (U+200B, a BOM)
        # look like text was there, so the toast says why nothing was sent.
        return None, (NOTHING_TO_SEND_NOTICE if (text or "").strip() else None)
    text = clean_text(text)  # a lone surrogate (a cut emoji) would kill the page's event stream
    too_long = too_long_notice(ctx, text, model)
    if too_long:
        return None, too_long
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while True:
        with _TAKE_LOCK:
            if ctx.repeated_take(tab, text, DOUBLE_SUBMIT_SECONDS):
                log.info("ignoring a repeated send of the same message in tab %s", tab)
                return None, None  # a double click or double Enter: the first one is being sent
            if not ctx.busy(tab):
                return ctx.begin_run(tab, text).id, None
        # Busy: Stop and a message sent right after it are separate requests, and a busy server
        # may take the message first; it was refused "a reply is being written" and stayed in
        # the box although the user had stopped that reply. Wait a moment for the Stop.
        if time.monotonic() >= deadline:
            return None, BUSY_NOTICE
        time.sleep(0.05)


def take_retry(ctx: WebContext, tab: str) -> Any:
    """Retry (answer the last stored message again): a run id, None while a reply runs."""
    if ctx.busy(tab):
        return None
    return ctx.begin_run(tab, None).id


def send_taken(ctx: WebContext, state: dict[str, Any], tab: str, run_id: Any, model: str | None,
               now: float | None = None) -> Iterator[SendUpdate]:
    """Send the message of run ``run_id`` (from :func:`take`) in the tab's session and stream the
    reply, like :func:`send`. Waits first for an earlier run of the tab that is still ending
    (stopped), and then continues from the state that run ended with.

    Once the tab has opened another conversation (:meth:`WebContext.supersede`), nothing more
    is yielded: the run is stopped, its text stays stored in its own session, and it never
    repaints the pane that now shows another chat."""
    run = ctx.claim_run(tab, run_id)
    if run is None:
        log.info("run %s of tab %s not found or already started", run_id, tab)
        return
    try:
        ctx.wait_for_earlier(tab, run, QUEUE_WAIT_SECONDS)
        state = dict(state or tab_state(ctx.project_key))
        last = ctx.last_state(tab)
        if last and (not state.get("session") or state.get("session") == last.get("session")):
            # The tab's own last run is newer than what the page sent, except for the archive
            # state the page shows (a run never archives; the page's Archive click may be newer).
            page_archived = state.get("archived") if state.get("session") else None
            state = dict(last, **({"archived": page_archived} if isinstance(page_archived, bool) else {}))
        for upd in send(ctx, state, run.text, model, tab, now=now, run=run):
            if run.superseded:
                continue  # keep consuming: the run stops and stores its partial text
            yield upd
    finally:
        if not run.done.is_set():  # never leave the tab busy, whatever happened above
            ctx.end_run(tab, run, None)


def send(ctx: WebContext, state: dict[str, Any], text: str | None, model: str | None, tab: str,
         now: float | None = None, run: Run | None = None) -> Iterator[SendUpdate]:
    """Send ``text`` in the tab's session and stream the reply as :class:`SendUpdate`s.

    ``text`` None answers the last stored message again (Retry after a reply was lost) without
    adding one. A new chat is created on its first message. The loaded message count goes to
    the store as ``expected_count``: if another tab or process appended meanwhile, nothing is
    written, the session is reloaded and the notice says so (the text is given back for sending
    again). Model errors end the stream with a readable row in the chat; the user message stays
    saved. ``tab`` names the tab whose Stop button stops this run; ``run`` is the
    ``WebContext`` run it belongs to (default: a new one).
    """
    if run is None:
        run = ctx.begin_run(tab, text)
        run.started = True
    final: dict[str, Any] | None = None
    try:
        for upd in _send(ctx, state, text, model, run, now, tab):
            if upd.done:
                final = upd.state
                run.restore_text = upd.restore_text
            yield upd
    finally:
        ctx.end_run(tab, run, final)


def _use_version(ctx: WebContext, key: SessionKey) -> None:
    try:
        ctx.manager.use_version(key)
    except (AnycodeError, OSError) as err:  # the reply is stored; only the pointer was not moved
        log.warning("could not mark %s as the version in use: %s", key.session_id, err)


@dataclass
class _Turn:
    """What one send knows while it runs (:func:`_send`): the tab's state and session, what is on
    screen, and how the reply went."""

    state: dict[str, Any]
    key: SessionKey
    session: Any
    retry: bool  # answering the last stored message again (no new message)
    give_back: str | None  # the text to put back in the box when nothing was sent
    created: bool  # this send created the session
    title: str
    label: str
    base: list[dict[str, Any]]  # the chat as it was
    shown: list[dict[str, Any]]  # base plus the message being sent
    count: int  # what the store holds, as far as this send knows
    saved: bool  # the user's message is stored (a retry adds none)
    live: _LiveRows = field(default_factory=lambda: _LiveRows())
    counted: bool = False  # the next round is already in ``count`` (it was kept as a version)
    error_row: dict[str, Any] | None = None
    notice: str | None = None
    restore: str | None = None
    info: str | None = None  # "sending unarchived it"
    gone: bool = False  # the chat was deleted elsewhere while the reply streamed (see _gone_update)
    caught_up: str | None = None  # "yours was sent after them": another tab's turns came first


def _send(ctx: WebContext, state: dict[str, Any], text: str | None, model: str | None, run: Run,
          now: float | None, tab: str = "") -> Iterator[SendUpdate]:
    retry = text is None
    if compaction_ui.is_compact_command(text):  # `/compact` typed, or the Compact button
        yield from compaction_ui.compact_updates(ctx, state, model, run)
        return
    text = clean_text((text or "").strip())
    if is_blank(text) and not (retry and state.get("session")):
        current = reload(ctx, state)
        yield SendUpdate(current.state, current.rows, current.title, done=True)
        return
    turn = yield from _open_turn(ctx, state, None if retry else text)
    if turn is None:
        return
    retry = turn.retry  # the same text sent again after its reply failed is answered again
    yield SendUpdate(turn.state, turn.shown, turn.title, label=turn.label)
    # Issue 25: a reply being written in this chat by another tab or process is waited for
    # (Stop ends the wait), and this tab's reply holds the lease the others see while it runs.
    held = yield from _take_lease(ctx, turn, run, tab)
    if held is None:
        return
    try:
        config = ctx.model_config()
        client = ctx.client()
        turn.info = archived_chat.unarchive_for_send(ctx, turn.key, turn.session) if retry else None  # sending unarchives
        yield from _stream_reply(ctx, turn, None if retry else text, model or config.model, config, client, run)
        yield _ended(ctx, turn, client, now)
    finally:
        held.release()


def _take_lease(ctx: WebContext, turn: _Turn, run: Run, tab: str) -> Generator[SendUpdate, None, Any]:
    """The session's reply lease for this send (:func:`webui.chat.live.hold`), waiting while
    another tab or process writes a reply there: the chat shows the message waiting under a
    sentence saying why, and once that reply is stored the message goes after it (the turn is
    re-read). Returns None after yielding the final update when the wait was stopped (Stop):
    nothing was sent and the text goes back to the box."""
    held = live.hold(ctx, turn.key, tab)
    if held is not None:
        if getattr(held, "took_over", None) is not None:
            # The writer this page saw at work died mid-reply (kill -9, a crash): its question
            # may be stored unanswered; this message goes after it, as after a wait.
            yield from _reread(ctx, turn)
        return held
    log.info("send in %s waits for the reply another tab or process is writing", turn.key.session_id)
    waiting_row = {"role": "assistant", "content": chat_text.reply("\u23f3 " + i18n.t(live.WAITING_NOTICE.key))}
    yield SendUpdate(turn.state, turn.shown + [waiting_row], turn.title, label=turn.label)
    while held is None:
        if not live.wait_for_other(ctx, turn.key, tab, run.cancel):
            view = _settle(ctx, turn.state, live.WAIT_STOPPED, turn.count, turn.base, turn.title)
            yield SendUpdate(view.state, view.rows, view.title, notice=live.WAIT_STOPPED,
                             restore_text=turn.give_back, done=True, label=view.label)
            return None
        held = live.hold(ctx, turn.key, tab)
    yield from _reread(ctx, turn)  # the other reply is stored now: this message goes after it
    last = turn.session.messages[-1] if turn.session.messages else {}
    if turn.retry and last.get("role") == "assistant" and not last.get("tool_calls"):
        # A retry of a message the other tab's reply has answered meanwhile: nothing to answer.
        held.release()
        view = _settle(ctx, turn.state, None, turn.count, turn.base, turn.title)
        yield SendUpdate(view.state, view.rows, view.title, done=True, label=view.label)
        return None
    return held


def _reread(ctx: WebContext, turn: _Turn) -> Iterator[SendUpdate]:
    """Re-read the session after another writer's reply (waited for, or its writer died), so the
    message goes after what is stored: the turn's session, rows and count are the store's now."""
    try:
        session = ctx.manager.get(turn.key)
    except (AnycodeError, OSError) as err:  # the send goes on; a stale count is refused as usual
        log.warning("cannot re-read %s after another writer: %s", turn.key.session_id, err)
        return
    turn.session, turn.count = session, len(session.messages)
    turn.state["count"] = turn.count
    turn.state["from"] = shown_from(session, turn.state)
    turn.base = render.chat_window(session.messages, turn.state["from"], session.compactions,
                                   session.reply_ends, session.reply_agents).rows
    turn.shown = turn.base if turn.retry else turn.base + [
        {"role": "user", "content": chat_text.literal(turn.give_back or "")}]
    yield SendUpdate(turn.state, turn.shown, turn.title, label=turn.label)


def _repeats_unanswered(session: Any, text: str | None) -> bool:
    """True when ``text`` is the session's last message, a user message no reply follows."""
    last = session.messages[-1] if session.messages else None
    return (bool(text) and isinstance(last, dict) and last.get("role") == "user"
            and isinstance(last.get("content"), str) and last["content"].strip() == str(text).strip())


def _open_turn(ctx: WebContext, state: dict[str, Any], text: str | None) -> Generator[SendUpdate, None, _Turn | None]:
    """The session the tab sends in (created for a new chat; a reply an earlier send could not
    store is stored first), or None after yielding the final update of a send refused before
    anything was written (the session is gone, the store failed, it was archived elsewhere)."""
    retry = text is None
    state = dict(state)
    created = False
    try:
        if not state.get("session"):
            session = ctx.manager.create(project_cwd(ctx, state["project"]))
            created = True
            state = tab_state(session.project_key, session.id, 0)
            log.info("created session %s in %s", session.id, session.cwd)
        key = _key(state)
        session = ctx.manager.get(key)
        pending = ctx.unsaved.pop(key, None)
        if pending is not None:
            session = _store_pending(ctx, key, pending, state)
    except SessionNotFound as err:
        if created or not state.get("session"):  # the project itself is unknown
            notice = describe(err)
        else:  # deleted in another tab or process since the tab showed it
            log.info("send refused: %s was deleted elsewhere (%s)", state.get("session"), err)
            notice = i18n.t("err_chat_deleted")
            if text:
                notice = i18n.t("sentence_join", first=notice, second=i18n.t("chat_deleted_box"))
        view = new_chat(ctx, state["project"], notice=notice)
        yield SendUpdate(view.state, view.rows, notice=view.notice, restore_text=text, done=True)
        return None
    except (StoreUnavailable, OSError) as err:
        # Nothing of this send was stored: say why, give the text back, leave the chat as it is.
        log.warning("send refused, the store failed: %s", err)
        yield SendUpdate(state, None, notice=storage_notice(err, saved=False), restore_text=text, done=True)
        return None
    refused = archived_chat.refused_send(session, state)  # archived in another tab since (issue 15 rule)
    if refused:
        view = reload(ctx, state, notice=refused)
        yield SendUpdate(view.state, view.rows, view.title, notice=refused, restore_text=text, done=True,
                         label=view.label)
        return None
    caught_up = None
    if not retry and _appended_elsewhere(session, state):
        # The tab was behind only because another tab or process added whole turns at the end:
        # the new message goes after them (as after a reply it waited for), and the tab shows
        # them first and says so, rather than refusing the send (the trial's message was then
        # only in the box, and overwritten there).
        log.info("%s had %d messages more than tab shows: the message goes after them",
                 key.session_id, len(session.messages) - int(state.get("count") or 0))
        state["count"] = len(session.messages)
        caught_up = i18n.t(SENT_AFTER_NOTICE.key)
    if not retry and _repeats_unanswered(session, text):
        # The message is stored already and its reply failed (the server refused, broke off):
        # sent again word for word, it is answered again rather than stored a second time
        # (trial 9: two identical user messages in a row, both sent to the model).
        log.info("the unanswered last message of %s was sent again: answered again", key.session_id)
        retry = True
    start = shown_from(session, state)
    state["from"] = start
    base = render.chat_window(session.messages, start, session.compactions, session.reply_ends, session.reply_agents).rows
    return _Turn(state=state, key=key, session=session, retry=retry, give_back=text, created=created,
                 title=shown_title(session),
                 label=render.session_label(session.title, session.created_at, session.title_source),
                 base=base, shown=base if retry else base + [{"role": "user", "content": chat_text.literal(text)}],
                 count=state.get("count", 0), saved=retry, caught_up=caught_up)


def _appended_elsewhere(session: Any, state: dict[str, Any]) -> bool:
    """True when the stored chat is the one the tab showed plus whole turns another writer added
    at its end: it holds more messages than the tab's count, and its last one is a finished reply
    (an assistant message asking for no tool). Messages are only ever appended to a session (an
    edit or a regeneration makes a version), so the tab's messages are its first ``count``.
    A stored tail that is a question without a reply, or a reply waiting for tool results or an
    approval, is not: a message sent there would answer or deny someone else's turn, so that
    send is refused as before ("changed elsewhere", the text back in the box)."""
    count = int(state.get("count") or 0)
    messages = session.messages
    if count <= 0 or len(messages) <= count:
        return False
    last = messages[-1]
    return (isinstance(last, dict) and last.get("role") == "assistant" and not last.get("tool_calls")
            and any(m.get("role") == "user" for m in messages[count:] if isinstance(m, dict)))


def _stream_reply(ctx: WebContext, turn: _Turn, text: str | None, model: str, config: Any, client: Any,
                  run: Run) -> Iterator[SendUpdate]:
    """Run the turn (:func:`core.agent.runner.run_session_stream`) and yield the chat as the
    reply streams; a failure is noted on ``turn`` (a notice, or an error row), never raised."""
    from core.agent.runner import run_session_stream

    stream = None
    try:
        stream = run_session_stream(turn.key, ctx.manager, text, **_runner_kwargs(
            ctx, turn.state, client, model, config, run.cancel))
        last_yield, last_look = 0.0, time.monotonic()
        for event in stream:
            _note_event(ctx, turn, event)
            if not turn.gone and time.monotonic() - last_look >= GONE_CHECK_SECONDS:
                last_look = time.monotonic()
                if _deleted_elsewhere(ctx, turn.key):
                    # Deleted in another tab or process: nothing of this reply can be stored, so
                    # it stops now (not at its end) and the tab says so (see _gone_update).
                    log.info("%s was deleted while its reply streamed: stopping it", turn.key.session_id)
                    turn.gone = True
                    run.cancel.set()
            if turn.live.apply(event):
                t = time.monotonic()
                if not isinstance(event, TextDelta) or t - last_yield >= STREAM_MIN_INTERVAL:
                    last_yield = t
                    yield SendUpdate(turn.state, turn.shown + [dict(r) for r in turn.live.rows], turn.title,
                                     label=turn.label)
    except SessionConflict as err:
        log.info("send in %s refused: %s", turn.key, err)
        turn.notice, turn.restore = CONFLICT_NOTICE, turn.give_back  # str(err) has internal counts
    except SessionNotFound as err:  # deleted in another tab or process while the reply streamed
        log.info("the chat %s was deleted while its reply was written: %s", turn.key.session_id, err)
        turn.gone = True
    except (StoreUnavailable, OSError) as err:
        log.warning("the store failed while answering in %s: %s", turn.key, err)
        if not turn.saved:
            turn.notice, turn.restore = storage_notice(err, saved=False), turn.give_back
            turn.shown = turn.base
        else:
            unsaved = getattr(err, "unsaved", None)
            if unsaved:  # kept on screen, and stored before this session's next message
                ctx.unsaved[turn.key] = (getattr(err, "saved_count", turn.count), unsaved)
            turn.error_row = _error_row(storage_notice(err, saved=True))
    except (ModelError, AnycodeError) as err:
        log.warning("%s in %s: %s", "model error" if isinstance(err, ModelError) else "error", turn.key, err)
        turn.error_row = _error_row(describe(err))
    except Exception as err:  # noqa: BLE001 -- never a traceback in the chat; logged
        log.exception("unexpected failure while answering in %s", turn.key)
        turn.error_row = _error_row(i18n.t("error_unexpected", error=type(err).__name__))
    finally:
        if stream is not None:
            stream.close()


def _deleted_elsewhere(ctx: WebContext, key: SessionKey) -> bool:
    """True when session ``key`` is no longer in the store (deleted by another tab or process);
    False while it is, and when the store cannot tell (a failure here never stops a reply)."""
    try:
        return not ctx.storage.sessions.exists(key)
    except Exception as err:  # noqa: BLE001 -- unknown: the reply goes on, its store says later
        log.warning("cannot tell whether %s still exists: %s", key.session_id, err)
        return False


def _note_event(ctx: WebContext, turn: _Turn, event: TurnEvent) -> None:
    """What a turn event tells the send beyond the rows: the message is stored, the reply was
    kept as a version, how many messages are stored, a title is being generated."""
    match event:
        case UserMessageSaved(message_count=count):
            turn.saved, turn.count = True, count
            turn.info = archived_chat.unarchive_for_send(ctx, turn.key, turn.session)
        case ReplyKeptAsVersion():
            # Another tab or process wrote here meanwhile: the reply is a version; this tab
            # follows it there and says so.
            turn.key = event.key
            turn.state["session"] = turn.key.session_id
            try:
                turn.count, turn.counted = len(ctx.manager.get(turn.key).messages), True  # the round is in it
            except (AnycodeError, OSError) as err:  # only the fallback count (see _settle)
                log.warning("cannot read the version %s: %s", turn.key.session_id, err)
            turn.notice = i18n.t("reply_kept_as_version", n=event.number, m=event.count)
        case RoundCompleted(messages=messages):
            turn.count += 0 if turn.counted else len(messages)
            turn.counted = False
        case TitleStarted(thread=thread):  # pushed to the page once stored (webui.chat.titles)
            ctx.titles.started(turn.key.session_id, thread)


def _ended(ctx: WebContext, turn: _Turn, client: Any, now: float | None) -> SendUpdate:
    """The last update of a send: the stored chat (or what is on screen when the store cannot be
    read), the notice, the text to give back, whether a title is awaited."""
    error_row, notice = turn.error_row, turn.notice
    if turn.gone:
        return _gone_update(ctx, turn)
    if turn.saved and (turn.session.version_of or turn.session.current_version):
        _use_version(ctx, turn.key)  # the version written in is the one a reload opens (issue 15)
    if turn.created and not turn.saved and _drop_if_empty(ctx, turn.key):
        # Nothing was stored (the send failed before the message): no empty "ghost" session.
        view = new_chat(ctx, turn.state["project"], notice=notice)
        return SendUpdate(view.state, [error_row] if error_row else [], notice=notice,
                          restore_text=turn.give_back, done=True, error=error_row is not None)
    now = time.time() if now is None else now
    on_screen = turn.shown + [dict(r) for r in turn.live.rows] if turn.saved else turn.shown
    view = _settle(ctx, turn.state, notice, turn.count, on_screen, turn.title)
    waiting = (client is not None and not view.title and error_row is None and notice is None
               and any(r["role"] == "assistant" for r in view.rows))
    view.state["title_wait"] = now + TITLE_WAIT_SECONDS if waiting else 0.0
    if error_row is not None and view.needs_reply:
        # One notice per event (issue 18): the error row says why and offers Retry itself, so the
        # page shows no second "No reply was saved… Retry" bar for the same failure.
        error_row["options"] = [render.option(render.RETRY)]
    rows = view.rows + ([error_row] if error_row else [])
    if turn.info:
        view.state["unarchived"] = True  # webui.chat.archived: the list shows the chat where it now is
    info = turn.info or (turn.caught_up if turn.saved else None)
    return SendUpdate(view.state, rows, view.title, notice=notice or info, restore_text=turn.restore,
                      done=True, error=error_row is not None, label=view.label,
                      notice_level="info" if info and not notice else "warning")


def _gone_update(ctx: WebContext, turn: _Turn) -> SendUpdate:
    """The last update of a send whose chat was deleted in another tab or process while its reply
    streamed (issue 25, "two writers": the other write is never dropped silently). Nothing of the
    turn can be stored any more, and re-creating the chat would undo the other tab's delete, so:

    - the tab becomes a new chat (state without a session: the next send starts a new chat rather
      than failing on the deleted one, the address bar drops ``?session=``);
    - the chat keeps what the tab showed — the conversation, the message and the reply as far as
      it streamed — under a row saying the chat was deleted elsewhere and nothing was saved
      (readable; never the store's "No session <project key>/<id>" sentence);
    - the message goes back to the input box (``restore_text``; a retry had none to give back).
    """
    shown = turn.shown + [dict(r) for r in turn.live.rows]
    text = i18n.t("chat_deleted_while_replying")
    if turn.give_back:
        text = i18n.t("sentence_join", first=text, second=i18n.t("chat_deleted_box"))
    view = new_chat(ctx, turn.state.get("project"))
    return SendUpdate(view.state, shown + [_error_row(text)], "", restore_text=turn.give_back, done=True,
                      error=True)


def _store_pending(ctx: WebContext, key: SessionKey, pending: Any, state: dict[str, Any]) -> Any:
    """Store a reply an earlier send could not save (kept in ``ctx.unsaved``); return the session
    as it is now and update ``state["count"]``. Store failures propagate (still pending)."""
    from core.agent.persist import store_pending

    try:
        stored = store_pending(ctx.manager, key, pending)
    except BaseException:
        ctx.unsaved[key] = pending
        raise
    session = ctx.manager.get(key)
    if stored is not None and state.get("count") == pending[0]:
        state["count"] = len(session.messages)  # the tab showed that reply: it is its history now
    log.info("stored the reply of %s that an earlier send could not save", key.session_id)
    return session


def _settle(ctx: WebContext, state: dict[str, Any], notice: str | None, count: int,
            rows: list[dict[str, Any]], title: str) -> SessionView:
    """The view at the end of a send: the stored session, or — when the store cannot be read
    (database down) — what is on screen, with the message count this send knows is stored (so
    the next send is never refused by a false "changed elsewhere")."""
    try:
        return reload(ctx, state, notice)
    except (AnycodeError, OSError) as err:
        log.warning("cannot reload %s after the send: %s", state.get("session"), err)
        return SessionView(state=dict(state, count=count), title=title, rows=rows, notice=notice)


def _drop_if_empty(ctx: WebContext, key: SessionKey) -> bool:
    """Delete session ``key`` (just created by a send) if it holds no message; True if it did."""
    try:
        if ctx.manager.get(key).messages:
            return False
        ctx.manager.delete(key)
    except AnycodeError as err:
        log.warning("could not check the new session %s: %s", key.session_id, err)
        return False
    log.info("removed the new session %s: its first message was not stored", key.session_id)
    return True


def _runner_kwargs(ctx: WebContext, state: dict[str, Any], client: Any, model: str, config: Any,
                   cancel: Any) -> dict[str, Any]:
    # tools left to the runner: TOOL_SPECS, in the session's checked project folder.
    return {
        "storage": ctx.storage, "client": client, "model": model, "expected_count": state["count"], "cancel": cancel,
        "title_client": client, "title_model": getattr(config, "title_model", None) or model,
        # The page can ask: a fact from a turn that read files or tool output waits for the user's yes.
        "confirm_memories": True,
        **approvals.runner_kwargs(ctx, state),  # the user's approvals and chosen workspace
        "extra_tools": mcp.turn_tools(ctx, state),  # the project's MCP servers' tools (webui.chat.mcp)
    }


def stop(ctx: WebContext, tab: str, withdrawn: list[str] | None = None, upto: Any = None) -> bool:
    """Stop the reply streaming in tab ``tab`` (the partial text is kept); False if none runs.
    A message handed over whose send has not started yet is withdrawn; its text is added to
    ``withdrawn`` (to put back in the input box). ``upto``: the run id the page showed Stop for;
    a message handed over after it is neither stopped nor withdrawn
    (:meth:`WebContext.request_stop`)."""
    return ctx.request_stop(tab, withdrawn, upto)


def restore_text(ctx: WebContext, tab: str, run_id: Any) -> str | None:
    """The text run ``run_id`` gave back for the input box (its send was refused), or None."""
    return ctx.pop_restore(tab, run_id) if run_id is not None else None


def leave(ctx: WebContext, tab: str, timeout: float = SWITCH_WAIT_SECONDS) -> None:
    """The tab is about to show another conversation: stop its reply (the partial text is
    stored in its own session) and wait until that is done, so the reply can never repaint the
    newly opened chat or receive the next message."""
    ctx.supersede(tab, timeout)
