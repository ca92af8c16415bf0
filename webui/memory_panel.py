"""The Memory panel and the "Memory updated" toast (issue 14).

The sidebar's **Memory** button opens a panel above the chat: the memories of the open project
and the user's (grouped by scope, most recent first), each with who wrote it, when, a link to the
conversation it came from, **Edit** and **Delete**; a box to add one (this project or every
project); the **Automatic memory** switch (:func:`core.memory.mode.set_automatic`). After a reply,
the panel's timer looks for memories the model just added from this conversation and shows
"Memory updated" with **Undo** (which removes them).

Plain functions (:func:`panel_html`, :func:`add_memory`, :func:`edit_memory`,
:func:`delete_memory`, :func:`new_model_memories`, :func:`undo`) are tested without a browser;
:func:`add_memory_panel` places the components and wires them. Memory text is chat-derived, so
it is escaped (``html.escape``) before it is put in the page.
"""
from __future__ import annotations

import html
import json
import logging
import time
from typing import Any, Callable

from core.errors import AnycodeError
from core.memory.mode import env_mode, memory_mode, set_automatic
from core.memory.model import Memory
from core.memory.store import MemoryStore
from webui.i18n import t, tn
from webui.error_text import describe
from webui.i18n_ui import tr
from webui.timefmt import relative_time

log = logging.getLogger(__name__)

WATCH_SECONDS = 30.0  # how long after a reply the toast may still appear (the job is in flight)
POLL_SECONDS = 1.5
SCOPE_TITLES = {"project": "memory_scope_project", "user": "memory_scope_user"}  # catalogue keys

# Clicks on an item's buttons become a ``select`` event carrying {"do", "id", "sid", "pk"} as JSON.
PANEL_JS = """
element.addEventListener('click', (e) => {
  const btn = e.target.closest('[data-do]');
  if (!btn) return;
  const item = btn.closest('[data-mid]');
  const d = {do: btn.dataset.do, id: item ? item.dataset.mid : '', sid: btn.dataset.sid || '', pk: btn.dataset.pk || ''};
  if (d.do === 'delete' && !window.confirm(btn.dataset.confirm || 'Delete?')) return;
  trigger('select', {index: 0, value: JSON.stringify(d)});
});
"""


def _data_dir(ctx: Any) -> Any:
    return getattr(ctx.store, "base_dir", None)


def memories_of(ctx: Any) -> MemoryStore:
    """The memory store beside the app's session store."""
    return MemoryStore.for_store(ctx.store)


def _item_html(m: Memory, titles: dict[str, str], now: float) -> str:
    meta = [t("memory_added_by_assistant") if m.source == "model" else t("memory_added_by_you"),
            relative_time(m.updated_at, now)]
    link = ""
    if m.session_id:
        name = titles.get(m.session_id) or t("memory_a_conversation")
        link = (f' · <button class="ac-mem-link" data-do="open" data-sid="{html.escape(m.session_id)}" '
                f'data-pk="{html.escape(m.session_project or m.project_key or "")}">{html.escape(t("memory_from", name=name))}</button>')
    return (f'<li class="ac-mem" data-mid="{html.escape(m.id)}"><div class="ac-mem-text">{html.escape(m.text)}</div>'
            f'<div class="ac-mem-meta">{" · ".join(html.escape(x) for x in meta)}{link}'
            f'<span class="ac-mem-actions"><button data-do="edit">{html.escape(t("edit"))}</button>'
            f'<button data-do="delete" data-confirm="{html.escape(t("memory_delete_confirm"))}">'
            f'{html.escape(t("delete"))}</button></span></div></li>')


