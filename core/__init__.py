"""anycode core: sessions that outlive the process, their storage, and the agent that fills them.

Three wings, imported one way only (``session`` ← ``stores`` ← ``agent``; ``webui`` on top):

- :mod:`core.session` — the session model: keys, entries, models, the ``SessionStore`` protocol,
  the manager, export. Imports nothing from the other wings.
- :mod:`core.stores` — the backends (JSONL, SQL, mirror + outbox), the store factory, migrate.
- :mod:`core.storage` — :class:`~core.storage.Storage`, the one object holding the sessions and
  the services beside them (leases, search, memories, blobs, the mirror); ``open_store`` opens it.
- :mod:`core.agent` — the model side: client config, the agent loop, tools, request repair,
  prompts, the runner, titles.

``core.errors`` and ``core.settings`` sit at the top and are used by every wing. No Gradio here.
Everything public is importable from ``core``; the agent side and the optional SQL store are
imported lazily, so ``import core`` stays light and works without optional extras.
"""
from __future__ import annotations

import importlib
from typing import Any

from core.errors import (
    AmbiguousSessionId,
    AnycodeError,
    InvalidSessionKey,
    InvalidTitle,
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelNotConfigured,
    ModelRateLimited,
    ModelServerError,
    ModelTimeout,
    ModelUnreachable,
    SessionConflict,
    SessionExists,
    SessionNotFound,
    StoreUnavailable,
)
from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, normalize_path, project_key
from core.session.manager import SessionManager
from core.session.models import ProjectInfo, Session, SessionMeta
from core.session.store import SessionStore
from core.stores.jsonl_store import LocalSessionStore

# name -> module, imported on first use (PEP 562).
_LAZY = {
    "agent_loop": "core.agent.loop",
    "agent_loop_stream": "core.agent.loop",
    "run_session": "core.agent.runner",
    "run_session_stream": "core.agent.runner",
    "generate_title": "core.agent.titles",
    "ModelConfig": "core.agent.config",
    "make_client": "core.agent.config",
    "list_models": "core.agent.config",
    "pick_model": "core.agent.config",
    "describe_api_error": "core.agent.config",
    "Workspace": "core.agent.tools",
    "TOOL_SPECS": "core.agent.tools",
    "run_tool": "core.agent.tools",
    "TextDelta": "core.agent.events",
    "ToolCallStarted": "core.agent.events",
    "ToolCallFinished": "core.agent.events",
    "RoundCompleted": "core.agent.events",
    "UserMessageSaved": "core.agent.events",
    "TitleStarted": "core.agent.events",
    "prepare_request": "core.agent.repair",
    "compact_session": "core.agent.compaction",
    "context_usage": "core.agent.context",
    "context_window": "core.agent.context",
    "fallback_title": "core.agent.titles",
    "clean_title": "core.agent.titles",
    "SqlSessionStore": "core.stores.sql_store",
    "MirroredSessionStore": "core.stores.mirror",
    "open_store": "core.storage",
    "Storage": "core.storage",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AmbiguousSessionId", "AnycodeError", "InvalidSessionKey", "InvalidTitle", "LocalSessionStore",
    "ModelAuthError", "ModelBadRequest", "ModelError", "ModelNotConfigured", "ModelRateLimited",
    "ModelServerError", "ModelTimeout", "ModelUnreachable", "ProjectInfo", "Session", "SessionConflict",
    "SessionExists", "SessionKey", "SessionManager", "SessionMeta", "SessionNotFound", "SessionStore",
    "StoreUnavailable", "header_entry", "message_entry", "new_session_id", "normalize_path",
    "project_key", "title_entry",
]
