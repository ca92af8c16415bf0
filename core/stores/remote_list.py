"""Chats that are only in the mirror (issue 26, item 4): what another machine wrote, listed here
before it was pulled.

The sidebar of a machine with a mirror lists, beside its own chats, the conversations of the same
project (its key, its aliases, or any mirror project of the same git identity) that the mirror
holds and this machine does not — marked "from another machine"; opening one pulls it first
(:func:`core.stores.pull.pull_sessions` with ``session_ids``). The rules:

- **Metadata only.** A refresh calls the mirror's ``project_keys()`` and ``list()`` (the S3
  ``meta.json`` objects, the Redis sorted set and metadata strings, the SQL session rows), and to
  tell which mirror projects are this project, each project's identity — from the metadata as
  well (:func:`mirror_identity`: the store's ``project_identity`` method), learnt once per key.
- **Never on the page's path.** :meth:`RemoteListing.view` answers from the last refresh at once
  and starts a refresh in a background thread when that one is older than ``ttl`` seconds (one
  at a time), so a slow or unreachable mirror never slows a page load or the live check; the
  page redraws the list when :attr:`RemoteListing.generation` moves.
- **Unreachable is said.** A failed refresh keeps the rows it had (marked stale) and its
  sentence (:attr:`RemoteView.error`), for the sidebar to show.

One family (a conversation and its versions) is one row: the root's metadata with the family's
latest activity, as :meth:`~core.session.manager.SessionManager.conversations` does locally. A
family any of whose records this machine has is not listed (it is this machine's own, or pulled).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from core.session.experts import is_expert_id
from core.session.keys import SessionKey
from core.session.models import SessionMeta
from core.session.store import SessionStore, indexes_projects, is_mirrored
from core.stores.aliases import header_identity

log = logging.getLogger(__name__)

DEFAULT_TTL = 30.0  # seconds a refresh is reused before the next one starts in the background


@dataclass
class RemoteView:
    """What :meth:`RemoteListing.view` answers. ``rows``: one :class:`SessionMeta` per
    conversation only in the mirror (most recent first); ``state``: ``"loading"`` (no refresh
    finished yet), ``"ok"``, ``"unreachable"`` (the last refresh failed: ``rows`` are the last
    known ones, ``error`` says why); ``checked_at``: when the last refresh finished (Unix s)."""

    rows: list[SessionMeta] = field(default_factory=list)
    state: str = "loading"
    error: str | None = None
    checked_at: float | None = None


def mirror_identity(remote: SessionStore, project_key: str) -> str | None:
    """The git identity recorded for ``project_key`` in the mirror: from the store's metadata
    (:class:`~core.session.store.IndexesProjects`: the S3, Redis and SQL stores), else from the
    header of the project's newest session (:func:`core.stores.aliases.header_identity`)."""
    if indexes_projects(remote):
        return remote.project_identity(project_key)
    return header_identity(remote, project_key)[0]


