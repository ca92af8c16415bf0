"""Edit, Regenerate and the ``‹ n / m ›`` version arrows of the chat pane (issue 15).

Plain functions (tested without a browser); :mod:`webui.gui.versions` adds the arrows' events and
the chat's edit / "Regenerate" / Retry events to the app's existing components. Arrows sit under
every message where versions diverge (:func:`arrows`), drawn by the page from a hidden carrier. A version is a
fork made with ``SessionManager.fork(..., version=True)`` (see :mod:`core.session.versions`):
the old version is never changed, and the family's root remembers the version in use.
"""
from __future__ import annotations

import html
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from core.errors import AnycodeError, SessionNotFound, StaleChange, StoreUnavailable
from core.session.export import message_text
from core.session.keys import SessionKey
from core.session.text import clean_text, is_blank
from core.session.versions import last_user_before
from webui import i18n
from webui.chat import views
from webui.render import rows as render

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

REGENERATE_OPTION = i18n.Msg("regenerate")  # compared in any language (i18n.variants)
REPEAT_SECONDS = 3.0  # Gradio can deliver one click on a feedback option twice: the same click
EMPTY_EDIT_NOTICE = i18n.Msg("empty_edit_notice")


def _key(state: dict[str, Any]) -> SessionKey:
    if not state.get("session"):
        raise SessionNotFound("(this chat has not been saved yet)")
    return SessionKey(state["project"], state["session"])


def _stored_index(ctx: WebContext, state: dict[str, Any], row_index: int) -> tuple[Any, int]:
    session = ctx.manager.get(_key(state))
    window = render.chat_window(session.messages, views.shown_from(session, state), session.compactions,
                                session.reply_ends, session.reply_agents)  # the rows exactly as shown
    if not 0 <= row_index < len(window.source):
        raise IndexError(i18n.t("no_such_message", n=row_index + 1))
    return session, window.source[row_index]


def edit(ctx: WebContext, state: dict[str, Any], row_index: int, text: str | None) -> tuple[views.SessionView, str | None]:
    """Edit of the user message on chat row ``row_index`` to ``text``: make a new version holding
    every message before it and open it; return ``(view, text to send)`` — the caller sends the
    text in the new version, so the model answers the edited message. An unchanged or blank text
    changes nothing (``(view of the tab's session, None)``, with a notice when blank).
    Raises ``SessionNotFound``, ``IndexError`` (no such row), ``ValueError`` (not a user message)."""
    text = clean_text((text or "").strip())
    session, index = _stored_index(ctx, state, row_index)
    message = session.messages[index]
    if message.get("role") != "user":
        raise ValueError(i18n.t("only_own_messages"))
    if is_blank(text):
        return views.reload(ctx, state, notice=EMPTY_EDIT_NOTICE), None
    if text == message_text(message.get("content")).strip():
        return views.reload(ctx, state), None  # like Cancel: nothing to do
    try:
        version = ctx.manager.fork(_key(state), index - 1, version=True)
    except (StoreUnavailable, OSError) as err:  # whole or absent: nothing was made
        log.warning("edit of %s failed: %s", state["session"], err)
        return views.reload(ctx, state, notice=views.not_saved(err, i18n.t("edit_not_saved"))), None
    log.info("edited message %d of %s into version %s", index, state["session"], version.id)
    made = ctx.manager.get(version.key)
    return views.view_of(made, start=views.version_from(made, state, index)), text


