"""Export a session for people (Markdown) or tools and backups (JSONL, its stored entries).

Shared by the ``anycode sessions export`` command and the web UI's download button, so both give
the same file. No Gradio import.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import time
from typing import Any, Iterable

from core.session.compaction import shown_sizes
from core.session.entries import encode_entries, messages_of
from core.session.markdown import escape_html
from core.session.models import Session
from core.session.text import message_text  # noqa: F401 (core.session.export.message_text, as before)

log = logging.getLogger(__name__)

UNTITLED = "New chat"  # the blank chat, not saved yet
FALLBACK_TITLE_FORMAT = "Session %Y-%m-%d %H:%M"  # local time; the design's timestamp fallback


def session_label(title: str | None, created_at: float | None) -> str:
    """What a stored session is called everywhere (sidebar, command line, exports): its title,
    else ``Session YYYY-MM-DD HH:MM`` in local time from ``created_at`` (Unix seconds), so
    untitled sessions stay apart; :data:`UNTITLED` only when no time is known."""
    title = (title or "").strip()
    if title:
        return title
    if not created_at:
        return UNTITLED
    return time.strftime(FALLBACK_TITLE_FORMAT, time.localtime(created_at))


_ROLES = {"user": "User", "assistant": "Assistant", "system": "System", "developer": "Developer"}


def _fence(text: str, lang: str = "") -> list[str]:
    # A fence longer than any backtick run inside, so file contents cannot close the block early.
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return [f"{ticks}{lang}", text, ticks, ""]


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")


def closed_fences(text: str) -> str:
    """``text`` with a closing fence appended when it ends inside a fenced code block it opened
    (CommonMark 4.5: a fence of ``` or ~~~, closed only by a run of the same character at least as
    long, with nothing but spaces after it). Without it, the rest of an export — the next
    message's heading included — would land inside that code block."""
    open_fence = ""
    for line in text.split("\n"):
        if open_fence:
            stripped = line.strip()
            if (len(line) - len(line.lstrip(" ")) <= 3 and stripped and set(stripped) == {open_fence[0]}
                    and len(stripped) >= len(open_fence)):
                open_fence = ""
            continue
        m = _FENCE_OPEN.match(line)
        if m:
            open_fence = m.group(1)
    if not open_fence:
        return text
    return text + ("" if text.endswith("\n") else "\n") + open_fence


_SENTINEL = "anycode-export-sentinel"


def contained_markdown(text: str) -> str:
    """A message's Markdown that cannot swallow what follows it in an export, nor show raw HTML:
    open fences are closed (:func:`closed_fences`) and HTML outside code is made inert
    (:func:`core.session.markdown.escape_html`: a typed ``<script>`` or ``<img onerror=…>`` reads
    as text in any Markdown viewer; code stays verbatim); if the text still leaves a block open,
    the whole text is shown fenced instead. Checked with the CommonMark parser itself: a heading
    written after the result must still parse as a heading."""
    from markdown_it import MarkdownIt

    out = escape_html(closed_fences(text))
    tokens = MarkdownIt("commonmark").parse(f"{out}\n\n# {_SENTINEL}\n")
    if any(t.type == "inline" and t.content == _SENTINEL and i and tokens[i - 1].type == "heading_open"
           for i, t in enumerate(tokens)):
        return out
    return "\n".join(_fence(text)[:-1])


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return arguments or ""


def _when(ts: float) -> str:
    # Local time for reading, with the UTC offset so the file is unambiguous elsewhere.
    return _dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def session_to_markdown(session: Session, subagents: Iterable[Any] | None = None,
                        version: tuple[int, int, bool] | None = None,
                        tags: Iterable[str] | None = None) -> str:
    """Render a :class:`~core.session.models.Session` as Markdown: title, facts (id, times, project,
    branch origin, which version of its conversation it is), then every message in order (system
    included) with tool calls and results as fenced blocks (raw HTML in titles, messages and
    summaries outside code made inert, :func:`contained_markdown`); then each of ``subagents``
    (``core.session.subagents.SubagentRecord``s) as a section of its own. ``version``: ``(n, m,
    in use)`` from :meth:`core.session.manager.SessionManager.version_number`. ``tags``: the
    conversation's tags (:meth:`~core.session.manager.SessionManager.pin_and_tags`; a version's
    own record has none), default the session's own. Returns the text, ending with one newline."""
    lines = [f"# {escape_html(session.title or UNTITLED)}", "", f"- Session: `{session.id}`",
             f"- Created: {_when(session.created_at)}", f"- Updated: {_when(session.updated_at)}",
             f"- Messages: {len(session.messages)}"]
    if session.cwd:
        lines.append(f"- Project: `{session.cwd}`")
    if version and version[1] > 1:  # the export is of this version only: say which one
        n, m, in_use = version
        lines.append(f"- Version {n} of {m} ({'the one in use' if in_use else 'not the one in use'}; "
                     f"`anycode sessions versions {session.id[:8]}` lists them)")
    if session.version_of:  # an Edit/Regenerate version
        lines.append(f"- Version of `{session.version_of.get('session_id')}` (shares messages up to "
                     f"{session.version_of.get('message_index')} with `{(session.forked_from or {}).get('session_id')}`)")
    elif session.forked_from:
        lines.append(f"- Branched from `{session.forked_from.get('session_id')}` at message "
                     f"{session.forked_from.get('message_index')}")
    if session.archived:
        lines.append("- Archived")
    tags = list(session.tags if tags is None else tags)
    if tags:
        lines.append("- Tags: " + ", ".join(f"`{t}`" for t in tags))
    lines.append("")
    lines += _messages_markdown(session.messages, compactions=session.compactions, agents=session.reply_agents,
                                mcp=session.mcp_calls)
    for rec in subagents or ():
        lines += [f"## Sub-agent: {escape_html(str(rec.description))}", "",
                  f"- Record: `{rec.key.subpath}`" + (f", for tool call `{rec.tool_call_id}`" if rec.tool_call_id else ""),
                  ""]
        lines += _messages_markdown(messages_of(rec.entries), level=3)
    return "\n".join(lines).rstrip() + "\n"


def compaction_markdown(compaction: dict[str, Any], level: int = 2) -> list[str]:
    """Markdown lines of one compaction (``Session.compactions`` item): a heading saying which
    messages were summarised, when, how and by which model, then the summary as a quote."""
    first = compaction.get("first_kept_index", 0)
    facts = [f"messages 0–{first - 1}" if first else "no messages", str(compaction.get("trigger") or "auto")]
    if isinstance(compaction.get("ts"), (int, float)):
        facts.append(_when(compaction["ts"]))
    if compaction.get("model"):
        facts.append(f"by {compaction['model']}")
    sizes = shown_sizes(compaction)
    if sizes is not None:
        before, after, before_est, after_est = sizes
        facts.append(f"{'~' if before_est else ''}{before:,} → {'~' if after_est else ''}{after:,} tokens"
                     + (" (~ estimated)" if before_est or after_est else ""))
    summary = escape_html(str(compaction.get("summary", "")))  # the model's prose: its HTML inert too
    quoted = ["> " + line if line else ">" for line in summary.splitlines()]
    return [f"{'#' * level} Earlier messages were summarised ({', '.join(facts)})", "", *quoted, ""]


def _messages_markdown(messages: list[dict[str, Any]], level: int = 2,
                       compactions: list[dict[str, Any]] | None = None,
                       agents: dict[int, str] | None = None,
                       mcp: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Markdown lines of OpenAI messages: a heading of ``level`` per message (a defined agent's
    reply, ``agents`` = ``Session.reply_agents``, names it: "Assistant (reviewer)"), tool calls
    (a call to an MCP server, ``mcp`` = ``Session.mcp_calls``, names its server and tool) and
    results as fenced blocks; each compaction's summary right before the first message it kept."""
    agents = agents or {}
    mcp = mcp or {}
    lines: list[str] = []
    h, h2 = "#" * level, "#" * (level + 1)
    by_index: dict[int, list[dict[str, Any]]] = {}
    for c in compactions or ():
        by_index.setdefault(int(c.get("first_kept_index", 0)), []).append(c)
    for i, msg in enumerate(messages):
        for c in by_index.pop(i, ()):
            lines += compaction_markdown(c, level)
        role = msg.get("role", "?")
        text = message_text(msg.get("content"))
        if role == "tool":
            name = f" `{msg['name']}`" if msg.get("name") else ""
            lines += [f"{h2} Tool result{name} ({msg.get('tool_call_id', '')})", ""] + _fence(text)
            continue
        who = f" ({agents[i]})" if i in agents else ""
        lines += [f"{h} {_ROLES.get(role, role)}{who}", ""]
        if text:
            lines += [contained_markdown(text), ""]
        for call in msg.get("tool_calls") or []:
            call = call if isinstance(call, dict) else {}
            fn = call.get("function") if isinstance(call.get("function"), dict) else {}
            source = mcp.get(str(call.get("id", "")))
            via = f" — MCP server `{_tick(source['server'])}`, tool `{_tick(source['tool'])}`" if source else ""
            lines += [f"**Tool call** `{fn.get('name', '')}` ({call.get('id', '')}){via}", ""]
            lines += _fence(_pretty(str(fn.get("arguments", ""))), "json")
    for rest in by_index.values():  # summarised everything: the summary comes last
        for c in rest:
            lines += compaction_markdown(c, level)
    return lines


def _tick(text: str) -> str:
    """``text`` for an inline code span (a backtick would end it)."""
    return str(text).replace("`", "'")


def session_to_jsonl(entries: Iterable[dict[str, Any]]) -> bytes:
    """Serialise stored entries (``SessionStore.load`` output) exactly as the JSONL store writes
    them: UTF-8, one compact JSON object per line, each ending in ``\\n``. The result, saved as
    ``<id>.jsonl`` in a project folder, is a valid session file. Raises ``ValueError`` for an
    entry that is not a JSON-serialisable dict."""
    return encode_entries(entries)
