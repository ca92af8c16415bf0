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
- Reconciling relies on records being append-only (the protocol's promise); a record removed and
  re-created is handled by its queued ``remove``. A record that existed before the mirror was
  configured is copied whole on its next append; ``anycode sessions migrate --to URL`` copies
  everything (archived flags included) once.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import filelock

from core import settings
from core.errors import SessionConflict, SessionExists, SessionNotFound
from core.session.keys import SessionKey
from core.session.models import ProjectInfo, SessionMeta
from core.stores.outbox import Outbox, OutboxItem

log = logging.getLogger(__name__)

DEFER_MAX = 1.0  # seconds a record's copy may wait for an append in flight to finish


class MirroredSessionStore:
    """A :class:`~core.session.store.SessionStore` writing to ``primary`` and copying to ``mirror``.

    ``primary``: the source of truth (normally the JSONL store); every read is answered by it.
    ``mirror``: a store, or a zero-argument callable opening one (retried until it succeeds, so
    an unreachable database does not stop the app from starting). ``outbox_path``: the outbox
    file (default ``<data dir>/mirror/outbox.sqlite3``). ``retry_initial``/``retry_max``: backoff
    after a failed delivery, seconds; ``poll_interval``: how often (seconds) to look for items
    queued by other processes. Errors of the primary propagate unchanged; the mirror's never do.
    """

    def __init__(
        self,
        primary: Any,
        mirror: Any | Callable[[], Any],
        *,
        outbox_path: str | os.PathLike[str] | None = None,
        mirror_name: str | None = None,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
        poll_interval: float = 2.0,
        start: bool = True,
    ):
        self.primary = primary
        if callable(mirror) and not hasattr(mirror, "append"):
            self._mirror, self._open_mirror = None, mirror
        else:
            self._mirror, self._open_mirror = mirror, None
        self.mirror_name = mirror_name or (repr(mirror) if self._mirror is not None else "mirror")
        path = Path(outbox_path) if outbox_path is not None else settings.data_dir() / "mirror" / "outbox.sqlite3"
        self.outbox = Outbox(path)
        self._deliver_lock = filelock.FileLock(str(path) + ".deliver.lock", timeout=0)
        self.retry_initial, self.retry_max, self.poll_interval = retry_initial, retry_max, poll_interval
        self._wake = threading.Event()
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

    def list_projects(self) -> list[ProjectInfo]:
        """The primary's projects."""
        return self.primary.list_projects()

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """Sub-agent record subpaths of the session, from the primary."""
        from core.stores.migrate import subpaths_of

        return subpaths_of(self.primary, key)

    # --- delivery ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Mirror health, read from the local outbox only (never blocks on the mirror).

        Keys: ``mirror`` (name, password masked), ``state`` (``"ok"``: nothing pending;
        ``"catching_up"``: pending, last delivery succeeded; ``"failing"``: the last delivery
        failed), ``pending_entries`` (entries not yet copied), ``pending_items`` (queued writes),
        ``last_error`` (str or None), ``last_error_at`` / ``last_success_at`` (Unix seconds or
        None), ``last_warning`` (a record the mirror holds more of than the primary; not retried),
        ``outbox`` (file path), ``running`` (this process's delivery thread is alive)."""
        try:
            items, entries = self.outbox.pending()
            st = self.outbox.state()
        except Exception as e:
            return {"mirror": self.mirror_name, "state": "failing", "pending_entries": None, "pending_items": None,
                    "last_error": f"outbox: {e}", "last_error_at": time.time(), "last_success_at": None,
                    "outbox": str(self.outbox.path), "running": self._running()}
        err_at = _float(st.get("last_error_at"))
        ok_at = _float(st.get("last_success_at"))
        failing = err_at is not None and (ok_at is None or err_at > ok_at)
        state = "ok" if items == 0 and not failing else ("failing" if failing else "catching_up")
        return {
            "mirror": self.mirror_name, "state": state, "pending_entries": entries, "pending_items": items,
            "last_error": st.get("last_error") if failing else None, "last_error_at": err_at,
            "last_success_at": ok_at, "last_warning": st.get("last_warning"),
            "outbox": str(self.outbox.path), "running": self._running(),
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
            close = getattr(store, "close", None)
            if callable(close):
                try:
                    close()
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
            mirror = self._get_mirror()
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

    def _get_mirror(self) -> Any:
        if self._mirror is None:
            self._mirror = self._open_mirror()  # type: ignore[misc]
            log.info("mirror %s opened", self.mirror_name)
        return self._mirror

    def _deliver(self, mirror: Any, item: OutboxItem, synced: set[SessionKey]) -> None:
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
                if time.monotonic() - first < DEFER_MAX:
                    self.outbox.hand_over(item, later)
                    return
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
        if item.op == "remove":
            try:
                mirror.remove(key)
            except SessionNotFound:
                pass  # never copied, or removed by an earlier delivery: done either way
        elif item.op in ("archive", "unarchive"):
            try:
                getattr(mirror, item.op)(key)
            except SessionNotFound:
                log.info("mirror %s has no session %s to %s", self.mirror_name, key, item.op)
        else:
            log.warning("outbox item %d has unknown op %r; dropped", item.id, item.op)

    def _reconcile(self, mirror: Any, key: SessionKey) -> None:
        source = self.primary.load(key)
        if source is None:
            return  # removed since; its remove item follows
        counter = getattr(mirror, "entry_count", None)
        if callable(counter):
            have = counter(key) or 0
        else:
            have = len(mirror.load(key) or [])
        if have > len(source):
            # Not retried (it would never succeed); shown as status()["last_warning"].
            msg = f"mirror has {have} entries of {key}, the primary {len(source)}; left as is"
            log.warning(msg)
            self.outbox.set_state(last_warning=msg, last_warning_at=time.time())
            return
        if have == len(source):
            return
        tail = source[have:]
        positioned = getattr(mirror, "append_at", None)
        if have == 0 and not callable(positioned) and callable(getattr(mirror, "create_whole", None)):
            try:
                mirror.create_whole(key, tail)  # a JSONL mirror: a killed copy leaves no short record
                return
            except SessionExists:
                have_now = len(mirror.load(key) or [])  # made meanwhile by someone else: top it up
                tail = source[have_now:]
        if callable(positioned):
            positioned(key, tail, have)  # idempotent: skips entries the mirror already has
        else:
            mirror.append(key, tail)
        log.debug("mirrored %d entries of %s", len(tail), key)


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
