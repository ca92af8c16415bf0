"""The ``‹ n / m ›`` version arrows, Edit, Regenerate and the chat's Retry wired into the page
(issue 15; the plain functions are :mod:`webui.chat.versions`).

:func:`build_version_bar` places the arrows' hidden carrier (its script draws the arrows under
the chat's rows: ``assets/js/version_arrows.js``); :func:`wire_version_arrows` and
:func:`wire_version_edits` bind their events. The app's own ``show``, ``switching``, ``on_send``,
``on_sent``, ``tab_key`` and ``notify`` are passed in, so a version streams its reply exactly like
a sent message.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from core.errors import AnycodeError
from core.session.export import message_text
from webui import i18n
from webui.chat import handlers
from webui.chat.versions import REGENERATE_OPTION, arrows, arrows_html, edit, regenerate, repeated, switch
from webui.gui.assets import script
from webui.text import chat_text
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import WebContext

# The arrows are drawn by the page under the message rows named in the carrier's data (the chat's
# rows are Gradio's; a row's text must stay the message, for Copy and Edit). They are put back
# whenever the chat re-renders, and a click becomes the carrier's ``select`` event with the
# point's stored message index and the step.
ARROWS_JS = script("version_arrows.js")
STREAM_ARGS = {"api_visibility": "private", "show_progress": "hidden", "trigger_mode": "multiple"}


def build_version_bar() -> dict[str, Any]:
    """Create, where it is called, the hidden carrier of the arrows' data and script:
    ``{"points": gr.HTML}``."""
    carrier = gr.HTML(arrows_html([]), js_on_load=ARROWS_JS, elem_id="ac-version-points", padding=False)
    return {"points": carrier}


def wire_version_arrows(ctx: WebContext, parts: dict[str, Any], *, state: Any, tab: Any, box: Any,
                        search: Any, show_archived: Any, view_outputs: list[Any],
                        show: Callable[..., tuple], switching: Callable[..., Any], listen: Callable[..., None]) -> None:
    """The carrier follows the tab's state; a click on an arrow switches the conversation's version."""
    carrier = parts["points"]

    def on_state(st):
        return arrows_html(arrows(ctx, st))

    listen(on_state, state, carrier)  # follows the tab's state (webui.gui.state_hub)

    def on_arrow(st, query, archived, evt: gr.SelectData):
        try:
            view = switch(ctx, st, 1 if str(evt.value) == "1" else -1, index=int(evt.index))
        except (AnycodeError, TypeError, ValueError) as err:
            view = handlers.reload(ctx, st, notice=describe(err))
        return (*show(view, query, archived), gr.Textbox(submit_btn=True, stop_btn=False))

    carrier.select(switching(on_arrow), [tab, state, search, show_archived], [*view_outputs, box],
                   api_visibility="private", concurrency_limit=1)


def _box(run_id: Any) -> Any:
    """The input box while the run ``run_id`` (None: none) streams."""
    return gr.Textbox(submit_btn=run_id is None, stop_btn=run_id is not None and i18n.t("stop"))


def wire_version_edits(ctx: WebContext, *, chat: Any, state: Any, tab: Any, box: Any, pending: Any,
                       model: Any, search: Any, show_archived: Any, view_outputs: list[Any],
                       show: Callable[..., tuple], tab_key: Callable[..., str], on_send: Callable[..., Any],
                       on_sent: Callable[..., Any], notify: Callable[..., None],
                       after_turn: Callable[[Any], Any] = lambda dep: dep,
                       rewind_parts: dict[str, Any] | None = None) -> None:
    """The chat's ``.edit`` (Send of an edited user message), its "Regenerate" feedback option (any
    reply) and its own Retry button (the last reply), each streaming like a sent message;
    ``after_turn`` wraps each chain as the app wraps its own sends (e.g. to show an approval card
    when the turn pauses). With ``rewind_parts`` (:func:`webui.gui.rewind_card.build_rewind_card`),
    an Edit or Regenerate replacing a turn that changed files first opens the rewind card —
    "Conversation and files" / "Conversation only" (issue 29) — and its answer does the rest."""
    from webui.chat import rewind
    from webui.gui import rewind_card

    card_outs = rewind_card.card_outputs(rewind_parts) if rewind_parts else []
    no_card = tuple(gr.skip() for _ in card_outs)
    skip = len(view_outputs) + 2 + len(card_outs)

    def ask_first(st, kind, index, text, query, archived):
        """The outputs opening the card when the turn replaced changed files, else None."""
        if not rewind_parts:
            return None
        found = rewind.replaced_turn(ctx, st, kind, int(index), text)
        if found is None:
            return None
        c, target = found
        return (*[gr.skip()] * len(view_outputs), _box(None), None,
                *rewind_card.shown_card(c, target, i18n.t("rewind_replace_intro"), files_choice=False))

    def on_edit(tab_id, st, query, archived, evt: gr.EditData, request: gr.Request):
        handlers.leave(ctx, tab_key(request, tab_id))  # a reply still streaming stops first
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        value = evt.value if isinstance(evt.value, str) else message_text(evt.value)
        value = chat_text.source(value)  # the box started from the shown content (chat_text)
        card = ask_first(st, "edit", index, value, query, archived)
        if card is not None:
            # The chat shows the edited text until the answer: put the stored one back.
            return (*show(handlers.reload(ctx, st), query, archived), *card[len(view_outputs):])
        try:
            view, text = edit(ctx, st, int(index), value)
        except (AnycodeError, IndexError, ValueError) as err:
            view, text = handlers.reload(ctx, st, notice=describe(err)), None
        run_id = None
        if text is not None:
            run_id, notice = handlers.take(ctx, tab_key(request, tab_id), text)
            notify(notice)
        return (*show(view, query, archived), _box(run_id), run_id, *no_card)

    def on_regenerate(tab_id, st, query, archived, evt: gr.LikeData, request: gr.Request):
        # Skips leave ``pending`` alone: the first of a doubled event may still be handing its
        # run over to the send that follows it (a stale id there is ignored by claim_run).
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if evt.liked not in i18n.variants(REGENERATE_OPTION) or repeated(st, int(index), ctx=ctx):  # Branch: own listener
            return tuple(gr.skip() for _ in range(skip))
        card = ask_first(st, "regenerate", index, None, query, archived)
        if card is not None:
            return card
        handlers.leave(ctx, tab_key(request, tab_id))
        try:
            view = regenerate(ctx, st, int(index))
        except (AnycodeError, IndexError, ValueError) as err:
            view = handlers.reload(ctx, st, notice=describe(err))
        if view is None:
            return tuple(gr.skip() for _ in range(skip))
        run_id = None
        if view.state.get("regen_guard"):
            run_id = handlers.take_retry(ctx, tab_key(request, tab_id))
        return (*show(view, query, archived), _box(run_id), run_id, *no_card)

    on_retry = _retry_handler(ctx, show=show, tab_key=tab_key, notify=notify, skip=skip, no_card=no_card,
                              ask_first=ask_first)
    outs = [*view_outputs, box, pending, *card_outs]
    send_inputs = [state, pending, model, tab, search, show_archived]
    for event, fn in ((chat.edit, on_edit), (chat.like, on_regenerate), (chat.retry, on_retry)):
        after_turn(event(fn, [tab, state, search, show_archived], outs, concurrency_limit=1,
                         **STREAM_ARGS).then(on_send, send_inputs, view_outputs, **STREAM_ARGS).then(
            on_sent, [tab, pending, box], box, **STREAM_ARGS))
    if not rewind_parts:
        return

    def on_answer(mode):
        def answer(tab_id, st, target, chosen, query, archived, request: gr.Request):
            if not isinstance(target, dict):  # Rewind to here's own card: webui.gui.rewind_card
                return tuple(gr.skip() for _ in range(skip))
            key = tab_key(request, tab_id)
            handlers.leave(ctx, key)
            view, text = rewind.replace_turn(ctx, st, target, mode, list(chosen or []))
            if view is None:
                return tuple(gr.skip() for _ in range(skip))
            run_id = None
            if text is not None:
                run_id, notice = handlers.take(ctx, key, text)
                notify(notice)
            elif view.state.get("regen_guard"):
                run_id = handlers.take_retry(ctx, key)
            return (*show(view, query, archived), _box(run_id), run_id, *rewind_card.hidden_card())
        return answer

    for mode in ("both", "conversation"):
        after_turn(rewind_parts[mode].click(
            on_answer(mode), [tab, state, rewind_parts["target"], rewind_parts["outside"], search, show_archived],
            outs, concurrency_limit=1, **STREAM_ARGS).then(on_send, send_inputs, view_outputs, **STREAM_ARGS).then(
            on_sent, [tab, pending, box], box, **STREAM_ARGS))


def _retry_handler(ctx: WebContext, *, show: Callable[..., tuple], tab_key: Callable[..., str],
                   notify: Callable[..., None], skip: int, no_card: tuple = (),
                   ask_first: Callable[..., Any] = lambda *a: None) -> Callable[..., tuple]:
    """The chat's own Retry (under the last reply): Regenerate of that reply (first the rewind
    card when that reply changed files: ``ask_first``), or, when the last message has no stored
    answer (its reply failed), answering it again in place."""

    def regenerate_last(st, key, current):
        if repeated(st, len(current.rows) - 1, ctx=ctx):  # the same click delivered twice
            return None, None
        handlers.leave(ctx, key)
        view = regenerate(ctx, st, len(current.rows) - 1)
        return view, (handlers.take_retry(ctx, key) if view is not None and view.state.get("regen_guard") else None)

    def on_retry(tab_id, st, query, archived, request: gr.Request):
        key = tab_key(request, tab_id)
        try:
            current = handlers.reload(ctx, st)
            if current.needs_reply:
                view, run_id = current, handlers.take_retry(ctx, key)
                notify(None if run_id else handlers.BUSY_NOTICE)
            else:
                card = None if repeated(st, len(current.rows) - 1, ctx=ctx) else ask_first(
                    st, "regenerate", len(current.rows) - 1, None, query, archived)
                if card is not None:
                    return card
                view, run_id = regenerate_last(st, key, current)
        except (AnycodeError, IndexError, ValueError) as err:
            view, run_id = handlers.reload(ctx, st, notice=describe(err)), None
        if view is None:
            return tuple(gr.skip() for _ in range(skip))
        return (*show(view, query, archived), _box(run_id), run_id, *no_card)

    return on_retry
