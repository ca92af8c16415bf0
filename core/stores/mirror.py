"""Dual write: a primary store that answers everything, mirrored in the background to another.

Design article: "local write first, then asynchronously mirror to an external backend; the local
copy is the source of truth and a failing mirror loses nothing". Claude Agent SDK's rule too:
mirrors never block the local write.

How (and why):

- A write goes to the primary; its *intent* is recorded in the durable :class:`core.stores.outbox.Outbox`
  just before and marked ready just after, so a crash at any point leaves a trace to redo.
- A background thread delivers ready items in order. An append item is delivered by
  *reconciling* the record: the mirror's entry count ``n`` is its high-water mark, and the
  primary's entries from ``n`` on are copied (with :meth:`SqlSessionStore.append_at` when the mirror
  has it, which skips what it already holds). Re-delivering after a crash therefore duplicates
  nothing, and one delivery catches up every earlier append of that record.
- ``remove``/``archive``/``unarchive`` are replayed as such (a record already gone counts as done).
- A mirror that raises or hangs only stalls the thread: the user's writes touch the primary and
  the local outbox only. Failures back off exponentially (0.5 s doubling to 30 s).
- Several processes may share a data dir: a file lock lets one of them deliver at a time.
- The mirror copies only what follows the entries it already holds, and only when they are the
  local record's own (issue 25): the outbox remembers how many entries of each copy it verified
  (``copies``), and a copy holding anything else (a second writer using the mirror as its
  primary) is read and compared entry by entry. A copy that is not a prefix of the local record
  never gets entries out of order: the local history goes to the mirror as a *version* of that
  conversation (``version_of``), later writes follow it there, and ``status()["diverged"]``, the
  mirror log (``Outbox.events``) and the app's log say so. ``append_at`` refuses to skip an entry
  that is not the one given, so a writer racing the copy is caught too.
- A conversation's title, pin, tags and archive choices are not part of that order and are merged
  both ways by :mod:`core.session.metadata` (the latest change of each field wins, by timestamp;
  a newer archive or unarchive taken moves the conversation): a copy
  differing from the local record only in them (another machine renamed while this one wrote
  messages) gets this machine's messages after its own entries and its newer metadata is taken
  here; a diverged conversation merges its metadata with the mirror's copy of its root. Messages
  are never rewritten on either side, and a repeated delivery adds nothing.
- Reconciling relies on records being append-only (the protocol's promise); a record removed and
  re-created is handled by its queued ``remove``. A record that existed before the mirror was
  configured is copied whole on its next append; ``anycode sessions migrate --to URL`` copies
  everything (archived flags included) once.
"""
from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

import filelock

from core import settings
from core.errors import SessionConflict, SessionExists, SessionNotFound
from core.session.keys import SessionKey
from core.session.metadata import archive_choice, history_of, is_root, metadata_to_apply
from core.session.models import ProjectInfo, SessionMeta
from core.session.keys import new_session_id
from core.session.store import SessionStore, appends_at
from core.stores.backend import Backend, own_folder
from core.stores.blobs import BlobCarrier, BlobStore, carry_blobs, referenced_in
from core.stores.outbox import MirrorCopy, Outbox, OutboxItem

log = logging.getLogger(__name__)

DEFER_MAX = 1.0  # seconds a record's copy may wait for an append in flight to finish


