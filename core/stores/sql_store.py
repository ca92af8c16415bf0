"""The SQL session store: the same :class:`~core.session.store.SessionStore` contract over a database.

``SqlSessionStore(url)`` works with ``sqlite:///PATH`` and ``postgresql+psycopg://…`` through one
implementation on SQLAlchemy 2 Core (the optional extra ``anycode[sql]``; without it, creating a
store raises :class:`~core.errors.StoreUnavailable` saying what to install, and ``import core``
still works). Tables and migrations are in :mod:`core.stores.sql_schema`.

Why it is shaped this way:

- Each append is one transaction that locks the session's row (PostgreSQL ``SELECT … FOR UPDATE``;
  SQLite ``BEGIN IMMEDIATE``, which takes the database write lock, with a busy timeout), checks
  ``expected_count``, inserts the entries with consecutive sequence numbers and folds them into
  the row's metadata with :class:`core.session.entries.SessionState`. Appends from many processes
  therefore serialise per session, lose nothing and never interleave, and ``list()`` is one
  indexed query that never reads entries.
- Entries are stored as the exact JSON text the JSONL store would write (one row each), so
  ``load`` returns them exactly and a migration between stores compares equal.
- Database failures (unreachable server, database locked past the timeout) become
  :class:`StoreUnavailable` with one readable sentence; nothing half-written is acknowledged.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from core import settings
from core.session.entries import SessionState
from core.errors import SessionConflict, SessionExists, SessionNotFound, StoreUnavailable
from core.session.entries import encode_entry as encode_entry_line
from core.session.keys import SessionKey, _check_project_key
from core.session.models import ProjectInfo, SessionMeta
from core.session.store import check_new_record, check_version

try:  # optional extra: anycode[sql]
    import sqlalchemy as sa
    from sqlalchemy import event, exc as sa_exc
    from sqlalchemy.engine import make_url
except ImportError:  # pragma: no cover - exercised by the "extra missing" test in a subprocess
    sa = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from core.stores.leases import LeaseBoard
    from core.stores.memory_log import MemoryLog

log = logging.getLogger(__name__)

BUSY_TIMEOUT = 30.0  # seconds a writer waits for the lock, as the JSONL store's LOCK_TIMEOUT
CONNECT_TIMEOUT = 10  # seconds to reach a PostgreSQL server before StoreUnavailable
_INSTALL_HINT = 'The SQL session store needs SQLAlchemy: install anycode[sql] (pip install "anycode[sql]").'


def encode_entry(entry: Any) -> tuple[str, dict[str, Any]]:
    """Serialise one entry as the JSONL store does; return ``(json_text, entry_as_stored)``.

    ``entry_as_stored`` is ``entry`` itself unless a lone surrogate had to become U+FFFD (text
    columns hold UTF-8 only), in which case it is the re-parsed text. Raises ``ValueError`` for a
    non-dict or a value JSON cannot hold (NaN, infinities, objects)."""
    data = encode_entry_line(entry)
    # Re-parse only when a lone surrogate may have become U+FFFD (rare): then what is stored
    # differs from ``entry``; re-parsing an entry that already held U+FFFD gives an equal dict.
    return data, (json.loads(data) if "\ufffd" in data else entry)


class SqlSessionStore:
    """:class:`~core.session.store.SessionStore` over SQLite or PostgreSQL (see the module docstring).

    ``url``: a SQLAlchemy URL: ``sqlite:///relative.db``, ``sqlite:////abs/path.db``,
    ``postgresql+psycopg://user:pass@host:5432/db`` (``postgresql://`` and ``postgres://`` are
    taken to mean psycopg 3). The schema is created or migrated on open. ``fsync``: SQLite
    ``synchronous=FULL`` (default from ``ANYCODE_FSYNC``) versus ``NORMAL``.

    Raises :class:`StoreUnavailable` when SQLAlchemy (or the driver) is not installed, the URL's
    database is not supported, or the database cannot be reached or migrated. Thread- and
    process-safe. Extra methods beyond the protocol: :meth:`list_subpaths`, :meth:`entry_count`,
    :meth:`append_at`, :meth:`close`.
    """

    def __init__(self, url: str, *, fsync: bool | None = None):
        if sa is None:
            raise StoreUnavailable(_INSTALL_HINT)
        self._fsync = settings.fsync_enabled() if fsync is None else fsync
        self.engine = _make_engine(url, self._fsync)
        self.url = self.engine.url.render_as_string(hide_password=True)
        self.dialect = self.engine.dialect.name
        from core.stores import sql_schema

        self._t = sql_schema
        with self._errors("open"), self._write() as conn:
            applied = sql_schema.upgrade(conn)
        if applied:
            log.info("%s: applied migrations %s", self.url, applied)

    def __repr__(self) -> str:
        return f"SqlSessionStore({self.url!r})"

    def close(self) -> None:
        """Close pooled connections (the store stays usable; it reconnects on demand)."""
        self.engine.dispose()

    # --- plumbing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as e:
            log.warning("%s: %s failed: %s", self.url, what, e)
            reason = _first_line(e)
            if "locked" in reason or "busy" in reason:
                raise StoreUnavailable(
                    f"The session database {self.url} is busy ({reason}); try again in a moment."
                ) from e
            # No reconnect needed by the caller: the pool checks each connection before use
            # (pool_pre_ping), so the first call after the server is back works.
            raise StoreUnavailable(
                f"The session database is unreachable ({self.url}: {reason}); check that it is "
                "running and reachable (anycode reconnects by itself once it is)."
            ) from e

    @contextlib.contextmanager
    def _write(self) -> Iterator["sa.Connection"]:
        # engine.begin(): BEGIN IMMEDIATE on SQLite (see _make_engine), plain BEGIN elsewhere.
        with self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator["sa.Connection"]:
        with self.engine.connect() as conn:
            conn.execution_options(anycode_read=True)  # SQLite: deferred BEGIN, readers don't queue
            with conn.begin():
                yield conn

    def _where(self, key: SessionKey) -> Any:
        s = self._t.sessions.c
        return sa.and_(s.project_key == key.project_key, s.session_id == key.session_id, s.subpath == (key.subpath or ""))

    def _lock_row(self, conn: "sa.Connection", key: SessionKey) -> Any:
        # FOR UPDATE is what serialises appends per session on PostgreSQL; SQLite ignores it
        # (its BEGIN IMMEDIATE already holds the database write lock).
        return conn.execute(sa.select(self._t.sessions).where(self._where(key)).with_for_update()).first()

    def _create_row(self, conn: "sa.Connection", key: SessionKey) -> Any:
        s = self._t.sessions
        archived = False
        if key.subpath is not None:
            # A sub-agent record added to an archived session is archived with it.
            archived = bool(conn.execute(sa.select(s.c.archived).where(self._where(key.parent))).scalar() or False)
        now = time.time()
        values = dict(
            project_key=key.project_key, session_id=key.session_id, subpath=key.subpath or "",
            created_at=now, updated_at=now, message_count=0, entry_count=0, archived=archived,
            state=json.dumps(SessionState().to_dict()),
        )
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        # Two processes creating one session: one inserts, the other waits on the unique key
        # and then does nothing; both then lock the same row.
        conn.execute(insert(s).values(**values).on_conflict_do_nothing())
        return self._lock_row(conn, key)

    # --- writes -----------------------------------------------------------------------------

    def append(self, key: SessionKey, entries: list[dict[str, Any]], *, expected_count: int | None = None,
               expected_version: str | None = None) -> int:
        """Append ``entries`` in one transaction; return the session's message count afterwards.

        Raises ``ValueError`` (an entry is not a JSON-serialisable dict; nothing written),
        :class:`SessionConflict` (stored message count != ``expected_count``; nothing written),
        :class:`StaleChange` (the version in use, read under the row lock, is not
        ``expected_version``; nothing written),
        :class:`SessionNotFound` (a missing main session and the first entry is not a header),
        :class:`StoreUnavailable` (database unreachable or locked for over 30 s)."""
        encoded = [encode_entry(e) for e in entries]  # fail before touching the database
        with self._errors("append"), self._write() as conn:
            return self._append_locked(conn, key, encoded, expected_count=expected_count,
                                       expected_version=expected_version)[0]

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        """Create the record ``key`` with exactly ``entries`` in one transaction (whole or absent:
        readers never see an uncommitted row); return its message count.

        Raises ``ValueError`` (see :func:`core.session.store.check_new_record`),
        :class:`SessionExists` (the record exists, archived or not; nothing written),
        :class:`StoreUnavailable`."""
        check_new_record(key, entries)
        encoded = [encode_entry(e) for e in entries]
        with self._errors("create"), self._write() as conn:
            return self._append_locked(conn, key, encoded, new=True)[0]

    def append_at(self, key: SessionKey, entries: list[dict[str, Any]], first_seq: int) -> int:
        """Idempotent positioned append (used by mirroring): ``entries[i]`` is the session's entry
        number ``first_seq + i`` (0-based). Entries the store already has are skipped when they
        are the same (the same JSON text), so delivering the same range twice changes nothing.
        Returns the entry count afterwards.

        Raises :class:`SessionConflict` (``expected`` = ``first_seq``, ``actual`` = stored entry
        count), with nothing written, when ``first_seq`` is beyond the stored entries (a gap) or
        an entry it would skip differs from the stored one (another writer appended there: the
        rest would land out of order; issue 25), ``ValueError`` for a bad entry,
        :class:`StoreUnavailable`."""
        encoded = [encode_entry(e) for e in entries]
        with self._errors("append"), self._write() as conn:
            return self._append_locked(conn, key, encoded, first_seq=first_seq)[1]

    def _append_locked(
        self, conn: "sa.Connection", key: SessionKey, encoded: list[tuple[str, dict[str, Any]]], *,
        expected_count: int | None = None, first_seq: int | None = None, new: bool = False,
        expected_version: str | None = None,
    ) -> tuple[int, int]:
        row = self._lock_row(conn, key)
        if new and row is not None:
            raise SessionExists(f"The session {key} already exists; nothing was written.")
        if row is None and encoded:
            if key.subpath is None and encoded[0][1].get("type") != "header":
                # Only a header starts a session (the protocol's rule): a message for a session
                # deleted meanwhile must not bring it back headless.
                raise SessionNotFound(str(key))
            row = self._create_row(conn, key)
            if new and row.entry_count:
                # Another creator of the same key committed first while we waited on its row.
                raise SessionExists(f"The session {key} already exists; nothing was written.")
        before = row.message_count if row is not None else 0
        have = row.entry_count if row is not None else 0
        if expected_count is not None and before != expected_count:
            raise SessionConflict(expected_count, before)
        if expected_version is not None:
            check_version(key, expected_version, row.current_version if row is not None else None)
        if first_seq is not None:
            if first_seq > have:
                raise SessionConflict(first_seq, have)
            overlap = encoded[:have - first_seq]
            if overlap:
                e = self._t.entries.c
                stored = conn.execute(sa.select(e.data).where(
                    e.session_pk == row.pk, e.seq >= first_seq, e.seq < first_seq + len(overlap)
                ).order_by(e.seq)).scalars().all()
                if list(stored) != [data for data, _ in overlap]:
                    raise SessionConflict(first_seq, have)
            encoded = encoded[have - first_seq:]
        if not encoded:
            return before, have
        state = SessionState.from_dict(json.loads(row.state))
        for _, entry in encoded:
            state.feed(entry)
        now = time.time()
        conn.execute(
            self._t.entries.insert(),
            [{"session_pk": row.pk, "seq": have + i, "data": data} for i, (data, _) in enumerate(encoded)],
        )
        # A record without header or timestamps falls back to its first/last write time, as the
        # JSONL store falls back to the file's mtime.
        created = state.created_at if state.created_at is not None else row.created_at
        conn.execute(
            self._t.sessions.update().where(self._t.sessions.c.pk == row.pk).values(
                title=state.title, title_source=state.title_source, created_at=created,
                updated_at=state.updated_at(default=now), message_count=state.message_count,
                entry_count=have + len(encoded), cwd=state.cwd,
                forked_from=json.dumps(state.forked_from) if state.forked_from is not None else None,
                version_of=json.dumps(state.version_of) if state.version_of is not None else None,
                current_version=state.current, state=json.dumps(state.to_dict()),
                pinned=state.pinned, tags=json.dumps(list(state.tags)) if state.tags else None,
            )
        )
        return state.message_count, have + len(encoded)

    # --- reads ------------------------------------------------------------------------------

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """Every entry in sequence order (archived sessions too), or None when missing. A row
        that does not parse (edited by hand) is skipped with a warning."""
        s, e = self._t.sessions, self._t.entries
        # One statement, so a concurrent remove or append is seen entirely or not at all. A
        # record always has at least one entry (rows are created by a non-empty append).
        q = sa.select(e.c.seq, e.c.data).join(s, s.c.pk == e.c.session_pk).where(self._where(key)).order_by(e.c.seq)
        with self._errors("load"), self._read() as conn:
            rows = conn.execute(q).all()
        if not rows:
            return None
        out = []
        for seq, data in rows:
            try:
                value = json.loads(data)
            except ValueError as err:
                log.warning("%s: %s entry %d is damaged (%s); skipped", self.url, key, seq, err)
                continue
            if isinstance(value, dict):
                out.append(value)
            else:
                log.warning("%s: %s entry %d is not a JSON object; skipped", self.url, key, seq)
        return out

    def exists(self, key: SessionKey) -> bool:
        """True when the session or sub-agent record exists (archived or not)."""
        s = self._t.sessions
        with self._errors("exists"), self._read() as conn:
            return conn.execute(sa.select(s.c.pk).where(self._where(key))).first() is not None

    def entry_count(self, key: SessionKey) -> int | None:
        """How many entries the record holds (its next sequence number), or None when missing."""
        s = self._t.sessions
        with self._errors("entry_count"), self._read() as conn:
            return conn.execute(sa.select(s.c.entry_count).where(self._where(key))).scalar()

    # --- checkpoint blobs (core.stores.blobs: what a mirror carries to other machines) -------

    def has_blob(self, name: str) -> bool:
        """Whether the blob ``name`` (SHA-256 hex) is stored here."""
        b = self._t.blobs
        with self._errors("has_blob"), self._read() as conn:
            return conn.execute(sa.select(b.c.name).where(b.c.name == name)).first() is not None

    def get_blob(self, name: str) -> bytes | None:
        """The blob's stored (zlib-compressed) bytes, or None."""
        b = self._t.blobs
        with self._errors("get_blob"), self._read() as conn:
            row = conn.execute(sa.select(b.c.data).where(b.c.name == name)).first()
        return bytes(row[0]) if row is not None else None

    def put_blob(self, name: str, packed: bytes) -> None:
        """Store the blob ``name`` (its zlib-compressed bytes) unless it is here already (two
        writers of one blob both succeed: the bytes are the same)."""
        b = self._t.blobs
        try:
            with self._errors("put_blob"), self._write() as conn:
                if conn.execute(sa.select(b.c.name).where(b.c.name == name)).first() is None:
                    conn.execute(b.insert().values(name=name, data=packed))
        except sa_exc.IntegrityError:
            pass  # written meanwhile by another writer

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """Main sessions of the project (or its archived ones), most recent activity first
        (ties: newer created, then higher id). One indexed query over the session rows."""
        _check_project_key(project_key)
        s = self._t.sessions.c
        q = (
            sa.select(s.session_id, s.title, s.title_source, s.created_at, s.updated_at, s.message_count,
                      s.forked_from, s.cwd, s.version_of, s.current_version, s.pinned, s.tags)
            .where(s.project_key == project_key, s.subpath == "", s.archived == bool(archived))
            .order_by(s.updated_at.desc(), s.created_at.desc(), s.session_id.desc())
        )
        with self._errors("list"), self._read() as conn:
            rows = conn.execute(q).all()
        return [
            SessionMeta(
                id=r.session_id, project_key=project_key, title=r.title, created_at=r.created_at,
                updated_at=r.updated_at, message_count=r.message_count, archived=bool(archived),
                forked_from=json.loads(r.forked_from) if r.forked_from else None, cwd=r.cwd,
                title_source=r.title_source,
                version_of=json.loads(r.version_of) if r.version_of else None, current_version=r.current_version,
                pinned=r.pinned, tags=tuple(json.loads(r.tags)) if r.tags else (),
            )
            for r in rows
        ]

    def project_keys(self) -> list[str]:
        """Every project key with a main session (one indexed query, no row's state read)."""
        s = self._t.sessions.c
        with self._errors("project_keys"), self._read() as conn:
            return [r[0] for r in conn.execute(sa.select(s.project_key).where(s.subpath == "").distinct())]

    def project_identity(self, project_key: str) -> str | None:
        """The git identity in the folded state of the project's newest sessions, or None."""
        s = self._t.sessions.c
        q = (sa.select(s.state).where(s.project_key == project_key, s.subpath == "")
             .order_by(s.updated_at.desc()).limit(5))
        with self._errors("project_identity"), self._read() as conn:
            rows = conn.execute(q).all()
        for (raw,) in rows:
            try:
                ident = json.loads(raw).get("identity")
            except (ValueError, AttributeError):
                continue
            if isinstance(ident, str) and ident:
                return ident
        return None

    def list_projects(self) -> list[ProjectInfo]:
        """Projects with at least one main session, most recently active first. ``cwd`` and
        ``updated_at`` come from the main list, or from the archive when the main list is empty
        (as in the JSONL store); ``session_count`` counts unarchived sessions."""
        s = self._t.sessions.c
        q = (
            sa.select(s.project_key, s.archived, s.updated_at, s.cwd)
            .where(s.subpath == "")
            .order_by(s.project_key, s.updated_at.desc(), s.created_at.desc(), s.session_id.desc())
        )
        with self._errors("list_projects"), self._read() as conn:
            rows = conn.execute(q).all()
        groups: dict[str, dict[bool, list[Any]]] = {}
        for r in rows:
            groups.setdefault(r.project_key, {False: [], True: []})[bool(r.archived)].append(r)
        out = []
        for pk, by in groups.items():
            metas = by[False] or by[True]
            cwd = next((m.cwd for m in metas if m.cwd), None)
            out.append(ProjectInfo(pk, cwd, len(by[False]), max(m.updated_at for m in metas)))
        out.sort(key=lambda p: p.updated_at, reverse=True)
        return out

    def memory_log(self) -> MemoryLog:
        """A new :class:`~core.stores.memory_log.SqlMemoryLog` in the same database (table
        ``anycode_memory``). :class:`core.storage.Storage` keeps one per storage."""
        from core.stores.memory_log import SqlMemoryLog

        return SqlMemoryLog(self)

    def describe(self) -> str:
        """The database URL as opened (password hidden; a relative SQLite path resolved)."""
        return self.url

    def leases(self) -> LeaseBoard:
        """A new :class:`~core.stores.leases.SqlLeases`: reply leases in the ``anycode_leases``
        table, seen by every process and machine on this database."""
        from core.stores.leases import SqlLeases

        return SqlLeases(self)

    def list_token(self, project_key: str) -> str:
        """A short text that changes whenever the project's list could (issue 25, the live list):
        one indexed aggregate over the project's session rows (how many, archived how many, the
        sum of their entry counts — every create, append, rename, archive and delete moves one)."""
        s = self._t.sessions.c
        q = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(s.entry_count), 0),
                      sa.func.coalesce(sa.func.sum(sa.case((s.archived, 1), else_=0)), 0),
                      sa.func.coalesce(sa.func.max(s.updated_at), 0)).where(
            s.project_key == project_key, s.subpath == "")
        with self._errors("list_token"), self._read() as conn:
            n, entries, archived, latest = conn.execute(q).one()
        return f"{n}:{entries}:{archived}:{latest}"

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """The subpaths of the session's sub-agent records (sorted; archived or not)."""
        s = self._t.sessions.c
        q = sa.select(s.subpath).where(
            s.project_key == key.project_key, s.session_id == key.session_id, s.subpath != ""
        ).order_by(s.subpath)
        with self._errors("list_subpaths"), self._read() as conn:
            return list(conn.execute(q).scalars())

    # --- lifecycle --------------------------------------------------------------------------

    def _lock_session(self, conn: "sa.Connection", key: SessionKey) -> list[Any]:
        s = self._t.sessions
        # Every row of the session, locked in pk order, so two removes/archives cannot deadlock.
        q = sa.select(s.c.pk, s.c.subpath).where(s.c.project_key == key.project_key, s.c.session_id == key.session_id)
        return conn.execute(q.order_by(s.c.pk).with_for_update()).all()

    def remove(self, key: SessionKey) -> None:
        """Delete the session with its sub-agent records, or one sub-agent record.
        Raises :class:`SessionNotFound`, :class:`StoreUnavailable`."""
        s, e = self._t.sessions, self._t.entries
        with self._errors("remove"), self._write() as conn:
            rows = self._lock_session(conn, key)
            if key.subpath is not None:
                rows = [r for r in rows if r.subpath == key.subpath]
            if not rows:
                raise SessionNotFound(str(key))
            pks = [r.pk for r in rows]
            # Explicit, not ON DELETE CASCADE: SQLite enforces foreign keys only when asked to.
            conn.execute(e.delete().where(e.c.session_pk.in_(pks)))
            conn.execute(s.delete().where(s.c.pk.in_(pks)))

    def archive(self, key: SessionKey) -> None:
        """Move the session and its sub-agent records out of the main list. Idempotent."""
        self._set_archived(key.parent, True)

    def unarchive(self, key: SessionKey) -> None:
        """Bring an archived session (and its sub-agent records) back. Idempotent."""
        self._set_archived(key.parent, False)

    def _set_archived(self, key: SessionKey, archived: bool) -> None:
        s = self._t.sessions
        with self._errors("archive"), self._write() as conn:
            rows = self._lock_session(conn, key)
            if not rows:
                raise SessionNotFound(str(key))
            conn.execute(s.update().where(s.c.pk.in_([r.pk for r in rows])).values(archived=archived))


