"""Archived chats in the chat pane (issue 18, item 5), the way ChatGPT does it.

An open archived chat shows a bar "This chat is archived" with **Unarchive** above the message
box. Sending a message (or Retry) in it brings it back to the main list, saying so once. The
stale-tab rule of issue 15 holds: the tab's state records the archive state it showed
(``state["archived"]``); a send in a chat another tab archived since is refused (the text goes
back to the box, the chat reloads with the bar), never silently unarchived; the bar's Unarchive
goes through :func:`webui.chat.handlers.set_archived` with the same expected-state check as the top
bar's button.

Plain functions (tested without a browser); the bar is :mod:`webui.gui.archived`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from core.errors import AnycodeError, StaleChange
from webui.i18n import Msg

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

UNARCHIVED_BY_SEND = Msg("unarchived_by_send")  # "This chat was archived; your message brought it back …"
ARCHIVED_ELSEWHERE = Msg("archived_elsewhere")  # "This chat was archived in another tab or window …"


def refused_send(session: Any, state: dict[str, Any]) -> str | None:
    """The notice refusing a send in ``session`` (a loaded ``Session``) when it was archived after
    the tab showed it unarchived (another tab did it: issue 15's stale-tab rule); else None."""
    return ARCHIVED_ELSEWHERE if session.archived and state.get("archived") is False else None


def unarchive_for_send(ctx: WebContext, key: Any, session: Any) -> str | None:
    """Bring ``session`` back to the main list because the user sent in it (called once the
    message is stored, or when a Retry starts). Returns the one info notice saying so, or None
    when it was not archived (or another tab unarchived it meanwhile). A store failure is
    logged and leaves it archived (the send itself went through)."""
    if not session.archived:
        return None
    try:
        ctx.manager.unarchive(key, expected=True)
    except StaleChange:  # unarchived elsewhere meanwhile: the outcome the send wanted
        return None
    except (AnycodeError, OSError) as err:
        log.warning("could not unarchive %s after a send: %s", key.session_id, err)
        return None
    log.info("unarchived %s: the user sent a message in it", key.session_id)
    return UNARCHIVED_BY_SEND
