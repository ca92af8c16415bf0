"""Turn stored sessions into what the page shows: chat rows and the sidebar list.

Pure functions, no Gradio import: the chat rows are the dicts ``gr.Chatbot`` accepts
(``{"role", "content", "metadata"?}``), the sidebar is an HTML string (every user-provided
string escaped here, because ``gr.HTML`` inserts it as markup).
"""
from __future__ import annotations

import html
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from core.session.compaction import shown_sizes
from core.session.entries import reasoning_of
from core.session.export import message_text
from core.session.fold import fold
from core.session.lookup import has_tags, split_tags
from webui.text import chat_text
from webui.render.tool_steps import tool_step
from webui import i18n
from webui.i18n import t, tn
from webui.text.timefmt import GROUPS, group_key, relative_time, session_label

UNTITLED = i18n.Msg("new_chat")  # the blank chat, not saved yet (t() it before showing)

log = logging.getLogger(__name__)

THINKING = i18n.Msg("thinking_step")
THINKING_ICON = "\u2026"  # … (a text glyph, like tool_steps.TOOL_ICON)


def thinking_step(text: str, key: Any = "", done: bool = True) -> dict[str, Any]:
    """A thinking-mode model's reasoning (``reasoning_content`` / ``reasoning``) as a collapsed
    step titled "Thinking" above the reply it led to, never as the answer; ``done`` False while
    it streams."""
    return {"role": "assistant", "content": chat_text.reply(text),
            "metadata": {"title": f"{THINKING_ICON} {t(THINKING)}", "id": f"thinking-{key}",
                         "status": "done" if done else "pending"}}


MEMORY_NOTE_ID = "ac-memories-used"


def added_row(row: dict[str, Any]) -> bool:
    """True for a row the page adds beside a stored message's own rows — the "Used N memories"
    note (:func:`memory_note`) and a reply's "Thinking" step (:func:`thinking_step`): both carry
    the index of the reply they stand above, but are not where its text is shown."""
    row_id = str((row.get("metadata") or {}).get("id", ""))
    return row_id == MEMORY_NOTE_ID or row_id.startswith("thinking-")


def memory_note(system_text: Any) -> dict[str, Any] | None:
    """The "Used N memories" step shown above a new chat's first reply (collapsed; opening it
    lists them), read from the session's stored system prompt; None when it holds none."""
    from core.memory.context import memories_in_prompt

    used = memories_in_prompt(system_text)
    if not used:
        return None
    return {"role": "assistant", "content": chat_text.reply("\n".join(f"- {line}" for line in used)),
            "metadata": {"title": tn("memories_used", len(used)),
                         "id": MEMORY_NOTE_ID, "status": "done"}}


