"""Other writers, seen live (issue 25): a reply being written in another tab or process, and a
session list another tab or process changed.

- A send holds the session's reply lease (:mod:`core.stores.leases`) while its reply is written
  (:func:`hold`), named after the tab (``<tab>:<random>``), so every other tab — of this app or
  another process on the same store — can tell it is someone else's (:func:`check`). A send in a
  chat whose lease another holds waits for it (:func:`wait_for_other`; Stop ends the wait)
  instead of racing it, and then goes after that reply.
- The page asks :func:`check` at most once a second while it is visible (the page script
  ``assets/js/live_check.js`` clicks a hidden button; nothing while the tab is hidden): the store's
  ``list_token`` (the index's state, no chat read) says whether the list must be drawn again, and
  the open chat's lease whether "A reply is being written in another tab or window" shows.

Plain functions over :class:`~webui.chat.context.WebContext`; no Gradio.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.session.keys import SessionKey
from core.session.store import has_list_token
from core.stores.leases import HeldLease
from webui.i18n import Msg

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # the page's change check, at most this often while visible
WAIT_POLL_SECONDS = 0.2  # how often a waiting send looks at the lease again
OTHER_WRITING = Msg("other_writing")  # "A reply is being written in another tab or window"
WAITING_NOTICE = Msg("waiting_for_other")
WAIT_STOPPED = Msg("wait_stopped")


@dataclass
class LiveCheck:
    """What changed since the page last asked: ``token`` (the list's token now; "" when the store
    cannot tell), ``list_changed`` (draw the list again), ``other_writing`` (another tab or process
    is writing a reply in the open chat)."""

    token: str
    list_changed: bool
    other_writing: bool


def holder(tab: str) -> str:
    """A lease holder token for a reply sent from ``tab``."""
    return f"{tab}:{uuid.uuid4().hex}"


def _mine(lease: Any, tab: str) -> bool:
    return lease is not None and str(lease.holder).startswith(f"{tab}:")


def list_token(ctx: WebContext, project: str) -> str:
    """The store's change token for ``project``'s list ("" when the store has none or fails)."""
    store = ctx.storage.sessions
    if not has_list_token(store):
        return ""
    try:
        from webui.chat import remote

        return str(store.list_token(project)) + remote.token(ctx, project)  # chats from another machine found since
    except Exception as err:  # noqa: BLE001 -- a check must never break the page
        log.warning("list check of %s failed: %s", project, err)
        return ""


def start_token(ctx: WebContext, project: str) -> str:
    """The list token a page load starts its live check from, taken before the list is drawn
    (a change in between is then seen by the first check, never missed). With a mirror, a
    listing of the chats only it has that is more than a moment old is refreshed in the background
    first (:func:`webui.chat.remote.page_opened`): its answer moves the token, and the first check
    or two draws it."""
    from webui.chat import remote

    try:
        remote.page_opened(ctx, project)
    except Exception as err:  # noqa: BLE001 -- the mirror never breaks a page load
        log.warning("cannot start the mirror listing of %s: %s", project, err)
    return list_token(ctx, project)


def other_writing(ctx: WebContext, key: SessionKey | None, tab: str) -> bool:
    """True when a reply is being written in session ``key`` by another tab or process."""
    if key is None:
        return False
    try:
        lease = ctx.storage.leases.current(key)
    except Exception as err:  # noqa: BLE001 -- unknown: say nothing rather than block
        log.warning("lease check of %s failed: %s", key.session_id, err)
        return False
    return lease is not None and not _mine(lease, tab)


def other_writing_in_conversation(ctx: WebContext, key: SessionKey | None, tab: str) -> bool:
    """True when another tab or process is writing a reply in any version of ``key``'s
    conversation (what Delete removes: the root and every version). A store that cannot list the
    family is asked about ``key`` alone."""
    if key is None:
        return False
    try:
        keys = [m.key for m in ctx.manager.family(key)] or [key]
    except Exception as err:  # noqa: BLE001 -- gone or unreadable: the one key still tells
        log.info("cannot list the versions of %s: %s", key.session_id, err)
        keys = [key]
    return any(other_writing(ctx, k, tab) for k in keys)


def check(ctx: WebContext, state: dict[str, Any] | None, tab: str, known: str | None) -> LiveCheck:
    """The page's once-a-second question (see the module docstring). ``known``: the token the page
    last drew the list with (None or "": the first check, never a change)."""
    state = state or {}
    token = list_token(ctx, state.get("project") or ctx.project_key)
    changed = bool(known) and bool(token) and token != known
    key = SessionKey(state["project"], state["session"]) if state.get("session") and state.get("project") else None
    return LiveCheck(token, changed, other_writing(ctx, key, tab))


@dataclass
class TitleNow:
    """The open chat's title as stored now, when it is not the one the tab showed: ``title`` the
    stored title (the tab state's ``"title"``), ``text`` what the title field shows for it (""
    for an untitled chat or core's English fallback; the placeholder names it then)."""

    title: str
    text: str


def open_meta(ctx: WebContext, state: dict[str, Any]) -> Any:
    """The stored metadata (``SessionMeta``) of the tab's open chat, ``state["session"]`` in
    ``state["project"]``, found among its versions; None when it is not among them. Metadata only
    (:meth:`SessionManager.family`). Raises what the store raises (deleted, moved, unreadable):
    each caller says what that means for it."""
    members = ctx.manager.family(SessionKey(state["project"], state["session"]))
    return next((m for m in members if m.id == state["session"]), None)


def title_now(ctx: WebContext, state: dict[str, Any] | None, tab: str) -> TitleNow | None:
    """The open chat's stored title when another tab or process renamed it (or a title was
    generated there) since this tab showed it; None when it is unchanged, without an open chat,
    while this tab runs a reply of its own (its send owns the state then) or when the store
    cannot tell. Metadata only (:meth:`SessionManager.family`, the conversation's one title);
    the page asks it only after the list token changed (:func:`check`)."""
    st = state or {}
    if not st.get("session") or not st.get("project") or ctx.running(tab):
        return None
    try:
        me = open_meta(ctx, st)
    except Exception as err:  # noqa: BLE001 -- deleted, moved or unreadable: the page keeps its title
        log.info("no title check for %s: %s", st.get("session"), err)
        return None
    if me is None or (me.title or "") == (st.get("title") or ""):
        return None
    return TitleNow(me.title or "", "" if me.title_source == "fallback" else (me.title or ""))


def behind(ctx: WebContext, state: dict[str, Any] | None, tab: str) -> bool:
    """True when the open chat holds more messages in the store than the tab shows (another tab or
    process wrote in it since): the page then re-reads it (:func:`refreshed`). The page asks it
    when the list token changed, so a reply written elsewhere is shown even when no check fell
    while it was being written (a fast reply holds its lease for less than the check's second:
    the fresh-user trial's tab never showed the other tab's message). False without an open chat,
    while this tab runs a reply of its own, for a state sent before a switch's answer
    (:meth:`WebContext.stale_view`), or when the store cannot tell. Metadata only."""
    st = state or {}
    if not st.get("session") or not st.get("project") or ctx.running(tab) or ctx.stale_view(tab, st):
        return False
    try:
        me = open_meta(ctx, st)
    except Exception as err:  # noqa: BLE001 -- deleted or unreadable: deleted_elsewhere says it
        log.info("no change check for %s: %s", st.get("session"), err)
        return False
    return me is not None and int(me.message_count or 0) > int(st.get("count") or 0)


def deleted_elsewhere(ctx: WebContext, state: dict[str, Any] | None, tab: str) -> bool:
    """True when the open chat no longer exists: deleted in another tab or process since this tab
    showed it (no version of it left). False without an open chat, while this tab runs a reply
    of its own (its send says so itself: :func:`webui.chat.send._gone_update`) or when the store
    cannot tell. Metadata only; the page asks it only after the list token changed."""
    from core.errors import SessionNotFound

    st = state or {}
    if not st.get("session") or not st.get("project") or ctx.running(tab):
        return False
    try:
        ctx.manager.family(SessionKey(st["project"], st["session"]))
    except SessionNotFound:
        return True
    except Exception as err:  # noqa: BLE001 -- unreadable is not gone: the page keeps what it shows
        log.info("no delete check for %s: %s", st.get("session"), err)
    return False


def refreshed(ctx: WebContext, state: dict[str, Any] | None, tab: str) -> Any:
    """The open chat re-read once another tab's or process's reply is done, so this tab shows it
    and its next send continues from it (a :class:`~webui.chat.views.SessionView`); None while
    this tab runs a reply of its own, without an open chat, when the page sent ``state`` before
    a switch's answer reached it (:meth:`WebContext.stale_view`: the left chat would be drawn over
    the one opened) or when the store cannot be read."""
    from webui.chat.views import reload

    if not state or not state.get("session") or ctx.running(tab) or ctx.stale_view(tab, state):
        return None
    try:
        view = reload(ctx, state)
    except Exception as err:  # noqa: BLE001 -- the page keeps what it shows
        log.warning("cannot re-read %s: %s", state.get("session"), err)
        return None
    ctx.note_state(tab, view.state)
    return view


def hold(ctx: WebContext, key: SessionKey, tab: str) -> HeldLease | None:
    """Take ``key``'s reply lease for a send from ``tab`` (renewed until released); None when
    another tab or process is writing a reply there. A store that cannot keep leases (an error)
    gives a free pass: the send goes on, and a racing reply is still kept as a version."""
    try:
        return HeldLease.take(ctx.storage.leases, key, holder(tab))
    except Exception as err:  # noqa: BLE001 -- see the docstring
        log.warning("could not take the reply lease of %s: %s", key.session_id, err)
        return _NoLease()


def wait_for_other(ctx: WebContext, key: SessionKey, tab: str, cancel: Any, timeout: float | None = None) -> bool:
    """Wait while another tab or process writes a reply in ``key``; True once it is done (or its
    writer died: the lease lapses within 10 s), False when ``cancel`` (the tab's Stop) was set
    or ``timeout`` seconds passed."""
    started = time.monotonic()
    while other_writing(ctx, key, tab):
        if cancel is not None and cancel.is_set():
            return False
        if timeout is not None and time.monotonic() - started > timeout:
            return False
        time.sleep(WAIT_POLL_SECONDS)
    return not (cancel is not None and cancel.is_set())


class _NoLease:
    """Stands for a lease the store could not take (see :func:`hold`)."""

    def release(self) -> None:
        """Nothing to give up."""
