"""The SQL store's tables and their ordered, recorded migrations (SQLAlchemy 2 Core).

Tables (names prefixed ``anycode_`` so the store can share a database with other software):

- ``anycode_schema_version(version PK, description, applied_at)``: one row per applied migration.
- ``anycode_sessions``: one row per session record (a main session, ``subpath = ''``, or one
  sub-agent record), holding the folded metadata ``list()`` shows, so listing never reads entries.
  ``entry_count`` is the next entry sequence number; ``state`` is the JSON of
  :class:`core.session.entries.SessionState` so each append folds only its new entries.
- ``anycode_memory(pk, scope, eid, data)``: the memory logs (:mod:`core.stores.memory_log`), one
  entry per row as JSON text, unique on ``(scope, eid)`` so a copied entry is never doubled.
- ``anycode_leases(project_key, session_id, holder, pid, host, expires_at)``: reply leases
  (:mod:`core.stores.leases`), one row per session with a reply being written (or lately written).
- ``anycode_blobs(name PK, data)``: checkpoint blobs (:mod:`core.stores.blobs`) a mirror carries to
  other machines (migration 6): the SHA-256 hex name and the zlib-compressed bytes.
- ``anycode_entries(session_pk, seq, data)``: one entry per row as JSON text, exactly as encoded
  (JSON text, not JSONB, so keys keep their order and ``load`` returns what was appended).

Migrations run on open, in order, each in the same transaction as the row recording it, under a
lock (PostgreSQL advisory lock; SQLite ``BEGIN IMMEDIATE``), so two processes opening a new
database at once apply each migration exactly once. A database newer than this code is refused.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    select,
    text,
)
from sqlalchemy.schema import CreateTable

from core.errors import StoreUnavailable

log = logging.getLogger(__name__)

metadata = MetaData()

schema_version = Table(
    "anycode_schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", Text, nullable=False),
    Column("applied_at", Float, nullable=False),  # Unix seconds
)

sessions = Table(
    "anycode_sessions",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),
    Column("project_key", String(200), nullable=False),
    Column("session_id", String(200), nullable=False),
    # '' for the main session: NULLs are never equal in a UNIQUE constraint, '' is.
    Column("subpath", String(1000), nullable=False, default=""),
    Column("title", Text),
    Column("title_source", String(16)),
    Column("created_at", Float, nullable=False),  # Unix seconds
    Column("updated_at", Float, nullable=False),  # Unix seconds
    Column("message_count", Integer, nullable=False, default=0),
    Column("entry_count", Integer, nullable=False, default=0),
    Column("cwd", Text),
    Column("forked_from", Text),  # JSON object or NULL
    Column("archived", Boolean, nullable=False, default=False),
    Column("state", Text, nullable=False),  # JSON of SessionState
    # Added by migration 4 (version families): the header's version_of (JSON object or NULL) and
    # a family root's last version entry (a session id or NULL).
    Column("version_of", Text),
    Column("current_version", String(200)),
    # Added by migration 7 (issue 31): when the conversation was pinned (Unix seconds; NULL: not
    # pinned) and its tags (a JSON list; NULL: none), folded from its pin and tags entries.
    Column("pinned", Float),
    Column("tags", Text),
    UniqueConstraint("project_key", "session_id", "subpath", name="anycode_sessions_key"),
)

entries = Table(
    "anycode_entries",
    metadata,
    Column("session_pk", Integer, ForeignKey("anycode_sessions.pk", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("data", Text, nullable=False),
)

memory = Table(
    "anycode_memory",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=True),  # append order
    Column("scope", String(300), nullable=False),  # "user" | "project:<project_key>"
    Column("eid", String(64), nullable=False),
    Column("data", Text, nullable=False),
    UniqueConstraint("scope", "eid", name="anycode_memory_entry"),
)

# Reply leases (core.stores.leases, migration 5): "a reply is being written in this session".
leases = Table(
    "anycode_leases",
    metadata,
    Column("project_key", String(200), primary_key=True),
    Column("session_id", String(200), primary_key=True),
    Column("holder", String(64), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("expires_at", Float, nullable=False),  # Unix seconds
)

# Checkpoint blobs (core.stores.blobs, migration 6): carried by a database mirror to other machines.
blobs = Table(
    "anycode_blobs",
    metadata,
    Column("name", String(64), primary_key=True),  # SHA-256 hex of the bytes
    Column("data", LargeBinary, nullable=False),  # zlib-compressed bytes
)

# The index list() uses: equality on the first three columns, then already in display order.
list_index = Index(
    "anycode_sessions_list", sessions.c.project_key, sessions.c.subpath, sessions.c.archived, sessions.c.updated_at
)


_V4_COLUMNS = ("version_of", "current_version")
_V7_COLUMNS = ("pinned", "tags")


def _v1(conn: Connection) -> None:
    # CreateTable (not Table.create / metadata.create_all): tables only, without the indexes
    # and columns later migrations add, so what v1 did never changes as the schema grows.
    v1_sessions = Table("anycode_sessions", MetaData(),
                        *[c._copy() for c in sessions.columns if c.name not in _V4_COLUMNS + _V7_COLUMNS],
                        UniqueConstraint("project_key", "session_id", "subpath", name="anycode_sessions_key"))
    conn.execute(CreateTable(v1_sessions))
    conn.execute(CreateTable(entries))


def _v2(conn: Connection) -> None:
    list_index.create(conn)


def _v3(conn: Connection) -> None:
    conn.execute(CreateTable(memory))


def _v4(conn: Connection) -> None:
    # Sessions written before versions existed have no family data: NULL is their true value.
    for name, kind in (("version_of", "TEXT"), ("current_version", "VARCHAR(200)")):
        conn.execute(text(f"ALTER TABLE anycode_sessions ADD COLUMN {name} {kind}"))


def _v5(conn: Connection) -> None:
    conn.execute(CreateTable(leases))


def _v6(conn: Connection) -> None:
    conn.execute(CreateTable(blobs))


def _v7(conn: Connection) -> None:
    # Sessions written before pins and tags existed have neither: NULL is their true value.
    for name, kind in (("pinned", "DOUBLE PRECISION" if conn.dialect.name == "postgresql" else "REAL"),
                       ("tags", "TEXT")):
        conn.execute(text(f"ALTER TABLE anycode_sessions ADD COLUMN {name} {kind}"))


# Ordered and append-only: never edit a released step, add a new one.
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "sessions and entries tables", _v1),
    (2, "index for list(): project, subpath, archived, updated_at", _v2),
    (3, "memory logs (add/update/remove entries per scope)", _v3),
    (4, "version families: version_of and current_version on sessions", _v4),
    (5, "reply leases (a reply is being written in a session)", _v5),
    (6, "checkpoint blobs (the file bytes checkpoints name, carried to other machines)", _v6),
    (7, "pins and tags: pinned and tags on sessions", _v7),
]
LATEST = MIGRATIONS[-1][0]
_PG_LOCK_ID = 0x616E79636F6465  # "anycode": serialises migrations across processes


def current_version(conn: Connection) -> int:
    """The highest applied migration (0 for an empty database)."""
    if not conn.dialect.has_table(conn, schema_version.name):
        return 0
    return int(conn.execute(select(schema_version.c.version).order_by(schema_version.c.version.desc())).scalar() or 0)


def upgrade(conn: Connection) -> list[int]:
    """Apply the missing migrations inside the caller's (write) transaction; return their versions.

    Raises :class:`StoreUnavailable` when the database was written by a newer anycode."""
    if conn.dialect.name == "postgresql":
        # Released at commit; concurrent openers wait, then see the migrations already applied.
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_ID})
    schema_version.create(conn, checkfirst=True)
    have = current_version(conn)
    if have > LATEST:
        raise StoreUnavailable(
            f"The session database is at schema version {have}, newer than this anycode "
            f"understands ({LATEST}); upgrade anycode."
        )
    applied = []
    for version, description, step in MIGRATIONS:
        if version <= have:
            continue
        log.info("applying session database migration %d: %s", version, description)
        step(conn)
        conn.execute(schema_version.insert().values(version=version, description=description, applied_at=time.time()))
        applied.append(version)
    return applied