@dataclass
class ChatView:
    """Chat rows for a session plus, for each row, the index of the stored message it ends at
    (``source[i]``), so "Branch from here" on row ``i`` forks after stored message ``source[i]``."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    source: list[int] = field(default_factory=list)


CHAT_WINDOW = 200  # stored messages shown when a conversation opens; earlier ones on request


def window_start(messages: list[dict[str, Any]], size: int = CHAT_WINDOW, include: int | None = None,
                 end: int | None = None) -> int:
    """The index of the first stored message to show of ``messages``: the last ``size`` of them
    (of ``messages[:end]`` when ``end`` is given: the window before one already shown, without
    copying the list), reaching back to ``include`` when given (a search hit), and moved back past
    tool results so a tool step is never shown without its call. 0 shows everything.

    A long conversation is shown from here, so opening one of 100,000 messages renders a few
    hundred rows, not all of them (issue 17); the rest come with "Show earlier messages"."""
    start = max(0, (len(messages) if end is None else min(end, len(messages))) - size)
    if include is not None:
        start = min(start, max(0, include))
    while start > 0 and messages[start].get("role") == "tool":
        start -= 1
    return start


def chat_window(messages: list[dict[str, Any]], start: int,
                compactions: list[dict[str, Any]] | None = None,
                ends: dict[int, str] | None = None, agents: dict[int, str] | None = None) -> ChatView:
    """:func:`chat_rows` of ``messages[start:]``, with ``source`` still indexing ``messages``;
    ``compactions`` (``Session.compactions``) adds a summary divider where each one cut;
    ``ends`` (``Session.reply_ends``) marks cut-off replies; ``agents``
    (``Session.reply_agents``) labels the replies a defined agent wrote."""
    if start <= 0:
        return chat_rows(messages, compactions, ends, agents)
    shifted = [{**c, "first_kept_index": c["first_kept_index"] - start} for c in compactions or ()
               if c.get("first_kept_index", 0) > start]
    view = chat_rows(messages[start:], shifted, {i - start: e for i, e in (ends or {}).items() if i >= start},
                     {i - start: a for i, a in (agents or {}).items() if i >= start})
    view.source = [i + start for i in view.source]
    return view


SUMMARY_DIVIDER = i18n.Msg("summary_divider")


def summary_divider(compaction: dict[str, Any]) -> dict[str, Any]:
    """The chat row standing where a compaction cut: a collapsed step titled
    :data:`SUMMARY_DIVIDER` that expands to the summary. Every message above it stays shown;
    the model sees the summary instead of them (core.session.compaction.model_view)."""
    how = t({"manual": "summary_on_request", "overflow": "summary_after_overflow"}.get(
        str(compaction.get("trigger")), "summary_automatically"))
    # core.session.compaction.shown_sizes: no figures when they would read backwards (a server's
    # wrong or missing usage); "~" on each figure that is anycode's estimate, and the note says so.
    shown = shown_sizes(compaction)
    sizes = ""
    if shown is not None:
        before, after, before_est, after_est = shown
        sizes = t("summary_sizes", before=f"{'~' if before_est else ''}{before:,}",
                  after=f"{'~' if after_est else ''}{after:,}",
                  estimated=t("summary_estimated") if before_est or after_est else "")
    note = f"*{t('summary_note', how=how, sizes=sizes)}*\n\n"
    return {"role": "assistant", "content": note + chat_text.reply(str(compaction.get("summary", ""))),
            "metadata": {"title": f"\u2702 {t(SUMMARY_DIVIDER)}", "status": "done",
                         "id": f"compaction-{compaction.get('ts', '')}"}}


def _looks_like_error(text: str) -> bool:
    return text.startswith(("Error", "error:", "Interrupted", "interrupted"))


# Option values (stable whatever the language; their labels are translated): RETRY under a failed
# reply's error row answers the message again, CONTINUE under a cut-off reply sends "Continue".
RETRY = "Retry"
CONTINUE = "Continue"
CUT_OFF_REASONS = {
    "length": "cut_off_length",
    "content_filter": "cut_off_content_filter",
    "no_end": "cut_off_no_end",
}


def option(value: str) -> dict[str, str]:
    """A chat option (``RETRY`` / ``CONTINUE``) labelled in the request's language."""
    return {"label": t(value.lower()), "value": value}


def cut_off_row(end: str, last: bool) -> dict[str, Any]:
    """The row marking a reply the model did not finish (``end`` as stored: ``"length"``,
    ``"content_filter"``, ``"no_end"``); the last one offers **Continue** (``options``)."""
    why = t(CUT_OFF_REASONS.get(end, "cut_off_unknown"))
    row: dict[str, Any] = {"role": "assistant", "content": f"\u26a0 {t('cut_off_row', why=why)}"}
    if last:
        row["options"] = [option(CONTINUE)]
    return row


def agent_label(name: str) -> str:
    """The line above a reply a defined agent wrote (issue 30: ``@name`` in the chat): its name,
    HTML-escaped, in a marker :func:`webui.text.chat_text.source` (and the page's Copy) removes."""
    return f'{chat_text.LABEL_OPEN}{html.escape(name)}</small>\n\n'


