"""Reply leases: "a reply is being written in this session" — visible to every writer of the store.

Issue 25, item 2 of "what to build": while a reply streams, other tabs of the same app and other
processes on the same store see it, and a Send there waits for it instead of racing it. A lease
is a short claim on one session — ``holder`` (a random token per reply), ``pid``, ``host`` and an
expiry — written where every writer of that store looks:

- JSONL store: ``projects/<project>/.locks/<session id>.lease`` (JSON, 0600), read and replaced
  under the session's lock (the one appends take), so two writers cannot both acquire it;
- SQL stores: the ``anycode_leases`` table (migration 5), in one write transaction;
- a mirrored store: its local store's (the mirror is a copy, not a writer's meeting place);
- any other store (S3, Redis): a table in this process only.

Each store kind builds its board (``store.leases()``); :class:`core.storage.Storage` keeps one per
storage (``storage.leases``), which is what every caller uses.

A lease lasts :data:`LEASE_SECONDS` (10 s; the issue's bound is 15 s) and is renewed while the
reply streams (:class:`HeldLease`, every :data:`RENEW_SECONDS`); a holder that dies — even by
``kill -9`` — stops renewing, so its lease expires within 10 s, and at once for readers on the same
host, which check that the holder's process is still alive. Leases are advice, never a lock on the
data: a writer that ignores one (or a clock far off) is still caught by ``expected_count`` and its
reply kept as a version (:meth:`core.session.manager.SessionManager.keep_as_version`). Expiry
compares wall-clock times, so hosts sharing a database should keep their clocks in sync (NTP).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from core.session.keys import SessionKey

if TYPE_CHECKING:
    from core.stores.jsonl_store import LocalSessionStore
    from core.stores.sql_store import SqlSessionStore

log = logging.getLogger(__name__)

LEASE_SECONDS = 10.0  # how long a lease lasts unless renewed (issue 25: at most 15 s)
RENEW_SECONDS = 3.0  # how often a streaming reply renews its lease
HOST = socket.gethostname()


@dataclass(frozen=True)
class Lease:
    """A claim on one session: ``holder`` (token), ``pid`` and ``host`` of its process,
    ``expires_at`` (Unix seconds)."""

    holder: str
    pid: int
    host: str
    expires_at: float

    def live(self, now: float | None = None) -> bool:
        """Not expired, and — when held on this host — its process still runs."""
        if self.expires_at <= (time.time() if now is None else now):
            return False
        return self.host != HOST or _alive(self.pid)


def new_holder() -> str:
    """A fresh holder token (one per reply)."""
    return uuid.uuid4().hex


class LeaseBoard:
    """Where one store's reply leases are kept. The common rule: acquire when free, expired,
    dead or already ours."""

    def acquire(self, key: SessionKey, holder: str, ttl: float = LEASE_SECONDS) -> bool:
        """Take or renew the lease on ``key`` for ``ttl`` seconds; False (nothing written) when
        another live holder has it. Raises the store's errors."""
        raise NotImplementedError

    def release(self, key: SessionKey, holder: str) -> None:
        """Give the lease up if ``holder`` has it (someone else's is left alone)."""
        raise NotImplementedError

    def current(self, key: SessionKey) -> Lease | None:
        """The live lease on ``key``, or None."""
        lease = self.peek(key)
        return lease if lease is not None and lease.live() else None

    def peek(self, key: SessionKey) -> Lease | None:
        """The stored lease on ``key``, live or not (a lapsed one: its holder died mid-reply)."""
        raise NotImplementedError

    @staticmethod
    def _mine(key: SessionKey, holder: str, ttl: float) -> Lease:
        return Lease(holder, os.getpid(), HOST, time.time() + min(ttl, 15.0))


