"""The mirror's durable outbox: a small SQLite file of writes still to copy to the mirror.

Each item names one write to mirror: ``op`` (``append``, ``remove``, ``archive``, ``unarchive``),
the session key, and for appends how many entries it added (for the pending count). Items are
written *before* the primary write as intents (``ready = 0``) and marked ready after it, so a
crash between the two still leaves a trace: an intent whose process is gone (or that is older
than :data:`STALE_AFTER`) is treated as ready, and delivering it is harmless even if the primary
write never happened, because delivery copies whatever the primary holds (see
:mod:`core.stores.mirror`). Standard-library ``sqlite3`` (no optional extra), WAL mode, shared safely by
every process using the same data dir.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core import settings
from core.session.keys import SessionKey

log = logging.getLogger(__name__)

STALE_AFTER = 120.0  # seconds; no primary write takes this long (the JSONL lock gives up at 30 s)
BUSY_TIMEOUT = 30.0  # seconds

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL,
    project_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    subpath TEXT NOT NULL DEFAULT '',
    entries INTEGER NOT NULL DEFAULT 0,
    ready INTEGER NOT NULL DEFAULT 0,
    owner INTEGER NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS items_ready ON items (ready, id);
CREATE INDEX IF NOT EXISTS items_session ON items (project_key, session_id, op, id);
CREATE TABLE IF NOT EXISTS state (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS copies (
    project_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    subpath TEXT NOT NULL DEFAULT '',
    target TEXT NOT NULL,
    delivered INTEGER NOT NULL,
    header TEXT,
    diverged_at REAL,
    PRIMARY KEY (project_key, session_id, subpath)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL
);
"""
EVENTS_KEPT = 200  # the mirror log keeps this many recent events


@dataclass(frozen=True)
class MirrorCopy:
    """Where a local record's copy lives in the mirror and how much of it this outbox verified:
    ``target`` (the mirror's session id: the record's own, or the version it was kept as after
    the mirror's copy diverged), ``delivered`` (entries of the mirror's copy known to equal the
    local ones), ``header`` (the version's header entry as JSON text; None for the own id),
    ``diverged_at`` (Unix seconds; None when it never diverged)."""

    key: SessionKey
    target: str
    delivered: int
    header: str | None = None
    diverged_at: float | None = None


@dataclass(frozen=True)
class OutboxItem:
    """One queued write: ``id`` (delivery order), ``op``, ``key``, ``entries`` (appends: how many
    entries it added), ``attempts`` (failed deliveries so far)."""

    id: int
    op: str
    key: SessionKey
    entries: int
    attempts: int


