"""Chats from another machine in the sidebar (issue 26, item 4): with a mirror configured, the
conversations of this project that only the mirror holds are listed, marked "from another
machine", and opening one pulls it first.

The listing is :class:`core.stores.remote_list.RemoteListing` (metadata only, refreshed in the
background, never on the page's path); this module binds it to the app: one listing per
:class:`~webui.chat.context.WebContext`, the project's keys (its own, its aliases, and its git
identity for mirror projects recorded at other paths), the pull on open, and the live check's
token (the list is drawn again when a refresh found something new, or the mirror went away).
Plain functions, no Gradio.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from core.errors import StoreUnavailable
from core.session.identity import project_identity
from core.session.keys import SessionKey, project_key
from core.storage import Storage
from core.stores.pull import pull_sessions
from core.stores.remote_list import RemoteListing, RemoteView

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)


def listing(ctx: WebContext) -> RemoteListing | None:
    """The app's listing of mirror-only chats; None without a mirror."""
    mirror = ctx.storage.mirror
    if mirror is None:
        return None
    found = ctx._model_cache.get("remote_listing")
    if found is None:
        found = ctx._model_cache["remote_listing"] = RemoteListing(mirror.mirror_store, mirror)
    return found


def _ask(ctx: WebContext, project: str) -> tuple[list[str], str | None]:
    if project != ctx.project_key:
        return [project], None
    return [project, *ctx.alias_keys(project)], ctx.identity()


def view(ctx: WebContext, project: str, *, archived: bool = False) -> RemoteView | None:
    """The mirror-only chats of ``project`` as last seen (never waits for the mirror); None
    without a mirror. ``archived=True``: those in the mirror's archive (the sidebar's archive
    view), so a chat archived by hand on another machine can be found here before any pull."""
    found = listing(ctx)
    if found is None:
        return None
    keys, identity = _ask(ctx, project)
    return found.view(keys, identity, archived=archived)


OPEN_MAX_AGE = 2.0  # seconds: a page opening on a listing older than this asks the mirror again


def page_opened(ctx: WebContext, project: str) -> None:
    """A page of ``project`` is being opened: when the mirror-only listing is older than
    :data:`OPEN_MAX_AGE`, start its refresh in the background (never waited for), so what
    another machine wrote since the last listing (up to :attr:`RemoteListing.ttl` ago) shows by
    the page's first live check or two instead of at the next scheduled refresh (the fresh-user
    trial's D4: ~46 s). Nothing without a mirror."""
    found = listing(ctx)
    if found is None:
        return
    keys, identity = _ask(ctx, project)
    found.view(keys, identity, max_age=OPEN_MAX_AGE)


def token(ctx: WebContext, project: str) -> str:
    """What the live check (once a second) adds to ``project``'s list token: the listing's
    generation, after starting a background refresh when the last one is stale ("" without a
    mirror). So the sidebar shows a chat another machine started within :attr:`RemoteListing.ttl`
    seconds, and says so when the mirror goes away."""
    found = listing(ctx)
    if found is None:
        return ""
    view(ctx, project)
    return f"r{found.generation}"


OPEN_WAIT = 10.0  # seconds opening an id the listing does not know waits for the mirror to say


def pull_if_remote(ctx: WebContext, session_id: str, project: str | None = None, *,
                   wait: float | None = None) -> SessionKey | None:
    """Bring the conversation ``session_id`` (an id only the mirror holds) here with all its
    versions (:func:`core.stores.pull.pull_sessions`) and return its key (a version the pull left
    out as a copy of a history it brought: its conversation's version in use); None when the mirror
    does not hold it either. An id the sidebar's listing has not seen (a bookmark or a link
    opened before the first listing came back, or a chat made elsewhere a moment ago) is looked
    up in ``project``'s mirror listing now, for up to ``wait`` seconds (default
    :data:`OPEN_WAIT`): the user asked for this chat. Raises :class:`StoreUnavailable` when the
    mirror cannot be reached or the pull failed (the sentence says which)."""
    found = listing(ctx)
    if found is None:
        return None
    meta = found.find(session_id)
    if meta is None and project is not None:
        meta = _look_up_now(ctx, found, project, session_id, OPEN_WAIT if wait is None else wait)
    if meta is None:
        return None
    report = _pull(ctx.storage, [meta.project_key], [session_id])
    store = ctx.storage.sessions
    key = SessionKey(meta.project_key, session_id)
    if not store.exists(key) and str(key) in report.already_here:
        # A version left out because a history of its conversation here holds its messages
        # (a copy of it): its conversation opens instead, on the version in use.
        root = SessionKey(meta.project_key, meta.family)
        key = ctx.manager.current_version(root) if store.exists(root) else key
    if not store.exists(key):
        why = "; ".join(w for _, w in report.errors) or "the mirror no longer has it"
        raise StoreUnavailable(f"The chat from another machine could not be brought here ({why}).")
    log.info("pulled %s from the mirror on open: %s", session_id, report.summary())
    found.pulled([meta.id, *meta.versions])
    return key