def chat_rows(messages: list[dict[str, Any]], compactions: list[dict[str, Any]] | None = None,
              ends: dict[int, str] | None = None, agents: dict[int, str] | None = None) -> ChatView:
    """Render stored OpenAI messages as chat rows; the system message is hidden. A user's text is
    shown as typed (:func:`webui.text.chat_text.literal`), a reply as Markdown with its HTML as text and
    remote images and media as links (:func:`webui.text.chat_text.reply`).

    An assistant message becomes its reasoning as a collapsed "Thinking" step (if a thinking-mode
    server sent any, :func:`thinking_step`), its text row (if any), then one collapsible step per
    tool call; a ``tool`` message fills in the result of its step (matched by ``tool_call_id``).
    Each of ``compactions`` puts a :func:`summary_divider` row before its ``first_kept_index``
    (its ``source`` is the last summarised message, so "Branch from here" on it forks there).
    ``ends`` (``Session.reply_ends``): replies the model did not finish get a "cut off" row after
    their text, with a **Continue** option when nothing follows them. ``agents``
    (``Session.reply_agents``): a reply a defined agent wrote has its name above its text
    (:func:`agent_label`).
    """
    ends = ends or {}
    agents = agents or {}
    view = ChatView()
    steps: dict[str, int] = {}  # tool_call_id -> row index
    calls: dict[str, tuple[str, str]] = {}  # tool_call_id -> (name, arguments)
    dividers: dict[int, list[dict[str, Any]]] = {}
    for c in compactions or ():
        dividers.setdefault(int(c.get("first_kept_index", 0)), []).append(c)
    note: dict[str, Any] | None = None  # "Used N memories", shown above the first reply
    for i, msg in enumerate(messages):
        for c in dividers.pop(i, ()):
            if view.rows:  # nothing shown above it (all outside the window): no divider
                view.rows.append(summary_divider(c))
                view.source.append(max(0, i - 1))
        role = msg.get("role")
        if role == "system":
            note = memory_note(msg.get("content"))
            continue
        if note is not None and role == "assistant":
            view.rows.append(note)
            view.source.append(i)
            note = None
        if role == "user":
            view.rows.append({"role": "user", "content": chat_text.literal(message_text(msg.get("content")))})
            view.source.append(i)
        elif role == "assistant":
            thought = reasoning_of(msg)
            if thought:
                view.rows.append(thinking_step(thought, i))
                view.source.append(i)
            text = message_text(msg.get("content"))
            if text.strip():
                label = agent_label(agents[i]) if i in agents else ""
                view.rows.append({"role": "assistant", "content": label + chat_text.reply(text)})
                view.source.append(i)
            if i in ends and not msg.get("tool_calls"):
                view.rows.append(cut_off_row(ends[i], last=i == len(messages) - 1))
                view.source.append(i)
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                cid = str(call.get("id", ""))
                name, args = str(fn.get("name", "tool")), str(fn.get("arguments", ""))
                calls[cid] = (name, args)
                steps[cid] = len(view.rows)
                view.rows.append(tool_step(cid, name, args))
                view.source.append(i)
        elif role == "tool":
            cid = str(msg.get("tool_call_id", ""))
            result = message_text(msg.get("content"))
            if cid in steps:
                name, args = calls[cid]
                row = steps[cid]
                view.rows[row] = tool_step(cid, name, args, result, _looks_like_error(result))
                view.source[row] = i
            else:  # an orphan result (history damaged elsewhere): still show it
                view.rows.append(tool_step(cid, "tool", "", result))
                view.source.append(i)
        else:
            log.debug("not showing message %d with role %r", i, role)
    for rest in dividers.values():  # everything was summarised: the divider comes last
        for c in rest:
            if view.rows:
                view.rows.append(summary_divider(c))
                view.source.append(len(messages) - 1)
    return view


# --- sidebar ---------------------------------------------------------------------------------