class Outbox:
    """The outbox file at ``path`` (created 0600 with its folder). Thread-safe (one connection
    behind a lock) and process-safe (SQLite locking). ``fsync``: ``synchronous=FULL`` (default
    from ``ANYCODE_FSYNC``) else ``NORMAL``. Raises ``sqlite3.Error`` on I/O failure."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        self._lock = threading.Lock()
        # isolation_level=None: each statement commits by itself; multi-statement work uses BEGIN.
        self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        fsync = settings.fsync_enabled() if fsync is None else fsync
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def add(self, op: str, key: SessionKey, entries: int = 0, *, ready: bool = False) -> int:
        """Queue ``op`` on ``key``; return the item id. ``ready=False`` records an intent."""
        with self._lock:
            cur = self._db.execute(
                "INSERT INTO items (op, project_key, session_id, subpath, entries, ready, owner, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (op, key.project_key, key.session_id, key.subpath or "", entries, int(ready), os.getpid(), time.time()),
            )
            return int(cur.lastrowid)

    def mark_ready(self, item_id: int) -> None:
        """The primary write of this intent has finished (or failed after writing something)."""
        with self._lock:
            self._db.execute("UPDATE items SET ready = 1 WHERE id = ?", (item_id,))

    def done(self, ids: list[int]) -> None:
        """Delivered (or nothing to deliver): forget these items (one transaction)."""
        if not ids:
            return
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("DELETE FROM items WHERE id = ?", [(i,) for i in ids])
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def refused(self, item_id: int, entries: int) -> None:
        """The primary refused the write of this intent (``entries`` long) and wrote nothing:
        forget it, unless an earlier item handed its copy over to it meanwhile
        (:meth:`hand_over`), in which case it is kept, ready, to deliver that copy."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # no hand-over between the check and the delete
            try:
                row = self._db.execute("SELECT entries FROM items WHERE id = ?", (item_id,)).fetchone()
                if row is not None and row[0] > entries:
                    self._db.execute("UPDATE items SET ready = 1, entries = entries - ? WHERE id = ?",
                                     (entries, item_id))
                else:
                    self._db.execute("DELETE FROM items WHERE id = ?", (item_id,))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def failed(self, item_id: int) -> None:
        """Count one failed delivery of the item."""
        with self._lock:
            self._db.execute("UPDATE items SET attempts = attempts + 1 WHERE id = ?", (item_id,))

    def recover_stale(self, now: float | None = None) -> int:
        """Mark ready the intents whose process died (or that are older than STALE_AFTER);
        return how many. Intents of live processes are writes in flight and are left alone."""
        now = time.time() if now is None else now
        with self._lock:
            rows = self._db.execute("SELECT id, owner, created_at FROM items WHERE ready = 0").fetchall()
            stale = [i for i, owner, created in rows if created < now - STALE_AFTER or not _alive(owner)]
            if stale:
                self._db.executemany("UPDATE items SET ready = 1 WHERE id = ?", [(i,) for i in stale])
        if stale:
            log.info("%s: %d interrupted writes queued for mirroring", self.path, len(stale))
        return len(stale)

    def batch(self, limit: int = 100) -> list[OutboxItem]:
        """The oldest ready items, in delivery order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, op, project_key, session_id, subpath, entries, attempts FROM items"
                " WHERE ready = 1 ORDER BY id LIMIT ?", (limit,),
            ).fetchall()
        return [OutboxItem(i, op, SessionKey(pk, sid, sub or None), n, a) for i, op, pk, sid, sub, n, a in rows]

    def removed_later(self, item: OutboxItem) -> bool:
        """True when a later ``remove`` of this record (or of its main session) is queued: copying
        it now would mix the old record's entries with a re-created one's."""
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM items WHERE op = 'remove' AND project_key = ? AND session_id = ? AND id > ?"
                " AND (subpath = '' OR subpath = ?) LIMIT 1",
                (item.key.project_key, item.key.session_id, item.id, item.key.subpath or ""),
            ).fetchone()
        return row is not None

    def removing(self) -> set[str]:
        """Session ids whose delete (of the main session) is queued and not yet delivered: the
        mirror may still hold them, but they are gone here."""
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT session_id FROM items WHERE op = 'remove' AND subpath = ''"
                                    ).fetchall()
        return {sid for (sid,) in rows}

    def in_flight_later(self, item: OutboxItem) -> int | None:
        """The id of a later append of the same record that a live process is still writing (its
        intent is not ready yet), or None. That item will copy this one's entries too."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, owner, created_at FROM items WHERE op = 'append' AND ready = 0 AND project_key = ?"
                " AND session_id = ? AND subpath = ? AND id > ? ORDER BY id",
                (item.key.project_key, item.key.session_id, item.key.subpath or "", item.id),
            ).fetchall()
        now = time.time()
        return next((i for i, owner, created in rows if created >= now - STALE_AFTER and _alive(owner)), None)

    def hand_over(self, item: OutboxItem, later_id: int) -> bool:
        """Move ``item``'s entry count onto the later item that will copy its entries, so the
        pending count stays right after ``item`` is marked done. False when the later item is gone
        already (its write was refused in the meantime, :meth:`refused`): then nothing will copy
        ``item``'s entries but ``item`` itself, and the caller must deliver it."""
        with self._lock:
            cur = self._db.execute("UPDATE items SET entries = entries + ? WHERE id = ?", (item.entries, later_id))
            return cur.rowcount == 1

    def pending(self) -> tuple[int, int]:
        """``(items, entries)`` still queued (intents included)."""
        with self._lock:
            n, entries = self._db.execute("SELECT COUNT(*), COALESCE(SUM(entries), 0) FROM items").fetchone()
        return int(n), int(entries)

    # --- what each record's mirror copy holds (issue 25: mirrors never diverge silently) -------

    def copy_of(self, key: SessionKey) -> MirrorCopy | None:
        """The record's :class:`MirrorCopy`, or None when nothing was delivered yet."""
        with self._lock:
            row = self._db.execute(
                "SELECT target, delivered, header, diverged_at FROM copies WHERE project_key = ?"
                " AND session_id = ? AND subpath = ?", (key.project_key, key.session_id, key.subpath or ""),
            ).fetchone()
        return MirrorCopy(key, *row) if row is not None else None

    def set_copy(self, key: SessionKey, target: str, delivered: int, *, header: str | None = None,
                 diverged_at: float | None = None) -> None:
        """Record that the mirror's ``target`` holds ``delivered`` entries equal to the local
        record's (``header``/``diverged_at`` as in :class:`MirrorCopy`)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO copies (project_key, session_id, subpath, target, delivered, header, diverged_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project_key, session_id, subpath) DO UPDATE SET"
                " target = excluded.target, delivered = excluded.delivered, header = excluded.header,"
                " diverged_at = excluded.diverged_at",
                (key.project_key, key.session_id, key.subpath or "", target, delivered, header, diverged_at),
            )

    def forget_copy(self, key: SessionKey) -> None:
        """Forget the record's copy (for a main session, its sub-agent records' too)."""
        with self._lock:
            if key.subpath is None:
                self._db.execute("DELETE FROM copies WHERE project_key = ? AND session_id = ?",
                                 (key.project_key, key.session_id))
            else:
                self._db.execute("DELETE FROM copies WHERE project_key = ? AND session_id = ? AND subpath = ?",
                                 (key.project_key, key.session_id, key.subpath))

    def diverged(self) -> list[MirrorCopy]:
        """Main sessions whose mirror copy had changes from elsewhere, so the local history went to
        the mirror as a version (``target``), most recent first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT project_key, session_id, target, delivered, header, diverged_at FROM copies"
                " WHERE subpath = '' AND diverged_at IS NOT NULL ORDER BY diverged_at DESC").fetchall()
        return [MirrorCopy(SessionKey(pk, sid), target, n, header, at) for pk, sid, target, n, header, at in rows]

    def log_event(self, kind: str, text: str, at: float | None = None) -> None:
        """Add one line to the mirror log (``kind``: ``diverged``, ``warning``, ``error``,
        ``expired``), keeping the last :data:`EVENTS_KEPT`."""
        with self._lock:
            self._db.execute("INSERT INTO events (at, kind, text) VALUES (?, ?, ?)",
                             (time.time() if at is None else at, kind, text[:1000]))
            self._db.execute("DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", (EVENTS_KEPT,))

    def events(self, limit: int = 20) -> list[tuple[float, str, str]]:
        """The latest mirror log lines ``(at, kind, text)``, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT at, kind, text FROM events ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [(float(at), kind, text) for at, kind, text in reversed(rows)]

    def oldest_pending(self) -> float | None:
        """When the oldest queued write was queued (Unix seconds), or None when nothing waits:
        the mirror's lag."""
        with self._lock:
            row = self._db.execute("SELECT MIN(created_at) FROM items").fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def set_state(self, **values: str | float | None) -> None:
        """Store delivery status values (shared by every process using this outbox)."""
        with self._lock:
            self._db.executemany(
                "INSERT INTO state (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                [(k, None if v is None else str(v)) for k, v in values.items()],
            )

    def state(self) -> dict[str, str | None]:
        """Every stored status value."""
        with self._lock:
            return dict(self._db.execute("SELECT k, v FROM state").fetchall())


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name == "nt":
        return True  # os.kill(pid, 0) would terminate it on Windows; STALE_AFTER still applies
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but is someone else's
    return True
