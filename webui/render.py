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

from core.session.export import message_text
from webui import chat_text
from webui.subagent_panel import TASK_TOOL, task_step_title, transcript_link
from webui import i18n
from webui.i18n import t, tn
from webui.timefmt import GROUPS, group_key, relative_time, session_label

UNTITLED = i18n.Msg("new_chat")  # the blank chat, not saved yet (t() it before showing)

log = logging.getLogger(__name__)

TOOL_ICON = "\u2699"  # ⚙ (a text glyph: common fonts have it, unlike emoji)


def pretty_arguments(raw: str) -> str:
    """Return tool-call arguments (a raw JSON string) indented for reading; unparsable text as is."""
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return raw or ""


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside keeps file contents from closing the block.
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def tool_step_content(arguments: str, result: str | None, is_error: bool = False) -> str:
    """Markdown body of a tool step: its arguments and, once known, its result."""
    body = f"**{t('tool_arguments')}**\n\n" + _fence(pretty_arguments(arguments), "json")
    if result is not None:
        label = f"**{t('tool_error')}**" if is_error else f"**{t('tool_result')}**"
        body += f"\n\n{label}\n\n" + _fence(result)
    return body


def tool_step(call_id: str, name: str, arguments: str, result: str | None = None,
              is_error: bool = False) -> dict[str, Any]:
    """A collapsible chat row for one tool call: title ``🛠️ name``, status pending until a result."""
    shown = chat_text.inline(name)
    title = f"{TOOL_ICON} " + (t("tool_failed", name=shown) if is_error else shown)
    content = tool_step_content(arguments, result, is_error)
    if name == TASK_TOOL:  # a sub-agent: its description, and a link to its transcript
        title = task_step_title(arguments, is_error)
        content = transcript_link(call_id) + "\n\n" + content
    return {
        "role": "assistant",
        "content": content,
        "metadata": {"title": title, "id": call_id,
                     "status": "pending" if result is None else "done"},
    }


def memory_note(system_text: Any) -> dict[str, Any] | None:
    """The "Used N memories" step shown above a new chat's first reply (collapsed; opening it
    lists them), read from the session's stored system prompt; None when it holds none."""
    from core.memory.context import memories_in_prompt

    used = memories_in_prompt(system_text)
    if not used:
        return None
    return {"role": "assistant", "content": chat_text.reply("\n".join(f"- {line}" for line in used)),
            "metadata": {"title": tn("memories_used", len(used)),
                         "id": "ac-memories-used", "status": "done"}}


