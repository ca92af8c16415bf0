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
from dataclasses import replace
from typing import Any, Iterable

from core import settings
from core.settings import inside_data_dir
from core.session.compaction import compactions_of
from core.session.entries import (MAX_TAGS, SessionState, archive_entry, clean_tag, header_entry,
                                  messages_of, pin_entry, reply_agents_of, reply_ends_of, reply_error_of, tags_entry,
                                  title_entry, version_entry)
from core.errors import (AmbiguousSessionId, AmbiguousTitle, ForbiddenProjectFolder, InvalidTag, InvalidTitle,
                         SessionNotFound, StaleChange)
from core.session.identity import project_identity
from core.session.experts import is_expert_id, without_experts
from core.session.folds import FoldMemo
from core.session.keys import SessionKey, new_session_id, normalize_path, project_key
from core.session.lookup import title_matches
from core.session.mcp_calls import mcp_calls_of
from core.session.usage import usage_totals
from core.session.models import ProjectInfo, Session, SessionMeta
from core.session.rounds import Round
from core.session.store import SessionStore, is_mirrored, knows_write_times
from core.session.subagents import records_for_calls, subagent_records, tool_call_ids
from core.session.text import is_blank
from core.session.versions import divergences, use_order, valid_cut

log = logging.getLogger(__name__)

MAX_TITLE_CHARS = 200
# Control characters, and the bidi marks/overrides/isolates that would show a title reversed.
TITLE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
BRANCH_SUFFIX = " (branch)"
DAY_SECONDS = 86400.0


def clean_user_title(title: str) -> str:
    """Turn control and bidi-override characters into spaces, collapse whitespace (newlines
    included) to single spaces and cut to :data:`MAX_TITLE_CHARS` characters (see
    :func:`title_shortened`; :data:`TITLE_SHORTENED` is the sentence to tell the user).

    Raises :class:`InvalidTitle` when nothing but whitespace is left (``reason`` ``"empty"``) or
    only characters that show nothing, such as zero-width spaces (``"invisible"``)."""
    if not isinstance(title, str):
        raise InvalidTitle("A title must be text.", reason="not text")
    cleaned = _collapsed(title)
    if not cleaned:
        raise InvalidTitle("A title cannot be empty.", reason="empty")
    if is_blank(cleaned):  # zero-width characters only show nothing either
        raise InvalidTitle("That title has no visible characters.", reason="invisible")
    return cleaned[:MAX_TITLE_CHARS]


TITLE_SHORTENED = f"Titles are at most {MAX_TITLE_CHARS} characters; yours was shortened."


def title_shortened(title: str) -> bool:
    """True when :func:`clean_user_title` cuts ``title`` to :data:`MAX_TITLE_CHARS` characters
    (the user is then told so: :data:`TITLE_SHORTENED`)."""
    return isinstance(title, str) and len(_collapsed(title)) > MAX_TITLE_CHARS


def _collapsed(title: str) -> str:
    return re.sub(r"\s+", " ", TITLE_CONTROLS.sub(" ", title)).strip()


def family_titles(metas: list[SessionMeta]) -> list[SessionMeta]:
    """``metas`` with each version's title replaced by its family root's (when the root is among
    ``metas`` and has a title): one conversation has one title on every version (issue 31, item
    1). Titles are written to the root (:meth:`SessionManager.rename`); a version's own title
    entry (copied when it was made, or written before that rule) only shows when its root is
    gone or untitled. Metadata only."""
    roots = {m.id: m for m in metas if not m.version_of and m.title}
    if not roots:
        return metas
    return [replace(m, title=roots[m.family].title, title_source=roots[m.family].title_source)
            if m.version_of and m.family in roots else m for m in metas]


