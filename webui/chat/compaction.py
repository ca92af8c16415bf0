"""The context meter, the Compact action (button and ``/compact``) and compaction progress (issue 9).

Plain functions over core (tested without a browser); the meter's and the button's wiring is
:mod:`webui.gui.compaction`. The summary divider in the history is drawn by
:func:`webui.render.rows.summary_divider`.
"""
from __future__ import annotations

import html
import logging
from typing import TYPE_CHECKING, Any, Iterator

from core import settings
from core.agent.events import CompactionEvent, CompactionFinished, CompactionProgress, CompactionStarted
from core.errors import AnycodeError, ModelError
from core.session.keys import SessionKey
from webui.render import rows as render
from babel.numbers import format_percent

from webui import i18n
from webui.chat.views import SendUpdate, _error_row, not_saved, reload, settled
from webui.i18n import Msg, t
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import Run, WebContext

log = logging.getLogger(__name__)

COMPACT_COMMAND = "/compact"
PROGRESS_TITLE = Msg("compaction_progress_title")


def is_compact_command(text: str | None) -> bool:
    """True for ``/compact`` typed in the message box (any case, surrounding spaces ignored)."""
    return (text or "").strip().lower() == COMPACT_COMMAND


# --- the meter ---------------------------------------------------------------------------------


def _chat_usage_tip(session: Any) -> str:
    """The meter tooltip's line on the tokens the chat's replies used so far (issue 31): the
    server's figures, ``~`` when any is anycode's estimate, the cost only when the user set prices
    for every model used (``ANYCODE_PRICES``); "" before the first counted reply."""
    from core.session.usage import prices

    totals = getattr(session, "usage", None)
    if totals is None or not totals.replies:
        return ""
    mark = "~" if totals.estimated else ""
    cost = totals.cost(prices())
    return " " + t("meter_chat_usage", tokens=f"{mark}{totals.total:,}", prompt=f"{mark}{totals.prompt:,}",
                   completion=f"{mark}{totals.completion:,}", replies=totals.replies,
                   cost=t("meter_chat_cost", cost=f"{cost:.4f}") if cost is not None else "")


def meter_html(ctx: WebContext, state: dict[str, Any] | None, model: str | None, *, probe: bool = True,
               session: Any = None) -> str:
    """The top bar's context meter for the tab's session: ``"42k / 128k"`` (``~`` when estimated),
    amber (class ``ac-meter-warn``) at or past ``ANYCODE_COMPACT_AT``; its tooltip says what the
    numbers are, and why the window is small when Ollama's ``num_ctx`` limits it. Never raises
    (a store or server failure shows no numbers). ``session``: the tab's session, already loaded."""
    from core.agent.context import Usage, context_usage, context_window

    state = state or {}
    client = ctx.client()
    name = model or ctx.model_config().model
    try:
        if state.get("session"):
            if session is None:
                session = ctx.manager.get(SessionKey(state["project"], state["session"]))
            usage = context_usage(session, client, name, probe=probe, data_dir=ctx.storage.data_dir)
        else:
            window = context_window(client, name, probe=probe, data_dir=ctx.storage.data_dir)
            usage = Usage(0, window.tokens, False, window.source, window.note)
    except (AnycodeError, OSError) as err:
        log.info("context meter unavailable: %s", err)
        return ""
    threshold = settings.compact_at()
    warn = usage.fraction >= threshold
    tip = t("meter_tip", used=usage.used, window=usage.window,
            how=t("meter_server_count" if usage.exact else "meter_estimated"), source=usage.source,
            threshold=format_percent(threshold, locale=i18n.babel_locale()))
    if usage.note:
        tip += " " + usage.note
    tip += _chat_usage_tip(session)
    classes = "ac-meter" + (" ac-meter-warn" if warn else "") + (" ac-meter-note" if usage.note else "")
    bar = min(100, int(usage.fraction * 100))
    return (f'<div class="{classes}" title="{html.escape(tip)}" role="meter" aria-valuemin="0" '
            f'aria-valuemax="{usage.window}" aria-valuenow="{usage.used}" aria-label="{html.escape(t("meter_label"))}">'
            f'<span class="ac-meter-bar"><span style="width:{bar}%"></span></span>'
            f'<span class="ac-meter-text">{html.escape(usage.label())}</span>'
            f'{"<span class=ac-meter-bang>!</span>" if usage.note else ""}</div>'
            if usage.window else "")


