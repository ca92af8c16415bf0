"""One turn's MCP offer (:class:`McpTurn`): what the runner adds to a turn from the project's MCP
servers (``run_session_stream(..., extra_tools=...)``, see :mod:`core.agent.runner`).

- ``specs``: each ready server's tools as OpenAI ``tools=`` entries, named
  ``mcp__<server>__<tool>`` (:func:`core.session.mcp_calls.mcp_tool_name`; two tools cleaned to
  the same name: the later one gets a hash suffix) with their JSON schema;
- ``handlers``: name → ``handler(raw_arguments) -> (text, is_error)`` running the call on its
  server (:meth:`core.agent.mcp.hub.McpHub.call`), plus, for the MCP tools the history called
  that are not offered now (the server removed, renamed, stopped or no longer listing that
  tool), a handler answering with one sentence saying so — the call gets a tool result like any
  other, so the history stays valid for a strict server and the model can adapt;
- ``check``: the approval gate's decision for its tools (:class:`core.agent.approval.ApprovalGate`):
  every MCP call asks (Allow once / for this chat / always for this tool in this project) unless
  the user already allowed it, asking is off (``ANYCODE_APPROVAL=auto`` or the chat's switch), or
  the configuration or the server marks the tool read-only *and* the user trusts read-only marks;
- ``system_refresh``: the servers' ``instructions`` appended to the system prompt at request
  time (once per request; the stored system message is never changed);
- ``calls_in``: the record of which server and tool each call of a round went to, stored beside
  the assistant message (:mod:`core.session.mcp_calls`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import replace
from typing import Any, Callable

from core.agent.approval import RUN, PendingApproval, Verdict, denied_result
from core.agent.mcp.config import McpConfig
from core.agent.mcp.results import hide
from core.agent.tools import ToolError, arguments_object
from core.session.mcp_calls import MAX_TOOL_NAME, call_record, mcp_tool_name, split_mcp_name

log = logging.getLogger(__name__)

MAX_INSTRUCTIONS_CHARS = 4000  # one server's instructions in the system prompt
INSTRUCTIONS_HEADING = "## MCP servers"
SUBAGENT_DENIED = ("Error: {tool} is a tool of an MCP server and needs the user's approval, which a sub-agent "
                   "cannot ask for; nothing was run.")


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    for n in range(1, 1000):
        suffix = "_" + hashlib.sha256(f"{name}\x00{n}".encode()).hexdigest()[:6]
        candidate = name[: MAX_TOOL_NAME - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    return name


class McpTurn:
    """The offer of one turn (see the module docstring). Built by :meth:`McpHub.turn`.

    ``hub``: the app's hub; ``config``: the project's MCP configuration; ``ready``: its
    connections ready now; ``messages``: the history; ``cancel``: the turn's Stop flag;
    ``chat_tools``: tools allowed for this chat; ``always``: ``{tool: server digest}`` allowed
    always in the project; ``trust_read_only``: the user trusts read-only marks; ``approved``:
    the project's configuration is approved."""

    def __init__(self, hub: Any, config: McpConfig, ready: list[Any], messages: list[dict], *, cancel: Any = None,
                 chat_tools: frozenset[str] = frozenset(), always: dict[str, str] | None = None,
                 trust_read_only: bool = False, approved: bool = True):
        self.hub = hub
        self.config = config
        self.cancel = cancel
        self.chat_tools = frozenset(chat_tools)
        self.always = dict(always or {})
        self.trust_read_only = trust_read_only
        self.approved = approved
        self.offered: dict[str, tuple[Any, Any]] = {}  # offered name -> (connection, ToolInfo)
        self.specs: list[dict] = []
        self.handlers: dict[str, Callable[[str], tuple[str, bool]]] = {}
        self._instructions: list[tuple[str, str]] = []
        taken: set[str] = set()
        for conn in ready:
            for info in conn.tools:
                name = _unique(info.offered, taken)
                taken.add(name)
                if name != info.offered:
                    info = replace(info, offered=name)
                self.offered[name] = (conn, info)
                self.specs.append(info.spec())
                self.handlers[name] = self._handler(conn, info)
            if conn.instructions:
                self._instructions.append((conn.config.name, conn.instructions))
        for name in self._gone_names(messages):
            self.handlers[name] = self._gone_handler(name)

    # --- the calls ---------------------------------------------------------------------------

    def _handler(self, conn: Any, info: Any) -> Callable[[str], tuple[str, bool]]:
        def run(raw_arguments: str) -> tuple[str, bool]:
            return self.hub.call(conn, info, raw_arguments, cancel=self.cancel)
        return run

    def _gone_names(self, messages: list[dict]) -> set[str]:
        names = set()
        for m in messages:
            for c in (m.get("tool_calls") or []) if isinstance(m, dict) else ():
                fn = c.get("function") if isinstance(c, dict) else None
                name = fn.get("name") if isinstance(fn, dict) else None
                if split_mcp_name(name) is not None and name not in self.offered:
                    names.add(name)
        return names

    def unavailable(self, name: str) -> str:
        """One sentence saying why the MCP tool ``name`` cannot be called now."""
        server_part, tool_part = split_mcp_name(name) or ("?", name)
        matches = [s for s in self.config.servers.values()
                   if (split_mcp_name(mcp_tool_name(s.name, "x")) or ("", ""))[0] == server_part]
        if not matches:
            why = f"no MCP server {server_part!r} is configured for this project any more"
        else:
            server = matches[0]
            running = [c for c, _ in self.offered.values() if c.config.name == server.name]
            if server.problem:
                why = hide(server.problem, server.secret_values())
            elif not server.trusted_source and not self.approved:
                why = (f"the MCP server {server.name!r} comes from this project's configuration, which changed "
                       "and waits for the user's approval")
            elif running:
                why = f"the MCP server {server.name!r} no longer offers the tool {tool_part!r}"
            else:
                why = f"the MCP server {server.name!r} is not running"
        available = sorted(self.offered)
        listing = (f" Available MCP tools: {', '.join(available[:20])}{' …' if len(available) > 20 else ''}."
                   if available else " No MCP tool is available now.")
        return f"Error: the tool {name} is not available: {why}.{listing}"

    def _gone_handler(self, name: str) -> Callable[[str], tuple[str, bool]]:
        def run(raw_arguments: str) -> tuple[str, bool]:
            return self.unavailable(name), True
        return run

    # --- approval ----------------------------------------------------------------------------

    def runs_without_asking(self, name: str) -> bool:
        """Whether a call of offered tool ``name`` runs without asking (allowed for this chat,
        always in this project while its server is unchanged, or trusted as read-only)."""
        conn, info = self.offered[name]
        if name in self.chat_tools or self.always.get(name) == conn.config.digest:
            return True
        return self.trust_read_only and (conn.config.marks_read_only(info.name) or info.read_only_hint)

    def check(self, call_id: str, name: str, raw_arguments: str | None, policy: Any, can_ask: bool) -> Verdict | None:
        """The approval verdict for a call of ``name`` (None: not an offered MCP tool)."""
        found = self.offered.get(name)
        if found is None:
            return None
        conn, info = found
        decision = policy.decisions.get(call_id)
        if decision is not None:
            return RUN if decision.allow else Verdict("deny", denied_result(name, decision.reason))
        try:
            arguments = arguments_object(raw_arguments)
        except ToolError as err:  # refused whatever the user answers: nobody is asked
            return Verdict("deny", f"Error: {err}")
        if policy.mode == "auto" or self.runs_without_asking(name):
            return RUN
        if not can_ask:
            return Verdict("deny", SUBAGENT_DENIED.format(tool=name))
        return Verdict("ask", pending=PendingApproval(call_id, name, raw_arguments or "",
                                                      self.preview(conn, info, arguments), time.time()))

    @staticmethod
    def preview(conn: Any, info: Any, arguments: dict) -> str:
        """What the approval card shows: the server (and where it is configured), what it runs,
        the tool and its description, the arguments."""
        cfg = conn.config
        where = "your user configuration" if cfg.trusted_source else f"this project's {cfg.path}"
        description = " ".join(info.description.split())[:300]
        lines = [f"MCP server: {cfg.name} ({where})", f"Runs: {hide(cfg.target(), conn.secrets)}",
                 f"Tool: {info.name}" + (f" — {description}" if description else ""), "Arguments:",
                 json.dumps(arguments, indent=2, ensure_ascii=False)]
        return "\n".join(lines)

    # --- the prompt and the record -----------------------------------------------------------

    def system_refresh(self, text: Any) -> Any:
        """``text`` (the system prompt as it will be sent) with the servers' instructions appended."""
        if not self._instructions or not isinstance(text, str):
            return text
        parts = [INSTRUCTIONS_HEADING, "Instructions from the MCP servers whose tools you have (their tools are "
                                       "named mcp__<server>__<tool>):"]
        for server, instructions in self._instructions:
            parts.append(f"### {server}\n{instructions[:MAX_INSTRUCTIONS_CHARS]}")
        return text + "\n\n" + "\n\n".join(parts)

    def calls_in(self, messages: list[dict]) -> dict[str, dict[str, str]] | None:
        """``{call id: {"server", "tool"}}`` of the calls of ``messages`` (a round) made to
        offered MCP tools; None when there are none."""
        calls: dict[str, dict[str, str]] = {}
        for m in messages:
            if not isinstance(m, dict) or m.get("role") != "assistant":
                continue
            for c in m.get("tool_calls") or ():
                fn = c.get("function") if isinstance(c, dict) else None
                found = self.offered.get(fn.get("name")) if isinstance(fn, dict) else None
                if found is not None and isinstance(c.get("id"), str):
                    calls[c["id"]] = call_record(found[0].config.name, found[1].name)
        return calls or None

    def tool_names(self) -> list[str]:
        """The offered names, for logs."""
        return sorted(self.offered)
