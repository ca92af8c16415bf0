"""The plain functions behind every UI action, over ``core`` only (no Gradio here).

Each function takes the app's :class:`~webui.context.WebContext` and the tab's state, a small
dict of ids ``{"project": project_key, "session": id or None, "count": loaded message count,
"title_wait": Unix seconds until which a generated title is awaited (0: not waiting)}``
(plus ``"branch_guard"`` right after a branch), and
returns plain data (:class:`SessionView`, HTML strings, file paths) that ``webui.app`` maps onto
components. Errors the user can act on come back as a ``notice`` sentence, never as a traceback.
"""
from __future__ import annotations

import html
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.errors import (
    AmbiguousSessionId,
    AnycodeError,
    InvalidSessionKey,
    InvalidTitle,
    ModelError,
    SessionConflict,
    SessionNotFound,
    StaleChange,
    StoreUnavailable,
)
from core.agent.repair import INTERRUPTED_RESULT
from core.session.keys import SessionKey
from core.session.subagents import export_entries, subagent_records
from webui.subagent_panel import LiveSubagents
from webui.error_text import describe, os_text
from core.session.text import clean_text, is_blank
from webui import archived_chat, chat_text, compaction_ui, i18n, project_move, render
from webui.i18n import Msg
from webui.export import write_exports
from webui.timefmt import relative_time

log = logging.getLogger(__name__)

TITLE_WAIT_SECONDS = 45.0  # how long the sidebar polls for a generated title after a reply
STREAM_MIN_INTERVAL = 0.04  # seconds between streamed UI updates (coalesces tiny text deltas)
MODEL_LIST_TTL = 60.0  # seconds a /v1/models answer is reused (every page load asks for it)
# Catalogue keys (webui/locales); as str they read English, i18n.t() gives the request's language.
EMPTY_TITLE_NOTICE = Msg("empty_title_notice")
TITLE_SHORTENED_NOTICE = Msg("title_shortened_notice")
BUSY_NOTICE = Msg("busy_notice")
NO_REPLY_NOTICE = Msg("no_reply_notice")
CONFLICT_NOTICE = Msg("conflict_notice")
CHAT_GONE_NOTICE = Msg("chat_gone")  # the open chat was deleted elsewhere (not "No session <uuid> was found")
SWITCH_WAIT_SECONDS = 10.0  # a switch waits this long for a stopped reply to be stored
DOUBLE_SUBMIT_SECONDS = 3.0  # the same text sent again this soon while it is pending: ignored
QUEUE_WAIT_SECONDS = 30.0  # a message sent right after Stop waits this long for the stopped run


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
    ``needs_reply``: the last stored message is the user's and has no answer (a run was killed).
    """

    state: dict[str, Any]
    title: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    archived: bool = False
    notice: str | None = None
    notice_level: str = "warning"
    label: str = render.UNTITLED
    needs_reply: bool = False

    @property
    def session_id(self) -> str | None:
        """The open session's id, None for a new chat."""
        return self.state.get("session")


def _key(state: dict[str, Any]) -> SessionKey:
    return SessionKey(state["project"], state["session"])


def shown_from(session: Any, state: dict[str, Any] | None = None, include: int | None = None) -> int:
    """The first stored message the tab shows: the default window of the conversation
    (:func:`render.window_start`), or earlier when the tab already shows earlier messages
    (``state["from"]``) or ``include`` (a search hit) needs it."""
    start = render.window_start(session.messages, include=include)
    earlier = (state or {}).get("from") if state and state.get("session") == session.id else None
    return min(start, earlier) if isinstance(earlier, int) and earlier >= 0 else start


def view_of(session: Any, *, title_wait: float = 0.0, notice: str | None = None,
            start: int | None = None) -> SessionView:
    """The view of a loaded ``core.session.models.Session``, showing its messages from stored
    message ``start`` on (default: its latest, :func:`render.window_start`; see
    :func:`shown_from`); ``state["earlier"]`` counts the messages not shown."""
    if start is None:
        start = render.window_start(session.messages)
    shown = [m for m in session.messages if m.get("role") != "system"]
    state = tab_state(session.project_key, session.id, len(session.messages), title_wait)
    state["from"] = start
    state["earlier"] = sum(1 for m in session.messages[:start] if m.get("role") != "system")
    # What the tab shows, so a change is written only when the user made one, and one made
    # against what another tab changed since is refused (issue 15; see rename, set_archived).
    state["title"], state["archived"] = session.title or "", bool(session.archived)
    state["compactions"] = len(session.compactions)  # a compaction changes the state: the meter refreshes
    return SessionView(
        state=state,
        title=shown_title(session),
        rows=render.chat_window(session.messages, start, session.compactions, session.reply_ends).rows,
        archived=bool(session.archived),
        notice=notice,
        label=render.session_label(session.title, session.created_at, session.title_source),
        needs_reply=_reply_lost(session, shown),
    )


def shown_title(session: Any) -> str:
    """The title field's text for a session: its title, or "" when it has none or only core's
    English fallback (``title_source == "fallback"``): the field's placeholder then shows the
    label in the tab's language (:func:`webui.timefmt.session_label`)."""
    return "" if getattr(session, "title_source", None) == "fallback" else (session.title or "")


