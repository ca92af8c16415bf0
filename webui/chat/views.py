"""What the chat pane shows for a tab: the tab's state, the :class:`SessionView` of its session,
and the reads every operation ends with (:func:`reload`, :func:`settled`).

The bottom of ``webui/chat``: the operations (:mod:`webui.chat.handlers`, :mod:`webui.chat.send`,
approvals, compaction, versions, moves …) all return these views, so they import this module and
it imports none of them. The tab's state is a small dict of ids ``{"project": project_key,
"session": id or None, "count": loaded message count, "title_wait": Unix seconds until which a
generated title is awaited (0: not waiting)}`` (plus ``"branch_guard"`` right after a branch).
"""
from __future__ import annotations

import logging
import os
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.agent.repair import INTERRUPTED_RESULT
from core.errors import (
    AmbiguousSessionId,
    AnycodeError,
    ExpertSessionReadOnly,
    InvalidSessionKey,
    SessionNotFound,
    StoreUnavailable,
)
from core.session.experts import expert_name
from core.session.keys import SessionKey
from webui import i18n
from webui.i18n import Msg, t
from webui.render import rows as render
from webui.text import chat_text
from webui.text.error_text import describe, describe_stored, os_text

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

CHAT_GONE_NOTICE = Msg("chat_gone")  # the open chat was deleted elsewhere (not "No session <uuid> was found")
NO_REPLY_NOTICE = Msg("no_reply_notice")  # the bar over a last message without an answer


def tab_state(project: str, session: str | None = None, count: int = 0,
              title_wait: float = 0.0) -> dict[str, Any]:
    """A tab's state: ids and a message count only (it lives in ``gr.State``, one per tab)."""
    return {"project": project, "session": session, "count": count, "title_wait": title_wait}


@dataclass
class SessionView:
    """What the chat pane shows for the tab's session (or a new, not yet saved chat).

    ``rows``: chat rows for ``gr.Chatbot``; ``title``: the title field's text ("" when untitled);
    ``archived``: the session is in the archive; ``notice``: a sentence to show the user, or None;
    ``notice_level``: ``"warning"`` (something was refused or went wrong) or ``"info"``;
    ``label``: what an untitled chat is called (the title field's placeholder);
    ``needs_reply``: the last stored message is the user's and has no answer (a run was killed);
    ``no_reply``: then, the sentence the "no reply" bar shows — why, when the turn failed at the
    model and the session kept the reason ("No reply was saved: <reason>"), else the plain notice.
    """

    state: dict[str, Any]
    title: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    archived: bool = False
    notice: str | None = None
    notice_level: str = "warning"
    label: str = render.UNTITLED
    needs_reply: bool = False
    no_reply: str | None = None

    @property
    def session_id(self) -> str | None:
        """The open session's id, None for a new chat."""
        return self.state.get("session")


def _key(state: dict[str, Any]) -> SessionKey:
    return SessionKey(state["project"], state["session"])


def _inside(start: int, session: Any) -> bool:
    """True when a window starting at stored message ``start`` shows some of ``session`` (or it
    is empty and starts at 0)."""
    return start == 0 or start < len(session.messages)


def shown_from(session: Any, state: dict[str, Any] | None = None, include: int | None = None) -> int:
    """The first stored message the tab shows: where the tab's window starts (``state["from"]``,
    for the tab's own session), or earlier when ``include`` (a search hit) needs it; the default
    window of the conversation (:func:`render.window_start`) for another session or a start past
    its end."""
    start = render.window_start(session.messages, include=include)
    earlier = (state or {}).get("from") if state and state.get("session") == session.id else None
    if not isinstance(earlier, int) or earlier < 0:
        return start
    if include is None and _inside(earlier, session):
        # The tab's window stays where it is, also when it starts after the default one (a
        # shorter version kept the rows above its point, :func:`version_from`): moved by one
        # message, every drawn row would hold its neighbour's and the page re-draw them all.
        return earlier
    return min(start, earlier)


def version_from(session: Any, state: dict[str, Any] | None, shared: int) -> int:
    """The first stored message to show of another version of the tab's conversation (an Edit,
    a Regenerate, a switch of the arrows), whose stored messages before ``shared`` are the ones
    the tab shows: the tab's own window start (``state["from"]``) when it lies in that shared
    part, so the rows above the point stay the rows drawn; else :func:`render.window_start`.

    Why: the default window is the latest :data:`render.CHAT_WINDOW` messages, so a version one
    message shorter or longer started one row off, every drawn row then held its neighbour's
    message (user and assistant swapped), and the page re-drew the whole chat — a version
    switch cost a full open of a long chat (issue 32)."""
    earlier = (state or {}).get("from")
    if isinstance(earlier, int) and 0 <= earlier <= shared and _inside(earlier, session):
        return earlier
    return render.window_start(session.messages)


