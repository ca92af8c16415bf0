"""The operations behind the page's actions, in one namespace the page calls (no Gradio here).

Each function takes the app's :class:`~webui.chat.context.WebContext` and the tab's state (see
:mod:`webui.chat.views`) and returns plain data (:class:`~webui.chat.views.SessionView`, HTML
strings, file paths) that :mod:`webui.gui` maps onto components. Errors the user can act on come
back as a ``notice`` sentence, never as a traceback.

Here: the sidebar's list, the session actions (rename, branch, archive, delete, exports), the
generated title's status, the model picker and the mirror line. The views themselves are
:mod:`webui.chat.views` and sending is :mod:`webui.chat.send`; their names are imported here too,
so the page and the tests reach every operation as ``handlers.<name>``.
"""
from __future__ import annotations

import html
import logging
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import AnycodeError, InvalidTitle, SessionNotFound, StaleChange, StoreUnavailable
from core.session.subagents import export_entries, subagent_records
from core.session.text import clean_text
from webui import i18n
from webui.chat.export import write_exports, write_html
from webui.chat.titles import title_status  # noqa: F401 (handlers.title_status)
from webui.chat.send import (  # noqa: F401 (the page's namespace: handlers.send, handlers.take …)
    BUSY_NOTICE,
    CONFLICT_NOTICE,
    NOTHING_TO_SEND_NOTICE,
    SendUpdate,
    _LiveRows,
    leave,
    restore_text,
    send,
    send_taken,
    stop,
    take,
    take_retry,
    too_long_notice,
)
from webui.chat.views import (  # noqa: F401 (the page's namespace: handlers.reload, handlers.SessionView …)
    CHAT_GONE_NOTICE,
    NO_REPLY_NOTICE,
    SessionView,
    _error_row,
    _key,
    first_list_target,
    initial_view,
    locate,
    new_chat,
    not_saved,
    open_session,
    project_cwd,
    project_label,
    reload,
    settled,
    shown_from,
    shown_title,
    storage_notice,
    tab_state,
    view_of,
)
from webui.i18n import Msg
from webui.render import rows as render
from webui.text.error_text import describe, os_text
from webui.text.timefmt import relative_time

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

MODEL_LIST_TTL = 60.0  # seconds a /v1/models answer is reused (every page load asks for it)
# Catalogue keys (webui/locales); as str they read English, i18n.t() gives the request's language.
EMPTY_TITLE_NOTICE = Msg("empty_title_notice")
INVISIBLE_TITLE_NOTICE = Msg("invisible_title_notice")  # only zero-width or other invisible characters
TITLE_SHORTENED_NOTICE = Msg("title_shortened_notice")
EXPORT_FAILED_NOTICE = Msg("export_failed")  # a click on Markdown or JSONL found nothing to write


# --- sidebar ---------------------------------------------------------------------------------


def session_list_html(ctx: WebContext, project: str, *, query: str = "", archived: bool = False,
                      active: str | None = None, now: float | None = None,
                      limit: int | None = render.SIDEBAR_PAGE) -> str:
    """The sidebar's session list for ``project`` as HTML (most recently active first, grouped by
    day, filtered by ``query`` on titles, the first ``limit`` of them); ``archived=True`` lists
    the archive instead."""
    try:
        metas = ctx.manager.conversations(project, archived=archived)  # one row per conversation
        for alias in ctx.alias_keys(project):  # the same project's sessions from another machine
            metas += ctx.manager.conversations(alias, archived=archived)
        if ctx.alias_keys(project):
            metas.sort(key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)
        remote_ids, note = _from_other_machines(ctx, project, metas, archived=archived)
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
    groups = render.group_sessions(page, query=query, active_id=active, now=now, remote_ids=remote_ids)
    if query.strip():
        empty = _no_match_text(query)
    elif archived:
        empty = i18n.t("no_archived")
    else:
        empty = i18n.t("no_conversations")
    return render.sidebar_html(groups, empty_text=empty, more=total - len(page), note=note)


def _no_match_text(query: str) -> str:
    """The empty list's sentence for a search: about tags when it asks for ``tag:NAME`` (trial 11:
    "No conversation title matches" for a tag nobody has), else about titles."""
    from core.session.lookup import split_tags

    wanted, rest = split_tags(query)
    if not wanted:
        return i18n.t("no_title_match")
    names = ", ".join(f"#{tag}" for tag in wanted if tag != "\x00") or query.strip()
    return i18n.t("no_tag_title_match" if rest else "no_tag_match", tags=names)


