"""The Memory panel and the "Memory updated" toast on the page (issue 14; the plain functions are
:mod:`webui.chat.memory`).

:func:`build_memory_panel` places the components (the Memory button in the sidebar, the panel
above the chat, the toast), :func:`wire_memory_panel` and :func:`wire_memory_toast` bind their
events. ``show``, ``switching``, ``switch`` and ``idle_box`` are the app's own, so an origin link
opens the conversation as the sidebar does.
"""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from core.errors import AnycodeError
from webui.chat import handlers
from webui.chat.memory import (
    POLL_SECONDS,
    WATCH_SECONDS,
    add_memory,
    delete_memory,
    edit_memory,
    memories_of,
    answer_proposals,
    new_model_memories,
    panel_html,
    pending_proposals,
    proposal_markdown,
    scope_choices,
    set_automatic_memory,
    switch_state,
    toast_due,
    toast_markdown,
    toast_shown,
    undo,
    written_lately,
)
from webui.gui.assets import script, signal_answered
from webui.gui.i18n_ui import tr
from webui.i18n import t
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import WebContext

# Clicks on an item's buttons become a ``select`` event carrying {"do", "id", "sid", "pk"} as JSON.
PANEL_JS = script("memory_panel.js")


def build_memory_panel(ctx: WebContext, *, button_slot: Any, panel_slot: Any, toast_slot: Any) -> dict[str, Any]:
    """Place the Memory button (in ``button_slot``, the sidebar), the panel (in ``panel_slot``, a
    hidden column of the main pane) and the toast (in ``toast_slot``, under the chat: a bar the
    chat gives room to, never over its last message); returns the parts for the ``wire_*``
    functions."""
    parts: dict[str, Any] = {"panel": panel_slot}
    with button_slot:
        parts["open"] = gr.Button(tr("memory"), size="sm", variant="secondary", elem_id="ac-memory-open")
    with panel_slot:
        with gr.Row(elem_id="ac-memory-head"):  # not equal_height: Close stays a small button
            gr.Markdown(tr("memory_heading"), elem_id="ac-memory-title")
            checked, interactive, info = switch_state(ctx)
            parts["auto"] = gr.Checkbox(label=tr("memory_automatic"), value=checked, interactive=interactive,
                                        info=info, elem_id="ac-memory-auto", scale=0, min_width=220)
            parts["close"] = gr.Button(tr("close"), size="sm", scale=0, min_width=70, elem_id="ac-memory-close")
        parts["listing"] = gr.HTML("", js_on_load=PANEL_JS, elem_id="ac-memory-list")
        with gr.Row(equal_height=True):
            parts["new_text"] = gr.Textbox(placeholder=tr("memory_add_placeholder"), show_label=False,
                                           container=False, scale=5, elem_id="ac-memory-new", max_lines=3)
            parts["scope"] = gr.Dropdown(choices=scope_choices(), value="project", show_label=False,
                                         container=False, scale=1, min_width=140, elem_id="ac-memory-scope")
            parts["add"] = gr.Button(tr("add"), size="sm", variant="primary", scale=0, min_width=70,
                                     elem_id="ac-memory-add")
        with gr.Row(visible=False, equal_height=True, elem_id="ac-memory-editor") as parts["editor"]:
            parts["edit_text"] = gr.Textbox(show_label=False, container=False, scale=5, elem_id="ac-memory-edit",
                                            max_lines=3)
            parts["save"] = gr.Button(tr("save"), size="sm", variant="primary", scale=0, min_width=70,
                                      elem_id="ac-memory-save")
            parts["cancel"] = gr.Button(tr("cancel"), size="sm", scale=0, min_width=70, elem_id="ac-memory-cancel")
        parts["editing"] = gr.State(None)  # id of the memory being edited
    with toast_slot, gr.Row(visible=False, elem_id="ac-memory-toast", equal_height=True) as parts["toast"]:
        parts["toast_text"] = gr.Markdown("", elem_id="ac-memory-toast-text")
        parts["undo"] = gr.Button(tr("undo"), size="sm", scale=0, min_width=70, elem_id="ac-memory-undo")
        parts["dismiss"] = gr.Button("✕", size="sm", scale=0, min_width=40, elem_id="ac-memory-dismiss")
    with gr.Row(visible=False, elem_id="ac-memory-proposal") as parts["proposal"]:
        parts["proposal_text"] = gr.Markdown("", elem_id="ac-memory-proposal-text")
        parts["keep"] = gr.Button(tr("memory_remember"), size="sm", variant="primary", scale=0, min_width=90,
                                  elem_id="ac-memory-keep")
        parts["decline"] = gr.Button(tr("memory_dont_remember"), size="sm", scale=0, min_width=90,
                                     elem_id="ac-memory-decline")
    parts["watch"] = gr.State(None)  # {"session", "since", "until", "seen": [...], "shown": [...], "asked": [...]}
    parts["timer"] = gr.Timer(POLL_SECONDS, active=False)
    return parts