def refuse_data_dir(folder: str, protected: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Raise :class:`~core.errors.ForbiddenProjectFolder` when ``folder`` is anycode's data folder or
    inside it (:func:`core.settings.inside_data_dir`), or one of the ``protected`` folders (a
    storage's own: :meth:`core.storage.Storage.protected_dirs`, e.g. one given with
    ``--data-dir``); every place a folder becomes a project asks."""
    if inside_data_dir(folder) or any(inside_data_dir(folder, own) for own in protected):
        raise ForbiddenProjectFolder(f"{folder} is inside anycode's data folder, where the conversations are "
                                     "stored; it cannot be a project folder. Choose your project's own folder.")


def session_from_entries(key: SessionKey, entries: list[dict[str, Any]], *, archived: bool = False) -> Session:
    """Fold stored entries into a :class:`Session` (timestamps in Unix seconds)."""
    state = SessionState().feed_all(entries)
    created = state.created_at if state.created_at is not None else time.time()
    messages = messages_of(entries)
    return Session(
        key=key,
        title=state.title,
        messages=messages,
        created_at=created,
        updated_at=state.updated_at(default=created),
        cwd=state.cwd,
        forked_from=state.forked_from,
        title_source=state.title_source,
        archived=archived,
        reply_ends=reply_ends_of(entries),
        reply_agents=reply_agents_of(entries),
        mcp_calls=mcp_calls_of(entries),
        reply_error=reply_error_of(entries),
        compactions=compactions_of(entries),
        version_of=state.version_of,
        current_version=state.current,
        origin=state.origin,
        identity=state.identity,
        pinned=state.pinned,
        tags=tuple(state.tags),
        usage=usage_totals(entries),
        system_at=tuple(i for i, m in enumerate(messages) if m.get("role") == "system"),
    )


def _summarises_within(entry: dict[str, Any], count: int) -> bool:
    fki = entry.get("first_kept_index")
    return count > 0 and isinstance(fki, int) and not isinstance(fki, bool) and 0 <= fki <= count


class SessionManager:
    """Create, find, resume, fork, rename, archive, delete and expire sessions.

    ``store``: any :class:`~core.session.store.SessionStore` (an app's: ``storage.sessions``).
    ``protected_dirs``: folders that are never a project, besides the settings' data folder (the
    storage's own: :meth:`core.storage.Storage.protected_dirs`). Methods taking a key raise
    :class:`SessionNotFound` when the session does not exist.
    """

    def __init__(self, store: SessionStore, *, protected_dirs: Iterable[str | os.PathLike[str]] = ()):
        self.store = store
        self.protected_dirs = tuple(protected_dirs)
        # An open chat is folded once while its file is unchanged, not once per reader (issue 32)
        self._folds = FoldMemo()

    @classmethod
    def of(cls, sessions: "SessionManager | SessionStore") -> "SessionManager":
        """``sessions`` itself when it is a manager (its fold memo shared with its other
        readers), else a new manager over the store ``sessions`` — for entry points scripts call
        with a bare store (:func:`core.agent.runner.run_session_stream`)."""
        return sessions if isinstance(sessions, SessionManager) else cls(sessions)

    # --- create and read -------------------------------------------------------------------

    def create(self, cwd: str | os.PathLike[str], title: str | None = None) -> Session:
        """Start a new, empty session for the workspace ``cwd`` (stored with its real path).

        Writes the header (with ``project_identity`` when ``cwd`` is in a git checkout with a
        remote) and a user title entry when ``title`` is given; adds no messages.
        Raises :class:`~core.errors.ForbiddenProjectFolder` for anycode's data folder (or inside it)."""
        real = normalize_path(cwd)
        refuse_data_dir(real, self.protected_dirs)
        key = SessionKey(project_key(real), new_session_id())
        now = time.time()
        entries = [header_entry(key.session_id, key.project_key, real, created_at=now)]
        identity = project_identity(real)
        if identity:
            # The project beyond its path (its git remote): another machine's checkout at another
            # path finds this session as its own (core.session.identity, core.stores.aliases).
            entries[0]["project_identity"] = identity
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

    def get(self, key: SessionKey, *, entries: list[dict[str, Any]] | None = None) -> Session:
        """Load the whole session. Raises :class:`SessionNotFound`.

        ``entries``: the session's entries as the caller just loaded them (``store.load(key)``),
        used instead of loading them again (as for :meth:`state`)."""
        if entries is None:
            entries = self.store.load(key)
            if entries is None:
                raise SessionNotFound(key.session_id)
        archived = False
        if key.subpath is None:
            archived_metas = self._archived(key.project_key)
            archived = any(m.id == key.session_id for m in archived_metas)
        folded = self._folds.fold(key, entries, "session", lambda e: session_from_entries(key, e))
        # A copy: the caller's to change (the memo's stays as folded)
        session = replace(folded, messages=list(folded.messages), reply_ends=dict(folded.reply_ends),
                          reply_agents=dict(folded.reply_agents), compactions=list(folded.compactions),
                          mcp_calls=dict(folded.mcp_calls),
                          archived=archived)
        if session.version_of and key.subpath is None:
            root = self._root_meta(key.project_key, session.family, archived_metas)
            if root is not None and root.title:
                session.title, session.title_source = root.title, root.title_source
        return session

    def _root_meta(self, project: str, root_id: str, archived: list[SessionMeta] | None = None) -> SessionMeta | None:
        metas = self.store.list(project) + (self._archived(project) if archived is None else archived)
        return next((m for m in metas if m.id == root_id), None)

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

    def find_by_title(self, project: str, query: str) -> list[SessionMeta]:
        """The project's conversations (archived ones after the others) whose title matches the
        words of ``query`` (:func:`core.session.lookup.title_matches`: every word, any order,
        case-folded; an exact title wins), most recent first; ``[]`` when none. Metadata only."""
        rows = self.conversations(project) + self.conversations(project, archived=True)
        return title_matches(rows, query)

    def find_title(self, project: str, query: str, *, everywhere: bool = True) -> SessionKey:
        """The one conversation whose title matches ``query`` (:meth:`find_by_title`): in
        ``project`` first, then (``everywhere``) in every other project when none matched there.
        Raises :class:`AmbiguousTitle` listing the matches when several do (in the first
        place with any), :class:`SessionNotFound` when none does."""
        places = [project]
        if everywhere:
            places += [p.project_key for p in self.list_projects() if p.project_key != project]
        for place in places:
            found = self.find_by_title(place, query)
            if len(found) == 1:
                return found[0].key
            if found:
                raise AmbiguousTitle(query, [(m.id, m.title or "") for m in found])
        raise SessionNotFound(f"with an id or a title matching {query!r}")

    def latest(self, project: str) -> Session | None:
        """The most recently active session of the project (for ``--continue``), or None."""
        metas = without_experts(self.store.list(project))
        return self.get(metas[0].key) if metas else None

    def list(self, project: str, archived: bool = False) -> list[SessionMeta]:
        """The project's sessions (chats: expert agents' sessions are left out, see
        :mod:`core.session.experts` and :meth:`experts`), most recent activity first. A version
        of a conversation has its conversation's title (see :func:`family_titles`)."""
        return family_titles(without_experts(self.store.list(project, archived=archived)))

    def experts(self, project: str) -> list[SessionMeta]:
        """The project's expert sessions (issue 30: one per expert agent consulted), most recent
        activity first."""
        return [m for m in self.store.list(project) if is_expert_id(m.id)]

    def conversations(self, project: str, archived: bool = False) -> list[SessionMeta]:
        """The sidebar's rows: like :meth:`list`, but one row per conversation — a family's
        versions are folded into its root's row (``updated_at`` the latest of the family), so
        opening the row shows the version in use (:meth:`current_version`). A version whose root
        is not in this list (deleted, or archived apart) keeps its own row; a root's row lists the
        ids of its versions in ``versions``. Metadata only."""
        metas = family_titles(without_experts(self.store.list(project, archived=archived)))  # experts: no chats
        roots = {m.id: m for m in metas if not m.version_of}
        rows: list[SessionMeta] = []
        latest: dict[str, float] = {}
        folded: dict[str, list[str]] = {}
        for m in metas:
            if m.version_of and m.family in roots:
                latest[m.family] = max(latest.get(m.family, 0.0), m.updated_at)
                folded.setdefault(m.family, []).append(m.id)
            else:
                rows.append(m)
        if latest:
            rows = [replace(m, updated_at=max(m.updated_at, latest[m.id]), versions=tuple(folded[m.id]))
                    if m.id in latest else m for m in rows]
            rows.sort(key=lambda m: m.updated_at, reverse=True)
        return rows

    def list_projects(self) -> list[ProjectInfo]:
        """Every project with sessions, most recently active first."""
        return self.store.list_projects()

    # --- write ------------------------------------------------------------------------------

    def add_messages(
        self, key: SessionKey, messages: Iterable[dict[str, Any]], expected_count: int | None = None,
        *, end: str | None = None, agent: str | None = None, mcp: dict[str, dict[str, str]] | None = None,
    ) -> int:
        """Append OpenAI chat messages in one append; return the new message count.

        ``expected_count``: the count the caller loaded; :class:`~core.errors.SessionConflict`
        if someone appended since. ``end``: the first message is an assistant reply the model did
        not finish, ended this way (see :func:`~core.session.entries.message_entry`). ``agent``:
        the defined agent that wrote the assistant messages, marked on each of them.
        ``mcp``: ``{call id: {"server", "tool"}}`` of the calls that went to MCP servers
        (:mod:`core.session.mcp_calls`), recorded on the assistant message holding each call.
        Raises :class:`SessionNotFound` for a missing main session,
        ``ValueError`` for a message without a role."""
        return self.store_round(key, Round(list(messages), end=end, agent=agent, mcp=mcp), expected_count=expected_count)

    def store_round(self, key: SessionKey, round: Round, *, expected_count: int | None = None) -> int:
        """Store ``round`` (:class:`~core.session.rounds.Round`: its messages with their usage,
        checkpoint and pending approval, or a turn's opening with the approval answers it
        carries) in ONE append — one lock, one fsync, one outbox item on a mirrored store — so
        a crash keeps all of it or none; return the message count after it.

        ``expected_count``: the message count the round continues;
        :class:`~core.errors.SessionConflict` and nothing written if someone appended since (the
        caller keeps the round as a version instead: :meth:`keep_as_version`). Raises
        :class:`SessionNotFound` (a main session deleted meanwhile is never brought back),
        ``ValueError`` (a message without a role, an entry of the wrong type) and the store's
        failures (``OSError``, :class:`~core.errors.StoreUnavailable`)."""
        # The store refuses, under its lock, to start a main session without a header, so a
        # session deleted meanwhile raises SessionNotFound here instead of coming back.
        return self.store.append(key, round.entries(ts=time.time()), expected_count=expected_count)

    def add_compaction(self, key: SessionKey, entry: dict[str, Any], expected_count: int | None = None) -> int:
        """Append one compaction entry (:func:`core.session.compaction.compaction_entry`); return
        the message count (unchanged: a compaction adds no message and removes none).

        ``expected_count``: the message count the compaction was computed on;
        :class:`~core.errors.SessionConflict` if someone appended since. Raises
        :class:`SessionNotFound`, ``ValueError`` for an entry that is not a compaction."""
        return self._append_one(key, entry, "compaction", expected_count)

    def add_checkpoint(self, key: SessionKey, entry: dict[str, Any], expected_count: int | None = None) -> int:
        """Append one checkpoint entry (:func:`core.agent.checkpoints.checkpoint_entry`: a rewind,
        an undo, or the files of a round whose messages were stored without it); return the
        message count. A round's own checkpoint goes with it (:meth:`store_round`).
        ``expected_count`` as in :meth:`add_compaction`. Raises :class:`SessionNotFound`,
        ``ValueError`` for an entry that is not a checkpoint."""
        return self._append_one(key, entry, "checkpoint", expected_count)

    def add_approval(self, key: SessionKey, entry: dict[str, Any]) -> int:
        """Append the user's answer to a pending approval (a decision entry,
        :func:`core.agent.approval.decision_entry`); return the message count. Unchecked: an
        answer refers to its call by id and is valid after anyone else's entries. Raises
        :class:`SessionNotFound`, ``ValueError`` for an entry that is not an approval."""
        return self._append_one(key, entry, "approval")

    def add_reply_error(self, key: SessionKey, entry: dict[str, Any]) -> int:
        """Append a ``reply_error`` entry (:func:`core.session.entries.reply_error_entry`: why a
        turn stored no reply); return the message count. Raises :class:`SessionNotFound`,
        ``ValueError`` for another kind of entry."""
        return self._append_one(key, entry, "reply_error")

    def _append_one(self, key: SessionKey, entry: dict[str, Any], kind: str,
                    expected_count: int | None = None) -> int:
        if not isinstance(entry, dict) or entry.get("type") != kind:
            raise ValueError(f"not a {kind} entry")
        return self.store.append(key, [entry], expected_count=expected_count)

    def rename(self, key: SessionKey, title: str, *, expected_title: str | None | object = ...) -> str:
        """Set a user title (never overwritten by generated ones); return the cleaned title.

        ``expected_title``: the title the caller showed ("" or None: untitled); when given and the
        stored title is another user title (another tab renamed meanwhile), :class:`StaleChange`
        is raised and nothing is written — the expected_count rule for titles. Raises :class:`InvalidTitle` for
        an empty title, :class:`SessionNotFound`.

        A version's title is its conversation's: the entry is written to the family root (when it
        exists), so every version, the sidebar row and ``anycode sessions rename`` agree (issue 31,
        item 1)."""
        cleaned = clean_user_title(title)
        key = self.root_of(key)  # one conversation, one title: it lives in the family root
        if expected_title is not ...:
            state = self.state(key)
            stored = state.title or ""
            # Only another user's rename counts: a generated title is there to be replaced.
            if state.title_source == "user" and stored != (expected_title or "") and stored != cleaned:
                raise StaleChange("title", expected_title, stored)
        self.store.append(key, [title_entry(cleaned, "user")])
        return cleaned

    # --- pins and tags (issue 31) -------------------------------------------------------------
    # A conversation's pin and tags are entries appended to its family root, so every version
    # shows them, every store and mirror carries them like any entry, and list() reads them as
    # metadata. Two tabs at once: both entries are kept; per field the last appended wins (see
    # core.session.entries), so nothing one tab did is lost to the other.

    def _conversation_root(self, key: SessionKey) -> tuple[SessionKey, SessionMeta]:
        metas = self.store.list(key.project_key) + self._archived(key.project_key)
        ids = {m.id: m for m in metas}
        me = ids.get(key.session_id)
        if me is None:
            raise SessionNotFound(key.session_id)
        if me.version_of and me.family in ids:
            return SessionKey(key.project_key, me.family), ids[me.family]
        return key, me

    def pin_and_tags(self, key: SessionKey) -> tuple[float | None, tuple[str, ...]]:
        """``(pinned, tags)`` of ``key``'s conversation (its family root's): when it was pinned
        (Unix seconds; None: not pinned) and its tags. Metadata only. Raises :class:`SessionNotFound`."""
        _, meta = self._conversation_root(key)
        return meta.pinned, tuple(meta.tags)

    def conversation_tags(self, project: str) -> dict[str, tuple[str, ...]]:
        """``{session id: its conversation's tags}`` for every session of ``project`` with tags
        (archived too; a version maps to its root's tags), for filtering search hits by tag.
        Metadata only."""
        metas = self.store.list(project) + self._archived(project)
        own = {m.id: tuple(m.tags) for m in metas}
        out = {m.id: own.get(m.family, own[m.id]) for m in metas}
        return {sid: tags for sid, tags in out.items() if tags}

    def pin(self, key: SessionKey, pinned: bool = True) -> SessionKey:
        """Pin (``pinned``) or unpin ``key``'s conversation: one ``pin`` entry appended to its
        family root, whose key is returned. Always written, even when already in that state (the
        click is the latest word when two tabs disagree). Raises :class:`SessionNotFound`."""
        root, _ = self._conversation_root(key)
        self.store.append(root, [pin_entry(pinned)])
        log.info("%s %s", "pinned" if pinned else "unpinned", root.session_id)
        return root

    def tag(self, key: SessionKey, add: Iterable[str] = (), remove: Iterable[str] = ()) -> tuple[str, ...]:
        """Add ``add`` and remove ``remove`` (tags, cleaned by
        :func:`~core.session.entries.clean_tag`) on ``key``'s conversation: one ``tags`` entry
        appended to its family root; returns the tags after it. Nothing is written when nothing
        would change. Raises :class:`~core.errors.InvalidTag` (a tag that cannot be one, more than
        :data:`~core.session.entries.MAX_TAGS`) and :class:`SessionNotFound`."""
        root, meta = self._conversation_root(key)
        added = list(dict.fromkeys(clean_tag(t) for t in add))
        removed = [t for t in dict.fromkeys(clean_tag(t) for t in remove) if t not in added]
        have = list(meta.tags)
        after = [t for t in have if t not in removed] + [t for t in added if t not in have]
        if after == have:
            return tuple(have)
        if len(after) > MAX_TAGS:
            raise InvalidTag(f"A chat can have at most {MAX_TAGS} tags.")
        self.store.append(root, [tags_entry(added, removed)])
        return tuple(after)

    def state(self, key: SessionKey, *, entries: list[dict[str, Any]] | None = None) -> SessionState:
        """The session's metadata folded from all its entries (:class:`SessionState`: title,
        cwd, version in use, ...), without building its messages; folded once while the
        session is unchanged. Raises :class:`SessionNotFound`.

        ``entries``: the session's entries as the caller just loaded them (``store.load(key)``),
        folded instead of loading them again: on the SQL stores a load is a full query, so a
        caller that needs the entries too (the approval card) would otherwise pay two."""
        if entries is None:
            entries = self.store.load(key)
            if entries is None:
                raise SessionNotFound(key.session_id)
        return replace(self._folds.fold(key, entries, "state", lambda e: SessionState().feed_all(e)))

    def set_generated_title(self, key: SessionKey, title: str, source: str = "llm") -> bool:
        """Store a generated title (``source`` ``"llm"`` or ``"fallback"``) unless the user set one.

        Returns False (nothing written) when a user title exists. Even if the user renames in
        between, the fold keeps the user's title, so the race is harmless. Like :meth:`rename`,
        it writes to the family root of a version."""
        key = self.root_of(key)
        entries = self.store.load(key)
        if entries is None:
            raise SessionNotFound(key.session_id)
        if self.state(key, entries=entries).title_source == "user":
            return False
        self.store.append(key, [title_entry(title, source)])
        return True

    def fork(self, key: SessionKey, message_index: int, *, version: bool = False,
             extra: list[dict[str, Any]] | None = None, in_use: bool = True,
             copy_of: str | None = None) -> Session:
        """Copy messages ``[0 .. message_index]`` (inclusive) into a new session and return it.

        The cut is first moved out of any tool round (:func:`core.session.versions.valid_cut`):
        the copy never holds a tool call without its result and no result is made up.
        A compaction whose summarised messages are all in the fork (``first_kept_index`` <=
        ``message_index + 1``: a cut at or after the compaction point, the divider) is copied too,
        so the fork's model view is the summary plus what follows; one cut before it is not.
        The original is not touched. The fork's header records ``forked_from`` =
        ``{"session_id", "message_index"}`` (the cut actually used). A plain fork ("Branch from
        here") is titled the original's plus " (branch)". With ``version`` (Edit/Regenerate) the
        header also records ``version_of`` (the family root and the cut), the title is the
        original's, ``message_index`` may be -1 (share nothing), and a version entry naming the
        new session is appended to the root, so reopening the conversation shows it. The
        sub-agent records of the task calls inside the copied messages are copied along (same
        subpaths), none of later calls. ``extra``: entries that follow the copied ones in the same
        whole creation (a racing reply kept as a version, :meth:`keep_as_version`; their task
        calls' records are copied too). ``in_use=False``: a version that does not become the one
        in use (no version entry; ``sessions pull`` keeping another machine's history). ``copy_of``:
        recorded in the header as ``{"session_id": copy_of}`` — the version holds a copy of that
        session's history from elsewhere (see :mod:`core.session.entries`).
        Raises :class:`SessionNotFound`, ``IndexError`` for an index outside the messages."""
        entries = self.store.load(key)
        if entries is None:
            raise SessionNotFound(key.session_id)
        original = session_from_entries(key, entries)
        if original.version_of and key.subpath is None:
            # A version's title is its conversation's (the root's, issue 31 item 1): a branch
            # of it copies that one, not the version's own older title entry.
            root_meta = self._root_meta(key.project_key, original.family)
            if root_meta is not None and root_meta.title:
                original.title, original.title_source = root_meta.title, root_meta.title_source
        if not (-1 if version else 0) <= message_index < len(original.messages):
            raise IndexError(
                f"message index {message_index} is outside 0..{len(original.messages) - 1}"
            )
        message_index = valid_cut(original.messages, message_index)
        new_key = SessionKey(key.project_key, new_session_id())
        now = time.time()
        copied: list[dict[str, Any]] = []
        seen = 0
        for e in entries:
            if e.get("type") == "message" and isinstance(e.get("message"), dict):
                if seen <= message_index:
                    copied.append(e)
                seen += 1
            elif e.get("type") == "compaction" and _summarises_within(e, message_index + 1):
                copied.append(e)  # a later one lands right after the copied messages
            elif (e.get("type") == "checkpoint" and isinstance(e.get("at"), int)
                  and e["at"] <= message_index + 1 and not e.get("rewind")):
                copied.append(e)  # the files the copied rounds changed (issue 29: rewind in the fork)
            elif e.get("type") == "usage" and isinstance(e.get("at"), int) and e["at"] <= message_index + 1:
                # the tokens of the copied replies go along (issue 31): a chat's usage is that of
                # the replies it shows, so a version's or a branch's totals count the shared prefix
                copied.append(e)
        forked_from = {"session_id": key.session_id, "message_index": message_index}
        root = original.family
        version_of = {"session_id": root, "message_index": message_index} if version else None
        new_entries = [header_entry(new_key.session_id, key.project_key, original.cwd,
                                    created_at=now, forked_from=forked_from, version_of=version_of)]
        if original.identity:  # a fork or version is of the same project beyond its path (issue 26)
            new_entries[0]["project_identity"] = original.identity
        if copy_of is not None:
            new_entries[0]["copy_of"] = {"session_id": copy_of}
        new_entries += copied
        if original.title and version:
            new_entries.append(title_entry(original.title, original.title_source or "user", ts=now))
        elif original.title:
            base = original.title[: MAX_TITLE_CHARS - len(BRANCH_SUFFIX)]
            new_entries.append(title_entry(base + BRANCH_SUFFIX, original.title_source or "user", ts=now))
        new_entries += extra or []
        # The sub-agent records of the task calls inside the copied prefix go along (none after
        # it), written before the fork itself so a fork that lists is complete.
        self._copy_subagent_records(key, new_key, messages_of(copied + (extra or [])))
        # Whole or absent: a fork killed mid-write never lists as a short session.
        try:
            self.store.create_whole(new_key, new_entries)
        except BaseException:
            self._remove_quietly(new_key)
            raise
        log.info("forked %s at message %d into %s%s", key.session_id, message_index, new_key.session_id,
                 " (a version)" if version else "")
        if version and in_use:
            self.store.append(SessionKey(key.project_key, root), [version_entry(new_key.session_id, ts=now)])
        return session_from_entries(new_key, new_entries)

    def keep_as_version(self, key: SessionKey, shared: int, round: Round) -> Session:
        """Store a round that could not land in ``key`` — someone else (another tab, process or
        machine) appended since its writer's last stored message — as a new version of the
        conversation (a racing reply is never dropped), and return that version.

        ``shared``: how many of ``key``'s messages the round follows (the writer's stored
        history, ending with the message the reply answers); ``round``: the reply's
        :class:`~core.session.rounds.Round` (its usage, checkpoint and approval go along; their
        ``at`` counts hold in the version too, which shares those ``shared`` messages). The
        version is a :meth:`fork` with ``version_of`` cut at message ``shared - 1`` holding the
        round, created whole (``create_whole``: a kill leaves it whole or absent), and becomes
        the version in use. Raises :class:`SessionNotFound` (``key`` was deleted meanwhile),
        ``IndexError`` (``shared`` outside the stored messages), ``ValueError`` (a bad round)
        and the store's errors, with no version made."""
        stored = self.store.load(key)
        if stored is None:
            raise SessionNotFound(key.session_id)
        message_entries = [e for e in stored if e.get("type") == "message" and isinstance(e.get("message"), dict)]
        if not 0 < shared <= len(message_entries):
            raise IndexError(f"the reply follows {shared} messages; the session holds {len(message_entries)}")
        # A cut right after an assistant message whose calls are answered by this round (a task
        # round's head is stored on its own) would be moved before it by valid_cut: the version
        # then starts at that boundary and carries the head itself, so no result is orphaned.
        cut = valid_cut([e["message"] for e in message_entries], shared - 1)
        entries = message_entries[cut + 1:shared] + round.entries(ts=time.time())
        version = self.fork(key, cut, version=True, extra=entries)
        log.warning("session %s changed while a reply was written; the reply was kept as version %s",
                    key.session_id, version.id)
        return version

    # --- versions ---------------------------------------------------------------------------

    def family(self, key: SessionKey) -> list[SessionMeta]:
        """The root and versions of ``key``'s family (archived or not), oldest first. Metadata only."""
        metas = self.store.list(key.project_key) + self._archived(key.project_key)
        root_id = next((m.family for m in metas if m.id == key.session_id), None)
        if root_id is None:
            raise SessionNotFound(key.session_id)
        members = family_titles([m for m in metas if m.id == root_id or m.family == root_id])
        return sorted(members, key=lambda m: (m.created_at, m.id))

    def current_version(self, key: SessionKey) -> SessionKey:
        """The session to show for ``key``'s conversation: the version last used in its family
        (the last version entry of the root), or ``key`` when it is not part of a family or the
        named version is gone. Raises :class:`SessionNotFound`."""
        state = self.state(key)
        root = SessionKey(key.project_key, state.version_of["session_id"]) if state.version_of else key
        if root != key:
            try:
                state = self.state(root)
            except SessionNotFound:
                return key
        current = state.current
        if not current or current == key.session_id:
            return key if current else root
        candidate = SessionKey(key.project_key, current)
        return candidate if self.store.exists(candidate) else root

    def switch_version(self, key: SessionKey, to: str, *, expected: str | None = None) -> SessionKey:
        """Make session ``to`` (a member of ``key``'s family) the version in use; return its key.

        ``expected``: the session the caller showed; when the family's version in use is another
        one (another tab switched or made a version meanwhile), :class:`StaleChange` is raised
        and nothing is written. The check is made again by the store under its lock (the root's
        ``expected_version``), so of two tabs racing from the same state exactly one switch is
        written. Raises :class:`SessionNotFound` when ``to`` is not in the family."""
        members = {m.id: m for m in self.family(key)}
        if to not in members:
            raise SessionNotFound(f"{to} among the versions of {key.session_id}")
        root = SessionKey(key.project_key, members[to].family)
        check: dict[str, Any] = {}
        if expected is not None:
            pointer = self.state(root).current or root.session_id  # as stored, before resolving
            shown = self.current_version(key).session_id
            if shown == to:
                return SessionKey(key.project_key, to)  # already in use (switched elsewhere too)
            if shown != expected:
                raise StaleChange("version", expected, shown)
            check = {"expected_version": pointer}
        try:
            self.store.append(root, [version_entry(to)], **check)
        except StaleChange as err:  # another tab switched between our read and the store's lock
            if self.current_version(key).session_id == to:
                return SessionKey(key.project_key, to)
            raise StaleChange("version", expected, err.actual) from err
        return SessionKey(key.project_key, to)

    def use_version(self, key: SessionKey) -> bool:
        """Make session ``key`` the version in use of its conversation when it is a member of a
        family and not already in use — called after a message was sent in it (maybe from a tab
        that kept showing it while another tab switched away): the version last used is the one
        last written in, so a reload lands there. Returns True when a version entry was
        appended. Metadata only, plus that one append. Raises :class:`SessionNotFound`."""
        members = self.family(key)
        if len(members) < 2:
            return False
        root = next(m for m in members if m.id == key.session_id).family
        pointer = next((m.current_version for m in members if m.id == root), None) or root
        if pointer == key.session_id:
            return False
        self.store.append(SessionKey(key.project_key, root), [version_entry(key.session_id)])
        log.info("version %s of %s in use again (a message was sent in it)", key.session_id, root)
        return True

    def version_points(self, key: SessionKey) -> list[dict[str, Any]]:
        """Where the family's versions diverge from session ``key`` (see
        :func:`core.session.versions.divergences`), each alternative opening the version last
        used below that point (the root's version entries, :func:`use_order`); ``[]`` for a
        session without versions. Reads the metadata and, for a family, its root's entries."""
        members = self.family(key)
        if len(members) < 2:
            return []
        root = next((m.family for m in members if m.id == key.session_id), key.session_id)
        entries = self.store.load(SessionKey(key.project_key, root)) or []
        return divergences(members, root, key.session_id, use_order(entries))

    def version_number(self, key: SessionKey) -> tuple[int, int, bool]:
        """``(n, m, in_use)``: session ``key`` is version ``n`` of the ``m`` versions of its
        conversation (numbered in creation order, the root being 1, as ``anycode sessions
        versions`` lists them), and whether it is the version in use. ``(1, 1, True)`` for a
        session without versions. Raises :class:`SessionNotFound`."""
        members = self.family(key)
        n = next(i for i, m in enumerate(members, 1) if m.id == key.session_id)
        in_use = len(members) < 2 or self.current_version(key) == key
        return n, len(members), in_use

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
        for sub in self.store.list_subpaths(key):
            try:
                self.store.remove(SessionKey(key.project_key, key.session_id, sub))
            except Exception:  # noqa: BLE001 -- the original failure matters more
                log.exception("could not remove %s/%s", key.session_id, sub)

    # --- lifecycle --------------------------------------------------------------------------

    def archive(self, key: SessionKey, *, expected: bool | None = None) -> None:
        """Move the session (with every version of its conversation) out of the main list (kept,
        browsable among archived sessions). ``expected``: the archived state the caller showed;
        when it differs from the stored one, :class:`StaleChange` and nothing changes."""
        self._set_archived(key, True, expected)

    def unarchive(self, key: SessionKey, *, expected: bool | None = None) -> None:
        """Bring an archived session (and its conversation's versions) back to the main list.
        ``expected`` as in :meth:`archive`."""
        self._set_archived(key, False, expected)

    def root_of(self, key: SessionKey) -> SessionKey:
        """The family root of ``key`` (``key`` itself unless it is a version whose root exists).
        Metadata only."""
        if key.subpath is not None:
            return key
        metas = self.store.list(key.project_key) + self._archived(key.project_key)
        ids = {m.id: m for m in metas}
        me = ids.get(key.session_id)
        if me is None or not me.version_of or me.family not in ids:
            return key
        return SessionKey(key.project_key, me.family)

    def _set_archived(self, key: SessionKey, archived: bool, expected: bool | None) -> None:
        # A conversation is archived whole: a version's archive state is its root's.
        key = self.root_of(key)
        if expected is not None and key.subpath is None:
            stored = any(m.id == key.session_id for m in self._archived(key.project_key))
            if stored != expected and stored != archived:
                raise StaleChange("archive state", expected, stored)
        if key.subpath is None:
            # Dates the user's choice, so a mirror can carry it to the other machines
            # (core.session.metadata: the newest archive or unarchive wins there too).
            self.store.append(key, [archive_entry(archived)])
        self._move_family(key, archived)

    def follow_archive_choice(self, key: SessionKey, archived: bool) -> bool:
        """Move ``key``'s conversation (root and versions) into the archive (``archived``) or back,
        without recording a choice: another copy's newest archive or unarchive by hand, just
        merged into its root (:mod:`core.session.metadata`). Returns whether the root moved.
        Raises :class:`SessionNotFound` when the root is gone."""
        key = self.root_of(key)
        where = any(m.id == key.session_id for m in self._archived(key.project_key))
        if where == archived:
            return False
        self._move_family(key, archived)
        log.info("%s %s as another machine chose", "archived" if archived else "unarchived", key.session_id)
        return True

    def _move_family(self, key: SessionKey, archived: bool) -> None:
        keys = [key] + [m.key for m in self._versions(key)]
        for k in keys:
            try:
                (self.store.archive if archived else self.store.unarchive)(k)
            except SessionNotFound:
                if k == key:
                    raise

    def _versions(self, key: SessionKey) -> list[SessionMeta]:
        # The other members of a family rooted at ``key`` (none for a version or a plain session).
        if key.subpath is not None:
            return []
        metas = self.store.list(key.project_key) + self._archived(key.project_key)
        return [m for m in metas if m.version_of and m.family == key.session_id and m.id != key.session_id]

    def delete(self, key: SessionKey) -> None:
        """Delete the session and its sub-agent records for good; deleting a conversation's root
        deletes its versions too. Raises :class:`SessionNotFound`."""
        versions = self._versions(key)
        self.store.remove(key)
        for m in versions:
            try:
                self.store.remove(m.key)
            except SessionNotFound:
                pass  # removed by someone else meanwhile
        log.info("deleted session %s%s", key.session_id, f" and {len(versions)} versions" if versions else "")

    def auto_archive(self, max_age_days: float | None = None, now: float | None = None) -> list[SessionKey]:
        """Archive sessions whose last activity is older than ``max_age_days`` (the design article's
        rule for archiving: "超过 N 天未活跃"), in every project.

        ``max_age_days`` defaults to ``ANYCODE_ARCHIVE_DAYS`` (off by default); 0 or less does
        nothing. ``now`` in Unix seconds (default the current time). Returns the keys archived.
        On a mirrored store only the local copy is archived (its ``archive_local``)."""
        days = settings.archive_days() if max_age_days is None else float(max_age_days)
        # A mirrored store archives its local copy only: the mirror's copy has its own retention.
        archived = self._for_idle(days, now, self.store.archive_local if is_mirrored(self.store) else self.store.archive)
        if archived:
            log.info("auto-archive moved %d sessions idle for over %g days", len(archived), days)
        return archived

    def cleanup(self, max_age_days: float | None = None, now: float | None = None) -> list[SessionKey]:
        """Delete non-archived sessions whose last activity is older than ``max_age_days``.

        ``max_age_days`` defaults to ``ANYCODE_CLEANUP_DAYS`` (30, per Claude Code's
        ``cleanupPeriodDays``); 0 or less disables cleanup. ``now`` in Unix seconds (default
        the current time). Returns the keys removed, across every project. On a mirrored store
        only the local copy is removed (its ``remove_local``); the mirror keeps its copy until its
        own retention removes it. The checkpoint blobs no session refers to any more are deleted
        by the callers after this (:func:`core.stores.blobs.collect_unreferenced`: the app's start,
        ``anycode sessions cleanup``), as core.session never imports a store module."""
        days = settings.cleanup_days() if max_age_days is None else float(max_age_days)
        # A mirrored store removes its local copy only (issue 25: mirror retention is the
        # mirror's, ANYCODE_MIRROR_RETENTION_DAYS); a user's delete still removes both.
        removed = self._for_idle(days, now, self.store.remove_local if is_mirrored(self.store) else self.store.remove)
        if removed:
            log.info("cleanup removed %d sessions idle for over %g days", len(removed), days)
        return removed

    def _arrived_after(self, key: SessionKey, cutoff: float) -> bool:
        """Whether the session came into this store after ``cutoff`` (Unix seconds) although its
        messages are older: an import or a restore keeps the original times, and must not be
        expired or archived the next time the app starts. Asks the store when it was last written
        (``written_at``, the JSONL store); otherwise reads the header's ``imported_from.at`` and
        ``restored_from.at`` (core.stores.backup)."""
        if knows_write_times(self.store):
            when = self.store.written_at(key)
            return when is not None and when >= cutoff
        entries = self.store.load(key) or []
        header = entries[0] if entries and entries[0].get("type") == "header" else {}
        for field_name in ("imported_from", "restored_from"):
            arrived = header.get(field_name) if isinstance(header.get(field_name), dict) else {}
            at = arrived.get("at")
            if isinstance(at, (int, float)) and not isinstance(at, bool) and at >= cutoff:
                return True
        return False

    def idle_sessions(self, days: float, now: float | None = None) -> list[SessionMeta]:
        """Unarchived sessions of every project idle for over ``days`` days at ``now`` (Unix
        seconds, default the current time): no message for that long and no arrival in this store
        for that long (see :meth:`_arrived_after`). None when ``days <= 0``. What cleanup deletes
        and auto-archive archives (``anycode sessions cleanup --dry-run`` lists it)."""
        if days <= 0:
            return []
        cutoff = (time.time() if now is None else now) - days * DAY_SECONDS
        return [meta for project in self.store.list_projects() for meta in self.store.list(project.project_key)
                if not is_expert_id(meta.id) and meta.updated_at < cutoff and not self._arrived_after(meta.key, cutoff)]

    def _for_idle(self, days: float, now: float | None, action: Any) -> list[SessionKey]:
        """Apply ``action(key)`` to every session of :meth:`idle_sessions`; return the keys it was
        applied to."""
        done: list[SessionKey] = []
        for meta in self.idle_sessions(days, now):
            try:
                action(meta.key)
            except SessionNotFound:
                continue  # removed by someone else meanwhile
            done.append(meta.key)
        return done
