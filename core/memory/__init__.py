"""The memory layer (the design article's third layer): short facts carried between sessions.

- :mod:`core.memory.model` — memory entries (``add`` / ``update`` / ``remove``) and their fold.
- :mod:`core.memory.store` — :class:`MemoryStore`: list / add / update / remove over a
  :class:`core.stores.memory_log.MemoryLog`, two scopes (the user's, a project's).
- :mod:`core.memory.secrets` — the rule that keeps API keys, tokens, passwords and private keys out.
- :mod:`core.memory.context` — what a new session's system prompt gets: memories within a token
  budget, and the project's ``AGENTS.md`` / ``CLAUDE.md``.
- :mod:`core.memory.mode` — ``ANYCODE_MEMORY`` (auto | manual | off) and the UI's switch.

Imports ``core.session`` and ``core.stores``; imported by ``core.agent`` and ``webui``.
"""