def _project_of(ctx: WebContext, st: Any) -> str:
    return (st or {}).get("project") or ctx.project_key


def wire_memory_panel(ctx: WebContext, parts: dict[str, Any], *, state: Any, search: Any, show_archived: Any,
                      tab: Any, show: Callable[..., tuple], switching: Callable[..., Any],
                      switch: dict[str, Any], idle_box: Callable[[], Any], notify: Callable[..., None]) -> None:
    """Open and close the panel, add a memory, the Automatic memory switch, and the items' own
    buttons (:func:`_wire_items`)."""
    listing, auto, scope = parts["listing"], parts["auto"], parts["scope"]

    def on_open(st):
        return gr.Column(visible=True), panel_html(ctx, _project_of(ctx, st)), gr.Checkbox(**dict(zip(
            ("value", "interactive", "info"), switch_state(ctx)))), gr.Dropdown(choices=scope_choices())

    parts["open"].click(on_open, state, [parts["panel"], listing, auto, scope], api_visibility="private")
    parts["close"].click(lambda: gr.Column(visible=False), None, parts["panel"], api_visibility="private")

    def on_add(st, text, where):
        sentence, ok = add_memory(ctx, _project_of(ctx, st), text or "", where)
        notify(sentence, "info" if ok else "warning")
        return (gr.Textbox(value="") if ok else gr.skip()), panel_html(ctx, _project_of(ctx, st))

    for event in (parts["add"].click, parts["new_text"].submit):
        event(on_add, [state, parts["new_text"], scope], [parts["new_text"], listing], api_visibility="private")

    def on_auto(enabled):
        notify(set_automatic_memory(ctx, bool(enabled)))
        checked_now, _, info_now = switch_state(ctx)
        return gr.Checkbox(value=checked_now, info=info_now)

    auto.input(on_auto, auto, auto, api_visibility="private")
    _wire_items(ctx, parts, state=state, search=search, show_archived=show_archived, tab=tab, show=show,
                switching=switching, switch=switch, idle_box=idle_box, notify=notify)


def _wire_items(ctx: WebContext, parts: dict[str, Any], *, state: Any, search: Any, show_archived: Any,
                tab: Any, show: Callable[..., tuple], switching: Callable[..., Any], switch: dict[str, Any],
                idle_box: Callable[[], Any], notify: Callable[..., None]) -> None:
    """An item's origin link (opens its conversation), Edit (the editor row) and Delete."""
    listing, editor, edit_text, editing = parts["listing"], parts["editor"], parts["edit_text"], parts["editing"]
    skip_view = tuple(gr.skip() for _ in switch["outputs"])

    def on_open_origin(st, query, archived, evt: gr.SelectData):
        try:
            data = json.loads(evt.value)
            view = handlers.open_session(ctx, data.get("pk") or _project_of(ctx, st), str(data["sid"]))
        except (TypeError, ValueError, KeyError):
            return skip_view
        except AnycodeError as err:
            notify(t("conversation_gone", error=err))
            return skip_view
        return (*show(view, query, archived), idle_box())

    opener = switching(on_open_origin)

    def on_action(request: gr.Request, tab_id, st, query, archived, evt: gr.SelectData):
        project = _project_of(ctx, st)
        try:
            data = json.loads(evt.value)
        except (TypeError, ValueError):
            return (*skip_view, gr.skip(), gr.skip(), gr.skip(), gr.skip())
        if data.get("do") == "open":
            # Through the app's `switching`: a reply running in this tab is stopped first, as
            # when a conversation is picked in the sidebar. Edit and delete never touch the chat.
            return (*opener(request, tab_id, st, query, archived, evt), gr.skip(), gr.skip(), gr.skip(), gr.skip())
        if data.get("do") == "edit":
            try:
                m = memories_of(ctx).get(str(data.get("id")), project)
            except AnycodeError as err:
                notify(describe(err))
                return (*skip_view, panel_html(ctx, project), gr.skip(), gr.skip(), gr.skip())
            return (*skip_view, gr.skip(), gr.Row(visible=True), m.text, m.id)
        if data.get("do") == "delete":
            sentence, ok = delete_memory(ctx, project, str(data.get("id")))
            notify(sentence, "info" if ok else "warning")
            return (*skip_view, panel_html(ctx, project), gr.Row(visible=False), gr.skip(), None)
        return (*skip_view, gr.skip(), gr.skip(), gr.skip(), gr.skip())

    # One action on its way at a time (assets/js/memory_panel.js queues the others): "multiple" only
    # so that a queued click is never dropped should Gradio say "answered" a moment early.
    done = listing.select(on_action, [tab, state, search, show_archived],
                          [*switch["outputs"], listing, editor, edit_text, editing], api_visibility="private",
                          trigger_mode="multiple")
    signal_answered(done, "ac-memory-done")

    def on_save(st, mid, text):
        sentence, ok = edit_memory(ctx, _project_of(ctx, st), mid or "", text or "")
        notify(sentence, "info" if ok else "warning")
        if not ok:
            return gr.skip(), gr.skip(), gr.skip()
        return panel_html(ctx, _project_of(ctx, st)), gr.Row(visible=False), None

    for event in (parts["save"].click, edit_text.submit):
        event(on_save, [state, editing, edit_text], [listing, editor, editing], api_visibility="private")
    parts["cancel"].click(lambda: (gr.Row(visible=False), None), None, [editor, editing], api_visibility="private")


