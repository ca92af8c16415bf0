"""The session service: what users do with sessions, over any :class:`~core.session.store.SessionStore`.

The web UI and the command line call this; it knows nothing of files or SQL. Rules it keeps:
a fork never touches the original; a user's title is never overwritten by a generated one;
cleanup never deletes archived sessions and is off for ``max_age_days <= 0``.
"""
from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, Iterable

from core import settings
from core.session.compaction import compactions_of
from core.session.entries import (SessionState, header_entry, message_entry, messages_of, reply_ends_of,
                                  title_entry)
from core.errors import AmbiguousSessionId, InvalidTitle, SessionNotFound
from core.session.keys import SessionKey, new_session_id, normalize_path, project_key
from core.session.models import ProjectInfo, Session, SessionMeta
from core.session.store import SessionStore
from core.session.subagents import records_for_calls, subagent_records, tool_call_ids
from core.session.text import is_blank

log = logging.getLogger(__name__)

MAX_TITLE_CHARS = 200
# Control characters, and the bidi marks/overrides/isolates that would show a title reversed.
TITLE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
BRANCH_SUFFIX = " (branch)"
DAY_SECONDS = 86400.0


def clean_user_title(title: str) -> str:
    """Turn control and bidi-override characters into spaces, collapse whitespace (newlines
    included) to single spaces and cut to 200 characters.

    Raises :class:`InvalidTitle` when nothing but whitespace is left."""
    if not isinstance(title, str):
        raise InvalidTitle("A title must be text.")
    cleaned = re.sub(r"\s+", " ", TITLE_CONTROLS.sub(" ", title)).strip()
    if is_blank(cleaned):  # zero-width characters only show nothing either
        raise InvalidTitle("A title cannot be empty.")
    return cleaned[:MAX_TITLE_CHARS]


def session_from_entries(key: SessionKey, entries: list[dict[str, Any]], *, archived: bool = False) -> Session:
    """Fold stored entries into a :class:`Session` (timestamps in Unix seconds)."""
    state = SessionState().feed_all(entries)
    created = state.created_at if state.created_at is not None else time.time()
    return Session(
        key=key,
        title=state.title,
        messages=messages_of(entries),
        created_at=created,
        updated_at=state.updated_at(default=created),
        cwd=state.cwd,
        forked_from=state.forked_from,
        title_source=state.title_source,
        archived=archived,
        reply_ends=reply_ends_of(entries),
        compactions=compactions_of(entries),
    )