def _look_up_now(ctx: WebContext, found: RemoteListing, project: str, session_id: str,
                 wait: float) -> Any:
    keys, identity = _ask(ctx, project)
    seen = _refresh_within(found, keys, identity, wait)
    if seen is None:
        raise StoreUnavailable(f"The mirror did not answer within {wait:g} s, so this chat (not on this "
                               "machine) could not be looked up there.")
    if seen.state != "ok":
        raise StoreUnavailable(f"This chat is not on this machine and the mirror cannot be reached "
                               f"({seen.error}).")
    return found.find(session_id)


def _refresh_within(found: RemoteListing, keys: list[str], identity: str | None, wait: float) -> RemoteView | None:
    """``found.refresh(keys, identity)`` in a thread, waited for ``wait`` seconds; None when the
    mirror did not answer by then (the thread goes on and its answer is kept for the sidebar)."""
    import threading

    answer: list[RemoteView] = []
    worker = threading.Thread(target=lambda: answer.append(found.refresh(keys, identity)), daemon=True,
                              name="anycode-mirror-lookup")
    worker.start()
    worker.join(wait)
    return answer[0] if answer else None


def _pull(storage: Storage, project_keys: list[str], session_ids: list[str]) -> Any:
    """:func:`core.stores.pull.pull_sessions` of ``session_ids`` from ``storage``'s mirror into it.
    Raises :class:`StoreUnavailable` without a mirror or while it cannot be reached."""
    if storage.mirror is None:
        raise StoreUnavailable("No mirror is configured, so nothing can be brought from another machine.")
    return pull_sessions(storage.mirror.mirror_store(), storage.sessions, aliases=storage.aliases,
                         memory_log=storage.memory_log, blobs=storage.blobs, project_keys=project_keys,
                         session_ids=session_ids)


def alias_keys_of_folder(storage: Storage, project_path: str) -> list[str]:
    """The other keys ``storage`` recorded for the project at ``project_path`` (its git identity
    at other paths; :mod:`core.stores.aliases`), sorted; [] without an identity."""
    identity, own = project_identity(project_path), project_key(project_path)
    try:
        return sorted(k for k in storage.aliases.keys_for(identity) if k != own) if identity else []
    except OSError as err:
        log.warning("cannot read project aliases: %s", err)
        return []


CONTINUE_WAIT = 10.0  # seconds `anycode --continue` waits for the mirror before going on without it


def newest_for_continue(storage: Storage, project_path: str, local_latest: Any, *,
                        wait: float | None = None) -> tuple[SessionKey | None, str | None]:
    """``anycode --continue`` with a mirror: when the newest conversation of the project at
    ``project_path`` (its key, aliases and git identity) is one only the mirror has and it is
    newer than ``local_latest`` (a ``Session`` or None), pull it and return ``(its key, None)``.
    ``(None, None)`` without a mirror or when this machine's is the newest; ``(None, sentence)``
    when the mirror did not answer within ``wait`` seconds (default :data:`CONTINUE_WAIT`) or the pull failed (the local newest
    is opened then)."""
    mirror = storage.mirror
    if mirror is None:
        return None, None
    wait = CONTINUE_WAIT if wait is None else wait
    keys = [project_key(project_path), *alias_keys_of_folder(storage, project_path)]
    identity = project_identity(project_path)
    found = RemoteListing(mirror.mirror_store, mirror)
    seen = _refresh_within(found, keys, identity, wait)
    if seen is None:
        return None, f"the mirror did not answer within {wait:g} s; continuing this machine's newest chat"
    if seen.state != "ok":
        return None, f"the mirror cannot be reached ({seen.error}); continuing this machine's newest chat"
    newest = seen.rows[0] if seen.rows else None
    if newest is None or (local_latest is not None and local_latest.updated_at >= newest.updated_at):
        return None, None
    try:
        report = _pull(storage, [newest.project_key], [newest.id])
    except Exception as err:  # noqa: BLE001 -- the local chat still opens
        return None, f"the newest chat (from another machine) could not be pulled ({err})"
    key = SessionKey(newest.project_key, newest.id)
    if not storage.sessions.exists(key):
        return None, "the newest chat (from another machine) could not be pulled: " + (
            "; ".join(w for _, w in report.errors) or "the mirror no longer has it")
    return key, None
