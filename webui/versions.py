"""Edit, Regenerate and the ``‹ n / m ›`` version switcher of the chat pane (issue 15).

Plain functions (tested without a browser) plus :func:`attach`, which adds the switcher bar's
events and the chat's edit / "Regenerate" events to the app's existing components. A version is a
fork made with ``SessionManager.fork(..., version=True)`` (see :mod:`core.session.versions`):
the old version is never changed, and the family's root remembers the version in use.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from webui import offline  # noqa: F401  (sets the offline environment before Gradio is imported)

import gradio as gr

from core.errors import AnycodeError, SessionNotFound, StaleChange, StoreUnavailable
from core.session.export import message_text
from core.session.keys import SessionKey
from core.session.text import clean_text, is_blank
from core.session.versions import last_user_before
from webui import chat_text, handlers, render

log = logging.getLogger(__name__)

REGENERATE_OPTION = "Regenerate"
REPEAT_SECONDS = 3.0  # Gradio can deliver one click on a feedback option twice: the same click
EMPTY_EDIT_NOTICE = "A message cannot be empty; nothing was changed."


def _key(state: dict[str, Any]) -> SessionKey:
    if not state.get("session"):
        raise SessionNotFound("(this chat has not been saved yet)")
    return SessionKey(state["project"], state["session"])


def _stored_index(ctx: Any, state: dict[str, Any], row_index: int) -> tuple[Any, int]:
    session = ctx.manager.get(_key(state))
    window = render.chat_window(session.messages, handlers.shown_from(session, state), session.compactions,
                                session.reply_ends)  # the rows exactly as shown
    if not 0 <= row_index < len(window.source):
        raise IndexError(f"There is no message {row_index + 1} in this conversation.")
    return session, window.source[row_index]


def edit(ctx: Any, state: dict[str, Any], row_index: int, text: str | None) -> tuple[handlers.SessionView, str | None]:
    """Edit of the user message on chat row ``row_index`` to ``text``: make a new version holding
    every message before it and open it; return ``(view, text to send)`` — the caller sends the
    text in the new version, so the model answers the edited message. An unchanged or blank text
    changes nothing (``(view of the tab's session, None)``, with a notice when blank).
    Raises ``SessionNotFound``, ``IndexError`` (no such row), ``ValueError`` (not a user message)."""
    text = clean_text((text or "").strip())
    session, index = _stored_index(ctx, state, row_index)
    message = session.messages[index]
    if message.get("role") != "user":
        raise ValueError("Only your own messages can be edited.")
    if is_blank(text):
        return handlers.reload(ctx, state, notice=EMPTY_EDIT_NOTICE), None
    if text == message_text(message.get("content")).strip():
        return handlers.reload(ctx, state), None  # like Cancel: nothing to do
    try:
        version = ctx.manager.fork(_key(state), index - 1, version=True)
    except (StoreUnavailable, OSError) as err:  # whole or absent: nothing was made
        log.warning("edit of %s failed: %s", state["session"], err)
        return handlers.reload(ctx, state, notice=handlers.not_saved(err, "the edit was not saved.")), None
    log.info("edited message %d of %s into version %s", index, state["session"], version.id)
    return handlers.view_of(ctx.manager.get(version.key)), text


def regenerate(ctx: Any, state: dict[str, Any], row_index: int, now: float | None = None) -> handlers.SessionView | None:
    """Regenerate the reply on (or answering the message on) chat row ``row_index``: make a new
    version holding everything up to the user message the reply answers, and open it; the caller
    then asks the model again (a retry: no new user message). Returns None for a repeat of the
    same click (already done). Raises ``SessionNotFound``, ``IndexError``, ``ValueError`` (no user
    message before the row)."""
    now = time.time() if now is None else now
    if repeated(state, row_index, now):
        log.info("ignoring a repeated regenerate event for row %d", row_index)
        return None
    session, index = _stored_index(ctx, state, row_index)
    cut = last_user_before(session.messages, index)
    if cut < 0:
        raise ValueError("There is no message of yours before this one to answer again.")
    try:
        version = ctx.manager.fork(_key(state), cut, version=True)
    except (StoreUnavailable, OSError) as err:
        log.warning("regenerate in %s failed: %s", state["session"], err)
        return handlers.reload(ctx, state, notice=handlers.not_saved(err, "nothing was regenerated."))
    view = handlers.view_of(ctx.manager.get(version.key))
    view.state["regen_guard"] = [version.id, row_index, now]
    return view


def repeated(state: dict[str, Any] | None, row_index: int, now: float | None = None) -> bool:
    """True when a Regenerate of ``row_index`` is the second delivery of the click that made the
    tab's version (within :data:`REPEAT_SECONDS`): it must neither fork again nor stop the reply
    the first delivery started."""
    guard = (state or {}).get("regen_guard")
    now = time.time() if now is None else now
    return bool(guard and guard[0] == (state or {}).get("session") and guard[1] == row_index
                and now - guard[2] < REPEAT_SECONDS)


def switcher(ctx: Any, state: dict[str, Any] | None) -> dict[str, Any] | None:
    """The switcher for the tab's session: ``{"index": first differing stored message, "n", "m",
    "ids"}`` at the latest point where its conversation has other versions, or None. Metadata only."""
    if not state or not state.get("session"):
        return None
    try:
        points = ctx.manager.version_points(_key(state))
    except (AnycodeError, OSError) as err:
        log.info("no version switcher: %s", err)
        return None
    return points[-1] if points else None


def switch(ctx: Any, state: dict[str, Any], step: int, index: int | None = None) -> handlers.SessionView:
    """Show the previous (``step`` -1) or next (+1) version at the switcher's point (``index``:
    the point's stored message index, default the latest point) and make it the version in use.
    A switch made while another tab changed the version in use is refused: the view then shows
    that version with a notice."""
    key = _key(state)
    points = ctx.manager.version_points(key)
    point = next((p for p in points if p["index"] == index), None) if index is not None else None
    point = point or (points[-1] if points else None)
    if point is None:
        return handlers.reload(ctx, state)
    target = point["n"] - 1 + step
    if not 0 <= target < point["m"]:
        return handlers.reload(ctx, state)
    try:
        new_key = ctx.manager.switch_version(key, point["ids"][target], expected=key.session_id)
    except StaleChange as err:
        current = ctx.manager.current_version(key)
        return handlers.view_of(ctx.manager.get(current), notice=str(err))
    except (StoreUnavailable, OSError) as err:
        return handlers.reload(ctx, state, notice=handlers.not_saved(err, "the version was not switched."))
    return handlers.view_of(ctx.manager.get(new_key))


def bar_label(point: dict[str, Any] | None) -> str:
    """The switcher's text, e.g. ``Version 2 / 3``."""
    return f"Version {point['n']} / {point['m']}" if point else ""


# --- Gradio wiring -----------------------------------------------------------------------------


def bar() -> dict[str, Any]:
    """Create the switcher bar (hidden until the conversation has versions) where it is called:
    ``{"row", "prev", "label", "next"}``."""
    with gr.Row(visible=False, elem_id="ac-versions", equal_height=True) as row:
        prev = gr.Button("‹", size="sm", elem_id="ac-version-prev", scale=0, min_width=40)
        label = gr.Markdown("", elem_id="ac-version-label")
        nxt = gr.Button("›", size="sm", elem_id="ac-version-next", scale=0, min_width=40)
    return {"row": row, "prev": prev, "label": label, "next": nxt}


def attach(ctx: Any, parts: dict[str, Any], *, chat: Any, state: Any, tab: Any, box: Any, pending: Any,
           model: Any, search: Any, show_archived: Any, view_outputs: list[Any],
           show: Callable[..., tuple], switching: Callable[..., Any], tab_key: Callable[..., str],
           on_send: Callable[..., Any], on_sent: Callable[..., Any], notify: Callable[..., None],
           after_turn: Callable[[Any], Any] = lambda dep: dep) -> None:
    """Wire the switcher ``parts`` (from :func:`bar`), the chat's ``.edit`` (Send of an edited user
    message) and its "Regenerate" feedback option into the app. ``show``, ``switching``,
    ``on_send``, ``on_sent``, ``tab_key`` and ``notify`` are the app's own helpers, so a version
    streams its reply exactly like a sent message; ``after_turn`` wraps each chain as the app wraps
    its own sends (e.g. to show an approval card when the turn pauses)."""
    def on_state(st):
        point = switcher(ctx, st)
        if point is None:
            return gr.Row(visible=False), "", gr.Button(), gr.Button()
        return (gr.Row(visible=True), bar_label(point), gr.Button(interactive=point["n"] > 1),
                gr.Button(interactive=point["n"] < point["m"]))

    state.change(on_state, state, [parts["row"], parts["label"], parts["prev"], parts["next"]],
                 api_visibility="private", show_progress="hidden")

    def stepper(step: int):
        def on_step(st, query, archived):
            try:
                view = switch(ctx, st, step)
            except AnycodeError as err:
                view = handlers.reload(ctx, st, notice=str(err))
            return (*show(view, query, archived), gr.Textbox(submit_btn=True, stop_btn=False))
        return on_step

    switch_kw = {"outputs": [*view_outputs, box], "api_visibility": "private"}
    parts["prev"].click(switching(stepper(-1)), [tab, state, search, show_archived], **switch_kw)
    parts["next"].click(switching(stepper(+1)), [tab, state, search, show_archived], **switch_kw)

    stream_args = {"api_visibility": "private", "show_progress": "hidden", "trigger_mode": "multiple"}
    skip = len(view_outputs) + 2

    def on_edit(tab_id, st, query, archived, evt: gr.EditData, request: gr.Request):
        handlers.leave(ctx, tab_key(request, tab_id))  # a reply still streaming stops first
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        value = evt.value if isinstance(evt.value, str) else message_text(evt.value)
        value = chat_text.source(value)  # the box started from the shown content (chat_text)
        try:
            view, text = edit(ctx, st, int(index), value)
        except (AnycodeError, IndexError, ValueError) as err:
            view, text = handlers.reload(ctx, st, notice=str(err)), None
        run_id = None
        if text is not None:
            run_id, notice = handlers.take(ctx, tab_key(request, tab_id), text)
            notify(notice)
        return (*show(view, query, archived), gr.Textbox(submit_btn=run_id is None, stop_btn=run_id is not None and "Stop"),
                run_id)

    def on_regenerate(tab_id, st, query, archived, evt: gr.LikeData, request: gr.Request):
        # Skips leave ``pending`` alone: the first of a doubled event may still be handing its
        # run over to the send that follows it (a stale id there is ignored by claim_run).
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if evt.liked != REGENERATE_OPTION or repeated(st, int(index)):  # Branch has its own listener
            return tuple(gr.skip() for _ in range(skip))
        handlers.leave(ctx, tab_key(request, tab_id))
        try:
            view = regenerate(ctx, st, int(index))
        except (AnycodeError, IndexError, ValueError) as err:
            view = handlers.reload(ctx, st, notice=str(err))
        if view is None:
            return tuple(gr.skip() for _ in range(skip))
        run_id = None
        if view.state.get("regen_guard"):
            run_id = handlers.take_retry(ctx, tab_key(request, tab_id))
        return (*show(view, query, archived), gr.Textbox(submit_btn=run_id is None, stop_btn=run_id is not None and "Stop"),
                run_id)

    outs = [*view_outputs, box, pending]
    send_inputs = [state, pending, model, tab, search, show_archived]
    after_turn(chat.edit(on_edit, [tab, state, search, show_archived], outs, concurrency_limit=1,
                         **stream_args).then(on_send, send_inputs, view_outputs, **stream_args).then(
        on_sent, [tab, pending, box], box, **stream_args))
    after_turn(chat.like(on_regenerate, [tab, state, search, show_archived], outs, concurrency_limit=1,
                         **stream_args).then(on_send, send_inputs, view_outputs, **stream_args).then(
        on_sent, [tab, pending, box], box, **stream_args))
