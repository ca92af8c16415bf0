"""The session data model (design article: ``Session``, ``SessionMeta``).

All timestamps are Unix seconds as ``float`` (UTC-based epoch time); the UI shows them in the
user's local time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.session.keys import SessionKey


@dataclass
class Session:
    """One conversation with its full history.

    ``messages``: OpenAI chat messages (dicts) in order, exactly as sent to the API.
    ``title``: the effective title or None when none was set or generated yet;
    ``title_source``: ``"user"``, ``"llm"`` or ``"fallback"`` (None without a title).
    ``created_at``/``updated_at``: Unix seconds; ``updated_at`` is the later of creation and the
    last message. ``reply_ends``: ``{message index: "length" | "content_filter" | "no_end"}`` for
    replies that were cut off. ``compactions``: the compaction entries (summaries of earlier
    messages; every message stays in ``messages``), see :mod:`core.session.compaction`. ``cwd``: the workspace's real path. ``forked_from``:
    ``{"session_id": str, "message_index": int}`` for a fork, else None. ``version_of``: the same
    shape for a version made by Edit/Regenerate (``session_id`` is the family root), else None;
    ``current_version``: for a family root, the id of the version last used (None: the root).
    """

    key: SessionKey
    title: str | None
    messages: list[dict[str, Any]]
    created_at: float
    updated_at: float
    cwd: str | None = None
    forked_from: dict[str, Any] | None = None
    title_source: str | None = None
    archived: bool = False
    # {message index: how it ended} for assistant replies the model did not finish ("length",
    # "content_filter", "no_end"); see core.session.entries.message_entry.
    reply_ends: dict[int, str] = field(default_factory=dict)
    # The session's compaction entries in file order, each with "at" (messages before it); see
    # core.session.compaction (model_view gives what the model is sent).
    compactions: list[dict[str, Any]] = field(default_factory=list)
    version_of: dict[str, Any] | None = None
    current_version: str | None = None
    # {message index: agent name} for replies a defined agent wrote (issue 30: "@name" in the
    # chat); see core.session.entries.message_entry.
    reply_agents: dict[int, str] = field(default_factory=dict)
    # {call id: {"server", "tool"}} for the tool calls that went to an MCP server (the names as
    # configured and listed); see core.session.mcp_calls.
    mcp_calls: dict[str, dict[str, str]] = field(default_factory=dict)
    # Why the last message has no answer, when a turn failed at the model and nothing was added
    # since: the reply_error entry (core.session.entries.reply_error_of), else None.
    reply_error: dict[str, Any] | None = None

    @property
    def family(self) -> str:
        """The id of the family root this session belongs to (its own id when not a version)."""
        return self.version_of["session_id"] if self.version_of else self.key.session_id

    @property
    def id(self) -> str:
        """The session id (``key.session_id``)."""
        return self.key.session_id

    @property
    def project_key(self) -> str:
        """The project key (``key.project_key``)."""
        return self.key.project_key
    # "imported" / "restored" when the header came from another tool or a backup: its recorded
    # folder is not trusted as the workspace on its own (core.agent.workspace).
    origin: str | None = None
    # The project's identity beyond its path (its git remote; core.session.identity), when recorded.
    identity: str | None = None
    # This record's own pin and tags entries (issue 31). A conversation's pin and tags live in its
    # family root: for a version, ask SessionManager.pin_and_tags.
    pinned: float | None = None
    tags: tuple[str, ...] = ()
    # The tokens its replies used (core.session.usage.UsageTotals, from its usage entries).
    usage: Any = None
    # The indexes of its system messages, found once by the fold (None: not known, e.g. a Session
    # made by hand): the chat view counts the hidden messages it shows no row for from these,
    # not with a pass over 100,000 messages per view (webui.chat.views.view_of).
    system_at: tuple[int, ...] | None = None


@dataclass(slots=True)  # slots: a new process makes 10,000 of these per list(), faster and smaller
class SessionMeta:
    """What the session list shows, read without loading messages.

    Fields as in :class:`Session`; ``message_count`` counts message entries (system message
    included); ``archived`` is True for sessions in the archive; ``version_of`` and
    ``current_version`` as in :class:`Session` (read from the header and version entries, so the
    list can group versions into one row without reading messages).
    """

    id: str
    project_key: str
    title: str | None
    created_at: float
    updated_at: float
    message_count: int
    archived: bool = False
    forked_from: dict[str, Any] | None = None
    cwd: str | None = None
    title_source: str | None = None
    version_of: dict[str, Any] | None = None
    current_version: str | None = None
    # Set by SessionManager.conversations on a root's row: the ids of the versions folded into it.
    versions: tuple[str, ...] = ()
    # Issue 31, from the pin and tags entries (core.session.entries): when the conversation was
    # pinned (Unix seconds; None: not pinned) and its tags, in the order first added.
    pinned: float | None = None
    tags: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        """The id of the family root (its own id when not a version)."""
        return self.version_of["session_id"] if self.version_of else self.id

    @property
    def key(self) -> SessionKey:
        """The session's key."""
        return SessionKey(self.project_key, self.id)


@dataclass
class ProjectInfo:
    """One project that has sessions: its key, its real path (from its newest session; None when
    unknown), how many sessions it holds (archived excluded) and its last activity (Unix seconds)."""

    project_key: str
    cwd: str | None
    session_count: int
    updated_at: float = field(default=0.0)