class SessionManager:
    """Create, find, resume, fork, rename, archive, delete and expire sessions.

    ``store``: any :class:`~core.session.store.SessionStore`. Methods taking a key raise
    :class:`SessionNotFound` when the session does not exist.
    """

    def __init__(self, store: SessionStore):
        self.store = store

    # --- create and read -------------------------------------------------------------------

    def create(self, cwd: str | os.PathLike[str], title: str | None = None) -> Session:
        """Start a new, empty session for the workspace ``cwd`` (stored with its real path).

        Writes the header (and a user title entry when ``title`` is given); adds no messages."""
        real = normalize_path(cwd)
        key = SessionKey(project_key(real), new_session_id())
        now = time.time()
        entries = [header_entry(key.session_id, key.project_key, real, created_at=now)]
        if title is not None:
            entries.append(title_entry(clean_user_title(title), "user", ts=now))
        # Whole or absent: a disk full at its first byte must not leave an empty file that lists.
        self.store.create_whole(key, entries)
        log.info("created session %s in %s", key.session_id, real)
        return session_from_entries(key, entries)

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> Session:
        """Store a new session (or sub-agent record) made of ``entries`` — an import, a restore, a
        version — whole or not at all (:meth:`SessionStore.create_whole`), and return it.

        ``entries`` are complete stored entries (a main session's first is its header; see
        :mod:`core.session.entries`). Raises ``ValueError``, :class:`~core.errors.SessionExists`,
        and the store's failures (``OSError``, :class:`~core.errors.StoreUnavailable`), in every
        case with nothing stored."""
        self.store.create_whole(key, entries)
        return session_from_entries(key, entries)

    def get(self, key: SessionKey) -> Session:
        """Load the whole session. Raises :class:`SessionNotFound`."""
        entries = self.store.load(key)
        if entries is None:
            raise SessionNotFound(key.session_id)
        archived = False
        if key.subpath is None:
            archived = any(m.id == key.session_id for m in self._archived(key.project_key))
        return session_from_entries(key, entries, archived=archived)

    def _archived(self, project: str) -> list[SessionMeta]:
        return self.store.list(project, archived=True)

    def find(self, project: str, id_or_prefix: str) -> SessionKey:
        """Resolve a full id or a unique id prefix within a project (archived sessions included).

        Raises :class:`SessionNotFound` (no match) or :class:`AmbiguousSessionId` (several)."""
        wanted = (id_or_prefix or "").strip()
        if not wanted:
            raise SessionNotFound("with an empty id")
        ids = [m.id for m in self.store.list(project)] + [m.id for m in self._archived(project)]
        if wanted in ids:
            return SessionKey(project, wanted)
        matches = sorted({i for i in ids if i.startswith(wanted)})
        if len(matches) == 1:
            return SessionKey(project, matches[0])
        if matches:
            raise AmbiguousSessionId(wanted, matches)
        raise SessionNotFound(f"with id {wanted!r} in this project")

    def latest(self, project: str) -> Session | None:
        """The most recently active session of the project (for ``--continue``), or None."""
        metas = self.store.list(project)
        return self.get(metas[0].key) if metas else None

    def list(self, project: str, archived: bool = False) -> list[SessionMeta]:
        """The project's sessions, most recent activity first."""
        return self.store.list(project, archived=archived)

    def list_projects(self) -> list[ProjectInfo]:
        """Every project with sessions, most recently active first."""
        return self.store.list_projects()

    # --- write ------------------------------------------------------------------------------

    def add_messages(
        self, key: SessionKey, messages: Iterable[dict[str, Any]], expected_count: int | None = None,
        *, end: str | None = None,
    ) -> int:
        """Append OpenAI chat messages in one append; return the new message count.

        ``expected_count``: the count the caller loaded; :class:`~core.errors.SessionConflict`
        if someone appended since. ``end``: the first message is an assistant reply the model did
        not finish, ended this way (see :func:`~core.session.entries.message_entry`).
        Raises :class:`SessionNotFound` for a missing main session,
        ``ValueError`` for a message without a role."""
        now = time.time()
        entries = [message_entry(m, ts=now, end=end if i == 0 else None) for i, m in enumerate(messages)]
        # The store refuses, under its lock, to start a main session without a header, so a
        # session deleted meanwhile raises SessionNotFound here instead of coming back.
        return self.store.append(key, entries, expected_count=expected_count)

    def add_compaction(self, key: SessionKey, entry: dict[str, Any], expected_count: int | None = None) -> int:
        """Append one compaction entry (:func:`core.session.compaction.compaction_entry`); return
        the message count (unchanged: a compaction adds no message and removes none).

        ``expected_count``: the message count the compaction was computed on;
        :class:`~core.errors.SessionConflict` if someone appended since. Raises
        :class:`SessionNotFound`, ``ValueError`` for an entry that is not a compaction."""
        if not isinstance(entry, dict) or entry.get("type") != "compaction":
            raise ValueError("not a compaction entry")
        return self.store.append(key, [entry], expected_count=expected_count)

    def rename(self, key: SessionKey, title: str) -> str:
        """Set a user title (never overwritten by generated ones); return the cleaned title.

        Raises :class:`InvalidTitle` for an empty title, :class:`SessionNotFound`."""
        cleaned = clean_user_title(title)
        self.store.append(key, [title_entry(cleaned, "user")])
        return cleaned

    def set_generated_title(self, key: SessionKey, title: str, source: str = "llm") -> bool:
        """Store a generated title (``source`` ``"llm"`` or ``"fallback"``) unless the user set one.

        Returns False (nothing written) when a user title exists. Even if the user renames in
        between, the fold keeps the user's title, so the race is harmless."""
        entries = self.store.load(key)
        if entries is None:
            raise SessionNotFound(key.session_id)
        if SessionState().feed_all(entries).title_source == "user":
            return False
        self.store.append(key, [title_entry(title, source)])
        return True

    def fork(self, key: SessionKey, message_index: int) -> Session:
        """Copy messages ``[0 .. message_index]`` (inclusive) into a new session and return it.

        A compaction entry placed within the copied messages (a cut at or after the compaction
        point) is copied too, so the fork's model view matches; one placed later is not.
        The original is not touched. The fork's header records ``forked_from`` =
        ``{"session_id", "message_index"}``; its title is the original's plus " (branch)". The
        sub-agent records of the task calls inside the copied messages are copied along (same
        subpaths), none of later calls.
        Raises :class:`SessionNotFound`, ``IndexError`` for an index outside the messages."""
        entries = self.store.load(key)
        if entries is None:
            raise SessionNotFound(key.session_id)
        original = session_from_entries(key, entries)
        if not 0 <= message_index < len(original.messages):
            raise IndexError(
                f"message index {message_index} is outside 0..{len(original.messages) - 1}"
            )
        new_key = SessionKey(key.project_key, new_session_id())
        now = time.time()
        copied: list[dict[str, Any]] = []
        seen = 0
        for e in entries:
            if e.get("type") == "message" and isinstance(e.get("message"), dict):
                if seen > message_index:
                    break
                copied.append(e)
                seen += 1
            elif e.get("type") == "compaction":  # placed within the copied messages
                copied.append(e)
        forked_from = {"session_id": key.session_id, "message_index": message_index}
        new_entries = [header_entry(new_key.session_id, key.project_key, original.cwd,
                                    created_at=now, forked_from=forked_from)]
        new_entries += copied
        if original.title:
            base = original.title[: MAX_TITLE_CHARS - len(BRANCH_SUFFIX)]
            new_entries.append(title_entry(base + BRANCH_SUFFIX, original.title_source or "user", ts=now))
        # The sub-agent records of the task calls inside the copied prefix go along (none after
        # it), written before the fork itself so a fork that lists is complete.
        self._copy_subagent_records(key, new_key, messages_of(copied))
        # Whole or absent: a fork killed mid-write never lists as a short session.
        try:
            self.store.create_whole(new_key, new_entries)
        except BaseException:
            self._remove_quietly(new_key)
            raise
        log.info("forked %s at message %d into %s", key.session_id, message_index, new_key.session_id)
        return session_from_entries(new_key, new_entries)

    def _copy_subagent_records(self, key: SessionKey, new_key: SessionKey, messages: list[dict[str, Any]]) -> None:
        records = records_for_calls(subagent_records(self.store, key), tool_call_ids(messages))
        try:
            for rec in records:
                self.store.create_whole(SessionKey(new_key.project_key, new_key.session_id, rec.key.subpath),
                                        rec.entries)
        except BaseException:
            self._remove_quietly(new_key)
            raise

    def _remove_quietly(self, key: SessionKey) -> None:
        """Remove what a failed fork wrote under ``key`` (its sub-agent records); never raises."""
        for sub in getattr(self.store, "list_subpaths", lambda k: [])(key):
            try:
                self.store.remove(SessionKey(key.project_key, key.session_id, sub))
            except Exception:  # noqa: BLE001 -- the original failure matters more
                log.exception("could not remove %s/%s", key.session_id, sub)

    # --- lifecycle --------------------------------------------------------------------------

    def archive(self, key: SessionKey) -> None:
        """Move the session out of the main list (kept, browsable among archived sessions)."""
        self.store.archive(key)

    def unarchive(self, key: SessionKey) -> None:
        """Bring an archived session back to the main list."""
        self.store.unarchive(key)

    def delete(self, key: SessionKey) -> None:
        """Delete the session and its sub-agent records for good. Raises :class:`SessionNotFound`."""
        self.store.remove(key)
        log.info("deleted session %s", key.session_id)

    def auto_archive(self, max_age_days: float | None = None, now: float | None = None) -> list[SessionKey]:
        """Archive sessions whose last activity is older than ``max_age_days`` (the design article's
        rule for archiving: "超过 N 天未活跃"), in every project.

        ``max_age_days`` defaults to ``ANYCODE_ARCHIVE_DAYS`` (off by default); 0 or less does
        nothing. ``now`` in Unix seconds (default the current time). Returns the keys archived."""
        days = settings.archive_days() if max_age_days is None else float(max_age_days)
        archived = self._for_idle(days, now, self.store.archive)
        if archived:
            log.info("auto-archive moved %d sessions idle for over %g days", len(archived), days)
        return archived

    def cleanup(self, max_age_days: float | None = None, now: float | None = None) -> list[SessionKey]:
        """Delete non-archived sessions whose last activity is older than ``max_age_days``.

        ``max_age_days`` defaults to ``ANYCODE_CLEANUP_DAYS`` (30, per Claude Code's
        ``cleanupPeriodDays``); 0 or less disables cleanup. ``now`` in Unix seconds (default
        the current time). Returns the keys removed, across every project."""
        days = settings.cleanup_days() if max_age_days is None else float(max_age_days)
        removed = self._for_idle(days, now, self.store.remove)
        if removed:
            log.info("cleanup removed %d sessions idle for over %g days", len(removed), days)
        return removed

    def _for_idle(self, days: float, now: float | None, action: Any) -> list[SessionKey]:
        """Apply ``action(key)`` to every unarchived session idle for over ``days`` days (none when
        ``days <= 0``), in every project; return the keys it was applied to."""
        if days <= 0:
            return []
        cutoff = (time.time() if now is None else now) - days * DAY_SECONDS
        done: list[SessionKey] = []
        for project in self.store.list_projects():
            for meta in self.store.list(project.project_key):
                if meta.updated_at < cutoff:
                    try:
                        action(meta.key)
                    except SessionNotFound:
                        continue  # removed by someone else meanwhile
                    done.append(meta.key)
        return done