def wire_memory_toast(ctx: WebContext, parts: dict[str, Any], *, state: Any, notify: Callable[..., None],
                      listen: Callable[..., None]) -> None:
    """"Memory updated" with **Undo**: after a reply the timer looks for memories the model just
    added from this conversation (for :data:`WATCH_SECONDS`)."""
    watch, timer, toast, listing = parts["watch"], parts["timer"], parts["toast"], parts["listing"]

    def on_state(st, w):
        # Every settled reply changes the tab's state: watch this conversation for a while.
        sid = (st or {}).get("session")
        w = dict(w or {})
        # "Memory updated" (and its Undo) belongs to the chat whose reply made the memory: it
        # goes when another chat is opened (trial 14: it stayed over an unrelated old chat).
        leaving = bool(w.get("toast_until")) and w.get("session") != sid
        bar = gr.Row(visible=False) if leaving else gr.skip()
        if leaving:
            w.pop("toast_until", None)
        if not sid:
            return (w if leaving else gr.skip()), gr.Timer(active=False), bar
        now = time.time()
        if w.get("session") != sid:
            # From a little before now: a quick memory job can finish before the page reports
            # the new conversation, and its memory would never be shown (seen as a flaky test).
            w = {"session": sid, "since": now - WATCH_SECONDS, "seen": [], "shown": []}
        if not written_lately(ctx, st, now):
            # Opened, not written: no memory job is adding memories here, so no poll (issue 32).
            w["until"] = max(now, float(w.get("toast_until") or 0))  # a bar shown here still leaves by itself
            return w, gr.Timer(active=bool(w.get("toast_until"))), bar
        w["until"] = now + WATCH_SECONDS
        return w, gr.Timer(active=True), bar

    listen(on_state, [state, watch], [watch, timer, toast])  # follows the tab's state (webui.gui.state_hub)

    def on_tick(st, w, panel_visible_html):
        w = dict(w or {})
        now = time.time()
        gone: Any = gr.skip()
        kept: Any = gr.skip()  # the watch is written back only when this tick changed it
        if toast_due(w, now):  # the bar leaves by itself
            w.pop("toast_until", None)
            gone, kept = gr.Row(visible=False), w
        if not w.get("session") or now > float(w.get("until") or 0):
            return kept, gone, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.Timer(active=False)
        project = _project_of(ctx, st)
        found = new_model_memories(ctx, w["session"], project, float(w.get("since") or 0), w.get("seen") or [])
        asked = pending_proposals(ctx, w["session"], project)
        new_asks = [m.id for m in asked] != list(w.get("asked") or [])
        if not found and not new_asks:
            return kept, gone, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        w["asked"] = [m.id for m in asked]
        toast_out: tuple[Any, Any] = (gone, gr.skip())
        if found:
            w["seen"] = [*(w.get("seen") or []), *(m.id for m in found)]
            w["shown"] = [m.id for m in found]
            w = toast_shown(w, now)
            toast_out = (gr.Row(visible=True), toast_markdown(found))
        card = (gr.Row(visible=bool(asked)), proposal_markdown(asked) if asked else "") if new_asks else (gr.skip(), gr.skip())
        return (w, *toast_out, *card, panel_html(ctx, project) if found else gr.skip(), gr.skip())

    timer.tick(on_tick, [state, watch, listing],
               [watch, toast, parts["toast_text"], parts["proposal"], parts["proposal_text"], listing, timer],
               api_visibility="private", show_progress="hidden")

    def on_answer(keep):
        def answer(st, w):
            w = dict(w or {})
            sentence = answer_proposals(ctx, _project_of(ctx, st), list(w.get("asked") or []), keep=keep)
            w["asked"] = []
            notify(sentence, "info")
            return w, gr.Row(visible=False), panel_html(ctx, _project_of(ctx, st))
        return answer

    parts["keep"].click(on_answer(True), [state, watch], [watch, parts["proposal"], listing], api_visibility="private")
    parts["decline"].click(on_answer(False), [state, watch], [watch, parts["proposal"], listing],
                           api_visibility="private")

    def on_undo(st, w):
        sentence = undo(ctx, _project_of(ctx, st), list((w or {}).get("shown") or []))
        notify(sentence, "info")
        return gr.Row(visible=False), panel_html(ctx, _project_of(ctx, st))

    parts["undo"].click(on_undo, [state, watch], [toast, listing], api_visibility="private")
    parts["dismiss"].click(lambda: gr.Row(visible=False), None, toast, api_visibility="private")