def _reply_lost(session: Any, shown: list[dict[str, Any]]) -> bool:
    """The last stored message is the user's and has no answer, or a tool result the model never
    answered (it failed, or sent an empty reply, which is never stored). A branch made at a user
    message ends that way on purpose (nothing was lost), until something is added to it. Tool
    results of a stopped round ("interrupted") are not lost replies: the user stopped them."""
    if not shown:
        return False
    if shown[-1].get("role") == "tool":
        return render.message_text(shown[-1].get("content")) != INTERRUPTED_RESULT
    if shown[-1].get("role") != "user":
        return False
    fork = session.forked_from or {}
    return not (isinstance(fork.get("message_index"), int)
                and len(session.messages) == fork["message_index"] + 1)


def new_chat(ctx: Any, project: str | None = None, notice: str | None = None) -> SessionView:
    """An empty chat in ``project`` (default: the launcher's project). Nothing is written until the
    first message is sent, so opening the page never litters the list with empty sessions."""
    return SessionView(state=tab_state(project or ctx.project_key), notice=notice)


def open_session(ctx: Any, project: str, session_id: str, *, include: int | None = None) -> SessionView:
    """Load session ``session_id`` (a unique prefix is fine) of ``project``, showing its latest
    messages (and stored message ``include`` when given, e.g. a search hit).

    Raises ``SessionNotFound`` / ``AmbiguousSessionId`` / ``InvalidSessionKey``.
    """
    key = ctx.manager.find(project, session_id)
    if include is None:
        key = ctx.manager.current_version(key)  # a conversation opens on the version last used
    else:  # a search hit shows the version holding it, which becomes the one in use
        key = ctx.manager.switch_version(key, key.session_id) if ctx.manager.family(key)[1:] else key
    session = ctx.manager.get(key)
    return view_of(session, start=shown_from(session, include=include))


def locate(ctx: Any, session_id: str, preferred_project: str | None = None) -> SessionKey:
    """Find a session by id or unique prefix, in ``preferred_project`` first, then in every project
    that has sessions (a bookmark from another project still opens). Raises ``SessionNotFound``."""
    projects = [preferred_project or ctx.project_key]
    try:
        projects += [p.project_key for p in ctx.manager.list_projects()]
    except AnycodeError as err:  # listing projects is a convenience, the preferred one still works
        log.warning("could not list projects: %s", err)
    seen: set[str] = set()
    for project in projects:
        if project in seen:
            continue
        seen.add(project)
        try:
            return ctx.manager.find(project, session_id)
        except SessionNotFound:
            continue
    raise SessionNotFound(session_id)


def initial_view(ctx: Any, query_params: dict[str, str] | None) -> SessionView:
    """The view a freshly loaded tab shows: the session named by ``?session=`` in the URL, else
    the launcher's ``--continue``/``--resume`` session, else a new chat. A bad id gives a new chat
    with a notice instead of an error page."""
    params = dict(query_params or {})
    wanted = (params.get("session") or "").strip() or ctx.initial_session
    if not wanted:
        return new_chat(ctx)
    try:
        return view_of(ctx.manager.get(ctx.manager.current_version(locate(ctx, wanted))))
    except (SessionNotFound, AmbiguousSessionId, InvalidSessionKey, StoreUnavailable) as err:
        log.info("cannot open session %r from the URL: %s", wanted, err)
        return new_chat(ctx, notice=describe(err))


def reload(ctx: Any, state: dict[str, Any], notice: str | None = None) -> SessionView:
    """Re-read the tab's session from the store (a new chat stays a new chat); a session moved
    to another project elsewhere opens there (:func:`webui.project_move.relocated`), one deleted
    elsewhere turns into a new chat with a notice."""
    if not state.get("session"):
        return new_chat(ctx, state.get("project"), notice)
    try:
        session = ctx.manager.get(_key(state))
        return view_of(session, title_wait=state.get("title_wait", 0.0), notice=notice,
                       start=shown_from(session, state))
    except SessionNotFound:
        moved = project_move.relocated(ctx, state)
        return moved if moved is not None else new_chat(ctx, state.get("project"), notice=CHAT_GONE_NOTICE)


# --- sidebar ---------------------------------------------------------------------------------


def session_list_html(ctx: Any, project: str, *, query: str = "", archived: bool = False,
                      active: str | None = None, now: float | None = None,
                      limit: int | None = render.SIDEBAR_PAGE) -> str:
    """The sidebar's session list for ``project`` as HTML (most recently active first, grouped by
    day, filtered by ``query`` on titles, the first ``limit`` of them); ``archived=True`` lists
    the archive instead."""
    try:
        metas = ctx.manager.conversations(project, archived=archived)  # one row per conversation
        if active and not any(m.id == active for m in metas):
            active = next((m.id for m in metas if active in m.versions), active)  # a version's row
    except (AnycodeError, OSError) as err:
        log.warning("cannot list sessions: %s", err)
        text = describe(err) if isinstance(err, AnycodeError) else f"{os_text(err)}."
        return render.sidebar_html([], empty_text=text)
    query = clean_text(query or "")
    if limit is not None and active:
        # The open conversation stays in the list, however far down it is.
        at = next((i for i, m in enumerate(metas) if m.id == active), -1)
        if at >= limit and not query.strip():
            limit = at + 1
    page, total = render.page_sessions(metas, query=query, limit=limit)
    groups = render.group_sessions(page, query=query, active_id=active, now=now)
    if query.strip():
        empty = i18n.t("no_title_match")
    elif archived:
        empty = i18n.t("no_archived")
    else:
        empty = i18n.t("no_conversations")
    return render.sidebar_html(groups, empty_text=empty, more=total - len(page))