def view_of(session: Any, *, title_wait: float = 0.0, notice: str | None = None,
            start: int | None = None) -> SessionView:
    """The view of a loaded ``core.session.models.Session``, showing its messages from stored
    message ``start`` on (default: its latest, :func:`render.window_start`; see
    :func:`shown_from`); ``state["earlier"]`` counts the messages not shown."""
    if start is None:
        start = render.window_start(session.messages)
    # only the last message that is not the system prompt matters (a list of every one cost a
    # pass over a 100,000-message chat per open)
    last = next((m for m in reversed(session.messages) if m.get("role") != "system"), None)
    state = tab_state(session.project_key, session.id, len(session.messages), title_wait)
    state["from"] = start
    state["earlier"] = _hidden(session, start)
    # What the tab shows, so a change is written only when the user made one, and one made
    # against what another tab changed since is refused (issue 15; see rename, set_archived).
    state["title"], state["archived"] = session.title or "", bool(session.archived)
    state["compactions"] = len(session.compactions)  # a compaction changes the state: the meter refreshes
    lost = _reply_lost(session, last)
    return SessionView(
        state=state,
        title=shown_title(session),
        rows=render.chat_window(session.messages, start, session.compactions, session.reply_ends, session.reply_agents).rows,
        archived=bool(session.archived),
        notice=notice,
        label=render.session_label(session.title, session.created_at, session.title_source),
        needs_reply=lost,
        no_reply=no_reply_text(session) if lost else None,
    )


def _hidden(session: Any, start: int) -> int:
    """The messages before stored message ``start`` that would show as rows: all but the system
    ones (:func:`render.chat_rows` draws none for those). From the indexes the fold recorded
    (``Session.system_at``), without a pass over the messages above the window."""
    start = max(0, min(start, len(session.messages)))
    system_at = getattr(session, "system_at", None)
    if system_at is None:  # a Session made by hand: count them
        return sum(1 for m in session.messages[:start] if m.get("role") != "system")
    return start - bisect_left(system_at, start)


def no_reply_text(session: Any) -> str:
    """What the "no reply" bar says for ``session`` (whose last message has no answer): "No reply
    was saved: <reason>" when a turn failed at the model and the session kept why
    (``Session.reply_error``; the sentence :func:`describe` gave it live, secrets hidden), else
    "No reply was saved for the last message." (the app was stopped mid-reply)."""
    record = getattr(session, "reply_error", None)
    if isinstance(record, dict):
        reason = describe_stored(record).strip()
        if reason:
            return t("no_reply_reason", reason=reason)
    return t(NO_REPLY_NOTICE)


def shown_title(session: Any) -> str:
    """The title field's text for a session: its title, or "" when it has none or only core's
    English fallback (``title_source == "fallback"``): the field's placeholder then shows the
    label in the tab's language (:func:`webui.text.timefmt.session_label`)."""
    return "" if getattr(session, "title_source", None) == "fallback" else (session.title or "")


def _reply_lost(session: Any, last: dict[str, Any] | None) -> bool:
    """The last stored message is the user's and has no answer, or a tool result the model never
    answered (it failed, or sent an empty reply, which is never stored). A branch made at a user
    message or a tool step ends that way on purpose (nothing was lost), until something is added to it. Tool
    results of a stopped round ("interrupted") are not lost replies: the user stopped them."""
    if last is None:
        return False
    fork = session.forked_from or {}
    if isinstance(fork.get("message_index"), int) and len(session.messages) == fork["message_index"] + 1:
        return False  # a branch made here, at a user message or a tool step (issue 31, item 6)
    if last.get("role") == "tool":
        return render.message_text(last.get("content")) != INTERRUPTED_RESULT
    return last.get("role") == "user"


def new_chat(ctx: WebContext, project: str | None = None, notice: str | None = None) -> SessionView:
    """An empty chat in ``project`` (default: the launcher's project). Nothing is written until the
    first message is sent, so opening the page never litters the list with empty sessions."""
    return SessionView(state=tab_state(project or ctx.project_key), notice=notice)


def open_session(ctx: WebContext, project: str, session_id: str, *, include: int | None = None) -> SessionView:
    """Load session ``session_id`` (a unique prefix is fine) of ``project``, showing its latest
    messages (and stored message ``include`` when given, e.g. a search hit).

    A session of the same project stored under another key (recorded on another machine, at
    another path of the same git checkout: :meth:`WebContext.alias_keys`) is found too, and one
    the sidebar listed as only in the mirror is pulled first (:mod:`webui.chat.remote`).

    Raises ``SessionNotFound`` / ``AmbiguousSessionId`` / ``InvalidSessionKey``;
    ``StoreUnavailable`` when a chat from another machine cannot be pulled.
    """
    key = _writable(_find_in_project(ctx, project, session_id))
    if include is None:
        key = ctx.manager.current_version(key)  # a conversation opens on the version last used
    # A search hit shows the version holding it, and the version in use stays what it was: only
    # the user's own switch (or a message sent in it) changes that (issue 31, item 3).
    session = ctx.manager.get(key)
    return view_of(session, start=shown_from(session, include=include))


