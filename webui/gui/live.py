"""The page's side of :mod:`webui.chat.live` (issue 25): once a second while the page is visible,
a hidden button asks whether the list changed (a chat created, renamed, archived or deleted by
another tab or process: the list is drawn again) and whether a reply is being written in the open
chat elsewhere ("A reply is being written in another tab or window" above the box, and in its
placeholder). When that reply is done, the chat shows it without a reload. When the list changed
and the open chat was renamed elsewhere, the title field follows (unless a name is being typed in
it), and so does the tag bar under it (pinned or tagged elsewhere), in the same event: no
listener of its own."""
from __future__ import annotations

import json
import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from webui.chat import live
from webui.chat.organise import tag_bar_html
from webui.gui.assets import on_page_load, script
from webui.i18n import t

if TYPE_CHECKING:
    from webui.gui.app import Page

log = logging.getLogger(__name__)

LIVE_JS = script("live_check.js", SECONDS_MS=int(live.CHECK_SECONDS * 1000))
LIVE_LIST_JS = script("live_list.js")


def build_live_parts(p: Page) -> None:
    """The bar above the input box (hidden until another tab writes) and the hidden check button."""
    p.other_bar = gr.HTML("", visible=False, elem_id="ac-other-writing")
    p.live_btn = gr.Button("live", visible="hidden", elem_id="ac-live-check")
    # the list token the sidebar was last drawn with; a Textbox, not a State, so that the page can
    # ask for the list again when it drops a check's list drawn for what it no longer shows
    p.live_token = gr.Textbox("", visible="hidden", elem_id="ac-live-token")
    # the check's sidebar list with what it was drawn for (``_packed``); the page shows it only if
    # that is still what it shows (assets/js/live_list.js)
    p.live_list = gr.Textbox("", visible="hidden", elem_id="ac-live-list")
    p.live_writing = gr.State(False)  # whether the bar is shown
    # set by the check when another tab's reply is done: its change shows that reply (wire_live)
    p.live_done = gr.Textbox(visible="hidden", elem_id="ac-live-done")


def start_token(ctx: Any, project: str) -> str:
    """The token a page load starts the live check from (:func:`webui.chat.live.start_token`)."""
    return live.start_token(ctx, project)


def _untouched(field: Any, state: dict[str, Any] | None) -> bool:
    """True when the title field still shows what the tab was given (its stored title, or empty
    for an untitled chat): nobody is typing a new name in it."""
    text = " ".join(str(field or "").split())
    return text in ("", " ".join(str((state or {}).get("title") or "").split()))


def _bar_html(key: str = live.OTHER_WRITING.key) -> str:
    return f'<div class="ac-other-writing">{t(key)}</div>'


def _packed(html: str, query: str | None, archived: Any) -> str:
    """The check's sidebar ``html`` with the search text and archive switch it was drawn for, and
    a nonce (the same list drawn twice is still a change for the page): JSON for ``live_list``.
    The open chat is not among them: the tab's state is a ``gr.State``, which Gradio reads on the
    server when the check runs, not when the page sent it, so it is never older than the list."""
    return json.dumps({"n": uuid.uuid4().hex, "query": query or "", "archived": bool(archived), "html": html})


DELETED = "deleted"  # the bar's mode (``live_writing``) while it says the open chat was deleted elsewhere