def earlier(ctx: Any, state: dict[str, Any]) -> SessionView:
    """Show the tab's conversation from :data:`render.CHAT_WINDOW` messages further back
    ("Show earlier messages", or the chat scrolled to its top)."""
    if not state.get("session"):
        return reload(ctx, state)
    try:
        session = ctx.manager.get(_key(state))
    except SessionNotFound as err:
        return new_chat(ctx, state.get("project"), notice=describe(err))
    current = shown_from(session, state)
    start = render.window_start(session.messages[:current]) if current > 0 else 0
    return view_of(session, title_wait=state.get("title_wait", 0.0), start=start)


def project_choices(ctx: Any, current: str | None = None) -> list[tuple[str, str]]:
    """``[(real path, project key)]`` for the project switcher: every project with sessions, plus
    the launcher's project and ``current`` even when they have none yet."""
    choices: list[tuple[str, str]] = []
    try:
        projects = ctx.manager.list_projects()
    except AnycodeError as err:
        log.warning("cannot list projects: %s", err)
        projects = []
    for info in projects:
        choices.append((project_label(info.cwd or info.project_key), info.project_key))
    keys = {k for _, k in choices}
    if ctx.project_key not in keys:
        choices.insert(0, (project_label(ctx.project_path), ctx.project_key))
        keys.add(ctx.project_key)
    if current and current not in keys:
        choices.append((current, current))
    return choices


def project_label(path: str) -> str:
    """``"name — /real/path"``: the folder name first (what a narrow sidebar shows), then the
    full real path, so two projects with one name stay apart."""
    name = os.path.basename(path.rstrip("/")) or path
    return f"{name} — {path}"


def project_cwd(ctx: Any, project: str) -> str:
    """The real path of ``project`` (new sessions record it; tools are confined to it)."""
    if project == ctx.project_key:
        return ctx.project_path
    for info in ctx.manager.list_projects():
        if info.project_key == project and info.cwd:
            return info.cwd
    raise SessionNotFound(f"project {project}")


# --- session actions -------------------------------------------------------------------------


def rename(ctx: Any, state: dict[str, Any], title: str | None) -> SessionView:
    """Save ``title`` as the user's title (Enter or leaving the title field).

    Blank titles are refused: the view keeps the stored title and carries a notice. Renaming a
    new chat creates its session, so the name is not lost. An unchanged title writes nothing.
    """
    current = reload(ctx, state)
    text = clean_text((title or "").strip())  # a lone surrogate from the browser would kill the page
    if is_blank(text):
        if not (title or "") and not current.title:
            # leaving the empty title field of a new or untitled chat: nothing to refuse
            return current
        return replace(current, notice=i18n.t(EMPTY_TITLE_NOTICE))
    if text == current.title:
        return current
    shown = state.get("title")
    if isinstance(shown, str) and text == clean_text(shown.strip()):
        # The field still holds what this tab showed (focused and left without typing): not a
        # change, so another tab's newer title stays (the field now shows it).
        return current
    shortened = _title_too_long(text)
    try:
        if not state.get("session"):
            view = view_of(ctx.manager.create(project_cwd(ctx, state["project"]), title=text))
        else:
            ctx.manager.rename(_key(state), text, **({"expected_title": shown} if isinstance(shown, str) else {}))
            view = reload(ctx, state)
    except StaleChange as err:
        return replace(current, notice=describe(err))
    except InvalidTitle as err:
        return replace(current, notice=describe(err))
    except (StoreUnavailable, OSError) as err:  # disk full, database down: the field keeps the text
        log.warning("rename failed: %s", err)
        return replace(current, title=text, notice=not_saved(err, i18n.t("not_saved_title")))
    if shortened and view.notice is None:
        view = replace(view, notice=i18n.t(TITLE_SHORTENED_NOTICE), notice_level="info")
    return view


def _title_too_long(text: str) -> bool:
    """True when core will cut ``text`` (cleaned the way it cleans titles) to its maximum."""
    from core.session.manager import MAX_TITLE_CHARS, TITLE_CONTROLS

    return len(" ".join(TITLE_CONTROLS.sub(" ", text).split())) > MAX_TITLE_CHARS


BRANCH_REPEAT_SECONDS = 3.0  # a second "Branch" event this soon after one is the same click