# --- progress rows while a compaction streams ---------------------------------------------------


def progress_row(chars: int = 0, piece: int = 1, pieces: int = 1) -> dict[str, Any]:
    """The pending chat row shown while the summary is written (a spinner and how far it got)."""
    part = t("compaction_part", piece=piece, pieces=pieces) if pieces > 1 else ""
    body = t("compaction_writing", part=part, chars=chars) if chars else t("compaction_asking", part=part)
    return {"role": "assistant", "content": body + " " + t("compaction_stop_hint"),
            "metadata": {"title": t(PROGRESS_TITLE), "status": "pending", "id": "compaction-progress"}}


def apply_event(rows: list[dict[str, Any]], event: CompactionEvent) -> bool:
    """Fold a compaction event (core.agent.compaction) into live chat ``rows``; True when shown
    rows changed. Started → a progress row; progress → its count; finished → the divider."""
    at = next((i for i, r in enumerate(rows) if (r.get("metadata") or {}).get("id") == "compaction-progress"), None)
    match event:
        case CompactionStarted():
            rows.append(progress_row())
            return True
        case CompactionProgress(chars=chars, piece=piece, pieces=pieces):
            row = progress_row(chars, piece, pieces)
        case CompactionFinished(entry=entry):
            row = render.summary_divider(entry)
        case _:
            return False
    if at is None:
        rows.append(row)
    else:
        rows[at] = row
    return True


# --- /compact and the Compact button --------------------------------------------------------------

NO_MESSAGES = Msg("nothing_to_compact_empty")
NOTHING_YET = Msg("nothing_to_compact_turn")  # the UI's words for core's NOTHING_TO_COMPACT


def nothing_to_compact(ctx: WebContext, state: dict[str, Any] | None, *, session: Any = None) -> str | None:
    """Why the tab's chat has nothing to compact (one sentence), or None when Compact would
    summarise something (:func:`core.agent.compaction.can_compact`). The Compact button is
    disabled while this says something; ``/compact`` answers with it. A store failure is left
    to the compaction itself to report (None). ``session``: the tab's session, already loaded."""
    from core.agent.compaction import can_compact

    if not (state or {}).get("session"):
        return NO_MESSAGES
    try:
        if session is None:
            session = ctx.manager.get(SessionKey(state["project"], state["session"]))
    except (AnycodeError, OSError):
        return None
    if not session.messages:
        return NO_MESSAGES
    return None if can_compact(session.messages, session.compactions) else NOTHING_YET


def compact_updates(ctx: WebContext, state: dict[str, Any], model: str | None, run: Run) -> Iterator[SendUpdate]:
    """Run a manual compaction of the tab's session (``/compact`` or the Compact button) as
    :class:`~webui.chat.views.SendUpdate`s: the chat with a progress row while the summary streams,
    then the reloaded chat with its divider. Stop (``run.cancel``) cancels it with nothing
    changed. Errors end with a readable row; nothing is ever appended but the compaction entry."""
    from core.agent.compaction import compact_session

    why = nothing_to_compact(ctx, state)
    if why:  # a plain sentence, not an error: nothing was tried
        view = reload(ctx, state, notice=why)
        yield SendUpdate(view.state, view.rows, view.title, notice=view.notice, done=True)
        return
    current = reload(ctx, state)
    rows = list(current.rows)
    yield SendUpdate(current.state, rows, current.title, label=current.label)
    error = None
    client = ctx.client()
    try:
        for event in compact_session(SessionKey(state["project"], state["session"]), ctx.manager, client=client,
                                     model=model or ctx.model_config().model, cancel=run.cancel,
                                     data_dir=ctx.storage.data_dir):
            if apply_event(rows, event):
                yield SendUpdate(current.state, [dict(r) for r in rows], current.title, label=current.label)
    except (ModelError, AnycodeError) as err:
        log.warning("compaction of %s failed: %s", state.get("session"), err)
        error = describe(err)  # readable, in the tab's language; never a store's internal key
    except OSError as err:
        error = not_saved(err, "the summary was not saved.")
    view = settled(ctx, current.state)
    cancelled = run.cancel.is_set() and error is None and len(view.rows) == len(current.rows)
    notice = t("compaction_stopped") if cancelled else None
    out = view.rows + ([_error_row(error)] if error else [])
    yield SendUpdate(view.state, out, view.title, notice=notice, done=True, error=error is not None,
                              label=view.label)
