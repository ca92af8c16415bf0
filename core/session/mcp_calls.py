"""Tool calls that went to an MCP server: how they are named and how a session records them.

Naming. A tool ``create_issue`` of the MCP server ``tracker`` is offered to the model as
``mcp__tracker__create_issue`` (Claude Code's scheme, so a history imported from Claude Code reads
the same). The chat completions API takes tool names matching ``^[a-zA-Z0-9_-]{1,64}$``, so both
parts are cleaned: any other character becomes ``_``; in the server part a run of underscores
becomes one (``__`` then only ever separates the server from the tool, and :func:`split_mcp_name`
reads the server back); a name longer than 64 characters is cut and ends in 8 hex characters of a
hash of the real server and tool names, so two long names never meet.

Record. The server and tool a call went to are stored beside the assistant message that made the
call (the entry's ``"mcp"`` key, like ``end`` and ``agent``; the message itself stays exactly
what the API takes): ``{"call_1": {"server": "tracker", "tool": "create_issue"}}`` — the names
as configured and as the server listed them, which a cleaned name may have changed. The entry is
copied whole by forks, versions, exports, backups, mirrors and imports of anycode's own files, so
the record goes wherever the message goes. :func:`mcp_calls_of` folds it.

This module is the session wing's: the page, the exports and the agent all read names through it.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable

MCP_PREFIX = "mcp__"
MAX_TOOL_NAME = 64  # the chat completions API's limit on a function name
ENTRY_KEY = "mcp"  # the message entry key holding {call id: {"server", "tool"}}

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_RUNS = re.compile(r"_{2,}")
_HASH_CHARS = 8


def _clean(part: str) -> str:
    return _INVALID.sub("_", part or "")


def mcp_tool_name(server: str, tool: str) -> str:
    """The name tool ``tool`` of MCP server ``server`` is offered under: ``mcp__<server>__<tool>``,
    cleaned to the API's rule (``[a-zA-Z0-9_-]``, at most 64 characters; see the module
    docstring). Deterministic: the same names always give the same result."""
    server_part = _RUNS.sub("_", _clean(server)).strip("_") or "server"
    tool_part = _clean(tool) or "tool"
    name = f"{MCP_PREFIX}{server_part}__{tool_part}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(f"{server}\x00{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    room = MAX_TOOL_NAME - len(MCP_PREFIX) - 2 - _HASH_CHARS - 1  # "__" between, "_" before the hash
    server_part = server_part[: max(8, room // 2)].rstrip("_") or "server"
    tool_room = room - len(server_part)
    return f"{MCP_PREFIX}{server_part}__{tool_part[:tool_room]}_{digest}"


def split_mcp_name(name: Any) -> tuple[str, str] | None:
    """``(server, tool)`` read from an offered MCP tool name (``mcp__<server>__<tool>``), as
    cleaned; None for any other name. For display: the stored record (:func:`mcp_calls_of`)
    has the names as configured."""
    if not isinstance(name, str) or not name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = name[len(MCP_PREFIX):].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


def call_record(server: str, tool: str) -> dict[str, str]:
    """One call's record (the value under its call id in the entry's ``"mcp"`` key)."""
    return {"server": str(server), "tool": str(tool)}


def mcp_calls_in(message: Any, calls: dict[str, dict[str, str]] | None) -> dict[str, dict[str, str]] | None:
    """The part of ``calls`` (``{call id: record}`` for a whole round) that belongs on ``message``:
    the records of the calls an assistant message makes; None when there are none."""
    if not calls or not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    ids = [c.get("id") for c in message.get("tool_calls") or () if isinstance(c, dict)]
    mine = {cid: calls[cid] for cid in ids if isinstance(cid, str) and cid in calls}
    return mine or None


def mcp_calls_of(entries: Iterable[Any]) -> dict[str, dict[str, str]]:
    """``{call id: {"server", "tool"}}`` of every MCP call recorded on the message entries of
    ``entries`` (malformed records are skipped)."""
    calls: dict[str, dict[str, str]] = {}
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "message" or not isinstance(e.get(ENTRY_KEY), dict):
            continue
        for call_id, record in e[ENTRY_KEY].items():
            if (isinstance(call_id, str) and isinstance(record, dict) and isinstance(record.get("server"), str)
                    and isinstance(record.get("tool"), str)):
                calls[call_id] = call_record(record["server"], record["tool"])
    return calls