def regenerate(ctx: WebContext, state: dict[str, Any], row_index: int, now: float | None = None) -> views.SessionView | None:
    """Regenerate the reply on (or answering the message on) chat row ``row_index``: make a new
    version holding everything up to the user message the reply answers, and open it; the caller
    then asks the model again (a retry: no new user message). Returns None for a repeat of the
    same click (already done). Raises ``SessionNotFound``, ``IndexError``, ``ValueError`` (no user
    message before the row)."""
    now = time.time() if now is None else now
    if repeated(state, row_index, now, ctx):
        log.info("ignoring a repeated regenerate event for row %d", row_index)
        return None
    session, index = _stored_index(ctx, state, row_index)
    cut = last_user_before(session.messages, index)
    if cut < 0:
        raise ValueError(i18n.t("no_message_before"))
    try:
        version = ctx.manager.fork(_key(state), cut, version=True)
    except (StoreUnavailable, OSError) as err:
        log.warning("regenerate in %s failed: %s", state["session"], err)
        return views.reload(ctx, state, notice=views.not_saved(err, i18n.t("nothing_regenerated")))
    made = ctx.manager.get(version.key)
    view = views.view_of(made, start=views.version_from(made, state, cut + 1))
    view.state["regen_guard"] = [version.id, row_index, now]
    return view


def repeated(state: dict[str, Any] | None, row_index: int, now: float | None = None,
             ctx: WebContext = None) -> bool:
    """True when a Regenerate of ``row_index`` is the second delivery of the click that made the
    tab's version (within :data:`REPEAT_SECONDS`): it must neither fork again nor stop the reply
    the first delivery started. Gradio may deliver both with the page's old state (the first's
    new state not applied yet), so with ``ctx`` the store is asked too: a version of the tab's
    session cut where this one would be, made within that time, is that first delivery's."""
    guard = (state or {}).get("regen_guard")
    now = time.time() if now is None else now
    if guard and guard[0] == (state or {}).get("session") and guard[1] == row_index \
            and now - guard[2] < REPEAT_SECONDS:
        return True
    if ctx is None or not (state or {}).get("session"):
        return False
    try:
        session, index = _stored_index(ctx, state, row_index)
        cut = last_user_before(session.messages, index)
        members = ctx.manager.family(_key(state))
    except (AnycodeError, IndexError, OSError):
        return False
    return any(m.version_of and m.forked_from == {"session_id": state["session"], "message_index": cut}
               and 0 <= now - m.created_at < REPEAT_SECONDS for m in members)


def switcher(ctx: WebContext, state: dict[str, Any] | None) -> dict[str, Any] | None:
    """The latest point of :func:`points` (``{"index", "n", "m", "ids"}``), or None."""
    found = points(ctx, state)
    return found[-1] if found else None


def points(ctx: WebContext, state: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every point where the tab's session has other versions, in message order: ``{"index":
    first differing stored message, "n", "m", "ids"}`` (see :func:`core.session.versions.divergences`);
    ``[]`` for a new chat, a session without versions, or when the store cannot be read."""
    if not state or not state.get("session"):
        return []
    try:
        return ctx.manager.version_points(_key(state))
    except (AnycodeError, OSError) as err:
        log.info("no version arrows: %s", err)
        return []


def top_level_rows(rows: list[dict[str, Any]]) -> list[int]:
    """The chat rows Gradio draws as rows of their own (``.message-row``), in order: every row
    except those nested under an earlier step (``metadata.parent_id`` naming a titled row's id,
    which ``gr.Chatbot`` folds into that step)."""
    steps: set[str] = set()
    out = []
    for i, row in enumerate(rows):
        meta = row.get("metadata") or {}
        parent = meta.get("parent_id")
        if not (parent and str(parent) in steps):
            out.append(i)
        if meta.get("id") and meta.get("title"):
            steps.add(str(meta["id"]))
    return out


def arrows(ctx: WebContext, state: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The ``‹ n / m ›`` arrows of the tab's conversation as shown: ``[{"index": stored message
    index of the point, "n", "m", "row": position of the drawn message row (``.message-row``) they
    sit under, "after": True when that row is not stored (see below)}]``. A point's arrows sit
    under the first row showing its message (the edited message, the regenerated reply); when the
    shown version ends right before it (its reply is streaming, or failed), under the row after
    the last stored one (the streaming reply, the error row) or, with none drawn, the last row;
    nowhere while the point is above the shown window (earlier messages)."""
    found = points(ctx, state)
    if not found:
        return []
    try:
        session = ctx.manager.get(_key(state))
    except (AnycodeError, OSError) as err:
        log.info("no version arrows: %s", err)
        return []
    start = views.shown_from(session, state)
    window = render.chat_window(session.messages, start, session.compactions, session.reply_ends, session.reply_agents)
    drawn = top_level_rows(window.rows)
    out = []
    for point in found:
        if point["index"] < start or not drawn:
            continue
        row = next((r for r in drawn if window.source[r] >= point["index"]), None)
        arrow = {"index": point["index"], "n": point["n"], "m": point["m"]}
        if row is None:  # the version ends before its first own message: under the reply to
            arrow.update(row=len(drawn), after=True)  # come (streaming, an error row), else the last row
        else:
            arrow["row"] = drawn.index(row)
        out.append(arrow)
    return out


