"""Expert sessions (issue 30; the design article's "independent sessions" of a team): where an
expert agent keeps its one persistent session per project, and how it is told from a chat.

An expert's session is a real main session of the store, under its own key
``SessionKey(<project key>, "expert-<agent name>")`` — so every store, backup, migration, pull
and mirror carries it like any session — whose header names the agent::

    {"type": "header", ..., "id": "expert-reviewer", "expert": {"name": "reviewer"}}

It is not a chat: :class:`core.session.manager.SessionManager`'s lists leave it out (the rule is
the id, :func:`is_expert_id`, so no store has to read a header to list), and the page shows it
in the sidebar's Agents section instead, read-only. Agent names are lowercase
(``core.agent.definitions.NAME_RE``), so ``expert-<name>`` is a valid session id and never a
uuid4 (the ids anycode gives chats).
"""
from __future__ import annotations

import logging
from typing import Any, Iterable

from core.session.keys import SessionKey

log = logging.getLogger(__name__)

EXPERT_PREFIX = "expert-"
HEADER_KEY = "expert"


def expert_session_id(name: str) -> str:
    """The session id of agent ``name``'s expert session (``expert-<name>``)."""
    return EXPERT_PREFIX + name


def expert_key(project_key: str, name: str) -> SessionKey:
    """The key of agent ``name``'s expert session in project ``project_key``. Raises
    ``InvalidSessionKey`` for a name that is not a safe id."""
    return SessionKey(project_key, expert_session_id(name))


def is_expert_id(session_id: str) -> bool:
    """True for an expert session's id (those are never listed as chats)."""
    return isinstance(session_id, str) and session_id.startswith(EXPERT_PREFIX)


def expert_name(session_id: str) -> str | None:
    """The agent name of expert session ``session_id``, or None for any other session."""
    return session_id[len(EXPERT_PREFIX):] if is_expert_id(session_id) else None


def expert_info(entries: Iterable[Any] | None) -> dict[str, Any] | None:
    """The ``expert`` object of a session's header (``{"name": ...}``), or None."""
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("type") == "header":
            info = entry.get(HEADER_KEY)
            return info if isinstance(info, dict) else None
    return None


def without_experts(metas: list[Any]) -> list[Any]:
    """``metas`` (SessionMeta rows) without the expert sessions' rows."""
    return [m for m in metas if not is_expert_id(m.id)]
