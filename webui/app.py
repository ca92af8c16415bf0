"""The Gradio Blocks of the anycode web UI: sidebar of sessions, chat pane, launch settings.

Thin wiring only: every action calls a function of :mod:`webui.handlers` and maps its plain
result onto components. Per tab, ``gr.State`` holds ids and a message count (never history);
the conversation itself is always re-read from the store.
"""
from __future__ import annotations

# isort: off
from webui import offline  # noqa: F401  (sets the offline environment before Gradio is imported)
from webui.error_text import describe
# isort: on

import html
import inspect
import logging
import uuid
from importlib import resources
from typing import Any

import gradio as gr

from core.errors import AnycodeError, SessionNotFound
from webui import (approval_card, archived_chat, compaction_ui, handlers, i18n, i18n_ui, import_panel,
                   memory_panel, narrow, notice_place, project_move, render, search_panel, shortcuts, subagent_panel,
                   theme_switch, title_push, versions)
from webui.i18n import t
from webui.i18n_ui import tr
from webui import chat_text
from webui.context import WebContext
from webui.handlers import SessionView

log = logging.getLogger(__name__)

BRANCH_OPTION = i18n.Msg("branch_from_here")
TITLE_POLL_SECONDS = 1.5
# The chat fills the window under the top bar and above the input box (it scrolls, the page not).
CHAT_HEIGHT = "calc(100vh - 200px)"

# Clicks on a session row become a ``select`` event carrying the row's session id. The listener
# sits on the component's root, so it keeps working after the list is re-rendered.
SESSION_LIST_JS = """
element.addEventListener('click', (e) => {
  if (e.target.closest('[data-more]')) { trigger('expand', {}); return; }
  const row = e.target.closest('[data-sid]');
  if (!row) return;
  element.querySelectorAll('.ac-session.active').forEach((x) => x.classList.remove('active'));
  row.classList.add('active');
  trigger('select', {index: row.dataset.sid, value: row.dataset.sid});
});
// The next page of the list when its "Show more" row scrolls into view (once per page).
let asked = null;
document.addEventListener('scroll', () => {
  const more = element.querySelector('[data-more]');
  if (!more || more === asked) return;
  const r = more.getBoundingClientRect();
  if (r.top < window.innerHeight + 200 && r.bottom > 0) { asked = more; trigger('expand', {}); }
}, true);
"""

# A long conversation opens on its latest messages; scrolled to its top, the earlier ones come.
EARLIER_ON_SCROLL_JS = """
() => {
  document.addEventListener('scroll', (e) => {
    const chat = document.getElementById('ac-chat');
    const btn = document.querySelector('#ac-earlier');
    if (!chat || !btn || btn.offsetParent === null || !chat.contains(e.target)) return;
    if (e.target.scrollTop <= 0 && Date.now() - (btn._asked || 0) > 1500) { btn._asked = Date.now(); btn.click(); }
  }, true);
  return [];
}
"""

# "Branch from here" sits in a menu Gradio opens on hover, so it stayed open under the pointer
# after the click. Close it until the pointer has left the menu.
CLOSE_BRANCH_MENU_JS = """
() => {
  const chat = document.getElementById('ac-chat');
  if (!chat) return [];
  chat.classList.add('ac-menu-closed');
  const reopen = (e) => {
    if (e.target.closest && e.target.closest('#ac-chat .extra-feedback')) return;
    chat.classList.remove('ac-menu-closed');
    document.removeEventListener('mouseover', reopen, true);
  };
  document.addEventListener('mouseover', reopen, true);
  return [];
}
"""

# Keep ``?session=<id>`` in the address bar in step with the open session (reload and bookmarks
# reopen it). replaceState: switching chats should not fill the back-button history.
URL_SYNC_JS = """
(sid) => {
  const url = new URL(window.location.href);
  if (sid) { url.searchParams.set('session', sid); } else { url.searchParams.delete('session'); }
  if (url.toString() !== window.location.href) { window.history.replaceState(null, '', url.toString()); }
  return sid;
}
"""


def asset_text(name: str) -> str:
    """Text of a file of the ``assets`` package (found through the package, not the cwd)."""
    return resources.files("assets").joinpath(name).read_text(encoding="utf-8")


