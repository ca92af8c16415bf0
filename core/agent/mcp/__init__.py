"""Tools from MCP (Model Context Protocol) servers, offered in a turn like anycode's own.

- :mod:`core.agent.mcp.config` — the servers configured for a project: ``<project>/.mcp.json``,
  ``<project>/.anycode/mcp.json`` and the user's ``<config dir>/anycode/mcp.json`` (Claude Code's
  format, ``${VAR}`` and ``${VAR:-default}`` expanded); reading and changing those files.
- :mod:`core.agent.mcp.trust` — what the user approved: a project's configuration (by its hash),
  MCP tools allowed "always" in a project, whether read-only marks are trusted.
- :mod:`core.agent.mcp.hub` — :class:`~core.agent.mcp.hub.McpHub`, one per running app: the
  servers' connections over the official ``mcp`` SDK (stdio and streamable HTTP), in one asyncio
  loop in a background thread; started lazily, reused across turns and chats, restarted when
  they die, stopped with the app.
- :mod:`core.agent.mcp.turn` — :class:`~core.agent.mcp.turn.McpTurn`, one turn's offer: the
  tools' OpenAI entries, their handlers, the approval check, the servers' instructions.
- :mod:`core.agent.mcp.results` — a tool result as the text stored in the tool message.

The ``mcp`` SDK is imported only when a server is started (``import core`` stays light).
See ``docs/mcp.md``.
"""