def panel_html(ctx: Any, project_key: str, now: float | None = None) -> str:
    """The panel's list for ``project_key``: one section per scope (project first), each memory
    with its source, age, origin link and buttons; a sentence when there are none."""
    now = time.time() if now is None else now
    try:
        memories = memories_of(ctx).list(project_key)
    except AnycodeError as err:
        return f'<div class="ac-mem-empty">{html.escape(describe(err))}</div>'
    if not memories:
        return f'<div class="ac-mem-empty">{html.escape(t("memory_none"))}</div>'
    titles = {}
    try:
        for meta in ctx.manager.list(project_key) + ctx.manager.list(project_key, archived=True):
            titles[meta.id] = meta.title or ""
    except AnycodeError:
        pass
    out = []
    for scope in ("project", "user"):
        group = [m for m in memories if m.scope == scope]
        if group:
            out.append(f'<h4>{html.escape(t(SCOPE_TITLES[scope]))} <span>{len(group)}</span></h4><ul>'
                       + "".join(_item_html(m, titles, now) for m in group) + "</ul>")
    return "".join(out)


def add_memory(ctx: Any, project_key: str, text: str, scope: str) -> tuple[str, bool]:
    """Add a memory typed in the panel; ``(sentence, ok)``."""
    try:
        m = memories_of(ctx).add(text, scope="user" if scope == "user" else "project", project_key=project_key)
    except AnycodeError as err:
        return describe(err), False
    return t("memory_remembered", text=m.text), True


def edit_memory(ctx: Any, project_key: str, memory_id: str, text: str) -> tuple[str, bool]:
    """Change a memory's text; ``(sentence, ok)``."""
    try:
        memories_of(ctx).update(memory_id, text, project_key=project_key)
    except AnycodeError as err:
        return describe(err), False
    return t("memory_updated_notice"), True


def delete_memory(ctx: Any, project_key: str, memory_id: str) -> tuple[str, bool]:
    """Remove a memory for good; ``(sentence, ok)``."""
    try:
        m = memories_of(ctx).remove(memory_id, project_key=project_key)
    except AnycodeError as err:
        return describe(err), False
    return t("memory_deleted", text=m.text), True


def new_model_memories(ctx: Any, session_id: str | None, project_key: str, since: float,
                       seen: list[str]) -> list[Memory]:
    """Memories the model added from conversation ``session_id`` since ``since`` (Unix seconds)
    whose ids are not in ``seen`` (already announced)."""
    if not session_id:
        return []
    try:
        return [m for m in memories_of(ctx).list(project_key) if m.source == "model" and m.session_id == session_id
                and m.created_at >= since and m.id not in seen]
    except AnycodeError as err:
        log.info("memory toast: %s", err)
        return []


def undo(ctx: Any, project_key: str, ids: list[str]) -> str:
    """Remove the memories ``ids`` (the toast's Undo); a sentence saying so."""
    done = 0
    for mid in ids:
        try:
            memories_of(ctx).remove(mid, project_key=project_key)
            done += 1
        except AnycodeError as err:
            log.info("undo of memory %s: %s", mid, err)
    return tn("memory_removed", done) if done else t("memory_nothing_to_undo")


def toast_markdown(memories: list[Memory]) -> str:
    """The toast's text: "Memory updated" and the facts (escaped)."""
    facts = "; ".join(html.escape(m.text) for m in memories)
    return t("memory_toast", facts=facts)


def switch_state(ctx: Any) -> tuple[bool, bool, str]:
    """``(checked, interactive, info)`` of the Automatic memory switch."""
    if env_mode() == "off":
        return False, False, t("memory_off")
    mode = memory_mode(_data_dir(ctx))
    return mode == "auto", True, t("memory_auto_info" if mode == "auto" else "memory_manual_info")


def scope_choices() -> list[tuple[str, str]]:
    """The scope picker's choices in the request's language."""
    return [(t("memory_scope_project"), "project"), (t("memory_every_project"), "user")]