def _from_other_machines(ctx: WebContext, project: str, metas: list[Any], *,
                         archived: bool = False) -> tuple[set[str], str]:
    """Add to ``metas`` (in place, order kept by activity) the chats of ``project`` only the
    mirror has (:mod:`webui.chat.remote`: last seen, never waited for; ``archived``: those in
    its archive); ``(their ids, a sentence when the mirror cannot be reached, else "")``."""
    from webui.chat import remote

    seen = remote.view(ctx, project, archived=archived)
    if seen is None:
        return set(), ""
    have = {m.id for m in metas} | {v for m in metas for v in m.versions}
    extra = [m for m in seen.rows if m.id not in have]
    if extra:
        metas += extra
        metas.sort(key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)
    note = i18n.t("remote_unreachable", error=seen.error) if seen.state == "unreachable" else ""
    return {m.id for m in extra}, note


def earlier(ctx: WebContext, state: dict[str, Any]) -> SessionView:
    """Show the tab's conversation from :data:`render.CHAT_WINDOW` messages further back
    ("Show earlier messages", or the chat scrolled to its top)."""
    if not state.get("session"):
        return reload(ctx, state)
    try:
        session = ctx.manager.get(_key(state))
    except SessionNotFound:
        return reload(ctx, state)  # moved (opens there) or deleted elsewhere (a new chat, said)
    current = shown_from(session, state)
    start = render.window_start(session.messages, end=current) if current > 0 else 0
    return view_of(session, title_wait=state.get("title_wait", 0.0), start=start)


def project_choices(ctx: WebContext, current: str | None = None) -> list[tuple[str, str]]:
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


# --- session actions -------------------------------------------------------------------------


def rename(ctx: WebContext, state: dict[str, Any], title: str | None) -> SessionView:
    """Save ``title`` as the user's title (Enter or leaving the title field).

    Blank titles, and titles of only invisible characters (zero-width spaces …), are refused: the
    view keeps the stored title and carries a notice saying why. A title over 200 characters is
    shortened, and the notice says so. Renaming a
    new chat creates its session, so the name is not lost. An unchanged title writes nothing.
    """
    from core.session.manager import clean_user_title, title_shortened

    current = reload(ctx, state)
    text = clean_text((title or "").strip())  # a lone surrogate from the browser would kill the page
    if not (title or "") and not current.title:
        # leaving the empty title field of a new or untitled chat: nothing to refuse
        return current
    try:
        clean_user_title(text)  # refused before anything is written: the notice says why
    except InvalidTitle as err:
        return replace(current, notice=describe(err))
    if text == current.title:
        return current
    shown = state.get("title")
    if isinstance(shown, str) and text == clean_text(shown.strip()):
        # The field still holds what this tab showed (focused and left without typing): not a
        # change, so another tab's newer title stays (the field now shows it).
        return current
    shortened = title_shortened(text)
    try:
        if not state.get("session"):
            view = view_of(ctx.manager.create(project_cwd(ctx, state["project"]), title=text))
        else:
            ctx.manager.rename(_key(state), text, **({"expected_title": shown} if isinstance(shown, str) else {}))
            view = reload(ctx, state)
    except StaleChange as err:
        return replace(current, notice=describe(err))
    except SessionNotFound:  # deleted (or moved) in another tab or process since it was shown
        return reload(ctx, state)
    except InvalidTitle as err:
        return replace(current, notice=describe(err))
    except (StoreUnavailable, OSError) as err:  # disk full, database down: the field keeps the text
        log.warning("rename failed: %s", err)
        return replace(current, title=text, notice=not_saved(err, i18n.t("not_saved_title")))
    if shortened and view.notice is None:
        view = replace(view, notice=i18n.t(TITLE_SHORTENED_NOTICE), notice_level="info")
    return view


BRANCH_REPEAT_SECONDS = 3.0  # a second "Branch" event this soon after one is the same click


def branch(ctx: WebContext, state: dict[str, Any], row_index: int, now: float | None = None) -> SessionView:
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
    view = render.chat_window(session.messages, shown_from(session, state), session.compactions, session.reply_ends, session.reply_agents)
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


def set_archived(ctx: WebContext, state: dict[str, Any], archived: bool) -> SessionView:
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


def delete_prompt(ctx: WebContext, state: dict[str, Any] | None, tab: str) -> str:
    """The delete confirmation's text (Markdown) for the tab's chat: "Delete this conversation
    permanently?…", followed by a warning when another tab or process is writing a reply in it
    right now (:func:`webui.chat.live.other_writing_in_conversation`; issue 25, "two writers":
    that reply cannot be saved once the chat is gone, and that tab gets its message back)."""
    from webui.chat import live

    text = i18n.t("delete_confirm")
    st = state or {}
    if st.get("session") and st.get("project") and live.other_writing_in_conversation(ctx, _key(st), tab):
        text = i18n.t("sentence_join", first=text, second=i18n.t("delete_confirm_writing"))
    return text