class MirroredSessionStore:
    """A :class:`~core.session.store.SessionStore` writing to ``primary`` and copying to ``mirror``.

    ``primary``: the source of truth (normally the JSONL store); every read is answered by it.
    ``mirror``: a store, or a zero-argument callable opening one (retried until it succeeds, so
    an unreachable database does not stop the app from starting). ``outbox_path``: the outbox
    file (default ``<data dir>/mirror/outbox.sqlite3``). ``blobs``: this machine's checkpoint
    blobs, which the mirror receives the ones its records name from (default: beside the
    primary, :func:`~core.stores.backend.own_folder`). ``retry_initial``/``retry_max``: backoff
    after a failed delivery, seconds; ``poll_interval``: how often (seconds) to look for items
    queued by other processes. Errors of the primary propagate unchanged; the mirror's never do.

    It is a :class:`~core.session.store.MirroredStore`, not a backend: the services beside the
    sessions (leases, search, memories, blobs) are the primary's, which
    :class:`core.storage.Storage` holds it with.
    """

    def __init__(
        self,
        primary: Backend,
        mirror: Backend | Callable[[], Backend],
        *,
        outbox_path: str | os.PathLike[str] | None = None,
        blobs: BlobStore | None = None,
        mirror_name: str | None = None,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
        poll_interval: float = 2.0,
        start: bool = True,
    ):
        self.primary = primary
        if isinstance(mirror, SessionStore):
            self._mirror, self._open_mirror = mirror, None
        else:
            self._mirror, self._open_mirror = None, mirror
        self.mirror_name = mirror_name or (repr(mirror) if self._mirror is not None else "mirror")
        path = Path(outbox_path) if outbox_path is not None else settings.data_dir() / "mirror" / "outbox.sqlite3"
        self.blobs = blobs if blobs is not None else BlobStore(own_folder(primary, settings.data_dir()) / "blobs")
        self.outbox = Outbox(path)
        self._deliver_lock = filelock.FileLock(str(path) + ".deliver.lock", timeout=0)
        self.retry_initial, self.retry_max, self.poll_interval = retry_initial, retry_max, poll_interval
        self._wake = threading.Event()
        self._open_lock = threading.Lock()  # the mirror is opened once, whichever thread asks first
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._deferred: dict[SessionKey, float] = {}  # record -> when its copy was first deferred
        if start:
            self.start()

    def __repr__(self) -> str:
        return f"MirroredSessionStore({self.primary!r} -> {self.mirror_name})"

    # --- the SessionStore protocol: writes ------------------------------------------------------

    def append(self, key: SessionKey, entries: list[dict[str, Any]], *, expected_count: int | None = None,
               expected_version: str | None = None) -> int:
        """Append to the primary (its errors propagate, its checks of ``expected_count`` and
        ``expected_version`` decide), then queue the copy; never waits for the mirror."""
        checks = {"expected_count": expected_count}
        if expected_version is not None:
            checks["expected_version"] = expected_version
        if not entries:
            return self.primary.append(key, entries, **checks)
        return self._write("append", key, len(entries), lambda: self.primary.append(key, entries, **checks))

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        """Create the record whole in the primary (its errors propagate), then queue the copy,
        which the mirror receives in one write too (see :meth:`_reconcile`)."""
        return self._write("append", key, len(entries), lambda: self.primary.create_whole(key, entries))

    def remove(self, key: SessionKey) -> None:
        """Remove from the primary, then from the mirror in the background."""
        self._write("remove", key, 0, lambda: self.primary.remove(key))

    def archive(self, key: SessionKey) -> None:
        """Archive in the primary, then in the mirror in the background."""
        self._write("archive", key.parent, 0, lambda: self.primary.archive(key))

    def unarchive(self, key: SessionKey) -> None:
        """Unarchive in the primary, then in the mirror in the background."""
        self._write("unarchive", key.parent, 0, lambda: self.primary.unarchive(key))

    def _write(self, op: str, key: SessionKey, count: int, do: Callable[[], Any]) -> Any:
        item = self._outbox_call(self.outbox.add, op, key, count)
        try:
            result = do()
        except (SessionConflict, SessionExists, SessionNotFound, ValueError):
            # Refused before writing anything: nothing to mirror, unless an earlier write of
            # this record handed its copy over to this item while it was in flight.
            if item is not None:
                self._outbox_call(self.outbox.refused, item, count)
                self._wake.set()
            raise
        except BaseException:
            # Maybe partly written (disk full mid-way): delivery copies whatever the primary has.
            if item is not None:
                self._outbox_call(self.outbox.mark_ready, item)
            raise
        if item is not None:
            self._outbox_call(self.outbox.mark_ready, item)
        self._wake.set()
        return result

    def _outbox_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        # The outbox failing (disk full, locked) must not fail the user's write either; the
        # record catches up on its next append, as delivery copies the whole missing tail.
        try:
            return fn(*args)
        except Exception as e:  # sqlite3.Error, OSError
            log.warning("mirror outbox %s unusable (%s); this write is not queued for %s",
                        self.outbox.path, e, self.mirror_name)
            try:
                self.outbox.set_state(last_error=f"outbox: {e}", last_error_at=time.time())
            except Exception:
                pass
            return None

    # --- retention: each copy has its own (issue 25) ------------------------------------------

    def remove_local(self, key: SessionKey) -> None:
        """Remove the local copy only (local cleanup): the mirror keeps its copy until its own
        retention removes it (:meth:`expire_mirror`). Raises :class:`SessionNotFound`."""
        self.primary.remove(key)
        self._outbox_call(self.outbox.forget_copy, key)

    def archive_local(self, key: SessionKey) -> None:
        """Archive the local copy only (auto-archive); the mirror's copy stays where it is."""
        self.primary.archive(key)

    def expire_mirror(self, days: float | None = None, *, now: float | None = None,
                      dry_run: bool = False) -> list[SessionMeta]:
        """Remove the mirror's copies idle for over ``days`` days (default
        ``ANYCODE_MIRROR_RETENTION_DAYS``; None or 0: keep everything) — the rule the local
        cleanup keeps, applied to the mirror's own list (archived copies are kept). Returns what
        was (``dry_run``: would be) removed. Raises the mirror's errors (unreachable: nothing
        removed)."""
        from core.session.manager import SessionManager

        days = settings.mirror_retention_days() if days is None else days
        if not days or days <= 0:
            return []
        mirror = self._get_mirror()
        doomed = SessionManager(mirror).idle_sessions(days, now)
        if dry_run:
            return doomed
        gone = []
        for meta in doomed:
            try:
                mirror.remove(meta.key)
            except SessionNotFound:
                continue
            gone.append(meta)
        if gone:
            msg = f"removed {len(gone)} mirror copies idle for over {days:g} days"
            log.info("mirror %s: %s", self.mirror_name, msg)
            self._outbox_call(self.outbox.log_event, "expired", msg)
        return gone

    # --- reads: the primary answers ---------------------------------------------------------------

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """The primary's entries (see :meth:`SessionStore.load`)."""
        return self.primary.load(key)

    def exists(self, key: SessionKey) -> bool:
        """Whether the primary has the record."""
        return self.primary.exists(key)

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """The primary's list."""
        return self.primary.list(project_key, archived=archived)

    def removing(self) -> set[str]:
        """Ids of sessions deleted here whose delete the mirror has not received yet (they are
        still in the mirror's list meanwhile). Read from the local outbox; never raises (an
        unreadable outbox gives an empty set, logged)."""
        try:
            return self.outbox.removing()
        except sqlite3.Error as err:
            log.warning("cannot read the mirror outbox of %s: %s", self.mirror_name, err)
            return set()

    def list_projects(self) -> list[ProjectInfo]:
        """The primary's projects."""
        return self.primary.list_projects()

    def list_token(self, project_key: str) -> str:
        """The primary's :meth:`list_token` (the list is the primary's)."""
        return self.primary.list_token(project_key)

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """Sub-agent record subpaths of the session, from the primary."""
        return self.primary.list_subpaths(key)

    def local_store(self) -> SessionStore:
        """The store of record this mirrored store writes first (what a :class:`~core.storage.Storage`
        built over a bare mirrored store takes as its ``local``)."""
        return self.primary

    def mirrors_from(self, store: SessionStore) -> bool:
        """Whether ``store`` is this mirrored store's primary (a storage's check that its mirror
        copies its own local store)."""
        return store is self.primary

    def copy_target(self, key: SessionKey) -> str | None:
        """The id of the mirror's record that ``key``'s writes go to (``key``'s own, or the version
        the local history was kept as there: :meth:`_diverge`); None when the outbox records no
        copy of it. Read from the local outbox; an unreadable outbox answers None (logged)."""
        try:
            copy = self.outbox.copy_of(key)
        except sqlite3.Error as err:
            log.warning("cannot read the mirror outbox of %s: %s", self.mirror_name, err)
            return None
        return copy.target if copy is not None else None

    # --- delivery ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Mirror health, read from the local outbox only (never blocks on the mirror).

        Keys: ``mirror`` (name, password masked), ``state`` (``"ok"``: nothing pending;
        ``"catching_up"``: pending, last delivery succeeded; ``"failing"``: the last delivery
        failed), ``pending_entries`` (entries not yet copied), ``pending_items`` (queued writes),
        ``last_error`` (str or None), ``last_error_at`` / ``last_success_at`` (Unix seconds or
        None), ``last_warning`` (a record the mirror holds more of than the primary; not retried),
        ``outbox`` (file path), ``running`` (this process's delivery thread is alive),
        ``diverged`` (the :class:`~core.stores.outbox.MirrorCopy` of each session whose mirror copy
        had changes from elsewhere, so the local history went there as a version; most recent
        first), ``lag_seconds`` (how long the oldest queued write has waited; None: none)."""
        try:
            items, entries = self.outbox.pending()
            st = self.outbox.state()
            diverged = self.outbox.diverged()
            oldest = self.outbox.oldest_pending()
        except Exception as e:
            return {"mirror": self.mirror_name, "state": "failing", "pending_entries": None, "pending_items": None,
                    "last_error": f"outbox: {e}", "last_error_at": time.time(), "last_success_at": None,
                    "outbox": str(self.outbox.path), "running": self._running(), "diverged": [],
                    "lag_seconds": None}
        err_at = _float(st.get("last_error_at"))
        ok_at = _float(st.get("last_success_at"))
        failing = err_at is not None and (ok_at is None or err_at > ok_at)
        state = "ok" if items == 0 and not failing else ("failing" if failing else "catching_up")
        return {
            "mirror": self.mirror_name, "state": state, "pending_entries": entries, "pending_items": items,
            "last_error": st.get("last_error") if failing else None, "last_error_at": err_at,
            "last_success_at": ok_at, "last_warning": st.get("last_warning"),
            "outbox": str(self.outbox.path), "running": self._running(), "diverged": diverged,
            "lag_seconds": max(0.0, time.time() - oldest) if oldest is not None else None,
        }

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the background delivery thread (done by the constructor unless ``start=False``)."""
        if self._running():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="anycode-mirror", daemon=True)
        self._thread.start()
        self._wake.set()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued write is delivered; True if so within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self._wake.set()
            if self.outbox.pending()[0] == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def close(self, timeout: float = 2.0) -> None:
        """Give delivery up to ``timeout`` seconds to finish, stop the thread, close the outbox.
        What is still queued stays in the outbox for the next start."""
        if self._running():
            self.flush(timeout)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            # A hung mirror call cannot be interrupted; the daemon thread then dies with the process.
            self._thread.join(timeout=1.0)
        self.outbox.close()
        for store in (self.primary, self._mirror):
            if store is None:
                continue
            try:
                store.close()
            except Exception as e:
                log.warning("closing %r: %s", store, e)

    def _run(self) -> None:
        delay = self.retry_initial
        while not self._stop.is_set():
            try:
                more = self.deliver_once()
            except Exception as e:
                log.warning("mirroring to %s failed (%s); retrying in %.1f s", self.mirror_name, e, delay)
                try:
                    self.outbox.set_state(last_error=f"{type(e).__name__}: {e}"[:500], last_error_at=time.time())
                except Exception:
                    pass
                self._stop.wait(delay)
                delay = min(delay * 2, self.retry_max)
                continue
            delay = self.retry_initial
            if not more:
                self._wake.wait(self.poll_interval)
                self._wake.clear()

    def deliver_once(self, limit: int = 100) -> bool:
        """Deliver up to ``limit`` queued items in order; return True when more may be waiting.

        Raises whatever the mirror raises (the item stays queued). Public for tests and tools."""
        try:
            self._deliver_lock.acquire()
        except filelock.Timeout:
            return False  # another process is delivering this outbox
        try:
            self.outbox.recover_stale()
            items = self.outbox.batch(limit)
            if not items:
                return False
            mirror = self.mirror_store()
            synced: set[SessionKey] = set()
            delivered: list[int] = []
            try:
                for item in items:
                    try:
                        self._deliver(mirror, item, synced)
                    except Exception:
                        self.outbox.failed(item.id)
                        raise
                    delivered.append(item.id)
            finally:
                # One commit for the batch: after a crash before it, the items are delivered
                # again, which changes nothing (reconciling is idempotent).
                if delivered:
                    self.outbox.done(delivered)
                    self.outbox.set_state(last_success_at=time.time())
            return len(items) == limit
        finally:
            self._deliver_lock.release()

    def mirror_store(self) -> Backend:
        """The mirror store itself (opened on first use), for reading what other machines wrote
        (``sessions pull``, the sidebar's mirror-only chats). Raises whatever opening it raises
        (:class:`~core.errors.StoreUnavailable` while it is unreachable)."""
        with self._open_lock:
            return self._get_mirror()

    def _get_mirror(self) -> Backend:
        if self._mirror is None:
            self._mirror = self._open_mirror()  # type: ignore[misc]
            log.info("mirror %s opened", self.mirror_name)
        return self._mirror

    def _deliver(self, mirror: Backend, item: OutboxItem, synced: set[SessionKey]) -> None:
        key = item.key
        if item.op == "append":
            if key in synced or self.outbox.removed_later(item):
                return  # already reconciled in this batch / will be wiped and copied anew
            later = self.outbox.in_flight_later(item)
            if later is not None:
                # Another append of this record is being written right now: reading it could
                # catch its line half-written (skipped, with a warning). That item copies these
                # entries too; but defer at most DEFER_MAX so a non-stop writer is still mirrored.
                first = self._deferred.setdefault(key, time.monotonic())
                if time.monotonic() - first < DEFER_MAX and self.outbox.hand_over(item, later):
                    return  # (a later item refused meanwhile takes nothing over: deliver this one now)
            try:
                self._reconcile(mirror, key)
            except SessionNotFound as e:
                # The mirror refuses a main session without a header (one made by hand in the
                # primary); retrying would block the queue forever, so report and move on.
                log.warning("mirror %s refused %s: %s", self.mirror_name, key, e)
                self.outbox.set_state(last_warning=f"{key}: {e}", last_warning_at=time.time())
            self._deferred.pop(key, None)
            synced.add(key)
            return
        # Any later append of this record (or, for a main session, of its sub-agent records)
        # must be reconciled again after this operation.
        synced.difference_update({k for k in synced if k == key or (key.subpath is None and k.parent == key)})
        target, _copy = self._target(key)  # a diverged session's own copy is its version there
        if item.op == "remove":
            try:
                mirror.remove(target)
            except SessionNotFound:
                pass  # never copied, or removed by an earlier delivery: done either way
            self.outbox.forget_copy(key)
        elif item.op in ("archive", "unarchive"):
            try:
                (mirror.archive if item.op == "archive" else mirror.unarchive)(target)
            except SessionNotFound:
                log.info("mirror %s has no session %s to %s", self.mirror_name, target, item.op)
        else:
            log.warning("outbox item %d has unknown op %r; dropped", item.id, item.op)

    def _target(self, key: SessionKey) -> tuple[SessionKey, MirrorCopy | None]:
        """Where ``key``'s copy goes in the mirror: its own key, or — once the mirror's copy of
        the session diverged — the version it was kept as (a sub-agent record follows its
        session there)."""
        copy = self.outbox.copy_of(key)
        if copy is not None:
            return SessionKey(key.project_key, copy.target, key.subpath), copy
        if key.subpath is not None:
            parent = self.outbox.copy_of(key.parent)
            if parent is not None and parent.target != key.session_id:
                return SessionKey(key.project_key, parent.target, key.subpath), None
        return key, None

    def _reconcile(self, mirror: Backend, key: SessionKey, *, again: bool = True) -> None:
        """Copy to the mirror what follows the entries its copy of ``key`` already holds.

        The copy must be a prefix of the local record: the entries this outbox verified last
        time (``copies.delivered``) are trusted when the mirror still holds exactly that many
        (records are append-only); otherwise its entries are read and compared one by one. When
        they differ (another writer wrote there), nothing is copied into it out of order: the
        local history goes to the mirror as a version of the conversation (:meth:`_diverge`).

        Metadata entries (title, pin, tags: :mod:`core.session.metadata`) are not part of that
        order. A main record whose copy differs from the local one only in them, or whose
        history (everything else) is a prefix of the local one, is merged instead: the local
        history's missing tail and the local metadata changes that are newer than the copy's go
        to the copy, and the copy's newer ones (another machine's rename, pin, tags) are
        appended to the local record — the latest change of each field wins on both. Such a
        copy is compared entry by entry on every delivery from then on (its count no longer
        matches the local one). A diverged conversation's metadata is merged the same way with
        the mirror's copy of its root (:meth:`_merge_root_metadata`)."""
        source = self.primary.load(key)
        if source is None:
            return  # removed since; its remove item follows
        target, copy = self._target(key)
        expected = list(source)
        if copy is not None and copy.header is not None and expected:
            expected[0] = json.loads(copy.header)
        keep = {"header": copy.header if copy else None, "diverged_at": copy.diverged_at if copy else None}
        have = _entry_count(mirror, target)
        if copy is not None and have == copy.delivered and have <= len(expected):
            held_ok = True  # exactly what this outbox verified: no need to read it
        else:
            held = (mirror.load(target) or []) if have else []
            have = len(held)
            held_ok = held[:len(expected)] == expected[:have]
            if held_ok and have > len(expected):
                # The mirror holds ours and more (another writer went on there): nothing to copy
                # now but the other writer's metadata changes to take here; the next local
                # message diverges, and is kept as a version then.
                self._take_metadata(key, source, held)
                self.outbox.set_copy(key, target.session_id, len(expected), **keep)
                self._merge_root_metadata(mirror, key, source, target)
                return
            if not held_ok and key.subpath is None and held and self._merge_copy(
                    mirror, key, target, source, expected, held, keep, again):
                self._merge_root_metadata(mirror, key, source, target)
                return
        if not held_ok:
            if key.subpath is not None:
                msg = f"the mirror's copy of {target} differs from the local one; not copied"
                log.warning("mirror %s: %s", self.mirror_name, msg)
                self.outbox.set_state(last_warning=msg, last_warning_at=time.time())
                self.outbox.log_event("warning", msg)
                return
            self._diverge(mirror, key, source, held)
            self._merge_root_metadata(mirror, key, source, self._target(key)[0])
            return
        tail = expected[have:]
        if tail:
            self._carry_blobs(mirror, tail)  # first: a checkpoint on the mirror finds its bytes there
            try:
                self._copy_tail(mirror, target, tail, have)
            except SessionConflict:
                # Another writer appended between our read and our write (append_at refuses to
                # skip an entry that is not ours): look again, once.
                if not again:
                    raise
                self._reconcile(mirror, key, again=False)
                return
            log.debug("mirrored %d entries of %s", len(tail), key)
        self.outbox.set_copy(key, target.session_id, len(expected), **keep)
        self._merge_root_metadata(mirror, key, source, target)

    def _merge_copy(self, mirror: Backend, key: SessionKey, target: SessionKey, source: list[dict[str, Any]],
                    expected: list[dict[str, Any]], held: list[dict[str, Any]], keep: dict[str, Any],
                    again: bool) -> bool:
        """Merge the mirror's copy ``held`` of main record ``key`` when it differs from the local
        ``expected`` in metadata entries only, or beyond that holds a prefix of the local history
        (or the local history is a prefix of its own): the missing history and the newer local
        metadata go to the copy, its newer metadata comes here. False (nothing done) when the
        histories differ, which :meth:`_diverge` handles."""
        mine, theirs = history_of(expected), history_of(held)
        if theirs != mine[:len(theirs)] and mine != theirs[:len(mine)]:
            return False
        tail = mine[len(theirs):] + metadata_to_apply(held, expected)
        if tail:
            self._carry_blobs(mirror, tail)
            try:
                self._copy_tail(mirror, target, tail, len(held))
            except SessionConflict:
                if not again:
                    raise
                self._reconcile(mirror, key, again=False)
                return True
            log.debug("mirrored %d entries of %s beside the metadata another writer set", len(tail), key)
        self._take_metadata(key, source, held)
        # -1: the copy is no longer this record entry for entry, so the next delivery compares.
        self.outbox.set_copy(key, target.session_id, -1, **keep)
        return True

    def _take_metadata(self, key: SessionKey, source: list[dict[str, Any]], other: list[dict[str, Any]]) -> None:
        """Append to the local root ``key`` the metadata entries of the mirror's ``other`` that
        are newer than its own (another machine's rename, pin, tags). Not queued for the mirror
        (it has them). A failure is logged only: the next delivery tries again."""
        if key.subpath is not None or not is_root(source):
            return
        theirs = metadata_to_apply(source, other)
        if not theirs:
            return
        try:
            self.primary.append(key, theirs)
        except (SessionNotFound, OSError, ValueError) as err:
            log.warning("mirror %s: could not take the other writer's title, pin or tags into %s (%s)",
                        self.mirror_name, key, err)
            return
        log.info("mirror %s: took %d title/pin/tag/archive change(s) another writer made in %s", self.mirror_name,
                 len(theirs), key)
        if any(e.get("type") == "archive" for e in theirs):
            self._follow_archive_choice(self, key, [*source, *theirs])

    def _follow_archive_choice(self, store: SessionStore, key: SessionKey, entries: list[dict[str, Any]]) -> None:
        """Move ``key``'s conversation in ``store`` (this mirrored store: queued for the mirror too;
        or the mirror) to where the newest archive entry of ``entries`` says. Logged, never raised."""
        from core.session.manager import SessionManager

        choice = archive_choice(entries)
        if choice is None:
            return
        try:
            SessionManager(store).follow_archive_choice(key, choice[1])
        except (SessionNotFound, OSError) as err:
            log.warning("mirror %s: could not %s %s as the newest choice says (%s)", self.mirror_name,
                        "archive" if choice[1] else "unarchive", key, err)

    def _merge_root_metadata(self, mirror: Backend, key: SessionKey, source: list[dict[str, Any]],
                             target: SessionKey) -> None:
        """For a conversation whose history went to the mirror as a version (``target`` is not
        ``key``): merge its metadata with the mirror's copy of its root — the record the other
        writer shows as that conversation — both ways (:mod:`core.session.metadata`), so a rename
        here reaches it and its rename reaches here, without touching either's messages."""
        if target == key or key.subpath is not None or not is_root(source):
            return
        for attempt in (1, 2):
            root = mirror.load(key)
            if not root:
                return  # the other writer deleted it: nothing to merge with
            ours = metadata_to_apply(root, source)
            if ours:
                try:
                    self._copy_tail(mirror, key, ours, len(root))
                except SessionConflict:
                    if attempt == 1:
                        continue  # the other writer appended meanwhile: look again
                    raise
                log.info("mirror %s: sent %d title/pin/tag/archive change(s) of %s to the other writer's copy",
                         self.mirror_name, len(ours), key)
                if any(e.get("type") == "archive" for e in ours):
                    self._follow_archive_choice(mirror, key, [*root, *ours])
            self._take_metadata(key, source, root)
            return

    def _copy_tail(self, mirror: SessionStore, target: SessionKey, tail: list[dict[str, Any]], have: int) -> None:
        if appends_at(mirror):
            mirror.append_at(target, tail, have)  # idempotent; refuses to skip entries that are not ours
        elif have == 0:
            try:
                mirror.create_whole(target, tail)  # a JSONL mirror: a killed copy leaves no short record
            except SessionExists:
                raise SessionConflict(0, 1) from None  # made meanwhile by someone else: look again
        else:
            mirror.append(target, tail)

    def _diverge(self, mirror: Backend, key: SessionKey, source: list[dict[str, Any]],
                 held: list[dict[str, Any]]) -> None:
        """The mirror's copy of session ``key`` is not a prefix of the local one: store the local
        history in the mirror as a new version of that conversation (``version_of`` and
        ``forked_from`` cut after the messages both share; ``copy_of`` naming ``key``, so a pull
        here does not bring it back as another version), created whole, and send every later
        write of ``key`` (and its sub-agent records) there. Reported in :meth:`status`, the
        mirror log and the app's log."""
        common = 0
        while common < min(len(held), len(source)) and held[common] == source[common]:
            common += 1
        shared = sum(1 for e in source[:common] if e.get("type") == "message" and isinstance(e.get("message"), dict))
        head = dict(source[0]) if source and source[0].get("type") == "header" else {}
        root = (head.get("version_of") or {}).get("session_id") or key.session_id
        version_id = new_session_id()
        link = {"session_id": key.session_id, "message_index": shared - 1}
        header = dict(head, id=version_id, forked_from=link, version_of={"session_id": root,
                                                                         "message_index": shared - 1},
                      copy_of={"session_id": key.session_id})  # this machine's own history: a pull here skips it
        target = SessionKey(key.project_key, version_id)
        # Sub-agent records first, so the version is complete once it lists.
        for sub in self.primary_subpaths(key):
            sub_key = SessionKey(key.project_key, key.session_id, sub)
            entries = self.primary.load(sub_key)
            if entries:
                mirror.create_whole(SessionKey(key.project_key, version_id, sub), entries)
                self.outbox.set_copy(sub_key, version_id, len(entries))
        self._carry_blobs(mirror, source)
        mirror.create_whole(target, [header, *source[1:]])
        now = time.time()
        self.outbox.set_copy(key, version_id, len(source), header=json.dumps(header), diverged_at=now)
        msg = (f"the mirror's copy of {key.session_id} had changes from elsewhere (the first {common} entries "
               f"agree); the local history was kept there as the version {version_id}")
        log.warning("mirror %s: %s", self.mirror_name, msg)
        self.outbox.log_event("diverged", msg, at=now)

    def _carry_blobs(self, mirror: Backend, entries: list[dict[str, Any]]) -> None:
        """Copy to the mirror the checkpoint blobs ``entries`` name that it lacks (issue 29: a
        rewind on another machine restores the bytes), before the entries themselves. A blob
        this machine never kept (over the size cap) is skipped. The mirror's errors propagate:
        the outbox item stays queued and is retried."""
        names = referenced_in(entries)
        if names:
            copied = carry_blobs(names, self.blobs, BlobCarrier.of(mirror))
            if copied:
                log.debug("mirrored %d checkpoint blobs", copied)

    def primary_subpaths(self, key: SessionKey) -> list[str]:
        return self.primary.list_subpaths(key)


def _entry_count(mirror: SessionStore, key: SessionKey) -> int:
    if appends_at(mirror):
        return mirror.entry_count(key) or 0
    return len(mirror.load(key) or [])


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