class FileLeases(LeaseBoard):
    """Leases of a :class:`~core.stores.jsonl_store.LocalSessionStore` (files beside its locks)."""

    def __init__(self, store: LocalSessionStore):
        self.store = store

    def _path(self, key: SessionKey):
        return self.store._project_dir(key.project_key) / ".locks" / f"{key.session_id}.lease"

    def _read(self, key: SessionKey) -> Lease | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return Lease(str(data["holder"]), int(data["pid"]), str(data["host"]), float(data["expires_at"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as err:  # damaged: as if free
            log.warning("%s: unreadable lease (%s); ignored", self._path(key), err)
            return None

    def acquire(self, key: SessionKey, holder: str, ttl: float = LEASE_SECONDS) -> bool:
        key = key.parent
        lock = self.store._locked(key)
        try:
            now = self._read(key)
            if now is not None and now.holder != holder and now.live():
                return False
            path = self._path(key)
            part = path.with_name(f".{path.name}.{holder}.part")
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, json.dumps(asdict(self._mine(key, holder, ttl))).encode())
            finally:
                os.close(fd)
            os.replace(part, path)
            return True
        finally:
            lock.release()

    def release(self, key: SessionKey, holder: str) -> None:
        key = key.parent
        lock = self.store._locked(key)
        try:
            now = self._read(key)
            if now is not None and now.holder == holder:
                self._path(key).unlink(missing_ok=True)
        finally:
            lock.release()

    def peek(self, key: SessionKey) -> Lease | None:
        return self._read(key.parent)


class SqlLeases(LeaseBoard):
    """Leases of a :class:`~core.stores.sql_store.SqlSessionStore` (table ``anycode_leases``)."""

    def __init__(self, store: SqlSessionStore):
        self.store = store

    def _where(self, key: SessionKey) -> Any:
        t = self.store._t.leases.c
        return (t.project_key == key.project_key) & (t.session_id == key.session_id)

    def acquire(self, key: SessionKey, holder: str, ttl: float = LEASE_SECONDS) -> bool:
        import sqlalchemy as sa

        key = key.parent
        t = self.store._t.leases
        mine = self._mine(key, holder, ttl)
        with self.store._errors("lease"), self.store._write() as conn:
            if self.store.dialect == "postgresql":
                # The row may not exist yet: an advisory lock on the key serialises the check.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"),
                             {"k": f"{key.project_key}/{key.session_id}"})
            row = conn.execute(sa.select(t).where(self._where(key))).first()
            if row is not None:
                held = Lease(row.holder, row.pid, row.host, row.expires_at)
                if held.holder != holder and held.live():
                    return False
                conn.execute(t.update().where(self._where(key)).values(
                    holder=holder, pid=mine.pid, host=mine.host, expires_at=mine.expires_at))
            else:
                conn.execute(t.insert().values(project_key=key.project_key, session_id=key.session_id,
                                               holder=holder, pid=mine.pid, host=mine.host,
                                               expires_at=mine.expires_at))
        return True

    def release(self, key: SessionKey, holder: str) -> None:
        t = self.store._t.leases
        with self.store._errors("lease"), self.store._write() as conn:
            conn.execute(t.delete().where(self._where(key.parent) & (t.c.holder == holder)))

    def peek(self, key: SessionKey) -> Lease | None:
        import sqlalchemy as sa

        t = self.store._t.leases
        with self.store._errors("lease"), self.store._read() as conn:
            row = conn.execute(sa.select(t).where(self._where(key.parent))).first()
        return Lease(row.holder, row.pid, row.host, row.expires_at) if row is not None else None


class MemoryLeases(LeaseBoard):
    """Leases of a store with no shared place for them: this process only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[SessionKey, Lease] = {}

    def acquire(self, key: SessionKey, holder: str, ttl: float = LEASE_SECONDS) -> bool:
        with self._lock:
            held = self._held.get(key.parent)
            if held is not None and held.holder != holder and held.live():
                return False
            self._held[key.parent] = self._mine(key, holder, ttl)
            return True

    def release(self, key: SessionKey, holder: str) -> None:
        with self._lock:
            if (held := self._held.get(key.parent)) is not None and held.holder == holder:
                del self._held[key.parent]

    def peek(self, key: SessionKey) -> Lease | None:
        with self._lock:
            return self._held.get(key.parent)


class HeldLease:
    """A lease held for one reply and renewed in the background until :meth:`release`.

    ``HeldLease.take(board, key)`` returns None when another live holder has the session's
    lease; ``took_over`` is the lapsed lease it replaced (its writer died mid-reply), if any.
    Renewal failures (the database away for a moment) are logged, never raised: the lease then
    lapses and the reply goes on (a racing writer is caught by ``expected_count``)."""

    def __init__(self, board: LeaseBoard, key: SessionKey, holder: str):
        self.board, self.key, self.holder = board, key, holder
        # The lapsed lease of another holder this one replaced: that writer died mid-reply (its
        # question may be stored unanswered), so the caller re-reads the session before writing.
        self.took_over: Lease | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="anycode-lease", daemon=True)

    @classmethod
    def take(cls, board: LeaseBoard, key: SessionKey, holder: str | None = None) -> "HeldLease | None":
        """Acquire ``key``'s lease on ``board`` (a storage's ``leases``) and start renewing it;
        None when someone else holds it. Raises the store's errors."""
        held = cls(board, key, holder or new_holder())
        before = held.board.peek(key)
        if not held.board.acquire(key, held.holder):
            return None
        if before is not None and before.holder != held.holder and not before.live():
            held.took_over = before
            log.info("the reply lease of %s lapsed (its writer, pid %d on %s, is gone); taken over",
                     key.session_id, before.pid, before.host)
        held._thread.start()
        return held

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            try:
                if not self.board.acquire(self.key, self.holder):
                    log.warning("the lease on %s was taken by another writer", self.key.session_id)
                    return
            except Exception as err:  # noqa: BLE001 -- renewal is best effort (see the class docstring)
                log.warning("could not renew the lease on %s: %s", self.key.session_id, err)

    def release(self) -> None:
        """Stop renewing and give the lease up (idempotent; errors logged)."""
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            self.board.release(self.key, self.holder)
        except Exception as err:  # noqa: BLE001 -- it expires by itself
            log.warning("could not release the lease on %s: %s", self.key.session_id, err)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name == "nt":
        return True  # expiry still applies
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