def delete(ctx: WebContext, state: dict[str, Any]) -> SessionView:
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


def exports(ctx: WebContext, state: dict[str, Any]) -> tuple[Path | None, Path | None]:
    """Write the tab's session as Markdown and JSONL files; ``(None, None)`` for a new chat."""
    if not state.get("session"):
        return None, None
    key = _key(state)
    try:
        session = ctx.manager.get(key)
        # Both files carry the sub-agent records of the session (core.session.subagents); the
        # Markdown says which version of the conversation it is (issue 15).
        version = ctx.manager.version_number(key) if session.version_of or session.current_version else None
        store = ctx.storage.sessions
        return write_exports(ctx.export_dir, session, export_entries(store, key), subagent_records(store, key),
                             version, tags=ctx.manager.pin_and_tags(key)[1])
    except (AnycodeError, OSError) as err:  # gone, database down, disk full: no download now
        log.warning("cannot prepare the exports of %s: %s", key.session_id, err)
        return None, None


def export_notice(ctx: WebContext, state: dict[str, Any] | None) -> str:
    """Why an export gave no file: the chat was deleted in another tab or process (it is no
    longer in the store), else "could not be read" (:data:`EXPORT_FAILED_NOTICE`)."""
    st = state or {}
    if st.get("session") and st.get("project"):
        try:
            ctx.manager.get(_key(st))
        except SessionNotFound:
            return i18n.t("export_chat_deleted")
        except (AnycodeError, OSError):
            pass
    return i18n.t(EXPORT_FAILED_NOTICE)


def export_html(ctx: WebContext, state: dict[str, Any]) -> Path | None:
    """Write the tab's conversation (the version shown) as the page to share (issue 31); None for
    a new chat or when it cannot be written (gone, database down, disk full: logged)."""
    if not state.get("session"):
        return None
    key = _key(state)
    try:
        session = ctx.manager.get(key)
        version = ctx.manager.version_number(key) if session.version_of or session.current_version else None
        return write_html(ctx.export_dir, session, version, tags=ctx.manager.pin_and_tags(key)[1])
    except (AnycodeError, OSError) as err:
        log.warning("cannot prepare the HTML page of %s: %s", key.session_id, err)
        return None


# --- model -----------------------------------------------------------------------------------


def model_choices(ctx: WebContext) -> tuple[list[str], str]:
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


def banner_markdown(ctx: WebContext) -> str | None:
    """The no-model banner (how to set ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``), or None."""
    if ctx.client_error() is None:
        return None
    return i18n.t("no_model_banner")


# --- mirror status ---------------------------------------------------------------------------

MIRROR_POLL_SECONDS = 5.0  # how often the sidebar's mirror line is refreshed (only with a mirror)


def has_mirror(ctx: WebContext) -> bool:
    """True when the app's storage is mirrored (its mirror's health is shown)."""
    return ctx.storage.mirror is not None


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
    diverged = [d for d in status.get("diverged") or []
                if (getattr(d, "diverged_at", None) or 0) > (time.time() if now is None else now) - DIVERGED_SHOWN_SECONDS]
    if diverged:
        # Said plainly, not in a tooltip (issue 25): another writer changed the mirror's copy of a
        # conversation, and this machine's history was kept there as a version.
        line = html.escape(i18n.tn("mirror_diverged", len(diverged)))
        if kind == "ok":
            kind, text = "diverged", line
        else:
            text += f'<br><span class="ac-mirror-diverged-line">{line}</span>'
        tip += i18n.t("mirror_tip_diverged", ids=", ".join(d.key.session_id[:8] for d in diverged[:5]))
    return f'<div class="ac-mirror ac-mirror-{kind}" title="{html.escape(tip)}">{text}</div>'


DIVERGED_SHOWN_SECONDS = 7 * 86400.0  # the sidebar names a divergence for a week (sessions mirror: always)
_ERROR_PREFIX = re.compile(r"^[A-Z]\w*(Error|Exception|Unavailable|Timeout): ")


def _entries(count: Any) -> str:
    """``"1 entry"`` / ``"N entries"``; "" for zero or an unknown count."""
    if not isinstance(count, int) or count <= 0:
        return ""
    return i18n.tn("entries", count)


def mirror_status(ctx: WebContext, now: float | None = None) -> str:
    """The mirror line of the app's storage ("" without a mirror). Never raises: a status poll
    must not break the page."""
    mirror = ctx.storage.mirror
    if mirror is None:
        return ""
    try:
        status = mirror.status()
    except Exception as err:  # noqa: BLE001 -- status() reads a local file; report, don't fail
        log.warning("mirror status unavailable: %s", err)
        status = {"state": "failing", "last_error": f"status unavailable: {err}"}
    return mirror_status_html(status, now)


def _one_line(text: Any, limit: int = 160) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