def _first_line(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]


def _make_engine(url: str, fsync: bool) -> "sa.Engine":
    try:
        u = make_url(url)
    except sa_exc.ArgumentError as e:
        raise StoreUnavailable(f"{url!r} is not a database URL (expected sqlite:///PATH or postgresql+psycopg://…).") from e
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")  # we ship psycopg 3, not SQLAlchemy's psycopg2 default
    backend = u.get_backend_name()
    try:
        if backend == "sqlite":
            engine = _sqlite_engine(u, fsync)
        elif backend == "postgresql":
            engine = sa.create_engine(u, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT})
        else:
            raise StoreUnavailable(f"Unsupported session database {backend!r}: use sqlite:///PATH or postgresql+psycopg://….")
    except (ImportError, sa_exc.NoSuchModuleError) as e:
        raise StoreUnavailable(f"The database driver for {u.drivername} is not installed ({e}); " + _INSTALL_HINT) from e
    return engine


def _sqlite_engine(u: Any, fsync: bool) -> "sa.Engine":
    path = u.database
    kwargs: dict[str, Any] = {"connect_args": {"timeout": BUSY_TIMEOUT}}
    if path and path != ":memory:" and not path.startswith("file:"):
        p = Path(path).expanduser()
        p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not p.exists():
            # Conversations are private: create the file 0600 before SQLite creates it 0644.
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
        u = u.set(database=str(p))
    else:
        from sqlalchemy.pool import StaticPool

        # One shared connection, or each connection would see its own empty in-memory database.
        kwargs = {"connect_args": {"check_same_thread": False}, "poolclass": StaticPool}
    engine = sa.create_engine(u, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is deferred).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer, nor it them
        cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock at BEGIN, so two appenders queue on busy_timeout instead
        # of both reading a count and one failing to upgrade its lock (SQLITE_BUSY mid-transaction).
        read = conn.get_execution_options().get("anycode_read", False)
        conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

    return engine