@dataclass
class ChatView:
    """Chat rows for a session plus, for each row, the index of the stored message it ends at
    (``source[i]``), so "Branch from here" on row ``i`` forks after stored message ``source[i]``."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    source: list[int] = field(default_factory=list)


CHAT_WINDOW = 200  # stored messages shown when a conversation opens; earlier ones on request


def window_start(messages: list[dict[str, Any]], size: int = CHAT_WINDOW, include: int | None = None) -> int:
    """The index of the first stored message to show of ``messages``: the last ``size`` of them,
    reaching back to ``include`` when given (a search hit), and moved back past tool results so
    a tool step is never shown without its call. 0 shows everything.

    A long conversation is shown from here, so opening one of 100,000 messages renders a few
    hundred rows, not all of them (issue 17); the rest come with "Show earlier messages"."""
    start = max(0, len(messages) - size)
    if include is not None:
        start = min(start, max(0, include))
    while start > 0 and messages[start].get("role") == "tool":
        start -= 1
    return start


def chat_window(messages: list[dict[str, Any]], start: int,
                compactions: list[dict[str, Any]] | None = None,
                ends: dict[int, str] | None = None) -> ChatView:
    """:func:`chat_rows` of ``messages[start:]``, with ``source`` still indexing ``messages``;
    ``compactions`` (``Session.compactions``) adds a summary divider where each one cut;
    ``ends`` (``Session.reply_ends``) marks cut-off replies."""
    if start <= 0:
        return chat_rows(messages, compactions, ends)
    shifted = [{**c, "first_kept_index": c["first_kept_index"] - start} for c in compactions or ()
               if c.get("first_kept_index", 0) > start]
    view = chat_rows(messages[start:], shifted, {i - start: e for i, e in (ends or {}).items() if i >= start})
    view.source = [i + start for i in view.source]
    return view


SUMMARY_DIVIDER = i18n.Msg("summary_divider")


def summary_divider(compaction: dict[str, Any]) -> dict[str, Any]:
    """The chat row standing where a compaction cut: a collapsed step titled
    :data:`SUMMARY_DIVIDER` that expands to the summary. Every message above it stays shown;
    the model sees the summary instead of them (core.session.compaction.model_view)."""
    how = t({"manual": "summary_on_request", "overflow": "summary_after_overflow"}.get(
        str(compaction.get("trigger")), "summary_automatically"))
    before, after = compaction.get("tokens_before"), compaction.get("tokens_after")
    sizes = t("summary_sizes", before=before, after=after) if isinstance(before, int) and isinstance(after, int) else ""
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


def chat_rows(messages: list[dict[str, Any]], compactions: list[dict[str, Any]] | None = None,
              ends: dict[int, str] | None = None) -> ChatView:
    """Render stored OpenAI messages as chat rows; the system message is hidden. A user's text is
    shown as typed (:func:`webui.chat_text.literal`), a reply as Markdown with its HTML as text and
    remote images and media as links (:func:`webui.chat_text.reply`).

    An assistant message becomes its text row (if any) followed by one collapsible step per tool
    call; a ``tool`` message fills in the result of its step (matched by ``tool_call_id``).
    Each of ``compactions`` puts a :func:`summary_divider` row before its ``first_kept_index``
    (its ``source`` is the last summarised message, so "Branch from here" on it forks there).
    ``ends`` (``Session.reply_ends``): replies the model did not finish get a "cut off" row after
    their text, with a **Continue** option when nothing follows them.
    """
    ends = ends or {}
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
            text = message_text(msg.get("content"))
            if text.strip():
                view.rows.append({"role": "assistant", "content": chat_text.reply(text)})
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
    """One row of the session list: id, shown title, relative time, archived flag, active flag."""

    id: str
    title: str
    when: str
    archived: bool = False
    active: bool = False
    forked: bool = False


SIDEBAR_PAGE = 100  # rows the session list renders at first; more as the user scrolls


def page_sessions(metas: list[Any], *, query: str = "", limit: int | None = SIDEBAR_PAGE) -> tuple[list[Any], int]:
    """``(the metas to render, how many match)``: ``metas`` (most recent first, as ``list()``
    returns them) filtered by ``query`` on their shown label, cut to ``limit`` (None: all).
    With 10,000 sessions the sidebar renders one page, so it stays fast (issue 17)."""
    needle = query.strip().casefold()
    if needle:
        metas = [m for m in metas if needle in session_label(m.title, m.created_at, m.title_source).casefold()]
    return (list(metas) if limit is None else list(metas[:limit])), len(metas)


def group_sessions(metas: list[Any], *, query: str = "", active_id: str | None = None,
                   now: float | None = None) -> list[tuple[str, list[SidebarRow]]]:
    """Group ``SessionMeta``s (most recent first) into the sidebar's date groups.

    ``query`` filters by the shown label, case-insensitively (an untitled session by its
    ``Session <date>`` label).
    Returns ``[(group label, rows)]`` in the order of :data:`GROUPS`, empty groups left out;
    labels and times are in the request's language, days in the browser's time zone.
    """
    tz = i18n.zone()
    needle = query.strip().casefold()
    grouped: dict[str, list[SidebarRow]] = {g: [] for g in GROUPS}
    for meta in sorted(metas, key=lambda m: m.updated_at, reverse=True):
        title = session_label(meta.title, meta.created_at, meta.title_source)
        if needle and needle not in title.casefold():
            continue
        grouped[group_key(meta.updated_at, now, tz)].append(SidebarRow(
            id=meta.id, title=title, when=relative_time(meta.updated_at, now, tz),
            archived=bool(meta.archived), active=meta.id == active_id,
            forked=bool(meta.forked_from)))
    return [(t(g), rows) for g, rows in grouped.items() if rows]


def sidebar_html(groups: list[tuple[str, list[SidebarRow]]], *, empty_text: str, more: int = 0) -> str:
    """HTML for the session list; each row is a ``button.ac-session`` carrying ``data-sid``
    (the page's script turns a click into a ``select`` event with that id). ``more``: how many
    matching sessions are not rendered yet; a ``button.ac-more`` at the end loads the next page
    (clicked, or scrolled into view)."""
    if not groups:
        return f'<div class="ac-empty">{html.escape(empty_text)}</div>'
    out = [f'<nav class="ac-sessions" aria-label="{html.escape(t("conversations_label"))}">']
    for label, rows in groups:
        out.append(f'<div class="ac-group"><div class="ac-group-label">{html.escape(label)}</div>')
        for row in rows:
            classes = "ac-session" + (" active" if row.active else "")
            badge = ""
            if row.archived:
                badge += f'<span class="ac-badge">{html.escape(t("archived_badge"))}</span>'
            out.append(
                f'<button type="button" class="{classes}" data-sid="{html.escape(row.id)}" '
                f'title="{html.escape(row.title)}">'
                f'<span class="ac-session-title">{html.escape(row.title)}</span>'
                f'<span class="ac-session-meta">{badge}<span class="ac-when">'
                f'{html.escape(row.when)}</span></span></button>'
            )
        out.append("</div>")
    if more > 0:
        out.append(f'<button type="button" class="ac-more" data-more="1">{html.escape(tn("show_more_older", more))}</button>')
    out.append("</nav>")
    return "".join(out)