def add_memory_panel(ctx: Any, gr: Any, *, button_slot: Any, panel_slot: Any, state: Any, search: Any,
                     show_archived: Any, tab: Any, show: Callable[..., tuple], switching: Callable[..., Any],
                     switch: dict[str, Any], idle_box: Callable[[], Any], notify: Callable[..., None]) -> Any:
    """Place the Memory button (in ``button_slot``, the sidebar) and the panel (in
    ``panel_slot``, a hidden column of the main pane), and wire them. ``show``, ``switching``,
    ``switch`` and ``idle_box`` are the app's own, so an origin link opens the conversation as
    the sidebar does. Returns the panel's list component."""
    with button_slot:
        open_btn = gr.Button(tr("memory"), size="sm", variant="secondary", elem_id="ac-memory-open")
    with panel_slot:
        with gr.Row(equal_height=True):
            gr.Markdown(tr("memory_heading"), elem_id="ac-memory-title")
            checked, interactive, info = switch_state(ctx)
            auto = gr.Checkbox(label=tr("memory_automatic"), value=checked, interactive=interactive, info=info,
                               elem_id="ac-memory-auto", scale=0, min_width=220)
            close_btn = gr.Button(tr("close"), size="sm", scale=0, min_width=70, elem_id="ac-memory-close")
        listing = gr.HTML("", js_on_load=PANEL_JS, elem_id="ac-memory-list")
        with gr.Row(equal_height=True):
            new_text = gr.Textbox(placeholder=tr("memory_add_placeholder"), show_label=False,
                                  container=False, scale=5, elem_id="ac-memory-new", max_lines=3)
            scope = gr.Dropdown(choices=scope_choices(), value="project",
                                show_label=False, container=False, scale=1, min_width=140, elem_id="ac-memory-scope")
            add_btn = gr.Button(tr("add"), size="sm", variant="primary", scale=0, min_width=70, elem_id="ac-memory-add")
        with gr.Row(visible=False, equal_height=True, elem_id="ac-memory-editor") as editor:
            edit_text = gr.Textbox(show_label=False, container=False, scale=5, elem_id="ac-memory-edit", max_lines=3)
            save_btn = gr.Button(tr("save"), size="sm", variant="primary", scale=0, min_width=70, elem_id="ac-memory-save")
            cancel_btn = gr.Button(tr("cancel"), size="sm", scale=0, min_width=70, elem_id="ac-memory-cancel")
        editing = gr.State(None)  # id of the memory being edited
    with gr.Row(visible=False, elem_id="ac-memory-toast") as toast:
        toast_text = gr.Markdown("", elem_id="ac-memory-toast-text")
        undo_btn = gr.Button(tr("undo"), size="sm", scale=0, min_width=70, elem_id="ac-memory-undo")
        dismiss_btn = gr.Button("✕", size="sm", scale=0, min_width=40, elem_id="ac-memory-dismiss")
    watch = gr.State(None)  # {"session", "since", "until", "seen": [...], "shown": [...]}
    timer = gr.Timer(POLL_SECONDS, active=False)

    def project_of(st: Any) -> str:
        return (st or {}).get("project") or ctx.project_key

    def on_open(st):
        return gr.Column(visible=True), panel_html(ctx, project_of(st)), gr.Checkbox(**dict(zip(
            ("value", "interactive", "info"), switch_state(ctx)))), gr.Dropdown(choices=scope_choices())

    open_btn.click(on_open, state, [panel_slot, listing, auto, scope], api_visibility="private")
    close_btn.click(lambda: gr.Column(visible=False), None, panel_slot, api_visibility="private")

    def on_add(st, text, where):
        sentence, ok = add_memory(ctx, project_of(st), text or "", where)
        notify(sentence, "info" if ok else "warning")
        return (gr.Textbox(value="") if ok else gr.skip()), panel_html(ctx, project_of(st))

    add_btn.click(on_add, [state, new_text, scope], [new_text, listing], api_visibility="private")
    new_text.submit(on_add, [state, new_text, scope], [new_text, listing], api_visibility="private")

    def on_auto(enabled):
        try:
            set_automatic(bool(enabled), _data_dir(ctx))
        except OSError as err:
            notify(t("memory_switch_not_saved", error=err))
        checked_now, _, info_now = switch_state(ctx)
        return gr.Checkbox(value=checked_now, info=info_now)

    auto.input(on_auto, auto, auto, api_visibility="private")

    def on_open_origin(st, query, archived, evt: gr.SelectData):
        try:
            data = json.loads(evt.value)
            view = handlers_open(data.get("pk") or project_of(st), str(data["sid"]))
        except (TypeError, ValueError, KeyError):
            return tuple(gr.skip() for _ in switch["outputs"])
        except AnycodeError as err:
            notify(t("conversation_gone", error=err))
            return tuple(gr.skip() for _ in switch["outputs"])
        return (*show(view, query, archived), idle_box())

    def handlers_open(project: str, sid: str) -> Any:
        from webui import handlers

        return handlers.open_session(ctx, project, sid)

    # Real classes, not the strings `from __future__ import annotations` leaves (gr is a
    # parameter here, so Gradio could not resolve them and would not pass the event data).
    on_open_origin.__annotations__ = {"evt": gr.SelectData}
    opener = switching(on_open_origin)
    skip_view = tuple(gr.skip() for _ in switch["outputs"])

    def on_action(request: gr.Request, tab_id, st, query, archived, evt: gr.SelectData):
        project = project_of(st)
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

    on_action.__annotations__ = {"request": gr.Request, "evt": gr.SelectData}
    listing.select(on_action, [tab, state, search, show_archived],
                   [*switch["outputs"], listing, editor, edit_text, editing], api_visibility="private")

    def on_save(st, mid, text):
        sentence, ok = edit_memory(ctx, project_of(st), mid or "", text or "")
        notify(sentence, "info" if ok else "warning")
        if not ok:
            return gr.skip(), gr.skip(), gr.skip()
        return panel_html(ctx, project_of(st)), gr.Row(visible=False), None

    save_btn.click(on_save, [state, editing, edit_text], [listing, editor, editing], api_visibility="private")
    edit_text.submit(on_save, [state, editing, edit_text], [listing, editor, editing], api_visibility="private")
    cancel_btn.click(lambda: (gr.Row(visible=False), None), None, [editor, editing], api_visibility="private")

    # --- "Memory updated" toast ----------------------------------------------------------------
    def on_state(st, w):
        # Every settled reply changes the tab's state: watch this conversation for a while.
        sid = (st or {}).get("session")
        if not sid:
            return gr.skip(), gr.Timer(active=False)
        now = time.time()
        w = dict(w or {})
        if w.get("session") != sid:
            # From a little before now: a quick memory job can finish before the page reports
            # the new conversation, and its memory would never be shown (seen as a flaky test).
            w = {"session": sid, "since": now - WATCH_SECONDS, "seen": [], "shown": []}
        w["until"] = now + WATCH_SECONDS
        return w, gr.Timer(active=True)

    state.change(on_state, [state, watch], [watch, timer], api_visibility="private", show_progress="hidden")

    def on_tick(st, w, panel_visible_html):
        w = dict(w or {})
        if not w.get("session") or time.time() > float(w.get("until") or 0):
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.Timer(active=False)
        found = new_model_memories(ctx, w["session"], project_of(st), float(w.get("since") or 0), w.get("seen") or [])
        if not found:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        w["seen"] = [*(w.get("seen") or []), *(m.id for m in found)]
        w["shown"] = [m.id for m in found]
        return w, gr.Row(visible=True), toast_markdown(found), panel_html(ctx, project_of(st)), gr.skip()

    timer.tick(on_tick, [state, watch, listing], [watch, toast, toast_text, listing, timer],
               api_visibility="private", show_progress="hidden")

    def on_undo(st, w):
        sentence = undo(ctx, project_of(st), list((w or {}).get("shown") or []))
        notify(sentence, "info")
        return gr.Row(visible=False), panel_html(ctx, project_of(st))

    undo_btn.click(on_undo, [state, watch], [toast, listing], api_visibility="private")
    dismiss_btn.click(lambda: gr.Row(visible=False), None, toast, api_visibility="private")
    return listing