def _writable(key: SessionKey) -> SessionKey:
    """``key`` itself, unless it is an expert agent's own session (issue 30): that one is written
    only by its consultations and opens read-only from the Agents section, never as a chat a
    message could be sent into (``?session=expert-x`` did). Raises ``ExpertSessionReadOnly``."""
    name = expert_name(key.session_id)
    if name is not None:
        raise ExpertSessionReadOnly(name)
    return key


def _find_in_project(ctx: WebContext, project: str, session_id: str) -> SessionKey:
    try:
        return ctx.manager.find(project, session_id)
    except SessionNotFound:
        for alias in ctx.alias_keys(project):
            try:
                return ctx.manager.find(alias, session_id)
            except SessionNotFound:
                continue
        from webui.chat import remote

        pulled = remote.pull_if_remote(ctx, session_id, project)  # from another machine: pulled first
        if pulled is not None:
            return pulled
        raise


def locate(ctx: WebContext, session_id: str, preferred_project: str | None = None, *,
           mirror: bool = True) -> SessionKey:
    """Find a session by id or unique prefix, in ``preferred_project`` first, then in every project
    that has sessions (a bookmark from another project still opens), then in the mirror (a chat
    made on another machine is pulled; not with ``mirror=False``). Raises ``SessionNotFound``; ``StoreUnavailable`` when
    the mirror had to be asked and could not answer."""
    first = preferred_project or ctx.project_key
    try:
        return ctx.manager.find(first, session_id)
    except SessionNotFound:
        pass
    # Only now every project: listing them reads each one's index (~70 ms with a 10,000-session
    # project), which a link to a chat of the preferred project never needed (issue 32).
    try:
        projects = [p.project_key for p in ctx.manager.list_projects()]
    except AnycodeError as err:  # listing projects is a convenience, the preferred one was asked
        log.warning("could not list projects: %s", err)
        projects = []
    seen: set[str] = {first}
    for project in projects:
        if project in seen:
            continue
        seen.add(project)
        try:
            return ctx.manager.find(project, session_id)
        except SessionNotFound:
            continue
    from webui.chat import remote

    # Not on this machine: a link to a chat made on another one (the mirror holds it) opens too.
    pulled = remote.pull_if_remote(ctx, session_id, preferred_project or ctx.project_key) if mirror else None
    if pulled is not None:
        return pulled
    raise SessionNotFound(f"with id {session_id!r}")  # quoted as given: never read as a store's key


def initial_view(ctx: WebContext, query_params: dict[str, str] | None) -> SessionView:
    """The view a freshly loaded tab shows: the session named by ``?session=`` in the URL, else
    the launcher's ``--continue``/``--resume`` session, else a new chat. A bad id gives a new chat
    with a notice instead of an error page."""
    params = dict(query_params or {})
    wanted = (params.get("session") or "").strip() or ctx.initial_session
    if not wanted:
        return new_chat(ctx)
    try:
        return view_of(ctx.manager.get(ctx.manager.current_version(_writable(locate(ctx, wanted)))))
    except (SessionNotFound, AmbiguousSessionId, InvalidSessionKey, StoreUnavailable, ExpertSessionReadOnly) as err:
        log.info("cannot open session %r from the URL: %s", wanted, err)
        return new_chat(ctx, notice=describe(err))


def first_list_target(ctx: WebContext, query_params: dict[str, str] | None) -> tuple[str, str | None]:
    """``(project key, open chat's id or None)``: whose sidebar list a freshly loaded page shows,
    and the row marked open in it, as :func:`initial_view` will find them, but from metadata
    only and never asking the mirror (the page's HTML carries this list: issue 32). A link
    that cannot be followed so (unknown id, a chat only the mirror has, a store error) gives the
    launcher's project with no row marked; the load's answer then says what became of it."""
    params = dict(query_params or {})
    wanted = (params.get("session") or "").strip() or ctx.initial_session
    if not wanted:
        return ctx.project_key, None
    try:
        key = ctx.manager.current_version(locate(ctx, wanted, mirror=False))
    except (AnycodeError, OSError) as err:
        log.debug("no first list for %r: %s", wanted, err)
        return ctx.project_key, None
    return key.project_key, key.session_id