def switch(ctx: WebContext, state: dict[str, Any], step: int, index: int | None = None) -> views.SessionView:
    """Show the previous (``step`` -1) or next (+1) alternative at the point of stored message
    ``index`` (default: the latest point) — the version last used below that point in it — and
    make it the version in use. A switch made while another tab switched or made a version is
    refused (nothing written): the view then shows the version in use, with a notice."""
    key = _key(state)
    try:
        found = ctx.manager.version_points(key)
        point = next((p for p in found if p["index"] == index), None) if index is not None else None
        point = point or (found[-1] if found and index is None else None)
        if point is None or not 0 <= point["n"] - 1 + step < point["m"]:
            return _in_use(ctx, key, state)  # the arrows the tab showed are gone or at an end
        new_key = ctx.manager.switch_version(key, point["ids"][point["n"] - 1 + step], expected=key.session_id)
    except StaleChange:
        return _in_use(ctx, key, state, notice=i18n.t("stale_version"))
    except (StoreUnavailable, OSError) as err:
        return views.reload(ctx, state, notice=views.not_saved(err, i18n.t("version_not_switched")))
    log.info("switched %s to version %s at message %s", key.session_id, new_key.session_id, point["index"])
    shown = ctx.manager.get(new_key)
    return views.view_of(shown, start=views.version_from(shown, state, point["index"]))


def _in_use(ctx: WebContext, key: SessionKey, state: dict[str, Any], notice: str | None = None) -> views.SessionView:
    # The version the conversation is on now (maybe another tab's choice), read afresh.
    current = ctx.manager.current_version(key)
    if current == key:
        return views.reload(ctx, state, notice=notice)
    return views.view_of(ctx.manager.get(current), notice=notice)


# --- the arrows' carrier (drawn by the page: assets/js/version_arrows.js, webui.gui.versions) ---


PREV_LABEL = i18n.Msg("previous_version")
NEXT_LABEL = i18n.Msg("next_version")

ARROWS_CSS = """<style>
#ac-version-points { display: none; }
#ac-chat .ac-vswitch { display: inline-flex; align-items: center; gap: 2px; margin: 2px 4px;
  font-size: var(--text-sm); color: var(--body-text-color-subdued); user-select: none; }
#ac-chat .user-row .ac-vswitch { align-self: flex-end; }
#ac-chat .ac-vswitch button { border: none; background: none; cursor: pointer; padding: 0 6px;
  font-size: 1.1em; line-height: 1.4; color: inherit; border-radius: 6px; }
#ac-chat .ac-vswitch button:hover:not(:disabled) { background: var(--background-fill-secondary); }
#ac-chat .ac-vswitch button:disabled { opacity: .35; cursor: default; }
</style>"""


def arrows_html(found: list[dict[str, Any]]) -> str:
    """The carrier's HTML: its style and the arrows' data (:func:`arrows`), HTML-escaped."""
    data = html.escape(json.dumps(found, separators=(",", ":")), quote=True)
    return (f'{ARROWS_CSS}<div data-points="{data}" data-prev="{html.escape(i18n.t(PREV_LABEL))}" '
            f'data-next="{html.escape(i18n.t(NEXT_LABEL))}"></div>')