def asset_path(name: str) -> str:
    """A filesystem path of an ``assets`` file (Gradio's favicon and button icons want paths)."""
    return str(resources.files("assets").joinpath(name))


def theme() -> gr.themes.Base:
    """A quiet, neutral theme with system fonts (no web fonts: the app runs offline)."""
    fonts = ["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue",
             "Arial", "sans-serif"]
    mono = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]
    base = gr.themes.Base(primary_hue=gr.themes.colors.emerald, neutral_hue=gr.themes.colors.zinc,
                          radius_size=gr.themes.sizes.radius_lg, font=fonts, font_mono=mono)
    # Readable in both themes (WCAG AA, issue 18): white on emerald-500 buttons was 2.5:1, the
    # subdued grey of hints and version arrows 1.9:1 on white.
    return base.set(button_primary_background_fill="*primary_700", button_primary_background_fill_hover="*primary_800",
                    button_primary_background_fill_dark="*primary_700",
                    button_primary_background_fill_hover_dark="*primary_800",
                    body_text_color_subdued="*neutral_500", body_text_color_subdued_dark="*neutral_400")


TOAST_SECONDS = 4  # toasts sit over the top bar's buttons: keep them short


def _notify(notice: str | None, level: str = "warning") -> None:
    if notice:
        toast = gr.Info if level == "info" else gr.Warning
        toast(html.escape(i18n.localize(notice)), title="anycode", duration=TOAST_SECONDS)


