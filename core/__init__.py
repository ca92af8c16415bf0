"""anycode core: sessions that outlive the process, their storage, and the agent that fills them.

No Gradio here. Everything public is importable from ``core``; the agent side and the optional
SQL store are imported lazily, so ``import core`` stays light and works without optional extras.
"""
from __future__ import annotations

import importlib
from typing import Any

from .entries import header_entry, message_entry, title_entry
from .errors import (
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
from .jsonl_store import LocalSessionStore
from .keys import SessionKey, new_session_id, normalize_path, project_key
from .manager import SessionManager
from .models import ProjectInfo, Session, SessionMeta
from .store import SessionStore

# name -> module, imported on first use (PEP 562).
_LAZY = {
    "agent_loop": "core.agent",
    "agent_loop_stream": "core.agent",
    "run_session": "core.runner",
    "run_session_stream": "core.runner",
    "generate_title": "core.titles",
    "ModelConfig": "core.config",
    "make_client": "core.config",
    "list_models": "core.config",
    "pick_model": "core.config",
    "describe_api_error": "core.config",
    "Workspace": "core.tools",
    "TOOL_SPECS": "core.tools",
    "run_tool": "core.tools",
    "TextDelta": "core.agent",
    "ToolCallStarted": "core.agent",
    "ToolCallFinished": "core.agent",
    "RoundCompleted": "core.agent",
    "UserMessageSaved": "core.runner",
    "TitleStarted": "core.runner",
    "prepare_request": "core.repair",
    "fallback_title": "core.titles",
    "clean_title": "core.titles",
    "SqlSessionStore": "core.sql_store",
    "MirroredSessionStore": "core.mirror",
    "open_store": "core.store_factory",
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
