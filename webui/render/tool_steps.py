"""Tool steps in the chat: the collapsible row of one tool call, shared by a reply's own steps
(:mod:`webui.render.rows`) and a sub-agent's nested ones (:mod:`webui.chat.subagents`).

A leaf of ``render``: imports ``text`` and ``i18n`` only (and the session wing's MCP naming rule),
so both sides use it without importing each other. A ``task`` step (a sub-agent) is titled with its description and carries the link
that opens the sub-agent's transcript (``#ac-subagent=<call id>``; the page's script turns a
click on it into an event, see ``assets/js/subagent_links.js``).
"""
from __future__ import annotations

import json
import urllib.parse
from typing import Any

from core.session.mcp_calls import split_mcp_name
from webui import i18n
from webui.i18n import t
from webui.text import chat_text

TOOL_ICON = "\u2699"  # ⚙ (a text glyph: common fonts have it, unlike emoji)
TASK_TOOL = "task"
LINK_PREFIX = "#ac-subagent="
LINK_TEXT = i18n.Msg("subagent_link")


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
    body = f"**{t('tool_arguments')}**\n\n" + _fence(chat_text.visible_bidi(pretty_arguments(arguments)), "json")
    if result is not None:
        label = f"**{t('tool_error')}**" if is_error else f"**{t('tool_result')}**"
        body += f"\n\n{label}\n\n" + _fence(result)
    return body


def transcript_link(call_id: str) -> str:
    """The Markdown link that opens the transcript of task call ``call_id``."""
    return f"[{i18n.t(LINK_TEXT)}]({LINK_PREFIX}{urllib.parse.quote(call_id, safe='')})"


def task_description(arguments: str) -> str:
    """The ``description`` of a task call's raw JSON arguments ("" when missing or unparsable)."""
    try:
        args = json.loads(arguments)
    except (TypeError, ValueError):
        return ""
    desc = args.get("description") if isinstance(args, dict) else None
    return " ".join(desc.split()) if isinstance(desc, str) else ""


def task_step_title(arguments: str, is_error: bool = False) -> str:
    """The title of a task step: ``⚙ task: <description>``."""
    desc = task_description(arguments)
    name = f"task: {chat_text.inline(desc)}" if desc else "task"
    return f"{TOOL_ICON} " + (i18n.t("tool_failed", name=name) if is_error else name)


def tool_step(call_id: str, name: str, arguments: str, result: str | None = None,
              is_error: bool = False) -> dict[str, Any]:
    """A collapsible chat row for one tool call: title ``⚙ name``, status pending until a result.
    An MCP tool (``mcp__<server>__<tool>``) is titled with its tool and server: ``⚙ tool · server``."""
    mcp = split_mcp_name(name)
    shown = chat_text.inline(t("mcp_tool_step", tool=mcp[1], server=mcp[0]) if mcp else name)
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