def wire_live(p: Page, tab_key: Callable[[Any, Any], str]) -> None:
    """The once-a-second check (see the module docstring)."""
    ctx = p.ctx

    check_outputs = [p.live_list, p.other_bar, p.box, p.live_token, p.live_writing, p.state, p.title, p.sid_box,
                     p.live_done, p.tag_bar]

    def on_check(st, tab_id, known, was_writing, query, archived, field, request: gr.Request):
        key = tab_key(request, tab_id)
        if ctx.stale_view(key, st):
            # sent before a switch's answer reached the page: that answer draws the pane and list
            return tuple(gr.skip() for _ in check_outputs)
        found = live.check(ctx, st, key, known)
        sessions = title = tags = gr.skip()
        renamed = None
        if found.list_changed and ctx.running(key):
            # This tab's own reply changed the list: its send draws it (issue 32: drawn here too,
            # mid-stream, it held up the first token); the list is compared again once it ends.
            found = replace(found, token=known, list_changed=False)
        if found.list_changed and st:
            limit = {"limit": st["list_limit"]} if st.get("list_limit") else {}
            sessions = _packed(p.list_html(st, query, archived, active=st.get("session"), **limit),
                               query, archived)
            renamed = live.title_now(ctx, st, key)  # renamed in another tab or process (trial D6)
            if st.get("session"):  # pinned or tagged elsewhere: the bar under the title follows (trial 9)
                tags = tag_bar_html(ctx, st)
        writing = found.other_writing
        bar = box = state = done = gr.skip()
        if found.list_changed and live.deleted_elsewhere(ctx, st, key):
            # Deleted in another tab or process (trial 7): said at once, not only on the next send.
            # What the tab shows stays on screen; the tab becomes a new chat (its next message
            # starts one, the address drops ?session=), as after a delete during this tab's reply.
            from webui.chat.views import new_chat

            if not ctx.forget_deleted(key, st["session"]):
                # a message sent since the page sent this state: its send owns the pane and says it
                return sessions, bar, box, known or "", writing, state, title, gr.skip(), done, tags
            view = new_chat(ctx, st.get("project"))
            bar = gr.HTML(_bar_html("chat_deleted_while_open"), visible=True)
            return sessions, bar, box, found.token or known or "", DELETED, view.state, "", "", done, ""
        if was_writing == DELETED:
            if st and st.get("session"):  # another chat opened, or a message sent: the notice goes
                bar = gr.HTML("", visible=False)
                was_writing = False
            else:
                return sessions, bar, box, found.token or known or "", DELETED, state, title, gr.skip(), done, tags
        if writing != bool(was_writing):
            bar = gr.HTML(_bar_html() if writing else "", visible=writing)
            box = gr.Textbox(placeholder=t(live.OTHER_WRITING.key) if writing else t("message_placeholder"))
            if not writing:  # the other reply is done: on_written shows it (live_done.change)
                done = uuid.uuid4().hex
        elif found.list_changed and not writing and live.behind(ctx, st, key):
            # Written elsewhere between two checks (a fast reply's lease came and went unseen):
            # the chat is behind the store, so it is shown now too (trial: never, until a reload).
            done = uuid.uuid4().hex
        if renamed is not None and _untouched(field, st):
            # The title field follows, and the state too (a later rename here is checked against
            # what the field now shows). A title being typed is left alone: its rename is then
            # refused as made against an older title (issue 15), never silently applied.
            title = renamed.text
            state = dict(state if isinstance(state, dict) and "project" in state else st, title=renamed.title)
        return sessions, bar, box, found.token or known or "", writing, state, title, gr.skip(), done, tags

    # The chat is no output of the check (issue 32): an event that fills the chat costs the page a
    # copy of its 200 messages as it starts and ends (webui/gui/progress.py), 100–200 ms of the
    # browser's main thread once a second. Only the end of another tab's reply fills the chat,
    # in an event of its own (a change of live_done: the check is unqueued, and a State's change
    # does not follow an unqueued event).
    p.live_btn.click(on_check, [p.state, p.tab, p.live_token, p.live_writing, p.search, p.show_archived, p.title],
                     check_outputs, api_visibility="private", show_progress="hidden", queue=False)

    # The list the check drew is shown only if the page still shows what it was drawn for (CI,
    # stop 45): the check is sent with the page's search text and archive switch, and an event
    # answered while it was on its way (Unarchive from the archive list) may have changed them.
    p.live_list.change(None, [p.live_list, p.search, p.show_archived, p.sessions, p.live_token],
                       [p.sessions, p.live_token], js=LIVE_LIST_JS, api_visibility="private",
                       show_progress="hidden", queue=False)

    def on_written(_done, st, tab_id, request: gr.Request):
        view = live.refreshed(ctx, st, tab_key(request, tab_id))
        if view is None:
            return gr.skip(), gr.skip()
        return view.rows, view.state  # the other tab's reply is done: shown here too, and counted

    p.live_done.change(on_written, [p.live_done, p.state, p.tab], [p.chat, p.state],
                       api_visibility="private", show_progress="hidden")
    on_page_load(p.demo, LIVE_JS)