@dataclass
class SidebarRow:
    """One row of the session list: id, shown title, relative time, archived flag, active flag;
    ``remote``: a chat only the mirror has (written on another machine, issue 26); ``pinned`` and
    ``tags``: its conversation's (issue 31)."""

    id: str
    title: str
    when: str
    archived: bool = False
    active: bool = False
    forked: bool = False
    remote: bool = False
    pinned: bool = False
    tags: tuple[str, ...] = ()


# A pushpin drawn in the text colour (an emoji would need a colour font the machine may lack).
PIN_ICON = ('<svg viewBox="0 0 16 16" width="11" height="11" aria-hidden="true" focusable="false">'
            '<path fill="currentColor" d="M10.5 1.5 14.5 5.5 13 6l-2.6 2.6.4 3.4-1.3 1.3-2.7-2.7L3 14.4 1.6 13 '
            '5.4 9.2 2.7 6.5 4 5.2l3.4.4L10 3z"/></svg>')

SIDEBAR_PAGE = 100  # rows the session list renders at first; more as the user scrolls


def _filter(query: str) -> Any:
    """The sidebar's filter for ``query``: ``tag:NAME`` terms keep conversations with every such
    tag (:func:`core.session.lookup.split_tags`), the rest of the text filters by the shown label,
    folded as title lookup and search fold it (:func:`core.session.fold.fold`: case, accents and
    width). Returns a predicate over metas, None when the query filters nothing."""
    tags, text = split_tags(query)
    needle = fold(text)
    if not tags and not needle:
        return None
    return lambda m: (has_tags(getattr(m, "tags", ()), tags) and (
        not needle or needle in fold(session_label(m.title, m.created_at, m.title_source))))


def page_sessions(metas: list[Any], *, query: str = "", limit: int | None = SIDEBAR_PAGE) -> tuple[list[Any], int]:
    """``(the metas to render, how many match)``: ``metas`` (most recent first, as ``list()``
    returns them) filtered by ``query`` (:func:`_filter`: its label, ``tag:NAME``), pinned ones
    first (issue 31), cut to ``limit`` (None: all). With 10,000 sessions the sidebar renders one
    page, so it stays fast (issue 17)."""
    keep = _filter(query)
    if keep is not None:
        metas = [m for m in metas if keep(m)]
    if any(getattr(m, "pinned", None) is not None for m in metas):
        metas = sorted(metas, key=lambda m: getattr(m, "pinned", None) is None)  # stable: each part keeps its order
    return (list(metas) if limit is None else list(metas[:limit])), len(metas)


def group_sessions(metas: list[Any], *, query: str = "", active_id: str | None = None,
                   now: float | None = None, remote_ids: Any = ()) -> list[tuple[str, list[SidebarRow]]]:
    """Group ``SessionMeta``s (most recent first) into the sidebar's date groups.

    ``query`` filters by the shown label, case-insensitively (an untitled session by its
    ``Session <date>`` label), and by ``tag:NAME`` terms (:func:`_filter`); ``remote_ids``: ids
    of chats only in the mirror (marked).
    Returns ``[(group label, rows)]``: "Pinned" first (pinned conversations, most recent first;
    issue 31), then the groups of :data:`GROUPS` in order, empty groups left out; labels and
    times are in the request's language, days in the browser's time zone.
    """
    tz = i18n.zone()
    keep = _filter(query)
    pinned: list[SidebarRow] = []
    grouped: dict[str, list[SidebarRow]] = {g: [] for g in GROUPS}
    for meta in sorted(metas, key=lambda m: m.updated_at, reverse=True):
        if keep is not None and not keep(meta):
            continue
        row = SidebarRow(
            id=meta.id, title=session_label(meta.title, meta.created_at, meta.title_source),
            when=relative_time(meta.updated_at, now, tz), archived=bool(meta.archived),
            active=meta.id == active_id, forked=bool(meta.forked_from), remote=meta.id in remote_ids,
            pinned=getattr(meta, "pinned", None) is not None, tags=tuple(getattr(meta, "tags", ())))
        (pinned if row.pinned else grouped[group_key(meta.updated_at, now, tz)]).append(row)
    out = [(t("pinned_group"), pinned)] if pinned else []
    return out + [(t(g), rows) for g, rows in grouped.items() if rows]