def reload(ctx: WebContext, state: dict[str, Any], notice: str | None = None) -> SessionView:
    """Re-read the tab's session from the store (a new chat stays a new chat); a session moved
    to another project elsewhere opens there (:func:`relocated`), one deleted
    elsewhere turns into a new chat with a notice."""
    if not state.get("session"):
        return new_chat(ctx, state.get("project"), notice)
    try:
        session = ctx.manager.get(_key(state))
        return view_of(session, title_wait=state.get("title_wait", 0.0), notice=notice,
                       start=shown_from(session, state))
    except SessionNotFound:
        moved = relocated(ctx, state)
        return moved if moved is not None else new_chat(ctx, state.get("project"), notice=CHAT_GONE_NOTICE)


def project_label(path: str) -> str:
    """``"name — /real/path"``: the folder name first (what a narrow sidebar shows), then the
    full real path, so two projects with one name stay apart."""
    name = os.path.basename(path.rstrip("/")) or path
    return f"{name} — {path}"


def project_cwd(ctx: WebContext, project: str) -> str:
    """The real path of ``project`` (new sessions record it; tools are confined to it): for the
    opened project and its aliases (the same checkout on another machine), the folder opened here."""
    if project == ctx.project_key or project in ctx.alias_keys(ctx.project_key):
        return ctx.project_path
    for info in ctx.manager.list_projects():
        if info.project_key == project and info.cwd:
            return info.cwd
    raise SessionNotFound(f"project {project}")


@dataclass
class SendUpdate:
    """One step of a streamed send: the tab state, the chat rows to show, an optional notice, the
    text to put back in the input box (on a conflict; None: clear it), and whether it is the end."""

    state: dict[str, Any]
    rows: list[dict[str, Any]] | None  # None: leave the chat as it is (the store could not be read)
    title: str = ""
    notice: str | None = None
    restore_text: str | None = None
    done: bool = False
    error: bool = False  # the reply failed (the chat shows an error row)
    label: str = render.UNTITLED  # what the chat is called while untitled (the sidebar's name)
    notice_level: str = "warning"  # "info": nothing went wrong (e.g. the chat was unarchived)


def _error_row(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": chat_text.reply(f"\u26a0 {text}")}  # ⚠ without emoji presentation


def storage_notice(err: BaseException, *, saved: bool) -> str:
    """What to tell the user when the store failed during a send. ``saved``: the user's message
    was stored (then the reply could not be; it stays on screen and is stored before the next
    message); otherwise nothing of the send was, and the text goes back in the box. E.g. "The
    disk is full: your message was not sent and nothing was saved; it is back in the box." """
    if saved:
        return not_saved(err, i18n.t("storage_reply_unsaved"))
    return not_saved(err, i18n.t("storage_message_unsaved"))


def not_saved(err: BaseException, consequence: str) -> str:
    """``"<what failed>: <consequence>"`` for a store failure: "The disk is full: …", "The folder …
    is read-only: …", or the store's own sentence ("The session database is unreachable …")
    followed by the consequence as a sentence of its own."""
    if isinstance(err, StoreUnavailable):  # str(err) is a sentence: the database, and what to do
        return i18n.t("not_saved_store", what=str(err).rstrip('.'), consequence=consequence[:1].upper() + consequence[1:])
    if isinstance(err, OSError):
        return i18n.t("not_saved_os", what=os_text(err),
                 consequence=consequence)
    return i18n.t("saving_failed", error=type(err).__name__, consequence=consequence)


def settled(ctx: WebContext, state: dict[str, Any]) -> SessionView:
    """:func:`reload` that never raises: when the store cannot be read, an empty view of the same
    state (for the archived flag and the Retry bar, which then stay as they are)."""
    try:
        return reload(ctx, state)
    except (AnycodeError, OSError) as err:
        log.warning("cannot reload %s: %s", state.get("session"), err)
        return SessionView(state=state)


def relocated(ctx: WebContext, state: dict[str, Any]) -> Any:
    """The view of the tab's chat when it is gone from the tab's project because it was moved to
    another one (in another tab, or by ``anycode sessions move``), saying so; None when it is
    nowhere (deleted) or the store cannot tell."""
    sid = (state or {}).get("session")
    if not sid:
        return None
    try:
        # not from the mirror: a chat just deleted here may still be there until its delete is mirrored
        key = locate(ctx, sid, state.get("project"), mirror=False)
        if key.project_key == state.get("project"):
            return None
        return opened_elsewhere(ctx, key, ctx.manager.get(key).cwd or key.project_key)
    except (AnycodeError, OSError) as err:
        log.info("chat %s is not in another project either: %s", sid, err)
        return None


def opened_elsewhere(ctx: WebContext, key: SessionKey, target: str) -> Any:
    """The view of the chat at ``key`` (moved to folder ``target``), saying so."""
    view = open_session(ctx, key.project_key, key.session_id)
    view.notice, view.notice_level = t("moved_notice", label=project_label(target)), "info"
    return view