def build_app(ctx: WebContext) -> gr.Blocks:
    """Build the Blocks for ``ctx``. Launch it with :func:`launch_kwargs` (theme, CSS, privacy
    settings belong to ``launch()`` in Gradio 6)."""
    with gr.Blocks(title="anycode", fill_height=True, fill_width=True) as demo:
        state = gr.State(None)  # handlers.tab_state(...): ids and a count
        tab = gr.State(None)  # this tab's token, names its runs (Stop, switching) in ctx
        pending = gr.State(None)  # id of the run the input box just handed over (ctx holds it)

        with gr.Sidebar(width=290, open=True, elem_id="ac-sidebar"):
            gr.HTML(f'<div class="ac-brand">{asset_text("icon.svg")}<span>anycode</span></div>',
                    js_on_load=None, elem_id="ac-brand")
            new_btn = gr.Button(tr("new_chat"), icon=asset_path("new-chat.svg"), elem_id="ac-new",
                                variant="secondary", size="md")
            search = gr.Textbox(placeholder=tr("search_chats"), show_label=False, container=False,
                                elem_id="ac-search")
            search_slot = gr.Column(elem_id="ac-search-slot")  # message search results (search_panel)
            sessions = gr.HTML("", js_on_load=SESSION_LIST_JS, elem_id="ac-list")
            with gr.Column(elem_id="ac-sidebar-foot"):
                show_archived = gr.Checkbox(label=tr("show_archived"), value=False,
                                            elem_id="ac-archived")
                project = gr.Dropdown(label=tr("project"), choices=[], value=None,
                                      elem_id="ac-project", interactive=True)
                ask_switch = approval_card.add_switch(ctx, gr)
                # Only with a mirrored store: without one there is no line and no polling.
                mirror_line = (gr.HTML("", elem_id="ac-mirror")
                               if handlers.has_mirror(ctx) else None)
                import_foot = gr.Column(elem_id="ac-import-foot")
                memory_foot = gr.Column(elem_id="ac-memory-foot")  # the Memory button (memory_panel)
                i18n_ui.add_language_setting(demo)
                # the theme switch and the keyboard shortcuts' help (issue 18)
                prefs = gr.HTML(page_prefs_html(), js_on_load=theme_switch.SWITCH_JS, elem_id="ac-prefs")

        with gr.Column(elem_id="ac-main"):
            with gr.Row(elem_id="ac-topbar", equal_height=True):
                title = gr.Textbox(placeholder=tr("new_chat"), show_label=False, container=False,
                                   elem_id="ac-title", scale=5, max_lines=1)
                model = gr.Dropdown(choices=[], value=None, show_label=False, container=False,
                                    allow_custom_value=True, elem_id="ac-model", scale=2,
                                    min_width=150)
                meter = gr.HTML("", elem_id="ac-meter-box", scale=0, min_width=110)  # context used (issue 9)
                compact_btn = gr.Button(tr("compact"), size="sm", elem_id="ac-compact", scale=0, min_width=90,
                                        interactive=False)  # enabled once there is something to compact
                archive_btn = gr.Button(tr("archive"), size="sm", elem_id="ac-archive",
                                        scale=0, min_width=90, interactive=False)
                md_btn = gr.DownloadButton("Markdown", size="sm", elem_id="ac-export-md",
                                           scale=0, min_width=96, interactive=False)
                jl_btn = gr.DownloadButton("JSONL", size="sm", elem_id="ac-export-jsonl",
                                           scale=0, min_width=80, interactive=False)
                delete_btn = gr.Button(tr("delete"), size="sm", variant="stop", elem_id="ac-delete",
                                       scale=0, min_width=80, interactive=False)
            with gr.Row(visible=False, elem_id="ac-confirm") as confirm_row:
                gr.Markdown(tr("delete_confirm"))
                confirm_btn = gr.Button(tr("delete_permanently"), variant="stop", size="sm",
                                        elem_id="ac-confirm-delete", scale=0, min_width=150)
                cancel_btn = gr.Button(tr("cancel"), size="sm", elem_id="ac-cancel-delete",
                                       scale=0, min_width=90)
            banner = gr.Markdown(visible=False, elem_id="ac-banner")
            memory_slot = gr.Column(visible=False, elem_id="ac-memory")  # the Memory panel (memory_panel)
            # A stored user message without an answer (the app was killed mid-reply, or the
            # model failed): say so and offer to answer it again.
            with gr.Row(visible=False, elem_id="ac-noreply", equal_height=True) as noreply_row:
                gr.Markdown(tr(handlers.NO_REPLY_NOTICE.key), elem_id="ac-noreply-text")
                retry_btn = gr.Button(tr("retry"), size="sm", elem_id="ac-retry", scale=0,
                                      min_width=80)
            earlier_btn = gr.Button(tr("show_earlier"), visible=False, size="sm", variant="secondary",
                                    elem_id="ac-earlier")
            version_bar = versions.bar()  # ‹ n / m › when the conversation has versions
            chat = gr.Chatbot(
                elem_id="ac-chat", show_label=False, height=CHAT_HEIGHT,
                layout="bubble", buttons=["copy"], editable="user",
                feedback_options=[BRANCH_OPTION, versions.REGENERATE_OPTION],
                like_user_message=True, group_consecutive_messages=False,
                placeholder="<div class='ac-hello'>\n\n" + tr("chat_placeholder") + "\n\n</div>",
            )
            approval_parts = approval_card.add_card(ctx, gr)  # hidden until a change waits
            archived_bar = archived_chat.add_bar(gr)  # "This chat is archived" + Unarchive
            box = gr.Textbox(placeholder=tr("message_placeholder"), show_label=False, lines=1,
                             max_lines=10, submit_btn=True, stop_btn=False, autofocus=True,
                             elem_id="ac-input", container=False)
            gr.HTML("<div class='ac-footnote'>" + tr("footnote") + "</div>", js_on_load=None)
        sid_box = gr.Textbox(visible="hidden", elem_id="ac-sid")  # mirrors the id into the URL
        timer = gr.Timer(TITLE_POLL_SECONDS, active=False)

        view_outputs = [state, title, chat, sessions, sid_box, archive_btn, delete_btn, md_btn,
                        jl_btn, timer, confirm_row, noreply_row]
        can_retry = ctx.client() is not None  # without a model the banner says what to do

        def show(view: SessionView, query: str, archived: bool) -> tuple:
            """Component values for a view, in ``view_outputs`` order."""
            _notify(view.notice, view.notice_level)
            saved = bool(view.session_id)
            label = i18n.localize(view.label)
            md, jl = handlers.exports(ctx, view.state) if saved else (None, None)
            return (
                view.state,
                gr.Textbox(value=view.title, placeholder=label if saved else t("new_chat")),
                view.rows,
                handlers.session_list_html(ctx, view.state["project"], query=query or "",
                                           archived=bool(archived), active=view.session_id),
                view.session_id or "",
                gr.Button(t("unarchive" if view.archived else "archive"), interactive=saved),
                gr.Button(interactive=saved),
                gr.DownloadButton(value=md, interactive=saved),
                gr.DownloadButton(value=jl, interactive=saved),
                gr.Timer(active=title_push.poll_needed(ctx, view.state)),  # else pushed
                gr.Row(visible=False),
                gr.Row(visible=bool(view.needs_reply and can_retry)),
            )

        # --- page load -----------------------------------------------------------------------
        def on_load(request: gr.Request):
            params = dict(request.query_params) if request is not None else {}
            view = handlers.initial_view(ctx, params)
            names, default = handlers.model_choices(ctx)
            banner_text = handlers.banner_markdown(ctx)
            current = view.state["project"]
            shown = list(show(view, "", False))
            # the message menu's options in the tab's language (compared in any language)
            shown[2] = gr.Chatbot(value=shown[2], feedback_options=[t(BRANCH_OPTION), t(versions.REGENERATE_OPTION)])
            return (*shown, uuid.uuid4().hex,
                    gr.Dropdown(choices=handlers.project_choices(ctx, current), value=current),
                    gr.Dropdown(choices=names, value=default),
                    gr.Markdown(banner_text or "", visible=bool(banner_text)))

        demo.load(on_load, None, [*view_outputs, tab, project, model, banner],
                  api_visibility="private", js=i18n_ui.COOKIE_JS)  # the browser's language and zone first
        sid_box.change(None, sid_box, None, js=URL_SYNC_JS)

        # --- sending ---------------------------------------------------------------------------
        # Three steps: the box hands its text over at once (cleared once, here only), the reply
        # streams without touching the box (a draft typed meanwhile survives), then the box's
        # buttons are reset. The run lives in ctx under the tab's token: Stop and the
        # conversation switches find it there, and a superseded run never repaints the pane.
        def on_take(text, tab_id, request: gr.Request):
            run_id, notice = handlers.take(ctx, _tab_key(request, tab_id), text)
            if run_id is None:
                # Refused or ignored (a double click): never clobber the pending run id of the
                # message that was accepted, or its reply would never start.
                _notify(notice)
                return gr.skip(), gr.skip()
            return gr.Textbox(value="", submit_btn=False, stop_btn=t("stop")), run_id

        def on_take_retry(tab_id, request: gr.Request):
            run_id = handlers.take_retry(ctx, _tab_key(request, tab_id))
            if run_id is None:
                _notify(handlers.BUSY_NOTICE)
                return gr.skip(), gr.skip(), gr.skip()
            return gr.Textbox(submit_btn=False, stop_btn=t("stop")), run_id, gr.Row(visible=False)

        def on_take_option(tab_id, evt: gr.SelectData, request: gr.Request):
            # "Continue" under a cut-off reply: sent as a message; a draft in the box stays.
            if evt.value == render.RETRY:  # under a failed reply's error row
                run_id = handlers.take_retry(ctx, _tab_key(request, tab_id))
                if run_id is None:
                    _notify(handlers.BUSY_NOTICE)
                    return gr.skip(), gr.skip()
                return gr.Textbox(submit_btn=False, stop_btn=t("stop")), run_id
            if evt.value != render.CONTINUE:
                return gr.skip(), gr.skip()
            run_id, notice = handlers.take(ctx, _tab_key(request, tab_id), t("continue"))
            if run_id is None:
                _notify(notice)
                return gr.skip(), gr.skip()
            return gr.Textbox(submit_btn=False, stop_btn=t("stop")), run_id

        def on_send(st, run_id, model_name, tab_id, query, archived, request: gr.Request):
            skip_all = tuple(gr.skip() for _ in view_outputs)
            if run_id is None:
                yield skip_all
                return
            final = False
            started_title = None  # the title when the reply started (None: not known yet)
            label = None  # the title field's placeholder last sent
            for upd in handlers.send_taken(ctx, st, _tab_key(request, tab_id), run_id, model_name):
                if started_title is None:
                    started_title = upd.title
                if not upd.done:
                    # Never the title's value while streaming (a rename being typed survives);
                    # only its placeholder, so an untitled chat is named like in the sidebar.
                    title_out = gr.skip()
                    if upd.state.get("session") and upd.label != label:
                        label = upd.label
                        title_out = gr.Textbox(placeholder=label)
                    yield (upd.state, title_out, upd.rows,
                           handlers.session_list_html(ctx, upd.state["project"], query=query or "",
                                                      archived=bool(archived),
                                                      active=upd.state["session"]),
                           upd.state["session"] or "", *[gr.skip()] * 6, gr.Row(visible=False))
                    continue
                final = True
                stored = handlers.settled(ctx, upd.state)  # never raises (database down)
                view = SessionView(state=upd.state, title=upd.title, rows=upd.rows or [],
                                   archived=stored.archived, notice=upd.notice, notice_level=upd.notice_level,
                                   label=stored.label,
                                   # the error row offers Retry itself: no second bar
                                   needs_reply=stored.needs_reply and not upd.error)
                out = list(show(view, query, archived))
                if upd.rows is None:  # the store could not be read: leave the chat as it is
                    out[2] = gr.skip()
                if upd.title == started_title and st_session(st) in (None, upd.state.get("session")):
                    # The title did not change during the reply: leave what is in the field
                    # (the user may be typing a new one), update the placeholder only.
                    out[1] = gr.Textbox(placeholder=i18n.localize(view.label) if view.session_id else t("new_chat"))
                yield tuple(out)
            if not final:  # superseded: the pane shows another conversation now
                yield skip_all

        def st_session(st):
            return (st or {}).get("session")

        def on_sent(tab_id, run_id, text, request: gr.Request):
            tab_key = _tab_key(request, tab_id)
            restore = handlers.restore_text(ctx, tab_key, run_id)
            if ctx.running(tab_key):
                return gr.skip()  # a message sent after Stop is on its way: keep Stop
            if restore and not (text or "").strip():
                return gr.Textbox(value=restore, submit_btn=True, stop_btn=False)
            return gr.Textbox(submit_btn=True, stop_btn=False)

        stream_args = {"api_visibility": "private", "show_progress": "hidden",
                       "trigger_mode": "multiple"}

        def continue_turn(event):
            """Stream the run whose id ``event`` put in ``pending`` (the approval card's answers)."""
            return event.then(
                on_send, [state, pending, model, tab, search, show_archived], view_outputs,
                **stream_args).then(on_sent, [tab, pending, box], box, **stream_args)

        after_turn = approval_card.wire(ctx, gr, approval_parts, state=state, tab=tab, box=box,
                                        pending=pending, chat=chat, switch=ask_switch,
                                        tab_key=_tab_key, continue_turn=continue_turn,
                                        notify=_notify)
        after_turn(box.submit(on_take, [box, tab], [box, pending], queue=False, **stream_args).then(
            on_send, [state, pending, model, tab, search, show_archived], view_outputs,
            **stream_args).then(on_sent, [tab, pending, box], box, **stream_args))
        after_turn(retry_btn.click(on_take_retry, tab, [box, pending, noreply_row], queue=False,
                        **stream_args).then(
            on_send, [state, pending, model, tab, search, show_archived], view_outputs,
            **stream_args).then(on_sent, [tab, pending, box], box, **stream_args))

        compaction_ui.add_compaction_controls(
            ctx, gr, state=state, model=model, meter=meter, compact_btn=compact_btn, tab=tab, box=box,
            pending=pending, on_send=on_send, send_inputs=[state, pending, model, tab, search, show_archived],
            view_outputs=view_outputs, on_sent=on_sent, stream_args=stream_args, tab_key=_tab_key)
        after_turn(chat.option_select(on_take_option, tab, [box, pending], queue=False, **stream_args).then(
            on_send, [state, pending, model, tab, search, show_archived], view_outputs,
            **stream_args).then(on_sent, [tab, pending, box], box, **stream_args))

        def on_stop(tab_id, text, request: gr.Request):
            tab_key = _tab_key(request, tab_id)
            withdrawn: list[str] = []
            handlers.stop(ctx, tab_key, withdrawn)
            if withdrawn and not (text or "").strip():
                # stopped before its reply started: the message goes back to the box
                return gr.Textbox(value=withdrawn[-1], submit_btn=True, stop_btn=False)
            if not ctx.running(tab_key):
                return gr.Textbox(submit_btn=True, stop_btn=False)  # Stop always recovers
            return gr.skip()  # the stopped reply is being stored; the send resets the box

        box.stop(on_stop, [tab, box], box, api_visibility="private", queue=False)

        def switching(fn):
            """Wrap a handler that changes the open conversation: a reply still streaming in this
            tab is stopped first and waited for (its partial text is stored in its own session),
            so it can neither repaint the new conversation nor take its next message."""
            def run(request, tab_id, *args, **kwargs):
                handlers.leave(ctx, _tab_key(request, tab_id))
                return fn(*args, **kwargs)
            run.__signature__ = _signature_with_tab(fn)
            # e.g. evt: gr.SelectData; Gradio passes the request (its session hash names the tab)
            run.__annotations__ = {"request": gr.Request, **fn.__annotations__}
            return run

        # No ``cancels=[...]`` on the send: a cancelled generator never gets to store its
        # partial reply in order, and its outputs race with ours; ``leave`` stops it instead.
        switch = {"outputs": [*view_outputs, box], "api_visibility": "private"}

        def idle_box():
            return gr.Textbox(submit_btn=True, stop_btn=False)

        # --- sidebar -------------------------------------------------------------------------
        def on_new(st, query, archived):
            project_key = (st or {}).get("project") or ctx.project_key
            return (*show(handlers.new_chat(ctx, project_key), query, archived), idle_box())

        new_btn.click(switching(on_new), [tab, state, search, show_archived], **switch)

        def on_pick(st, query, archived, evt: gr.SelectData):
            sid = str(evt.value or "")
            try:
                view = handlers.open_session(ctx, st["project"], sid)
            except AnycodeError as err:
                view = handlers.reload(ctx, st, notice=describe(err))
            return (*show(view, query, archived), idle_box())

        sessions.select(switching(on_pick), [tab, state, search, show_archived], **switch)

        # --- long lists and long conversations (issue 17) ---------------------------------------
        def on_more(st, query, archived):
            st = dict(st or {})
            st["list_limit"] = int(st.get("list_limit") or render.SIDEBAR_PAGE) + render.SIDEBAR_PAGE
            return st, handlers.session_list_html(ctx, st["project"], query=query or "", archived=bool(archived),
                                                  active=st.get("session"), limit=st["list_limit"])

        sessions.expand(on_more, [state, search, show_archived], [state, sessions], api_visibility="private",
                        trigger_mode="once", show_progress="hidden")

        def on_earlier_state(st):
            hidden = int((st or {}).get("earlier") or 0)
            label = i18n.tn("show_earlier_more", hidden) if hidden else t("show_earlier")
            return gr.Button(value=label, visible=hidden > 0)

        state.change(on_earlier_state, state, earlier_btn, api_visibility="private", show_progress="hidden")

        def on_earlier(st, query, archived):
            return show(handlers.earlier(ctx, st), query, archived)

        earlier_btn.click(on_earlier, [state, search, show_archived], view_outputs, api_visibility="private",
                          show_progress="minimal")
        demo.load(None, None, None, js=EARLIER_ON_SCROLL_JS)
        notice_place.add(demo)  # toasts stay above the bars under the chat, never over their buttons
        narrow.attach(demo)  # narrow windows: the sidebar is a drawer (issue 18)
        shortcuts.attach(demo)
        demo.load(page_prefs_html, None, prefs, api_visibility="private", show_progress="hidden")  # in the tab's language
        demo.load(None, None, None, js=chat_text.CHAT_TEXT_JS)  # Copy and Edit give the text written

        def on_filter(st, query, archived):
            return handlers.session_list_html(ctx, st["project"], query=query or "",
                                              archived=bool(archived), active=st.get("session"))

        # .change: any edit filters (typing, paste, Backspace, select-all + Delete, clearing)
        search.change(on_filter, [state, search, show_archived], sessions,
                     api_visibility="private", trigger_mode="always_last")
        show_archived.input(on_filter, [state, search, show_archived], sessions,
                            api_visibility="private")

        def on_project(project_key, query, archived):
            view = handlers.new_chat(ctx, project_key or ctx.project_key)
            return (*show(view, query, archived), idle_box())

        project.input(switching(on_project), [tab, project, search, show_archived], **switch)

        # --- chat pane actions ---------------------------------------------------------------
        def on_rename(st, text, query, archived):
            before = st.get("session")
            view = handlers.rename(ctx, st, text)
            if view.session_id != before:  # a new chat got saved under this name
                return show(view, query, archived)
            _notify(view.notice, view.notice_level)
            # Only the title and the list change: a blur that fires as the user clicks another
            # conversation must not repaint the chat with this one.
            html_list = handlers.session_list_html(ctx, st["project"], query=query or "",
                                                   archived=bool(archived), active=before)
            md, jl = handlers.exports(ctx, st)
            # The tab now shows this title: a later rename is checked against it (issue 15).
            seen = dict(st, title=view.title) if st.get("session") and view.title != st.get("title") else gr.skip()
            return (seen, view.title, gr.skip(), html_list, gr.skip(), gr.skip(), gr.skip(),
                    gr.DownloadButton(value=md), gr.DownloadButton(value=jl), gr.skip(), gr.skip(),
                    gr.skip())

        title.submit(on_rename, [state, title, search, show_archived], view_outputs,
                     api_visibility="private")
        title.blur(on_rename, [state, title, search, show_archived], view_outputs,
                   api_visibility="private")

        def on_branch(st, query, archived, evt: gr.LikeData):
            if evt.liked not in i18n.variants(BRANCH_OPTION):
                return (*[gr.skip()] * len(view_outputs), gr.skip())
            index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
            try:
                view = handlers.branch(ctx, st, int(index))
                if view.session_id != st.get("session"):
                    gr.Info(t("branched_toast"), title="anycode")
            except (AnycodeError, IndexError) as err:
                view = handlers.reload(ctx, st, notice=describe(err))
            return (*show(view, query, archived), idle_box())

        # concurrency 1: a double-fired click is handled in order, and the repeat is ignored
        chat.like(switching(on_branch), [tab, state, search, show_archived],
                  concurrency_limit=1, **switch)
        chat.like(None, None, None, js=CLOSE_BRANCH_MENU_JS, api_visibility="private")
        versions.attach(ctx, version_bar, chat=chat, state=state, tab=tab, box=box, pending=pending, model=model,
                        search=search, show_archived=show_archived, view_outputs=view_outputs, show=show,
                        switching=switching, tab_key=_tab_key, on_send=on_send, on_sent=on_sent, notify=_notify,
                        after_turn=after_turn)

        def on_archive(st, query, archived):
            current = handlers.reload(ctx, st)
            try:
                view = handlers.set_archived(ctx, st, not current.archived)
            except SessionNotFound as err:
                view = handlers.reload(ctx, st, notice=describe(err))
            if archived and current.archived and not view.archived:
                # Unarchived from the archive list: back to the main list, where it now is.
                return (*show(view, query, False), gr.Checkbox(value=False))
            return (*show(view, query, archived), gr.skip())

        archive_btn.click(on_archive, [state, search, show_archived], [*view_outputs, show_archived],
                          api_visibility="private")
        delete_btn.click(lambda: gr.Row(visible=True), None, confirm_row,
                         api_visibility="private")
        cancel_btn.click(lambda: gr.Row(visible=False), None, confirm_row,
                         api_visibility="private")

        def on_delete(st, query, archived):
            return (*show(handlers.delete(ctx, st), query, archived), idle_box())

        confirm_btn.click(switching(on_delete), [tab, state, search, show_archived], **switch)
        archived_chat.wire(ctx, gr, archived_bar, state=state, search=search, show_archived=show_archived,
                           sessions=sessions, view_outputs=view_outputs, show=show)
        project_move.wire(ctx, gr, approval_parts, state=state, search=search, show_archived=show_archived,
                          project=project, view_outputs=view_outputs, show=show)  # a chat whose folder moved

        def on_chat_clear(st, query, archived):
            # The Chatbot's own trash icon (hidden by the CSS) only starts a new chat; it never
            # deletes a session.
            return (*show(handlers.new_chat(ctx, st["project"]), query, archived), idle_box())

        chat.clear(switching(on_chat_clear), [tab, state, search, show_archived], **switch)

        # --- generated title -------------------------------------------------------------------
        def on_tick(st, query, archived):
            # The state is read, never written here: a tick racing a send must not put back an
            # older message count.
            found, waiting = handlers.title_status(ctx, st)
            if waiting:
                return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            html_list = handlers.session_list_html(ctx, st["project"], query=query or "",
                                                   archived=bool(archived), active=st["session"])
            md, jl = handlers.exports(ctx, st)  # the file names and headings carry the title
            return ((found if found else gr.skip()), html_list, gr.Timer(active=False),
                    gr.DownloadButton(value=md), gr.DownloadButton(value=jl))

        timer.tick(on_tick, [state, search, show_archived], [title, sessions, timer, md_btn, jl_btn],
                   api_visibility="private", show_progress="hidden")
        title_push.attach(ctx, gr, state=state, title=title, sessions=sessions, timer=timer, md_btn=md_btn,
                          jl_btn=jl_btn, search=search, show_archived=show_archived)

        # --- message search (results under the search box) ------------------------------------------
        with search_slot:
            search_panel.add_search(ctx, gr, state=state, search=search, show_archived=show_archived, tab=tab,
                                    show=show, switching=switching, switch=switch, idle_box=idle_box)

        # --- sub-agent transcripts (a task step's link opens its run, read-only) -----------------
        subagent_panel.add_transcript(ctx, gr, state=state, notify=_notify)

        # --- import (ChatGPT, Claude Code, Codex files) --------------------------------------------
        with import_foot:
            import_panel.add_import(ctx, gr, state=state, search=search, show_archived=show_archived,
                                    sessions=sessions, notify=_notify)

        # --- memory (issue 14): the panel, the "Memory updated" toast --------------------------------
        memory_panel.add_memory_panel(ctx, gr, button_slot=memory_foot, panel_slot=memory_slot, state=state,
                                      search=search, show_archived=show_archived, tab=tab, show=show,
                                      switching=switching, switch=switch, idle_box=idle_box, notify=_notify)

        # --- mirror state (a MirroredSessionStore only) ------------------------------------------
        if mirror_line is not None:
            mirror_timer = gr.Timer(handlers.MIRROR_POLL_SECONDS, active=True)

            def on_mirror():
                return handlers.mirror_status(ctx)

            demo.load(on_mirror, None, mirror_line, api_visibility="private",
                      show_progress="hidden")
            mirror_timer.tick(on_mirror, None, mirror_line, api_visibility="private",
                              show_progress="hidden", concurrency_limit=None)

        # --- languages (issue 20): static labels in the page setting's language when it overrides
        i18n_ui.attach(demo, skip=(title, archive_btn, earlier_btn))
    return demo