def tag_chip(tag: str, *, removable: bool = False) -> str:
    """One tag as a chip (``span.ac-tag`` with ``data-tag``; a click filters the list by it);
    ``removable`` adds its × (``data-untag``), as the title bar shows them."""
    chip = (f'<span class="ac-tag" role="button" tabindex="0" data-tag="{html.escape(tag)}" '
            f'title="{html.escape(t("filter_by_tag", tag=tag))}">#{html.escape(tag)}</span>')
    if removable:
        chip = (f'<span class="ac-tag-wrap">{chip}<span class="ac-untag" role="button" tabindex="0" '
                f'data-untag="{html.escape(tag)}" aria-label="{html.escape(t("remove_tag", tag=tag))}" '
                f'title="{html.escape(t("remove_tag", tag=tag))}">\u00d7</span></span>')
    return chip


def sidebar_html(groups: list[tuple[str, list[SidebarRow]]], *, empty_text: str, more: int = 0,
                 note: str = "") -> str:
    """HTML for the session list; each row is a ``button.ac-session`` carrying ``data-sid``
    (the page's script turns a click into a ``select`` event with that id), ``data-pinned``,
    ``data-tags`` and its menu button (``[data-menu]``, assets/js/organise.js). ``more``: how many
    matching sessions are not rendered yet; a ``button.ac-more`` at the end loads the next page
    (clicked, or scrolled into view). ``note``: a sentence above the list (``div.ac-list-note``;
    e.g. the mirror cannot be reached)."""
    top = f'<div class="ac-list-note" role="status">{html.escape(note)}</div>' if note else ""
    if not groups:
        return f'{top}<div class="ac-empty">{html.escape(empty_text)}</div>'
    # The row menu's labels (assets/js/organise.js builds the menu from them).
    menu = {"pin": t("pin"), "unpin": t("unpin"), "tags": t("edit_tags"), "prompt": t("tags_prompt")}
    out = [top, f'<nav class="ac-sessions" aria-label="{html.escape(t("conversations_label"))}" '
                f'data-menu-labels="{html.escape(json.dumps(menu, ensure_ascii=False))}">']
    for label, rows in groups:
        out.append(f'<div class="ac-group"><div class="ac-group-label">{html.escape(label)}</div>')
        for row in rows:
            classes = ("ac-session" + (" active" if row.active else "") + (" ac-remote" if row.remote else "")
                       + (" pinned" if row.pinned else ""))
            badge = ""
            if row.archived:
                badge += f'<span class="ac-badge">{html.escape(t("archived_badge"))}</span>'
            if row.remote:
                badge += f'<span class="ac-badge ac-remote-badge">{html.escape(t("remote_badge"))}</span>'
            if row.pinned:
                badge += f'<span class="ac-pin" role="img" aria-label="{html.escape(t("pinned_badge"))}">{PIN_ICON}</span>'
            tags = "".join(tag_chip(tag) for tag in row.tags)
            out.append(
                f'<button type="button" class="{classes}" data-sid="{html.escape(row.id)}" '
                f'data-pinned="{int(row.pinned)}" data-tags="{html.escape(", ".join(row.tags))}" '
                f'title="{html.escape(row.title)}">'
                f'<span class="ac-session-title">{html.escape(row.title)}</span>'
                f'<span class="ac-session-meta">{badge}{tags}<span class="ac-when">'
                f'{html.escape(row.when)}</span>'
                f'<span class="ac-row-menu" role="button" tabindex="0" data-menu="{html.escape(row.id)}" '
                f'aria-label="{html.escape(t("chat_menu"))}" title="{html.escape(t("chat_menu"))}">\u22ef</span>'
                '</span></button>'
            )
        out.append("</div>")
    if more > 0:
        out.append(f'<button type="button" class="ac-more" data-more="1">{html.escape(tn("show_more_older", more))}</button>')
    out.append("</nav>")
    return "".join(out)
