"""The Memory panel and the "Memory updated" toast (issue 14).

The sidebar's **Memory** button opens a panel above the chat: the memories of the open project
and the user's (grouped by scope, most recent first), each with who wrote it, when, a link to the
conversation it came from, **Edit** and **Delete**; a box to add one (this project or every
project); the **Automatic memory** switch (:func:`core.memory.mode.set_automatic`). After a reply,
the panel's timer looks for memories the model just added from this conversation and shows
"Memory updated" with **Undo** (which removes them).

Plain functions (:func:`panel_html`, :func:`add_memory`, :func:`edit_memory`,
:func:`delete_memory`, :func:`new_model_memories`, :func:`undo`) are tested without a browser;
:mod:`webui.gui.memory` places the components and wires them. Memory text is chat-derived, so
it is escaped (``html.escape``) before it is put in the page.
"""
from __future__ import annotations

import html
import logging
import time
from typing import TYPE_CHECKING, Any

from core.errors import AnycodeError
from core.memory.mode import env_mode, memory_mode, set_automatic
from core.memory.model import Memory
from core.memory.store import MemoryStore
from webui.chat.live import open_meta
from webui.text.chat_text import inline, visible_bidi
from webui.i18n import t, tn
from webui.text.error_text import describe
from webui.text.timefmt import relative_time

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

WATCH_SECONDS = 30.0  # how long after a reply the toast may still appear (the job is in flight)
POLL_SECONDS = 1.5
TOAST_SECONDS = 10.0  # "Memory updated" leaves by itself this long after it came (issue 31, item 7)


def toast_shown(watch: dict[str, Any], now: float) -> dict[str, Any]:
    """The tab's memory watch once the "Memory updated" bar is shown at ``now``: it is due to
    leave at ``now + TOAST_SECONDS``, and the watch (its poll) lasts at least that long."""
    out = dict(watch)
    out["toast_until"] = now + TOAST_SECONDS
    out["until"] = max(float(out.get("until") or 0), out["toast_until"])
    return out


def toast_due(watch: dict[str, Any] | None, now: float) -> bool:
    """True when the "Memory updated" bar is shown and its time is over (it leaves)."""
    until = (watch or {}).get("toast_until")
    return isinstance(until, (int, float)) and now >= until


SCOPE_TITLES = {"project": "memory_scope_project", "user": "memory_scope_user"}  # catalogue keys


def memories_of(ctx: WebContext) -> MemoryStore:
    """The app's memories (its storage's :attr:`~core.storage.Storage.memories`)."""
    return ctx.storage.memories


def _item_html(m: Memory, titles: dict[str, str], now: float) -> str:
    meta = [t("memory_added_by_assistant") if m.source == "model" else t("memory_added_by_you"),
            relative_time(m.updated_at, now)]
    link = ""
    if m.session_id:
        name = titles.get(m.session_id) or t("memory_a_conversation")
        link = (f' · <button class="ac-mem-link" data-do="open" data-sid="{html.escape(m.session_id)}" '
                f'data-pk="{html.escape(m.session_project or m.project_key or "")}">{html.escape(t("memory_from", name=name))}</button>')
    return (f'<li class="ac-mem" data-mid="{html.escape(m.id)}"><div class="ac-mem-text">{html.escape(visible_bidi(m.text))}</div>'
            f'<div class="ac-mem-meta">{" · ".join(html.escape(x) for x in meta)}{link}'
            f'<span class="ac-mem-actions"><button data-do="edit">{html.escape(t("edit"))}</button>'
            f'<button data-do="delete" data-confirm="{html.escape(t("memory_delete_confirm"))}">'
            f'{html.escape(t("delete"))}</button></span></div></li>')


def panel_html(ctx: WebContext, project_key: str, now: float | None = None) -> str:
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
        for pk in [project_key, *ctx.alias_keys(project_key)]:  # memories from another machine's chats too
            for meta in ctx.manager.list(pk) + ctx.manager.list(pk, archived=True):
                titles[meta.id] = meta.title or ""
    except AnycodeError:
        pass
    out = []
    for scope in ("project", "user"):
        group = [m for m in memories if m.scope == scope]
        if group:
            # The count is a badge of its own beside the label (issue 31, item 10: "This project 1").
            out.append(f'<h4>{html.escape(t(SCOPE_TITLES[scope]))}<span class="ac-mem-count">{len(group)}</span></h4><ul>'
                       + "".join(_item_html(m, titles, now) for m in group) + "</ul>")
    return "".join(out)


