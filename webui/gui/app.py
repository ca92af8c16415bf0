"""The Gradio Blocks of the anycode web UI: sidebar of sessions, chat pane, launch settings.

Thin wiring only: every action calls a function of :mod:`webui.chat` (through
:mod:`webui.chat.handlers`) and maps its plain result onto components. Per tab, ``gr.State``
holds ids and a message count (never history); the conversation itself is always re-read from
the store.

Built like Gradio's own ``ChatInterface``: ``build_*`` functions make the components (kept on a
:class:`Page`), ``wire_*`` functions bind their events, in the order :func:`build_app` calls them
(the order of listeners on one component is the order they run in). Features with their own
module (approvals, versions, compaction, search, memory, import, sub-agents, archived chats,
moved projects, titles) have their ``build_*``/``wire_*`` in :mod:`webui.gui`.
"""
from __future__ import annotations

# isort: off
from webui.server import offline  # noqa: F401  (sets the offline environment before Gradio is imported)
# isort: on

import html
import inspect
import logging
import uuid
from typing import Any, Callable

import gradio as gr

from core.errors import AnycodeError, SessionNotFound
from webui import i18n
from webui.chat import handlers
from webui.chat.context import WebContext
from webui.chat.views import SessionView
from webui.gui import (
    agents,
    approval_card,
    archived,
    compaction,
    first_paint,
    i18n_ui,
    imports,
    mcp as mcp_gui,
    memory,
    narrow,
    organise,
    notice_place,
    progress,
    project_move,
    rewind_card,
    search,
    shortcuts,
    subagents,
    theme_switch,
    topbar_menu,
    titles,
    versions,
)
from webui.chat import live as live_chat
from webui.chat import versions as chat_versions
from webui.chat.titles import poll_needed
from webui.gui import live as live_gui
from webui.gui.assets import asset_path, asset_text, on_page_load, script, signal_answered, wire_page_scripts
from webui.gui.i18n_ui import tr
from webui.gui.state_hub import StateListeners
from webui.i18n import t
from webui.render import rows as render
from webui.text.error_text import describe

log = logging.getLogger(__name__)

BRANCH_OPTION = i18n.Msg("branch_from_here")
TITLE_POLL_SECONDS = 1.5
# The chat fills the window under the top bar and above the input box (it scrolls, the page not).
CHAT_HEIGHT = "calc(100vh - 200px)"
TOAST_SECONDS = 4  # toasts sit over the top bar's buttons: keep them short
PRIVATE = {"api_visibility": "private"}
# The three steps of a send stream in order, never queued behind each other's progress bars.
LOAD_WAIT_SECONDS = 30.0  # how long a message sent before the page's load answered waits for it
STREAM_ARGS = {"api_visibility": "private", "show_progress": "hidden", "trigger_mode": "multiple"}

# Clicks on a session row become a ``select`` event carrying the row's session id; the list's
# "Show more" row (scrolled into view or clicked) an ``expand`` event. The listener sits on the
# component's root, so it keeps working after the list is re-rendered.
SESSION_LIST_JS = script("session_list.js")
# Says the load's answer is on the page: a row of the list the page's HTML carries
# (webui.gui.first_paint), clicked before it, is opened only now (assets/js/session_list.js).
PAGE_LOADED_JS = "() => { window.acPageLoaded = true; window.dispatchEvent(new Event('ac-page-loaded')); }"
# A long conversation opens on its latest messages; scrolled to its top, the earlier ones come.
EARLIER_ON_SCROLL_JS = script("earlier_on_scroll.js")
# "Branch from here" sits in a menu Gradio opens on hover, so it stayed open under the pointer
# after the click. Close it until the pointer has left the menu.
CLOSE_BRANCH_MENU_JS = script("close_branch_menu.js")
# Keep ``?session=<id>`` in the address bar in step with the open session (reload and bookmarks
# reopen it): sid_box's js_on_load, below; why there, in the script itself.
URL_SYNC_JS = script("url_sync.js")
# The Chatbot's Copy buttons write a message's content to the clipboard and its Edit box starts
# from it; both go through the decoding of :func:`webui.text.chat_text.source`. Run once
# (``demo.load``); it survives re-renders because it hooks the clipboard and watches the page.
CHAT_TEXT_JS = script("chat_text.js")
# The message box is kept per chat in the browser (localStorage), so a reload gives it back: a
# message typed and not sent, or one a refused send put back there.
DRAFTS_JS = script("drafts.js")


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


def _notify(notice: str | None, level: str = "warning") -> None:
    if notice:
        toast = gr.Info if level == "info" else gr.Warning
        toast(html.escape(i18n.localize(notice)), title="anycode", duration=TOAST_SECONDS)


def idle_box() -> gr.Textbox:
    """The input box with no reply running: Send, no Stop."""
    return gr.Textbox(submit_btn=True, stop_btn=False)


def busy_box(**value: Any) -> gr.Textbox:
    """The input box while a reply runs: Stop instead of Send."""
    return gr.Textbox(submit_btn=False, stop_btn=t("stop"), **value)