def page_prefs_html() -> str:
    """The sidebar foot's theme switch and Keyboard shortcuts help, in the request's language."""
    return theme_switch.switch_html() + shortcuts.help_html()


def _signature_with_tab(fn):
    """``fn``'s signature with leading ``request`` and ``tab_id`` parameters (Gradio reads
    signatures to pass the request and event data such as ``gr.SelectData``, so the wrapper must
    advertise them)."""
    sig = inspect.signature(fn)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    request = inspect.Parameter("request", kind, annotation=gr.Request)
    tab_param = inspect.Parameter("tab_id", kind)
    return sig.replace(parameters=[request, tab_param, *sig.parameters.values()])


def _tab_key(request: Any, tab_id: str | None) -> str:
    """The key of a browser tab's runs in the ``WebContext``: Gradio's session hash (one per
    page load, known from the first event on, unlike a token the load event puts in a State),
    else the tab's token."""
    return getattr(request, "session_hash", None) or tab_id or "default"


# style.css first; the later files refine it (issue 18: window sizes, dark mode).
CSS_FILES = ("style.css", "chat_state.css", "layout.css", "chat-text.css", "contrast.css", "dark.css")


def launch_kwargs(*, host: str, port: int, auth: tuple[str, str] | None = None,
                  quiet: bool = False) -> dict[str, Any]:
    """Keyword arguments for ``Blocks.launch``: privacy (no share link, no API page links, no
    monitoring, no run history kept in the browser), the theme, CSS and icon from ``assets``."""
    return dict(
        server_name=host, server_port=port, auth=auth, share=False, inbrowser=False,
        footer_links=[], run_history=False, enable_monitoring=False, ssr_mode=False,
        show_error=False, quiet=quiet, theme=theme(), css="\n".join(asset_text(n) for n in CSS_FILES),
        i18n=i18n_ui.gradio_i18n(), head=i18n_ui.HEAD + theme_switch.HEAD_JS,
        # an update of a button with an icon re-serves the icon: allow it from any working directory
        allowed_paths=[asset_path("new-chat.svg")],
        favicon_path=asset_path("icon.svg"), pwa=False, mcp_server=False,
        auth_message="anycode: sign in with the --auth user and password.",
    )