class RemoteListing:
    """The mirror-only conversations of one app (see the module docstring).

    ``remote``: a zero-argument callable returning the mirror store (it may raise: the mirror is
    unreachable); ``local``: this machine's store (``exists`` decides what is only there);
    ``ttl``: seconds between background refreshes."""

    def __init__(self, remote: Callable[[], SessionStore], local: SessionStore, *, ttl: float = DEFAULT_TTL):
        self._remote, self._local, self.ttl = remote, local, ttl
        self._lock = threading.Lock()
        self._views: dict[tuple[Any, ...], RemoteView] = {}
        self._running: set[tuple[Any, ...]] = set()
        self._identities: dict[str, str | None] = {}
        self._metas: dict[str, SessionMeta] = {}  # every listed row and version, by session id
        self._gone: set[str] = set()  # pulled since the last refresh
        self.generation = 0  # moves whenever a view's rows or state change

    @staticmethod
    def _ask(project_keys: Iterable[str], identity: str | None, archived: bool = False) -> tuple[Any, ...]:
        return (tuple(sorted(set(project_keys))), identity, archived)

    def view(self, project_keys: Iterable[str], identity: str | None = None, *,
             max_age: float | None = None, archived: bool = False) -> RemoteView:
        """The conversations of ``project_keys`` (and of any mirror project recorded with
        ``identity``) that only the mirror has, from the last refresh; never waits for the
        mirror. Starts a background refresh when none ran or the last is older than :attr:`ttl`
        (or than ``max_age`` seconds when that is shorter: a page just opened wants a fresh one).
        ``archived=True``: the mirror's archive instead (a chat archived on another machine is
        in no sidebar list otherwise); it is a listing of its own, refreshed as the other."""
        ask = self._ask(project_keys, identity, archived)
        limit = self.ttl if max_age is None else min(self.ttl, max_age)
        with self._lock:
            current = self._views.get(ask) or RemoteView()
            stale = current.checked_at is None or time.time() - current.checked_at >= limit
            start = stale and ask not in self._running
            if start:
                self._running.add(ask)
            gone = self._gone | self._removing()
            shown = replace(current, rows=[m for m in current.rows if m.id not in gone])
        if start:
            threading.Thread(target=self._refresh_quietly, args=(ask,), name="anycode-remote-list",
                             daemon=True).start()
        return shown

    def refresh(self, project_keys: Iterable[str], identity: str | None = None, *,
                archived: bool = False) -> RemoteView:
        """Ask the mirror now (blocking) and keep the answer for :meth:`view`; never raises: an
        unreachable mirror gives state ``"unreachable"`` with the last known rows."""
        ask = self._ask(project_keys, identity, archived)
        with self._lock:
            self._running.add(ask)
        self._refresh_quietly(ask)
        with self._lock:
            return self._views[ask]

    def find(self, session_id: str) -> SessionMeta | None:
        """The mirror's metadata of a listed conversation or version ``session_id`` (an exact id),
        or None when no refresh listed it."""
        if session_id in self._removing():
            return None  # deleted here a moment ago: opening it must not bring it back
        with self._lock:
            return self._metas.get(session_id)

    def _removing(self) -> set[str]:
        """Ids deleted on this machine whose delete the mirror has not had yet (a mirrored local
        store says; any other says none)."""
        return self._local.removing() if is_mirrored(self._local) else set()

    def pulled(self, session_ids: Iterable[str]) -> None:
        """``session_ids`` were brought here: drop them from the views at once."""
        with self._lock:
            self._gone.update(session_ids)
            self.generation += 1

    # --- the refresh ------------------------------------------------------------------------

    def _refresh_quietly(self, ask: tuple[Any, ...]) -> None:
        try:
            rows, metas = self._read(ask)
            view = RemoteView(rows=rows, state="ok", checked_at=time.time())
        except Exception as err:  # noqa: BLE001 -- any mirror failure is "unreachable", said
            log.warning("the mirror cannot be listed: %s", err)
            with self._lock:
                last = self._views.get(ask) or RemoteView()
            view, metas = RemoteView(rows=last.rows, state="unreachable", error=_sentence(err),
                                     checked_at=time.time()), {}
        with self._lock:
            old = self._views.get(ask)
            if old is None or (old.state, old.error, [_sig(m) for m in old.rows]) != (
                    view.state, view.error, [_sig(m) for m in view.rows]):
                self.generation += 1
            self._views[ask] = view
            self._metas.update(metas)
            if view.state == "ok":
                self._gone -= {m.id for m in view.rows}  # listed again: not pulled after all
            self._running.discard(ask)

    def _read(self, ask: tuple[Any, ...]) -> tuple[list[SessionMeta], dict[str, SessionMeta]]:
        keys, identity, archived = ask
        remote = self._remote()
        wanted = set(keys)
        if identity:
            listed = remote.project_keys() if indexes_projects(remote) else [p.project_key for p in remote.list_projects()]
            for pk in listed:
                if pk not in self._identities:
                    self._identities[pk] = mirror_identity(remote, pk)
                if self._identities[pk] == identity:
                    wanted.add(pk)
        families: dict[tuple[str, str], list[SessionMeta]] = {}
        for pk in sorted(wanted):
            for meta in remote.list(pk, archived=archived):
                if is_expert_id(meta.id):  # an expert agent's session (issue 30) is no chat: pulled, not listed
                    continue
                families.setdefault((pk, meta.family), []).append(meta)
        rows, metas = [], {}
        for (pk, root), members in families.items():
            if any(self._local.exists(m.key) for m in members) or self._local.exists(SessionKey(pk, root)):
                continue  # this machine has (part of) this conversation: it lists it itself
            head = next((m for m in members if m.id == root), members[0])
            latest = max(members, key=lambda m: (m.updated_at, m.created_at))
            row = replace(head, updated_at=latest.updated_at, versions=tuple(m.id for m in members if m.id != head.id),
                          title=latest.title if head.title is None else head.title)
            rows.append(row)
            metas.update({m.id: row for m in members})
        rows.sort(key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)
        return rows, metas


def _sig(meta: SessionMeta) -> tuple[Any, ...]:
    return (meta.id, meta.title, meta.updated_at)


def _sentence(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:299] + "…"