class Page:
    """The components of one Blocks and the helpers its events share.

    ``build_*`` functions set the components as attributes; :meth:`show`, :meth:`switching`,
    :meth:`on_send` and :meth:`on_sent` are what every feature's wiring reuses, so opening a chat
    or streaming a reply is done one way whichever control started it."""

    def __init__(self, ctx: WebContext, demo: gr.Blocks) -> None:
        self.ctx = ctx
        self.demo = demo
        self.state = gr.State(None)  # handlers.tab_state(...): ids and a count
        self.tab = gr.State(None)  # this tab's token, names its runs (Stop, switching) in ctx
        self.pending = gr.State(None)  # id of the run the input box just handed over (ctx holds it)
        self.can_retry = ctx.client() is not None  # without a model the banner says what to do
        # What follows the tab's state, computed in one event per change (webui.gui.state_hub)
        self.state_listeners = StateListeners(self.state)
        self.listen = self.state_listeners.add

    @property
    def view_outputs(self) -> list[Any]:
        """The components a :class:`SessionView` fills, in :meth:`show` order."""
        return [self.state, self.title, self.chat, self.sessions, self.sid_box, self.archive_btn,
                self.delete_btn, self.md_btn, self.jl_btn, self.timer, self.confirm_row, self.noreply_row,
                self.noreply_text]

    def _plain_outputs(self) -> set[int]:
        """Positions in :attr:`view_outputs` of the chat, the sidebar list, the session id and
        the tab's state: what :func:`_settled_again` leaves out."""
        outs = self.view_outputs
        return {outs.index(c) for c in (self.state, self.chat, self.sessions, self.sid_box)}

    @property
    def switch(self) -> dict[str, Any]:
        """Event keywords of a handler that opens another conversation (it also resets the box).
        No ``cancels=[...]`` on the send: a cancelled generator never gets to store its partial
        reply in order, and its outputs race with ours; :meth:`switching` stops it instead."""
        return {"outputs": [*self.view_outputs, self.box], "api_visibility": "private"}

    @property
    def list_inputs(self) -> list[Any]:
        """The tab's state and what the sidebar list shows: ``[state, search, show_archived]``."""
        return [self.state, self.search, self.show_archived]

    def list_html(self, st: dict[str, Any], query: str | None, archived: Any, **kwargs: Any) -> str:
        """The sidebar list of the tab's project for the query and archive switch shown (the
        launcher's project before the page's load has given the tab a state: a search typed that
        early raised)."""
        project = (st or {}).get("project") or self.ctx.project_key
        return handlers.session_list_html(self.ctx, project, query=query or "", archived=bool(archived),
                                          **kwargs)

    def show(self, view: SessionView, query: str, archived: bool) -> tuple:
        """Component values for a view, in :attr:`view_outputs` order."""
        _notify(view.notice, view.notice_level)
        saved = bool(view.session_id)
        label = i18n.localize(view.label)
        return (
            view.state,
            gr.Textbox(value=view.title, placeholder=label if saved else t("new_chat")),
            view.rows,
            self.list_html(view.state, query, archived, active=view.session_id),
            view.session_id or "",
            gr.Button(t("unarchive" if view.archived else "archive"), interactive=saved),
            gr.Button(interactive=saved),
            gr.Button(interactive=saved),  # the exports are written when clicked (wire_exports)
            gr.Button(interactive=saved),
            gr.Timer(active=poll_needed(self.ctx, view.state)),  # else pushed
            gr.Row(visible=False),
            gr.Row(visible=bool(view.needs_reply and self.can_retry)),
            # why no reply was saved (the model's error, kept in the session), or the plain notice
            gr.Markdown(view.no_reply or t(handlers.NO_REPLY_NOTICE)) if view.needs_reply else gr.skip(),
        )

    def switching(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a handler that changes the open conversation: a reply still streaming in this
        tab is stopped first and waited for (its partial text is stored in its own session),
        so it can neither repaint the new conversation nor take its next message."""
        ctx = self.ctx

        def run(request, tab_id, *args, **kwargs):
            handlers.leave(ctx, _tab_key(request, tab_id))
            return fn(*args, **kwargs)

        # Gradio reads the signature and the type hints to pass the request (its session hash
        # names the tab) and event data such as gr.SelectData: the wrapper advertises both.
        run.__signature__ = _signature_with_tab(fn)
        run.__annotations__ = {"request": gr.Request, **fn.__annotations__}
        return run

    def on_send(self, st, run_id, model_name, tab_id, query, archived, request: gr.Request):
        """Stream the reply of run ``run_id`` (handed over by the box, Retry, an option, an
        approval, Compact, Edit or Regenerate) into the chat pane."""
        if run_id is None:
            yield tuple(gr.skip() for _ in self.view_outputs)
            return
        final = None  # the outputs of the send's last update
        started_title = None  # the title when the reply started (None: not known yet)
        label = None  # the title field's placeholder last sent
        # (open session, list token) the sidebar was last drawn for: at first what the page shows
        # (the live check keeps it to the token), so an open chat's list is not drawn again
        # before its message is stored
        page = st or {}
        drawn = (page.get("session"), live_chat.list_token(self.ctx, page.get("project") or self.ctx.project_key))
        # The user's message shows at once, before the reply's first token: holding it back to
        # render both together (tried in issue 32) only made one's own message late with a model
        # whose first token takes longer than the hold, which is every remote one.
        updates = handlers.send_taken(self.ctx, st, _tab_key(request, tab_id), run_id, model_name)
        shown_rows = None  # how many chat rows the last streamed update showed
        held_list = False  # the list was held back once, from the update bringing the first token
        for upd in updates:
            if started_title is None:
                started_title = upd.title
            if not upd.done:
                # Never the title's value while streaming (a rename being typed survives);
                # only its placeholder, so an untitled chat is named like in the sidebar.
                title_out = gr.skip()
                if upd.state.get("session") and upd.label != label:
                    label = upd.label
                    title_out = gr.Textbox(placeholder=label)
                # The sidebar only when the list changed (the chat created, its message stored):
                # not once per streamed token (issue 32: 25 KiB of list HTML drawn per update).
                now = (upd.state["session"], live_chat.list_token(self.ctx, upd.state["project"]))
                listed = gr.skip()
                # The update that brings the reply's first row renders it alone: the list (the
                # chat moved up once its message was stored, 25 KiB of HTML) follows with the next
                # update or the last (issue 32: both in one update delayed the first token).
                first_reply_row = shown_rows is not None and len(upd.rows or []) > shown_rows
                shown_rows = len(upd.rows or [])
                hold = first_reply_row and not held_list and now[0] == drawn[0]
                held_list = held_list or hold
                if (now != drawn or not now[1]) and not hold:  # a store without a change token: every update
                    drawn = now
                    listed = self.list_html(upd.state, query, archived, active=upd.state["session"])
                yield (upd.state, title_out, upd.rows, listed,
                       upd.state["session"] or "", *[gr.skip()] * 6, gr.Row(visible=False), gr.skip())
                continue
            final = self._settled_outputs(st, upd, started_title, query, archived)
            yield final
        if final is None:  # superseded: the pane shows another conversation now
            yield tuple(gr.skip() for _ in self.view_outputs)
            return
        yield _settled_again(final, self._plain_outputs())

    def _settled_outputs(self, st: Any, upd: Any, started_title: str | None, query: str, archived: bool) -> tuple:
        """The pane once a send ended (:meth:`on_send`'s last update)."""
        stored = handlers.settled(self.ctx, upd.state)  # never raises (database down)
        view = SessionView(state=upd.state, title=upd.title, rows=upd.rows or [],
                           archived=stored.archived, notice=upd.notice, notice_level=upd.notice_level,
                           label=stored.label,
                           # the error row offers Retry itself: no second bar
                           needs_reply=stored.needs_reply and not upd.error, no_reply=stored.no_reply)
        out = list(self.show(view, query, archived))
        if upd.rows is None:  # the store could not be read: leave the chat as it is
            out[2] = gr.skip()
        if upd.title == started_title and (st or {}).get("session") in (None, upd.state.get("session")):
            # The title did not change during the reply: leave what is in the field
            # (the user may be typing a new one), update the placeholder only.
            out[1] = gr.Textbox(placeholder=i18n.localize(view.label) if view.session_id else t("new_chat"))
        return tuple(out)

    def on_sent(self, tab_id, run_id, text, request: gr.Request):
        """The box after a send: the text given back (a refused send) into an empty box, Stop
        kept while a message sent after Stop is on its way (the text given back then too), else
        Send."""
        tab_key = _tab_key(request, tab_id)
        restore = handlers.restore_text(self.ctx, tab_key, run_id)  # popped: once, whatever follows
        # never over what the user typed since; an empty box gets the refused text back
        give_back = restore if restore and not (text or "").strip() else None
        if self.ctx.running(tab_key):
            # A message sent after Stop is on its way: keep Stop. The refused text still goes
            # back (trial 11: it was popped, then skipped here, and gone from the box for good).
            return busy_box(value=give_back) if give_back else gr.skip()
        if give_back:
            return gr.Textbox(value=give_back, submit_btn=True, stop_btn=False)
        return idle_box()

    @property
    def send_inputs(self) -> list[Any]:
        """Inputs of :meth:`on_send`."""
        return [self.state, self.pending, self.model, self.tab, self.search, self.show_archived]

    def stream(self, event: Any) -> Any:
        """Chain :meth:`on_send` and :meth:`on_sent` after ``event`` (which put a run id in
        ``pending``); returns the last dependency."""
        return event.then(self.on_send, self.send_inputs, self.view_outputs, **STREAM_ARGS).then(
            self.on_sent, [self.tab, self.pending, self.box], self.box, **STREAM_ARGS)


def build_app(ctx: WebContext) -> gr.Blocks:
    """Build the Blocks for ``ctx``. Launch it with :func:`launch_kwargs` (theme, CSS, privacy
    settings belong to ``launch()`` in Gradio 6)."""
    with gr.Blocks(title="anycode", fill_height=True, fill_width=True) as demo:
        p = Page(ctx, demo)
        build_sidebar(p)
        build_chat_pane(p)
        # The open session's id, an output of every view (Page.show); its script puts it in the
        # address as the answer is applied. An HTML block, not a Textbox: its script can watch its
        # value, where a Textbox's value reached the address only through its change event, a
        # second event dispatched after the chat was drawn (the address trailed the chat).
        p.sid_box = gr.HTML("", html_template="", js_on_load=URL_SYNC_JS, visible="hidden", elem_id="ac-sid")
        # The name of a message's "…" menu button, in the page's language: Gradio names it
        # "Feedback" in every language (trial 11); chat_text.js puts this name on it.
        p.menu_name = gr.Textbox(tr("reply_menu"), visible="hidden", elem_id="ac-menu-name")
        # What the title field held when it was last focused (or renamed from): a rename event
        # whose text is still that was not typed (wire_chat_actions).
        p.title_base = gr.Textbox(visible="hidden", elem_id="ac-title-base")
        p.timer = gr.Timer(TITLE_POLL_SECONDS, active=False)
        wire_load(p)
        wire_sending(p)
        wire_sidebar(p)
        wire_chat_actions(p)
        rewind_card.wire_rewind_card(p, p.rewind_parts, _tab_key)
        wire_titles(p)
        wire_features(p)
        live_gui.wire_live(p, _tab_key)  # other tabs and processes, seen live (issue 25)
        p.state_listeners.wire()  # after every feature added what it shows of the state
        wire_page_scripts(demo)  # one load event for the page's scripts (issue 32)
        # languages (issue 20): static labels in the page setting's language when it overrides
        i18n_ui.attach(demo, skip=(p.title, p.archive_btn, p.earlier_btn, p.noreply_text), progress_on=p.lang)
        progress.trim_progress_targets(demo, sink=p.lang, quiet=(p.chat,))  # last: every event is wired (issue 32)
    return demo


def build_sidebar(p: Page) -> None:
    """The sidebar: brand, New chat, the search box and its results slot, the session list, and
    its foot (archive switch, project, Ask before changes, mirror line, Import, Memory, language,
    theme and shortcuts)."""
    with gr.Sidebar(width=SIDEBAR_WIDTH, open=True, elem_id="ac-sidebar"):
        gr.HTML(f'<div class="ac-brand">{asset_text("icon.svg")}<span>anycode</span></div>',
                js_on_load=None, elem_id="ac-brand")
        p.new_btn = gr.Button(tr("new_chat"), icon=asset_path("new-chat.svg"), elem_id="ac-new",
                              variant="secondary", size="md")
        # Each field has a label even where none is shown: it is the field's name to screen readers
        # and scripts (a fresh-user trial found the title named "Textbox", Gradio's default).
        p.search = gr.Textbox(label=tr("search_chats"), placeholder=tr("search_chats"), show_label=False, container=False,
                              elem_id="ac-search")
        p.search_slot = gr.Column(elem_id="ac-search-slot")  # message search results (gui.search)
        p.sessions = gr.HTML("", js_on_load=SESSION_LIST_JS, elem_id="ac-list")
        p.agents_slot = gr.Column(elem_id="ac-agents-slot")  # the Agents section (gui.agents, issue 30)
        with gr.Column(elem_id="ac-sidebar-foot"):
            p.show_archived = gr.Checkbox(label=tr("show_archived"), value=False, elem_id="ac-archived")
            p.project = gr.Dropdown(label=tr("project"), choices=[], value=None, elem_id="ac-project",
                                    interactive=True)
            p.ask_switch = approval_card.build_ask_switch(p.ctx)
            # Only with a mirrored store: without one there is no line and no polling.
            p.mirror_line = gr.HTML("", elem_id="ac-mirror") if handlers.has_mirror(p.ctx) else None
            p.import_foot = gr.Column(elem_id="ac-import-foot")
            p.memory_foot = gr.Column(elem_id="ac-memory-foot")  # the Memory button (gui.memory)
            p.tools_foot = gr.Column(elem_id="ac-tools-foot")  # the Tools button (gui.mcp: MCP servers)
            p.lang = i18n_ui.add_language_setting(p.demo)  # set by the page's load (wire_load)
            # the theme switch and the keyboard shortcuts' help (issue 18)
            p.prefs = gr.HTML(page_prefs_html(), js_on_load=theme_switch.SWITCH_JS, elem_id="ac-prefs")


def build_chat_pane(p: Page) -> None:
    """The main column: the top bar, the delete confirmation, the banner, the Memory panel's slot,
    the no-reply bar, the chat with its version arrows, the approval card, the archived bar and
    the input box."""
    with gr.Column(elem_id="ac-main"):
        build_topbar(p)
        p.tag_bar = organise.build_tag_bar()  # the open chat's tags; carries the sidebar menu's script
        with gr.Row(visible=False, elem_id="ac-confirm") as p.confirm_row:
            p.confirm_text = gr.Markdown(tr("delete_confirm"), elem_id="ac-confirm-text")
            p.confirm_btn = gr.Button(tr("delete_permanently"), variant="stop", size="sm",
                                      elem_id="ac-confirm-delete", scale=0, min_width=150)
            p.cancel_btn = gr.Button(tr("cancel"), size="sm", elem_id="ac-cancel-delete", scale=0, min_width=90)
        p.banner = gr.Markdown(visible=False, elem_id="ac-banner")
        p.memory_slot = gr.Column(visible=False, elem_id="ac-memory")  # the Memory panel (gui.memory)
        p.tools_slot = gr.Column(visible=False, elem_id="ac-tools")  # the Tools panel (gui.mcp)
        # A stored user message without an answer (the app was killed mid-reply, or the model
        # failed): say so and offer to answer it again.
        with gr.Row(visible=False, elem_id="ac-noreply", equal_height=True) as p.noreply_row:
            p.noreply_text = gr.Markdown(tr(handlers.NO_REPLY_NOTICE.key), elem_id="ac-noreply-text")
            p.retry_btn = gr.Button(tr("retry"), size="sm", elem_id="ac-retry", scale=0, min_width=80)
        p.earlier_btn = gr.Button(tr("show_earlier"), visible=False, size="sm", variant="secondary",
                                  elem_id="ac-earlier")
        p.version_bar = versions.build_version_bar()  # ‹ n / m › when the conversation has versions
        p.chat = gr.Chatbot(
            elem_id="ac-chat", show_label=False, height=CHAT_HEIGHT,
            layout="bubble", buttons=["copy"], editable="user",
            feedback_options=[BRANCH_OPTION, chat_versions.REGENERATE_OPTION, rewind_card.REWIND_OPTION],
            like_user_message=True, group_consecutive_messages=False,
            placeholder="<div class='ac-hello'>\n\n" + tr("chat_placeholder") + "\n\n</div>",
        )
        p.approval_parts = approval_card.build_approval_card(p.ctx)  # hidden until a change waits
        p.rewind_parts = rewind_card.build_rewind_card()  # "Rewind to here": hidden until asked
        p.archived_bar = archived.build_archived_bar()  # "This chat is archived" + Unarchive
        # "Memory updated" (gui.memory): a bar here, so it never covers the chat (issue 31, item 7)
        p.memory_toast_slot = gr.Column(elem_id="ac-memory-toast-slot")
        live_gui.build_live_parts(p)  # "A reply is being written in another tab or window" (issue 25)
        p.box = gr.Textbox(label=tr("message_placeholder"), placeholder=tr("message_placeholder"), show_label=False, lines=1,
                           max_lines=10, submit_btn=True, stop_btn=False, autofocus=True,
                           elem_id="ac-input", container=False)
        gr.HTML("<div class='ac-footnote'>" + tr("footnote") + "</div>", js_on_load=None)


def build_topbar(p: Page) -> None:
    """Title, model, context meter, Compact, Archive, the three downloads and Delete, on one row.

    When the row is too narrow for them (a phone, a split window; issue 31, item 5) the actions,
    then the meter, fold into the "⋯" menu (:mod:`webui.gui.topbar_menu`): the same buttons, so
    their events are the same."""
    with gr.Row(elem_id="ac-topbar", equal_height=True):
        p.title = gr.Textbox(label=tr("chat_title_label"), placeholder=tr("new_chat"), show_label=False, container=False,
                             elem_id="ac-title", scale=5, max_lines=1)
        p.model = gr.Dropdown(label=tr("model_label"), choices=[], value=None, show_label=False, container=False,
                              allow_custom_value=True, elem_id="ac-model", scale=2, min_width=150)
        p.meter = gr.HTML("", elem_id="ac-meter-box", scale=0, min_width=110)  # context used (issue 9)
        with gr.Row(elem_id="ac-actions"):  # the "⋯" menu's items on a narrow bar
            p.compact_btn = gr.Button(tr("compact"), size="sm", elem_id="ac-compact", scale=0, min_width=90,
                                      interactive=False)  # enabled once there is something to compact
            p.archive_btn = gr.Button(tr("archive"), size="sm", elem_id="ac-archive", scale=0, min_width=90,
                                      interactive=False)
            p.md_btn = gr.Button("Markdown", size="sm", elem_id="ac-export-md", scale=0, min_width=96,
                                 interactive=False)
            p.jl_btn = gr.Button("JSONL", size="sm", elem_id="ac-export-jsonl", scale=0, min_width=80,
                                 interactive=False)
            p.html_btn = gr.Button("HTML", size="sm", elem_id="ac-export-html", scale=0, min_width=70,
                                   interactive=False)  # the page to share (issue 31); follows the state
            p.delete_btn = gr.Button(tr("delete"), size="sm", variant="stop", elem_id="ac-delete", scale=0,
                                     min_width=80, interactive=False)
        # the file a click on Markdown or JSONL just wrote; the page downloads it (wire_exports)
        p.export_file = gr.File(visible="hidden", elem_id="ac-export-file", interactive=False)
        topbar_menu.build_more_button()


def wire_load(p: Page) -> None:
    """Page load: the tab's first view (``?session=`` or the launcher's), its token, the project
    and model pickers and the banner (the address bar follows from sid_box: url_sync.js)."""
    ctx = p.ctx

    def on_load(request: gr.Request):
        params = dict(request.query_params) if request is not None else {}
        view = handlers.initial_view(ctx, params)
        names, default = handlers.model_choices(ctx)
        banner_text = handlers.banner_markdown(ctx)
        current = view.state["project"]
        # The list's change token as of before the list is drawn: a chat renamed or made elsewhere
        # between this load and the first live check is still seen as a change (it was missed).
        token = live_gui.start_token(ctx, current)  # with a mirror: a fresh listing too
        shown = list(p.show(view, "", False))
        # the message menu's options in the tab's language (compared in any language)
        shown[2] = gr.Chatbot(value=shown[2], feedback_options=[t(BRANCH_OPTION), t(chat_versions.REGENERATE_OPTION),
                                                                   t(rewind_card.REWIND_OPTION)])
        return (*shown, uuid.uuid4().hex,
                # the launcher's project only (the list of all follows from on_loaded, below)
                gr.Dropdown(choices=[(handlers.project_label(ctx.project_path), current)], value=current)
                if current == ctx.project_key else gr.skip(),
                gr.Dropdown(choices=names, value=default),
                gr.Markdown(banner_text or "", visible=bool(banner_text)), token,
                # the sidebar foot in the tab's language: in this event, not two more (issue 32)
                i18n_ui.language_setting_update(request), page_prefs_update(request))

    def on_loaded(st, request: gr.Request):
        # After the load's answer reached the page (a second event): a message sent before it
        # waits until here, so the answer can no longer blank the chat that message went to.
        ctx.page_loaded(_tab_key(request, None), st)
        # Every project with sessions for the switcher: listing them reads every project's
        # index (~70 ms with a 10,000-session project), which the sidebar and chat of the load's
        # answer no longer wait for (issue 32).
        current = (st or {}).get("project") or ctx.project_key
        return gr.Dropdown(choices=handlers.project_choices(ctx, current), value=current)

    loaded = p.demo.load(on_load, None, [*p.view_outputs, p.tab, p.project, p.model, p.banner, p.live_token,
                                         p.lang, p.prefs],
                         api_visibility="private", js=i18n_ui.COOKIE_JS)  # the browser's language and zone first
    loaded.then(on_loaded, p.state, p.project, api_visibility="private", show_progress="hidden", queue=False)
    loaded.then(None, None, None, js=PAGE_LOADED_JS)  # a row clicked before this waited for it

    def first_list(request: Any) -> str:
        # The page's HTML carries the sidebar (issue 32): shown as the page mounts, not a round
        # trip later; the load's answer above draws it again from the tab's state.
        project, active = handlers.first_list_target(ctx, dict(request.query_params))
        with i18n.for_request(request):
            return handlers.session_list_html(ctx, project, active=active)

    def shell_labels(request: Any) -> first_paint.ShellLabels:
        # The shell drawn with the page's first paint, until Gradio's sidebar is mounted (issue 32)
        with i18n.for_request(request):
            return first_paint.ShellLabels(new_chat=i18n.t("new_chat"), search=i18n.t("search_chats"),
                                           width=SIDEBAR_WIDTH, narrow_px=narrow.BREAKPOINT_PX,
                                           theme_key=theme_switch.STORAGE_KEY)

    first_paint.install(p.demo, first_list, shell_labels)


def wire_sending(p: Page) -> None:
    """Sending: one streaming event hands the box's text over (the box cleared once, in its first
    update, here only) and streams the reply without touching the box again (a draft typed
    meanwhile survives); a second event resets the box's buttons. The run lives in ctx under the tab's token: Stop and the
    conversation switches find it there, and a superseded run never repaints the pane. Also the
    approval card (a paused turn resumes through the same chain), Retry, Compact and the chat's
    options under a reply (Retry, Continue)."""
    ctx = p.ctx

    def on_take(text, tab_id, request: gr.Request, model_name=None):
        run_id, notice = handlers.take(ctx, _tab_key(request, tab_id), text, model_name)
        if run_id is None:
            # Refused or ignored (a double click): never clobber the pending run id of the
            # message that was accepted, or its reply would never start.
            _notify(notice)
            return gr.skip(), gr.skip()
        return busy_box(value=""), run_id

    def on_take_retry(tab_id, request: gr.Request):
        run_id = handlers.take_retry(ctx, _tab_key(request, tab_id))
        if run_id is None:
            _notify(handlers.BUSY_NOTICE)
            return gr.skip(), gr.skip(), gr.skip()
        return busy_box(), run_id, gr.Row(visible=False)

    p.after_turn = approval_card.wire_approval_card(
        ctx, p.approval_parts, state=p.state, tab=p.tab, box=p.box, pending=p.pending, chat=p.chat,
        switch=p.ask_switch, tab_key=_tab_key, continue_turn=p.stream, notify=_notify, listen=p.listen)

    def on_take_send(text, st, model_name, tab_id, query, archived, request: gr.Request):
        # Enter is one event (issue 32): the box is handed over and the reply streams in the same
        # round trip; a hand-over event before the stream cost one more before the model was asked.
        if st is None:  # sent before the page's load answered (a slow machine): wait for it
            st = ctx.wait_page_loaded(_tab_key(request, tab_id), LOAD_WAIT_SECONDS)
        box, run_id = on_take(text, tab_id, request, model_name)
        yield box, run_id, *[gr.skip()] * len(p.view_outputs)
        if _is_skip(run_id):
            return
        for out in p.on_send(st, run_id, model_name, tab_id, query, archived, request):
            yield gr.skip(), gr.skip(), *out

    sent = p.box.submit(on_take_send, [p.box, p.state, p.model, p.tab, p.search, p.show_archived],
                        [p.box, p.pending, *p.view_outputs], **STREAM_ARGS)
    p.after_turn(sent.then(p.on_sent, [p.tab, p.pending, p.box], p.box, **STREAM_ARGS))
    p.after_turn(p.stream(p.retry_btn.click(on_take_retry, p.tab, [p.box, p.pending, p.noreply_row],
                                            queue=False, **STREAM_ARGS)))
    compaction.wire_compaction(
        ctx, state=p.state, model=p.model, meter=p.meter, compact_btn=p.compact_btn, tab=p.tab, box=p.box,
        pending=p.pending, on_send=p.on_send, send_inputs=p.send_inputs, view_outputs=p.view_outputs,
        on_sent=p.on_sent, stream_args=STREAM_ARGS, tab_key=_tab_key, listen=p.listen)
    p.after_turn(p.stream(p.chat.option_select(_option_taker(ctx), p.tab, [p.box, p.pending], queue=False,
                                               **STREAM_ARGS)))

    def on_stop(tab_id, text, pending, request: gr.Request):
        tab_key = _tab_key(request, tab_id)
        withdrawn: list[str] = []
        # Only what Stop was shown for: a message sent right after the click may reach the
        # server first, and must still be sent.
        handlers.stop(ctx, tab_key, withdrawn, upto=pending)
        if withdrawn and not (text or "").strip():
            # stopped before its reply started: the message goes back to the box
            return gr.Textbox(value=withdrawn[-1], submit_btn=True, stop_btn=False)
        if not ctx.running(tab_key):
            return idle_box()  # Stop always recovers
        return gr.skip()  # the stopped reply is being stored; the send resets the box

    p.box.stop(on_stop, [p.tab, p.box, p.pending], p.box, api_visibility="private", queue=False)


def _settled_again(final: tuple, plain: set[int]) -> tuple:
    """The update after a send's last one, so that its event ends without drawing the chat again.

    When a streaming event completes, Gradio's page sets every output once more from the
    event's last update: the whole chat (200 messages rendered again) and the sidebar list after
    every reply (issue 32). So the last update repeats ``final`` without the outputs at the
    positions ``plain`` (the chat, the list, the session id and the state: ``gr.skip()``). The
    component updates are repeated unchanged, not skipped: the page applies an update's
    difference to the object of the update before it, and a property dropped here (a title's
    new value) would be deleted from that object while it may still be being applied."""
    return tuple(gr.skip() if i in plain else value for i, value in enumerate(final))


def _is_skip(value: Any) -> bool:
    return isinstance(value, dict) and value == {"__type__": "update"}  # gr.skip()


def _option_taker(ctx: WebContext) -> Callable[..., tuple]:
    """The handler of an option under a reply: Retry under a failed reply's error row answers the
    message again; Continue under a cut-off reply is sent as a message (a draft in the box stays)."""

    def on_take_option(tab_id, evt: gr.SelectData, request: gr.Request):
        if evt.value == render.RETRY:
            run_id = handlers.take_retry(ctx, _tab_key(request, tab_id))
            if run_id is None:
                _notify(handlers.BUSY_NOTICE)
                return gr.skip(), gr.skip()
            return busy_box(), run_id
        if evt.value != render.CONTINUE:
            return gr.skip(), gr.skip()
        run_id, notice = handlers.take(ctx, _tab_key(request, tab_id), t("continue"))
        if run_id is None:
            _notify(notice)
            return gr.skip(), gr.skip()
        return busy_box(), run_id

    return on_take_option


def wire_sidebar(p: Page) -> None:
    """New chat, picking a session, the list's next page, the title filter, the archive switch
    and the project picker; also "Show earlier messages" and the page scripts run on load."""
    ctx = p.ctx

    def on_new(st, query, archived):
        project_key = (st or {}).get("project") or ctx.project_key
        return (*p.show(handlers.new_chat(ctx, project_key), query, archived), idle_box())

    p.new_btn.click(p.switching(on_new), [p.tab, *p.list_inputs], **p.switch)

    def on_pick(st, query, archived, evt: gr.SelectData):
        sid = str(evt.value or "")
        try:
            view = handlers.open_session(ctx, st["project"], sid)
        except AnycodeError as err:
            view = handlers.reload(ctx, st, notice=describe(err))
        return (*p.show(view, query, archived), idle_box())

    # One pick on its way at a time: the list's script holds a row clicked meanwhile until this
    # answer is drawn (assets/js/session_list.js), as Gradio dropped it ("once", its default for a
    # select) or drew two answers in either order ("multiple"). "multiple" here only so that the held
    # click is never dropped should Gradio say "answered" a moment before it clears the pick.
    picked = p.sessions.select(p.switching(on_pick), [p.tab, *p.list_inputs], trigger_mode="multiple",
                               **p.switch)
    signal_answered(picked, "ac-picked")  # a row clicked meanwhile is opened now (session_list.js)

    # --- long lists and long conversations (issue 17) ---------------------------------------
    def on_more(st, query, archived):
        st = dict(st or {})
        st["list_limit"] = int(st.get("list_limit") or render.SIDEBAR_PAGE) + render.SIDEBAR_PAGE
        return st, p.list_html(st, query, archived, active=st.get("session"), limit=st["list_limit"])

    p.sessions.expand(on_more, p.list_inputs, [p.state, p.sessions], api_visibility="private",
                      trigger_mode="once", show_progress="hidden")
    wire_earlier(p)
    on_page_load(p.demo, EARLIER_ON_SCROLL_JS)
    notice_place.add(p.demo)  # toasts stay above the bars under the chat, never over their buttons
    narrow.attach(p.demo)  # narrow windows: the sidebar is a drawer (issue 18)
    topbar_menu.attach(p.demo)  # a narrow top bar: its actions in the "⋯" menu (issue 31)
    shortcuts.attach(p.demo)
    on_page_load(p.demo, CHAT_TEXT_JS)  # Copy and Edit give the text written
    on_page_load(p.demo, DRAFTS_JS)  # the box survives a reload of the tab

    def on_filter(st, query, archived):
        return p.list_html(st, query, archived, active=(st or {}).get("session"))

    # .change: any edit filters (typing, paste, Backspace, select-all + Delete, clearing)
    p.search.change(on_filter, p.list_inputs, p.sessions, api_visibility="private", trigger_mode="always_last")
    p.show_archived.input(on_filter, p.list_inputs, p.sessions, api_visibility="private")

    def on_project(project_key, query, archived):
        view = handlers.new_chat(ctx, project_key or ctx.project_key)
        return (*p.show(view, query, archived), idle_box())

    p.project.input(p.switching(on_project), [p.tab, p.project, p.search, p.show_archived], **p.switch)


def wire_earlier(p: Page) -> None:
    """"Show earlier messages" (or the chat scrolled to its top): the conversation from
    :data:`render.CHAT_WINDOW` messages further back; the button says how many are hidden."""

    def on_earlier_state(st):
        hidden = int((st or {}).get("earlier") or 0)
        label = i18n.tn("show_earlier_more", hidden) if hidden else t("show_earlier")
        return gr.Button(value=label, visible=hidden > 0)

    p.listen(on_earlier_state, p.state, p.earlier_btn)

    def on_earlier(st, query, archived):
        return p.show(handlers.earlier(p.ctx, st), query, archived)

    p.earlier_btn.click(on_earlier, p.list_inputs, p.view_outputs, api_visibility="private",
                        show_progress="minimal")


def wire_chat_actions(p: Page) -> None:
    """The chat pane's own actions: rename (Enter or leaving the title), Branch from here, the
    versions (arrows, Edit, Regenerate, Retry), Archive, Delete, the archived bar, the Move
    button of a chat whose folder moved, and the Chatbot's trash icon."""
    ctx = p.ctx
    # The field's text as it was focused, kept in the page: a rename event carries it with the
    # text, both as the page had them when it was sent. The tab's state cannot tell what the
    # field showed then: Gradio reads a State when the event runs, and the live check may have
    # changed it since (another tab's rename: the blur of a field left without typing then
    # wrote the older title back over it; a full suite run, round 24).
    p.title.focus(None, p.title, p.title_base, js="(text) => text", api_visibility="private",
                  show_progress="hidden", queue=False)
    rename_inputs = [p.state, p.title, p.search, p.show_archived, p.title_base]
    p.title.submit(_renamer(p), rename_inputs, [*p.view_outputs, p.title_base], api_visibility="private")
    p.title.blur(_renamer(p), rename_inputs, [*p.view_outputs, p.title_base], api_visibility="private")

    def on_branch(st, query, archived, evt: gr.LikeData):
        if evt.liked not in i18n.variants(BRANCH_OPTION):
            return (*[gr.skip()] * len(p.view_outputs), gr.skip())
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        try:
            view = handlers.branch(ctx, st, int(index))
            if view.session_id != st.get("session"):
                gr.Info(t("branched_toast"), title="anycode")
        except (AnycodeError, IndexError) as err:
            view = handlers.reload(ctx, st, notice=describe(err))
        return (*p.show(view, query, archived), idle_box())

    # concurrency 1: a double-fired click is handled in order, and the repeat is ignored
    p.chat.like(p.switching(on_branch), [p.tab, *p.list_inputs], concurrency_limit=1, **p.switch)
    p.chat.like(None, None, None, js=CLOSE_BRANCH_MENU_JS, api_visibility="private")
    versions.wire_version_arrows(ctx, p.version_bar, state=p.state, tab=p.tab, box=p.box, search=p.search,
                                 show_archived=p.show_archived, view_outputs=p.view_outputs, show=p.show,
                                 switching=p.switching, listen=p.listen)
    versions.wire_version_edits(ctx, chat=p.chat, state=p.state, tab=p.tab, box=p.box, pending=p.pending,
                                model=p.model, search=p.search, show_archived=p.show_archived,
                                view_outputs=p.view_outputs, show=p.show, tab_key=_tab_key, on_send=p.on_send,
                                on_sent=p.on_sent, notify=_notify, after_turn=p.after_turn,
                                rewind_parts=p.rewind_parts)  # Edit/Regenerate: files too (issue 29)
    wire_archive_and_delete(p)
    wire_exports(p)
    archived.wire_archived_bar(ctx, p.archived_bar, state=p.state, search=p.search, show_archived=p.show_archived,
                               sessions=p.sessions, view_outputs=p.view_outputs, show=p.show, listen=p.listen)
    project_move.wire_move_button(ctx, p.approval_parts, state=p.state, search=p.search,
                                  show_archived=p.show_archived, project=p.project, view_outputs=p.view_outputs,
                                  show=p.show, listen=p.listen)  # a chat whose folder moved

    def on_chat_clear(st, query, archived):
        # The Chatbot's own trash icon (hidden by the CSS) only starts a new chat; it never
        # deletes a session.
        return (*p.show(handlers.new_chat(ctx, st["project"]), query, archived), idle_box())

    p.chat.clear(p.switching(on_chat_clear), [p.tab, *p.list_inputs], **p.switch)


def _renamer(p: Page) -> Callable[..., tuple]:
    """The title field's handler (Enter, or leaving it): save the name the user typed."""
    ctx = p.ctx

    def on_rename(st, text, query, archived, base):
        if base is not None and text == base:
            # Nothing typed since the field was focused (or last renamed from): not a rename.
            # The field may still hold a title another tab has since replaced, and the state
            # already the newer one: a rename from it would write the older title back.
            return tuple(gr.skip() for _ in range(len(p.view_outputs) + 1))
        before = st.get("session")
        view = handlers.rename(ctx, st, text)
        # Saved (or nothing to save): the field's new starting point. Refused or not saved: the
        # old one stays, so the same text sent again is a rename again.
        saved = view.title if view.notice is None or view.notice_level == "info" else gr.skip()
        if view.session_id != before:  # a new chat got saved under this name
            return (*p.show(view, query, archived), saved)
        _notify(view.notice, view.notice_level)
        # Only the title and the list change: a blur that fires as the user clicks another
        # conversation must not repaint the chat with this one.
        html_list = p.list_html(st, query, archived, active=before)
        # The tab now shows this title: a later rename is checked against it (issue 15).
        seen = dict(st, title=view.title) if st.get("session") and view.title != st.get("title") else gr.skip()
        return (seen, view.title, gr.skip(), html_list, *[gr.skip()] * 9, saved)

    return on_rename


def wire_archive_and_delete(p: Page) -> None:
    """The top bar's Archive / Unarchive, and Delete with its confirmation row."""
    ctx = p.ctx

    def on_archive(st, query, archived):
        current = handlers.reload(ctx, st)
        try:
            view = handlers.set_archived(ctx, st, not current.archived)
        except SessionNotFound as err:
            view = handlers.reload(ctx, st, notice=describe(err))
        unarchived_from_list = archived and current.archived and not view.archived
        out = list(p.show(view, query, False if unarchived_from_list else archived))
        if view.session_id == st.get("session") and current.rows == view.rows:
            # The same conversation, the same messages: the chat is not sent again (issue 32:
            # 200 messages re-sent and re-rendered made Archive slower than opening a chat).
            out[2] = gr.skip()
        # Unarchived from the archive list: back to the main list, where it now is.
        return (*out, gr.Checkbox(value=False) if unarchived_from_list else gr.skip())

    p.archive_btn.click(on_archive, p.list_inputs, [*p.view_outputs, p.show_archived], api_visibility="private")

    def on_delete_asked(st, tab_id, request: gr.Request):
        # The question warns when another tab or process is writing a reply here (issue 25).
        return gr.Row(visible=True), handlers.delete_prompt(ctx, st, _tab_key(request, tab_id))

    p.delete_btn.click(on_delete_asked, [p.state, p.tab], [p.confirm_row, p.confirm_text],
                       api_visibility="private", show_progress="hidden", queue=False)
    p.cancel_btn.click(lambda: gr.Row(visible=False), None, p.confirm_row, api_visibility="private")

    def on_delete(st, query, archived):
        return (*p.show(handlers.delete(ctx, st), query, archived), idle_box())

    p.confirm_btn.click(p.switching(on_delete), [p.tab, *p.list_inputs], **p.switch)


# Download the file the export handler just put in the hidden File component (its value arrives
# here as Gradio's file data: ``{url, orig_name, ...}``).
DOWNLOAD_JS = script("download_export.js")


def wire_exports(p: Page) -> None:
    """Markdown and JSONL in the top bar: the file is written when the button is clicked, not
    each time a chat opens (issue 32: writing both files took 200 ms of every open of a
    1,000-message chat, 1.9 s at 10,000), then downloaded by the page. A chat with nothing to
    export (gone meanwhile, database down) gives a sentence instead of a file."""
    ctx = p.ctx

    def exporter(kind: str) -> Callable[..., Any]:
        def on_export(st):
            if kind == "html":
                path = handlers.export_html(ctx, st or {})
            else:
                md, jl = handlers.exports(ctx, st or {})
                path = md if kind == "md" else jl
            if path is None:
                _notify(handlers.export_notice(ctx, st))  # deleted elsewhere, or unreadable
                return gr.skip()
            return str(path)

        return on_export

    p.listen(lambda st: gr.Button(interactive=bool((st or {}).get("session"))), p.state, p.html_btn)
    for button, kind in ((p.md_btn, "md"), (p.jl_btn, "jsonl"), (p.html_btn, "html")):
        button.click(exporter(kind), p.state, p.export_file, api_visibility="private",
                     show_progress="hidden").success(None, p.export_file, None, js=DOWNLOAD_JS)


def wire_titles(p: Page) -> None:
    """The generated title: pushed when its thread ends (:mod:`webui.gui.titles`), polled by the
    timer as the fallback."""
    ctx = p.ctx

    def on_tick(st, query, archived):
        # The state is read, never written here: a tick racing a send must not put back an
        # older message count.
        found, waiting = handlers.title_status(ctx, st)
        if waiting:
            return gr.skip(), gr.skip(), gr.skip()
        html_list = p.list_html(st, query, archived, active=st["session"])
        return (found if found else gr.skip()), html_list, gr.Timer(active=False)

    p.timer.tick(on_tick, p.list_inputs, [p.title, p.sessions, p.timer],
                 api_visibility="private", show_progress="hidden")
    titles.wire_title_push(ctx, state=p.state, title=p.title, sessions=p.sessions, timer=p.timer,
                           search=p.search, show_archived=p.show_archived, listen=p.listen)


def wire_features(p: Page) -> None:
    """The features with their own module: message search, sub-agent transcripts, import,
    memory, the Tools panel (MCP servers), and the mirror line."""
    ctx = p.ctx
    with p.search_slot:  # message search (results under the search box)
        search.build_search_results(ctx, state=p.state, search=p.search, show_archived=p.show_archived, tab=p.tab,
                                    show=p.show, switching=p.switching, switch=p.switch, idle_box=idle_box)
    # sub-agent transcripts (a task step's link opens its run, read-only)
    subagents.build_transcript_panel(ctx, state=p.state, notify=_notify)
    # defined agents and experts' sessions (issue 30): a sidebar section, opened read-only
    agents.build_agents_section(ctx, slot=p.agents_slot, state=p.state, notify=_notify, listen=p.listen)
    with p.import_foot:  # import (ChatGPT, Claude Code, Codex files)
        imports.build_import_button(ctx, state=p.state, search=p.search, show_archived=p.show_archived,
                                    sessions=p.sessions, notify=_notify)
    # memory (issue 14): the panel, the "Memory updated" toast
    parts = memory.build_memory_panel(ctx, button_slot=p.memory_foot, panel_slot=p.memory_slot,
                                      toast_slot=p.memory_toast_slot)
    memory.wire_memory_panel(ctx, parts, state=p.state, search=p.search, show_archived=p.show_archived, tab=p.tab,
                             show=p.show, switching=p.switching, switch=p.switch, idle_box=idle_box,
                             notify=_notify)
    memory.wire_memory_toast(ctx, parts, state=p.state, notify=_notify, listen=p.listen)
    # MCP servers: the Tools panel (their state, approval of a project's configuration, Test)
    mcp_gui.wire_tools_panel(ctx, mcp_gui.build_tools_panel(ctx, button_slot=p.tools_foot, panel_slot=p.tools_slot),
                             state=p.state, notify=_notify)
    organise.wire_tag_bar(ctx, p.tag_bar, state=p.state, search=p.search, show_archived=p.show_archived,
                          sessions=p.sessions, list_html=p.list_html, notify=_notify,
                          listen=p.listen)  # pins and tags (issue 31)
    if p.mirror_line is not None:  # mirror state (a MirroredSessionStore only)
        mirror_timer = gr.Timer(handlers.MIRROR_POLL_SECONDS, active=True)

        def on_mirror():
            return handlers.mirror_status(ctx)

        p.demo.load(on_mirror, None, p.mirror_line, api_visibility="private", show_progress="hidden")
        mirror_timer.tick(on_mirror, None, p.mirror_line, api_visibility="private", show_progress="hidden",
                          concurrency_limit=None)


def page_prefs_html() -> str:
    """The sidebar foot's theme switch and Keyboard shortcuts help, in the request's language."""
    return theme_switch.switch_html() + shortcuts.help_html()


def page_prefs_update(request: gr.Request) -> Any:
    """:func:`page_prefs_html` for the page's load; ``gr.skip()`` when the request's language is
    the one the page was built in (its config already holds that HTML)."""
    if i18n.request_lang(request) == i18n_ui.built_lang():
        return gr.skip()
    return page_prefs_html()


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


SIDEBAR_WIDTH = 290  # CSS pixels; the shell of the first paint has the same (webui.gui.first_paint)
# style.css first; the later files refine it (issue 18: window sizes, dark mode).
CSS_FILES = ("style.css", "chat_state.css", "layout.css", "chat-text.css", "contrast.css", "dark.css", "organise.css")


def launch_kwargs(*, host: str, port: int, auth: tuple[str, str] | None = None,
                  quiet: bool = False) -> dict[str, Any]:
    """Keyword arguments for ``Blocks.launch``: privacy (no share link, no API page links, no
    monitoring, no run history kept in the browser), the theme, CSS and icon from ``assets``.

    ``_frontend=False``: Gradio 6.31 otherwise sends one HEAD request to its own address after
    it started (``networking.url_ok``, to offer a share link when "localhost is not accessible"),
    with the environment's proxy settings — a proxy set for the internet fails it and the app
    would not start. anycode never offers share links and binds its port itself first
    (:mod:`webui.server.preflight`), so the check is not made rather than the environment
    rewritten (``NO_PROXY``). The flag does nothing else in this Gradio release."""
    return dict(
        server_name=host, server_port=port, auth=auth, share=False, inbrowser=False, _frontend=False,
        footer_links=[], run_history=False, enable_monitoring=False, ssr_mode=False,
        show_error=False, quiet=quiet, theme=theme(), css="\n".join(asset_text(n) for n in CSS_FILES),
        i18n=i18n_ui.gradio_i18n(), head=i18n_ui.HEAD + theme_switch.HEAD_JS,
        # an update of a button with an icon re-serves the icon: allow it from any working directory
        allowed_paths=[asset_path("new-chat.svg")],
        favicon_path=asset_path("icon.svg"), pwa=False, mcp_server=False,
        auth_message="anycode: sign in with the --auth user and password.",
    )