def branch(ctx: Any, state: dict[str, Any], row_index: int, now: float | None = None) -> SessionView:
    """"Branch from here" on chat row ``row_index``: fork the session so the new one holds every
    message up to and including that row's, and open the fork. The original is left unchanged.

    Gradio can deliver one click on a message's feedback option twice; a repeat of the same row
    within :data:`BRANCH_REPEAT_SECONDS` of a branch (the tab now showing the fork) is ignored.
    Raises ``SessionNotFound`` (the session is gone) and ``IndexError`` (no such row)."""
    now = time.time() if now is None else now
    if not state.get("session"):
        raise SessionNotFound("(this chat has not been saved yet)")
    guard = state.get("branch_guard")
    if guard and guard[0] == state["session"] and guard[1] == row_index \
            and now - guard[2] < BRANCH_REPEAT_SECONDS:
        log.info("ignoring a repeated branch event for row %d", row_index)
        view = reload(ctx, state)
        view.state["branch_guard"] = guard
        return view
    key = _key(state)
    session = ctx.manager.get(key)
    view = render.chat_window(session.messages, shown_from(session, state), session.compactions, session.reply_ends)
    if not 0 <= row_index < len(view.source):
        raise IndexError(i18n.t("no_such_message", n=row_index + 1))
    try:
        fork = ctx.manager.fork(key, view.source[row_index])
    except (StoreUnavailable, OSError) as err:  # whole or absent: nothing was made
        log.warning("branch of %s failed: %s", key.session_id, err)
        return reload(ctx, state, notice=not_saved(err, i18n.t("not_saved_branch")))
    log.info("branched %s at message %d into %s", key.session_id, view.source[row_index], fork.id)
    result = view_of(ctx.manager.get(fork.key))
    result.state["branch_guard"] = [fork.id, row_index, now]
    return result


def set_archived(ctx: Any, state: dict[str, Any], archived: bool) -> SessionView:
    """Archive (``True``) or unarchive the tab's session; it stays open."""
    if state.get("session"):
        shown = state.get("archived")
        try:
            (ctx.manager.archive if archived else ctx.manager.unarchive)(
                _key(state), expected=shown if isinstance(shown, bool) else None)
        except StaleChange as err:  # another tab (un)archived it meanwhile: keep that
            return reload(ctx, state, notice=describe(err))
        except (StoreUnavailable, OSError) as err:
            log.warning("archive failed: %s", err)
            what = i18n.t("not_saved_archived" if archived else "not_saved_unarchived")
            return reload(ctx, state, notice=not_saved(err, what))
    return reload(ctx, state)


def delete(ctx: Any, state: dict[str, Any]) -> SessionView:
    """Delete the tab's session for good (after the UI's confirmation) and show a new chat."""
    if state.get("session"):
        try:
            # Delete removes the conversation (every version), not only the version on screen.
            ctx.manager.delete(ctx.manager.root_of(_key(state)))
        except SessionNotFound:
            pass  # already gone (another tab deleted it): the outcome the user asked for
        except (StoreUnavailable, OSError) as err:
            log.warning("delete failed: %s", err)
            return reload(ctx, state, notice=not_saved(err, i18n.t("not_saved_deleted")))
    view = new_chat(ctx, state.get("project"), notice=i18n.t("deleted_notice"))
    view.notice_level = "info"
    return view


def exports(ctx: Any, state: dict[str, Any]) -> tuple[Path | None, Path | None]:
    """Write the tab's session as Markdown and JSONL files; ``(None, None)`` for a new chat."""
    if not state.get("session"):
        return None, None
    key = _key(state)
    try:
        session = ctx.manager.get(key)
        # Both files carry the sub-agent records of the session (core.session.subagents); the
        # Markdown says which version of the conversation it is (issue 15).
        version = ctx.manager.version_number(key) if session.version_of or session.current_version else None
        return write_exports(ctx.export_dir, session, export_entries(ctx.store, key),
                             subagent_records(ctx.store, key), version)
    except (AnycodeError, OSError) as err:  # gone, database down, disk full: no download now
        log.warning("cannot prepare the exports of %s: %s", key.session_id, err)
        return None, None


def title_status(ctx: Any, state: dict[str, Any], now: float | None = None) -> tuple[str | None, bool]:
    """While a generated title is awaited: ``(title or None, still waiting)``. Cheap: reads the
    list metadata, not the messages."""
    now = time.time() if now is None else now
    if not state.get("session") or not state.get("title_wait"):
        return None, False
    for meta in ctx.manager.list(state["project"], archived=False) + \
            ctx.manager.list(state["project"], archived=True):
        if meta.id == state["session"]:
            if meta.title and meta.title_source == "fallback":
                return None, False  # no title came: the field keeps showing the localised label
            if meta.title:
                return meta.title, False
            break
    return None, now < state["title_wait"]


# --- model -----------------------------------------------------------------------------------