def add_memory(ctx: WebContext, project_key: str, text: str, scope: str) -> tuple[str, bool]:
    """Add a memory typed in the panel; ``(sentence, ok)``."""
    try:
        m = memories_of(ctx).add(text, scope="user" if scope == "user" else "project", project_key=project_key)
    except AnycodeError as err:
        return describe(err), False
    return t("memory_remembered", text=m.text), True


def edit_memory(ctx: WebContext, project_key: str, memory_id: str, text: str) -> tuple[str, bool]:
    """Change a memory's text; ``(sentence, ok)``."""
    try:
        memories_of(ctx).update(memory_id, text, project_key=project_key)
    except AnycodeError as err:
        return describe(err), False
    return t("memory_updated_notice"), True


def delete_memory(ctx: WebContext, project_key: str, memory_id: str) -> tuple[str, bool]:
    """Remove a memory for good; ``(sentence, ok)``."""
    try:
        m = memories_of(ctx).remove(memory_id, project_key=project_key)
    except AnycodeError as err:
        return describe(err), False
    return t("memory_deleted", text=m.text), True


def written_lately(ctx: WebContext, state: dict[str, Any] | None, now: float) -> bool:
    """True when the tab's open conversation was written in the last :data:`WATCH_SECONDS`
    (a reply just ended there, so its memory job may still add memories); False for one that was
    only opened. Only then does the page poll for new memories (issue 32: every open and version
    switch started a poll every 1.5 s for 30 s, an event whose status changes each made Gradio's
    page copy the data of every component ever shown as loading). Metadata only; True when the
    store cannot tell (the page then polls as before)."""
    st = state or {}
    if not st.get("session") or not st.get("project"):
        return False
    try:
        me = open_meta(ctx, st)
    except Exception as err:  # noqa: BLE001 -- deleted or unreadable: poll as before
        log.info("memory watch: %s", err)
        return True
    return me is None or now - float(me.updated_at or 0) <= WATCH_SECONDS


def new_model_memories(ctx: WebContext, session_id: str | None, project_key: str, since: float,
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


def undo(ctx: WebContext, project_key: str, ids: list[str]) -> str:
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
    """The toast's text: "Memory updated" and the facts, shown as text: neither HTML nor Markdown
    in a memory becomes an image, a link or markup (issue 28; :func:`webui.text.chat_text.inline`)."""
    facts = "; ".join(inline(m.text) for m in memories)
    return t("memory_toast", facts=facts)


def pending_proposals(ctx: WebContext, session_id: str | None, project_key: str) -> list[Memory]:
    """Facts the model proposed in conversation ``session_id`` that wait for the user's yes (a
    turn that read files or tool output stores none by itself; :meth:`MemoryStore.propose`)."""
    if not session_id:
        return []
    try:
        return [m for m in memories_of(ctx).pending(project_key) if m.session_id == session_id]
    except AnycodeError as err:
        log.info("memory proposals: %s", err)
        return []


def proposal_markdown(memories: list[Memory]) -> str:
    """The proposal card's text: what the assistant wants to remember and why it asks (as text)."""
    return t("memory_proposal", facts="; ".join(inline(m.text) for m in memories))


def answer_proposals(ctx: WebContext, project_key: str, ids: list[str], *, keep: bool) -> str:
    """Accept (``keep``) or dismiss the proposals ``ids``; a sentence saying what was done."""
    done = 0
    store = memories_of(ctx)
    for mid in ids:
        try:
            (store.accept if keep else store.dismiss)(mid, project_key=project_key)
            done += 1
        except AnycodeError as err:
            log.info("memory proposal %s: %s", mid, err)
    return tn("memory_proposals_kept" if keep else "memory_proposals_declined", done)


def switch_state(ctx: WebContext) -> tuple[bool, bool, str]:
    """``(checked, interactive, info)`` of the Automatic memory switch."""
    if env_mode() == "off":
        return False, False, t("memory_off")
    mode = memory_mode(ctx.storage.files_dir)
    return mode == "auto", True, t("memory_auto_info" if mode == "auto" else "memory_manual_info")


def scope_choices() -> list[tuple[str, str]]:
    """The scope picker's choices in the request's language."""
    return [(t("memory_scope_project"), "project"), (t("memory_every_project"), "user")]


def set_automatic_memory(ctx: WebContext, enabled: bool) -> str | None:
    """The **Automatic memory** switch: turn it on or off for the app's data directory
    (:func:`core.memory.mode.set_automatic`). Returns the notice when the choice could not be
    saved (an ``OSError``), else None."""
    try:
        set_automatic(bool(enabled), ctx.storage.files_dir)
    except OSError as err:
        return t("memory_switch_not_saved", error=err)
    return None