def model_choices(ctx: Any) -> tuple[list[str], str]:
    """``(model names, default)`` for the model picker: the server's ``/v1/models`` when it
    answers, else just the configured model name."""
    config = ctx.model_config()
    fallback = config.model
    client = ctx.client()
    names: list[str] = []
    if client is not None:
        cached = ctx._model_cache.get("models")
        if cached and time.monotonic() - cached[0] < MODEL_LIST_TTL:
            names = list(cached[1])
        else:
            from core.agent.config import list_models

            try:
                names = list(list_models(client, fallback))
                ctx._model_cache["models"] = (time.monotonic(), list(names))
            except Exception as err:  # noqa: BLE001 -- a picker must never break the page
                log.warning("listing models failed: %s", err)
    if fallback and fallback not in names:
        names.insert(0, fallback)
    return names, fallback


def banner_markdown(ctx: Any) -> str | None:
    """The no-model banner (how to set ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``), or None."""
    if ctx.client_error() is None:
        return None
    return i18n.t("no_model_banner")


# --- mirror status ---------------------------------------------------------------------------

MIRROR_POLL_SECONDS = 5.0  # how often the sidebar's mirror line is refreshed (only with a mirror)


def has_mirror(ctx: Any) -> bool:
    """True when the store reports mirror health (a ``core.stores.mirror.MirroredSessionStore``)."""
    return callable(getattr(ctx.store, "status", None))


def mirror_status_html(status: dict[str, Any] | None, now: float | None = None) -> str:
    """The sidebar's mirror state for a ``MirroredSessionStore.status()`` dict, as HTML ("" when
    there is no mirror): ``ok`` -> "Mirror: up to date"; ``catching_up`` -> "Mirroring… N
    entries pending"; ``failing`` -> a warning saying when the last copy succeeded, with the
    last error (shortened) under it. The hover text names the mirror (password masked) and holds
    the full error. ``now``: Unix seconds for the relative time (default: now)."""
    if not status:
        return ""
    state = status.get("state")
    pending = status.get("pending_entries")
    name = status.get("mirror") or "mirror"
    tip = i18n.t("mirror_tip", name=name)
    if status.get("last_warning"):
        tip += i18n.t("mirror_tip_warning", warning=_one_line(status['last_warning'], 500))
    if state == "ok":
        kind, text = "ok", html.escape(i18n.t("mirror_ok"))
    elif state == "catching_up":
        kind = "busy"
        text = html.escape(i18n.t("mirror_busy_pending", entries=_entries(pending)) if _entries(pending)
                           else i18n.t("mirror_busy"))
    else:  # "failing", or a state this version does not know: say so rather than hide it
        kind = "failing"
        error = _one_line(_ERROR_PREFIX.sub("", str(status.get("last_error") or ""), count=1),
                          500) or i18n.t("mirror_unknown_error")
        copied = status.get("last_success_at")
        parts = [i18n.t("mirror_last_copied", when=relative_time(copied, now)) if copied else i18n.t("mirror_nothing_copied")]
        if _entries(pending):
            parts.append(i18n.t("mirror_waiting", entries=_entries(pending)))
        tip += i18n.t("mirror_tip_error", error=error)
        text = (f"<strong>⚠ {html.escape(i18n.t('mirror_failing'))}</strong> · {html.escape(' · '.join(parts))}"
                f'<br><span class="ac-mirror-error">{html.escape(_one_line(error, 110))}</span>')
    return f'<div class="ac-mirror ac-mirror-{kind}" title="{html.escape(tip)}">{text}</div>'


_ERROR_PREFIX = re.compile(r"^[A-Z]\w*(Error|Exception|Unavailable|Timeout): ")


def _entries(count: Any) -> str:
    """``"1 entry"`` / ``"N entries"``; "" for zero or an unknown count."""
    if not isinstance(count, int) or count <= 0:
        return ""
    return i18n.tn("entries", count)


def mirror_status(ctx: Any, now: float | None = None) -> str:
    """The mirror line for ``ctx.store`` ("" without a mirror). Never raises: a status poll
    must not break the page."""
    if not has_mirror(ctx):
        return ""
    try:
        status = ctx.store.status()
    except Exception as err:  # noqa: BLE001 -- status() reads a local file; report, don't fail
        log.warning("mirror status unavailable: %s", err)
        status = {"state": "failing", "last_error": f"status unavailable: {err}"}
    return mirror_status_html(status, now)


def _one_line(text: Any, limit: int = 160) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# --- sending ---------------------------------------------------------------------------------


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


class _LiveRows:
    """The rows of the reply being streamed, built from agent events."""

    def __init__(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._steps: dict[str, int] = {}
        self._args: dict[str, str] = {}
        self._subagents = LiveSubagents()
        self._text: dict[int, str] = {}  # row index -> the reply text as streamed
        self._shown: dict[int, chat_text.StreamedReply] = {}
        self._stale: set[int] = set()  # text rows whose content is behind their text

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The rows; a text row's content is rendered here, when read (about every
        STREAM_MIN_INTERVAL), not on every delta."""
        for i in self._stale:
            self._rows[i]["content"] = self._shown.setdefault(i, chat_text.StreamedReply()).render(self._text[i])
        self._stale.clear()
        return self._rows

    def apply(self, event: Any) -> bool:
        """Fold one agent event in; return True when it changed what is shown."""
        kind = type(event).__name__
        if kind.startswith("Compaction"):  # summarising before the request (issue 9)
            return compaction_ui.apply_event(self.rows, event)
        if kind.startswith("Subagent"):  # a task step's sub-agent at work (webui.subagent_panel)
            return self._subagents.apply(self.rows, self._steps, event)
        if kind == "TextDelta":
            if not event.text:
                return False
            last = self._rows[-1] if self._rows else None
            if last is None or last.get("metadata"):
                self._rows.append({"role": "assistant", "content": ""})
                self._text[len(self._rows) - 1] = ""
            self._text[len(self._rows) - 1] += event.text
            # shown as the stored reply will be: HTML as text, remote images as links
            self._stale.add(len(self._rows) - 1)
            return True
        if kind == "ToolCallStarted":
            self._args[event.call_id] = event.arguments
            row = render.tool_step(event.call_id, event.name, event.arguments)
            if event.call_id in self._steps:  # a task step its sub-agent's start already showed
                self.rows[self._steps[event.call_id]] = row
            else:
                self._steps[event.call_id] = len(self.rows)
                self.rows.append(row)
            return True
        if kind == "ToolCallFinished":
            row = render.tool_step(event.call_id, event.name, self._args.get(event.call_id, ""),
                                   event.result, event.is_error)
            if event.call_id in self._steps:
                self.rows[self._steps[event.call_id]] = row
            else:
                self.rows.append(row)
            return True
        return False


def take(ctx: Any, tab: str, text: str | None) -> tuple[Any, str | None]:
    """The input box hands over ``text`` (Enter or the send arrow): ``(run id, None)`` when it is
    accepted (the box is cleared; :func:`send_taken` sends it), ``(None, notice)`` when it is
    refused and must stay in the box (a reply is still being written and was not stopped), and
    ``(None, None)`` for a blank box. A message sent right after Stop is accepted: it goes out
    as soon as the stopped reply has been stored."""
    if is_blank(text):  # whitespace and zero-width characters only: nothing to send
        return None, None
    text = clean_text(text)  # a lone surrogate (a cut emoji) would kill the page's event stream
    if ctx.repeated_take(tab, text, DOUBLE_SUBMIT_SECONDS):
        log.info("ignoring a repeated send of the same message in tab %s", tab)
        return None, None  # a double click or double Enter: the first one is being sent
    if ctx.busy(tab):
        return None, BUSY_NOTICE
    return ctx.begin_run(tab, text).id, None


def take_retry(ctx: Any, tab: str) -> Any:
    """Retry (answer the last stored message again): a run id, None while a reply runs."""
    if ctx.busy(tab):
        return None
    return ctx.begin_run(tab, None).id


def send_taken(ctx: Any, state: dict[str, Any], tab: str, run_id: Any, model: str | None,
               now: float | None = None) -> Iterator[SendUpdate]:
    """Send the message of run ``run_id`` (from :func:`take`) in the tab's session and stream the
    reply, like :func:`send`. Waits first for an earlier run of the tab that is still ending
    (stopped), and then continues from the state that run ended with.

    Once the tab has opened another conversation (:meth:`WebContext.supersede`), nothing more
    is yielded: the run is stopped, its text stays stored in its own session, and it never
    repaints the pane that now shows another chat."""
    run = ctx.claim_run(tab, run_id)
    if run is None:
        log.info("run %s of tab %s not found or already started", run_id, tab)
        return
    try:
        ctx.wait_for_earlier(tab, run, QUEUE_WAIT_SECONDS)
        state = dict(state or tab_state(ctx.project_key))
        last = ctx.last_state(tab)
        if last and (not state.get("session") or state.get("session") == last.get("session")):
            # The tab's own last run is newer than what the page sent, except for the archive
            # state the page shows (a run never archives; the page's Archive click may be newer).
            page_archived = state.get("archived") if state.get("session") else None
            state = dict(last, **({"archived": page_archived} if isinstance(page_archived, bool) else {}))
        for upd in send(ctx, state, run.text, model, tab, now=now, run=run):
            if run.superseded:
                continue  # keep consuming: the run stops and stores its partial text
            yield upd
    finally:
        if not run.done.is_set():  # never leave the tab busy, whatever happened above
            ctx.end_run(tab, run, None)


def send(ctx: Any, state: dict[str, Any], text: str | None, model: str | None, tab: str,
         now: float | None = None, run: Any = None) -> Iterator[SendUpdate]:
    """Send ``text`` in the tab's session and stream the reply as :class:`SendUpdate`s.

    ``text`` None answers the last stored message again (Retry after a reply was lost) without
    adding one. A new chat is created on its first message. The loaded message count goes to
    the store as ``expected_count``: if another tab or process appended meanwhile, nothing is
    written, the session is reloaded and the notice says so (the text is given back for sending
    again). Model errors end the stream with a readable row in the chat; the user message stays
    saved. ``tab`` names the tab whose Stop button stops this run; ``run`` is the
    ``WebContext`` run it belongs to (default: a new one).
    """
    if run is None:
        run = ctx.begin_run(tab, text)
        run.started = True
    final: dict[str, Any] | None = None
    try:
        for upd in _send(ctx, state, text, model, run, now):
            if upd.done:
                final = upd.state
                run.restore_text = upd.restore_text
            yield upd
    finally:
        ctx.end_run(tab, run, final)


def _use_version(ctx: Any, key: SessionKey) -> None:
    try:
        ctx.manager.use_version(key)
    except (AnycodeError, OSError) as err:  # the reply is stored; only the pointer was not moved
        log.warning("could not mark %s as the version in use: %s", key.session_id, err)


def _send(ctx: Any, state: dict[str, Any], text: str | None, model: str | None, run: Any,
          now: float | None) -> Iterator[SendUpdate]:
    from core.agent.runner import run_session_stream

    retry = text is None
    if compaction_ui.is_compact_command(text):  # `/compact` typed, or the Compact button
        yield from compaction_ui.compact_updates(ctx, state, model, run)
        return
    text = clean_text((text or "").strip())
    if is_blank(text) and not (retry and state.get("session")):
        current = reload(ctx, state)
        yield SendUpdate(current.state, current.rows, current.title, done=True)
        return
    give_back = None if retry else text
    state = dict(state)
    created = False
    try:
        if not state.get("session"):
            session = ctx.manager.create(project_cwd(ctx, state["project"]))
            created = True
            state = tab_state(session.project_key, session.id, 0)
            log.info("created session %s in %s", session.id, session.cwd)
        key = _key(state)
        session = ctx.manager.get(key)
        pending = ctx.unsaved.pop(key, None)
        if pending is not None:
            session = _store_pending(ctx, key, pending, state)
    except SessionNotFound as err:
        view = new_chat(ctx, state["project"], notice=describe(err))
        yield SendUpdate(view.state, view.rows, notice=view.notice, restore_text=give_back, done=True)
        return
    except (StoreUnavailable, OSError) as err:
        # Nothing of this send was stored: say why, give the text back, leave the chat as it is.
        log.warning("send refused, the store failed: %s", err)
        yield SendUpdate(state, None, notice=storage_notice(err, saved=False), restore_text=give_back,
                         done=True)
        return
    refused = archived_chat.refused_send(session, state)  # archived in another tab since (issue 15 rule)
    if refused:
        view = reload(ctx, state, notice=refused)
        yield SendUpdate(view.state, view.rows, view.title, notice=refused, restore_text=give_back, done=True,
                         label=view.label)
        return
    title = shown_title(session)
    label = render.session_label(session.title, session.created_at, session.title_source)
    start = shown_from(session, state)
    state["from"] = start
    base = render.chat_window(session.messages, start, session.compactions, session.reply_ends).rows
    shown = base if retry else base + [{"role": "user", "content": chat_text.literal(text)}]
    yield SendUpdate(state, shown, title, label=label)

    config = ctx.model_config()
    client = ctx.client()
    live = _LiveRows()
    error_row: dict[str, Any] | None = None
    notice: str | None = None
    restore: str | None = None
    stream = None
    saved = retry  # the user's message is stored (a retry adds none)
    info = archived_chat.unarchive_for_send(ctx, key, session) if retry else None  # sending unarchives
    count = state.get("count", 0)  # what the store holds, as far as this send knows
    try:
        stream = run_session_stream(key, ctx.store, None if retry else text, **_runner_kwargs(
            ctx, state, client, model or config.model, config, run.cancel))
        last_yield = 0.0
        for event in stream:
            kind = type(event).__name__
            if kind == "UserMessageSaved":
                saved, count = True, event.message_count
                info = archived_chat.unarchive_for_send(ctx, key, session)
            elif kind == "RoundCompleted":
                count += len(event.messages)
            elif kind == "TitleStarted":  # pushed to the page once stored (webui.title_push)
                ctx.titles.started(key.session_id, event.thread)
            if live.apply(event):
                t = time.monotonic()
                if kind != "TextDelta" or t - last_yield >= STREAM_MIN_INTERVAL:
                    last_yield = t
                    yield SendUpdate(state, shown + [dict(r) for r in live.rows], title,
                                     label=label)
    except SessionConflict as err:
        log.info("send in %s refused: %s", key, err)
        notice, restore = CONFLICT_NOTICE, give_back  # str(err) has internal counts
    except (StoreUnavailable, OSError) as err:
        log.warning("the store failed while answering in %s: %s", key, err)
        if not saved:
            notice, restore = storage_notice(err, saved=False), give_back
            shown = base
        else:
            unsaved = getattr(err, "unsaved", None)
            if unsaved:  # kept on screen, and stored before this session's next message
                ctx.unsaved[key] = (getattr(err, "saved_count", count), unsaved)
            error_row = _error_row(storage_notice(err, saved=True))
    except ModelError as err:
        log.warning("model error in %s: %s", key, err)
        error_row = _error_row(describe(err))
    except AnycodeError as err:
        log.warning("error in %s: %s", key, err)
        error_row = _error_row(describe(err))
    except Exception as err:  # noqa: BLE001 -- never a traceback in the chat; logged
        log.exception("unexpected failure while answering in %s", key)
        error_row = _error_row(i18n.t("error_unexpected", error=type(err).__name__))
    finally:
        if stream is not None:
            stream.close()

    if saved and (session.version_of or session.current_version):
        _use_version(ctx, key)  # the version written in is the one a reload opens (issue 15)
    if created and not saved and _drop_if_empty(ctx, key):
        # Nothing was stored (the send failed before the message): no empty "ghost" session.
        view = new_chat(ctx, state["project"], notice=notice)
        yield SendUpdate(view.state, [error_row] if error_row else [], notice=notice,
                         restore_text=give_back, done=True, error=error_row is not None)
        return
    now = time.time() if now is None else now
    on_screen = shown + [dict(r) for r in live.rows] if saved else shown
    view = _settle(ctx, state, notice, count, on_screen, title)
    waiting = (client is not None and not view.title and error_row is None and notice is None
               and any(r["role"] == "assistant" for r in view.rows))
    view.state["title_wait"] = now + TITLE_WAIT_SECONDS if waiting else 0.0
    if error_row is not None and view.needs_reply:
        # One notice per event (issue 18): the error row says why and offers Retry itself, so the
        # page shows no second "No reply was saved… Retry" bar for the same failure.
        error_row["options"] = [render.option(render.RETRY)]
    rows = view.rows + ([error_row] if error_row else [])
    if info:
        view.state["unarchived"] = True  # webui.archived_chat: the list shows the chat where it now is
    yield SendUpdate(view.state, rows, view.title, notice=notice or info, restore_text=restore, done=True,
                     error=error_row is not None, label=view.label,
                     notice_level="info" if info and not notice else "warning")


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


def _store_pending(ctx: Any, key: SessionKey, pending: Any, state: dict[str, Any]) -> Any:
    """Store a reply an earlier send could not save (kept in ``ctx.unsaved``); return the session
    as it is now and update ``state["count"]``. Store failures propagate (still pending)."""
    from core.agent.persist import store_pending

    try:
        stored = store_pending(ctx.manager, key, pending)
    except BaseException:
        ctx.unsaved[key] = pending
        raise
    session = ctx.manager.get(key)
    if stored is not None and state.get("count") == pending[0]:
        state["count"] = len(session.messages)  # the tab showed that reply: it is its history now
    log.info("stored the reply of %s that an earlier send could not save", key.session_id)
    return session


def _settle(ctx: Any, state: dict[str, Any], notice: str | None, count: int,
            rows: list[dict[str, Any]], title: str) -> SessionView:
    """The view at the end of a send: the stored session, or — when the store cannot be read
    (database down) — what is on screen, with the message count this send knows is stored (so
    the next send is never refused by a false "changed elsewhere")."""
    try:
        return reload(ctx, state, notice)
    except (AnycodeError, OSError) as err:
        log.warning("cannot reload %s after the send: %s", state.get("session"), err)
        return SessionView(state=dict(state, count=count), title=title, rows=rows, notice=notice)


def settled(ctx: Any, state: dict[str, Any]) -> SessionView:
    """:func:`reload` that never raises: when the store cannot be read, an empty view of the same
    state (for the archived flag and the Retry bar, which then stay as they are)."""
    try:
        return reload(ctx, state)
    except (AnycodeError, OSError) as err:
        log.warning("cannot reload %s: %s", state.get("session"), err)
        return SessionView(state=state)


def _drop_if_empty(ctx: Any, key: SessionKey) -> bool:
    """Delete session ``key`` (just created by a send) if it holds no message; True if it did."""
    try:
        if ctx.manager.get(key).messages:
            return False
        ctx.manager.delete(key)
    except AnycodeError as err:
        log.warning("could not check the new session %s: %s", key.session_id, err)
        return False
    log.info("removed the new session %s: its first message was not stored", key.session_id)
    return True


def _runner_kwargs(ctx: Any, state: dict[str, Any], client: Any, model: str, config: Any,
                   cancel: Any) -> dict[str, Any]:
    # tools left to the runner: TOOL_SPECS, in the session's checked project folder.
    from webui import approvals

    return {
        "client": client, "model": model, "expected_count": state["count"], "cancel": cancel,
        "title_client": client, "title_model": getattr(config, "title_model", None) or model,
        **approvals.runner_kwargs(ctx, state),  # the user's approvals and chosen workspace
    }


def stop(ctx: Any, tab: str, withdrawn: list[str] | None = None) -> bool:
    """Stop the reply streaming in tab ``tab`` (the partial text is kept); False if none runs.
    A message handed over whose send has not started yet is withdrawn; its text is added to
    ``withdrawn`` (to put back in the input box)."""
    return ctx.request_stop(tab, withdrawn)


def restore_text(ctx: Any, tab: str, run_id: Any) -> str | None:
    """The text run ``run_id`` gave back for the input box (its send was refused), or None."""
    return ctx.pop_restore(tab, run_id) if run_id is not None else None


def leave(ctx: Any, tab: str, timeout: float = SWITCH_WAIT_SECONDS) -> None:
    """The tab is about to show another conversation: stop its reply (the partial text is
    stored in its own session) and wait until that is done, so the reply can never repaint the
    newly opened chat or receive the next message."""
    ctx.supersede(tab, timeout)
