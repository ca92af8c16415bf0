"""Full-text index of the SQL store, inside the store's own database, with its own text search.

Tables (a cache outside the store's migrations: created when first needed, dropping them only
costs a rebuild):

- ``anycode_search_state(session_pk PK, session_id, subpath, entry_count, message_count)``: how far
  each session row (main session or sub-agent record) of ``anycode_sessions`` is indexed.
- SQLite: ``anycode_search_docs`` + the FTS5 table ``anycode_search_fts`` (trigram tokenizer) of
  :mod:`core.search.fts`. PostgreSQL: ``anycode_search_docs`` with a ``pg_trgm`` GIN index on
  ``COALESCE(fold, text)``, searched with ``ILIKE`` (substrings, Chinese and identifiers
  included); without the ``pg_trgm`` extension the same query scans. In both, ``fold`` holds the
  folded text of a document that is not plain ASCII (:func:`core.session.fold.fold`: accents,
  width and case), and the terms are folded the same way.

Tables from before ``fold`` are brought up to date when first opened: SQLite's in place
(:meth:`core.search.fts.FtsTables.upgrade`, from the text they hold); PostgreSQL's are dropped and
built again from the sessions (a cache: the next search re-reads them, under the index lock).

As for the JSONL store the index is brought up to date at query time: rows whose ``entry_count``
moved past the indexed one have only their new entries indexed; rows that vanished (deleted
sessions) lose their documents; a row whose id changed (a reused primary key) is re-read. Each
session's update is one transaction, so a crash leaves it as it was, redone on the next query.

Titles and tags are not documents: every search reads them from ``anycode_sessions`` (the store
keeps its ``title`` and ``tags`` columns folded on every append, migration 7 added ``tags``), so a
tag added or removed is found, or no longer found, by the very next search, with nothing to
re-index, and a database from before tags needs no step of its own.
"""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from core.search.fts import FtsTables, has_trigram
from core.search.text import Scope, SearchHit, collect_hits, entry_documents, like_pattern, parse_query
from core.session.fold import fold, needs_fold

if TYPE_CHECKING:
    from core.stores.sql_store import SqlSessionStore

log = logging.getLogger(__name__)

PREFIX = "anycode_search_"
_PG_LOCK_ID = 0x616E7973726368  # "anysrch": serialises index updates across processes
MAX_ROWS = 2000  # PostgreSQL: candidate sessions considered per query


class SqlSearchIndex:
    """Search over a :class:`~core.stores.sql_store.SqlSessionStore` (see the module docstring).

    Raises :class:`~core.errors.StoreUnavailable` (from the store's error mapping) when the
    database cannot be reached."""

    def __init__(self, store: SqlSessionStore):
        self.store = store
        self.dialect = store.dialect
        self._ready = False
        self._tables = FtsTables(PREFIX)
        self._trgm = False

    def __repr__(self) -> str:
        return f"SqlSearchIndex({self.store.url!r})"

    # --- tables -------------------------------------------------------------------------------

    def _ensure(self) -> None:
        if self._ready:
            return
        import sqlalchemy as sa

        with self.store._errors("search"), self.store.engine.begin() as conn:
            if self.dialect == "sqlite":
                raw = conn.connection.driver_connection
                self._tables = FtsTables(PREFIX, use_fts=has_trigram(raw))
                cols = [r[1] for r in raw.execute(f"PRAGMA table_info({PREFIX}docs)")]
                if "owner" in cols:  # the first layout (owner column, triggers): rebuilt
                    self._tables.drop(raw)
                    raw.execute(f"DROP TABLE IF EXISTS {PREFIX}state")
                elif cols and "fold" not in cols:  # before folded text: upgraded in place
                    log.info("%s: folding the search index's text in place", self.store.url)
                    self._tables.upgrade(raw)
                raw.execute(f"CREATE TABLE IF NOT EXISTS {PREFIX}state(session_pk INTEGER PRIMARY KEY, "
                            "session_id TEXT NOT NULL, subpath TEXT NOT NULL, entry_count INTEGER NOT NULL, "
                            "message_count INTEGER NOT NULL)")
                self._tables.create(raw)
            else:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_ID})
                cols = set(conn.execute(sa.text(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = :t"), {"t": f"{PREFIX}docs"}).scalars())
                if cols and "fold" not in cols:
                    # Before folded text: dropped, and built again from the sessions by the next update.
                    log.info("%s: rebuilding the search index with folded text", self.store.url)
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {PREFIX}docs"))
                    conn.execute(sa.text(f"DROP TABLE IF EXISTS {PREFIX}state"))
                conn.execute(sa.text(
                    f"CREATE TABLE IF NOT EXISTS {PREFIX}state(session_pk INTEGER PRIMARY KEY, "
                    "session_id TEXT NOT NULL, subpath TEXT NOT NULL, entry_count INTEGER NOT NULL, "
                    "message_count INTEGER NOT NULL)"))
                conn.execute(sa.text(
                    f"CREATE TABLE IF NOT EXISTS {PREFIX}docs(id BIGSERIAL PRIMARY KEY, owner INTEGER NOT NULL, "
                    "idx INTEGER, ts DOUBLE PRECISION, role TEXT, text TEXT NOT NULL, fold TEXT)"))
                conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {PREFIX}docs_owner ON {PREFIX}docs(owner)"))
        if self.dialect == "postgresql":
            self._trgm = self._pg_trgm()
        self._ready = True

    def _pg_trgm(self) -> bool:
        import sqlalchemy as sa

        try:
            with self.store.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_ID})
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
                conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {PREFIX}docs_fold_trgm ON {PREFIX}docs "
                                     "USING gin ((COALESCE(fold, text)) gin_trgm_ops)"))
            return True
        except Exception as exc:  # no such extension, or no right to create it: search scans instead
            log.warning("%s: pg_trgm is not available (%s); search scans the text", self.store.url,
                        str(exc).splitlines()[0])
            return False

    # --- bringing the index up to date ------------------------------------------------------

    def update(self, project_keys: list[str] | None = None) -> int:
        """Bring the index up to date for ``project_keys`` (None: all); return how many session
        rows were (re-)read. Every search calls it first."""
        self._ensure()
        import sqlalchemy as sa

        scope, params = "", {}
        if project_keys is not None:
            if not project_keys:
                return 0
            scope, params = " WHERE s.project_key IN :pks", {"pks": list(project_keys)}
        q = sa.text(
            "SELECT s.pk, s.session_id, s.subpath, s.entry_count, st.entry_count, st.session_id, st.subpath "
            f"FROM anycode_sessions s LEFT JOIN {PREFIX}state st ON st.session_pk = s.pk{scope}"
        )
        if params:
            q = q.bindparams(sa.bindparam("pks", expanding=True))
        with self.store._errors("search"), self.store._read() as conn:
            rows = conn.execute(q, params).all()
            gone = conn.execute(sa.text(
                f"SELECT session_pk FROM {PREFIX}state WHERE session_pk NOT IN (SELECT pk FROM anycode_sessions)"
            )).scalars().all()
        todo = [r for r in rows if r[4] is None or r[4] != r[3] or (r[5], r[6]) != (r[1], r[2])]
        for pk in gone:
            with self.store._errors("search"), self._write() as conn:
                self._drop(conn, pk)
        for r in todo:
            with self.store._errors("search"), self._write() as conn:
                self._index_row(conn, r[0])
        return len(todo)

    def _write(self) -> Any:
        import contextlib

        @contextlib.contextmanager
        def cm() -> Any:
            import sqlalchemy as sa

            with self.store.engine.begin() as conn:  # BEGIN IMMEDIATE on SQLite
                if self.dialect == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_ID})
                yield conn

        return cm()

    def _drop(self, conn: Any, pk: int) -> None:
        import sqlalchemy as sa

        if self.dialect == "sqlite":
            self._tables.delete_owner(conn.connection.driver_connection, pk)
        else:
            conn.execute(sa.text(f"DELETE FROM {PREFIX}docs WHERE owner = :pk"), {"pk": pk})
        conn.execute(sa.text(f"DELETE FROM {PREFIX}state WHERE session_pk = :pk"), {"pk": pk})

    def _index_row(self, conn: Any, pk: int) -> None:
        """Index the new entries of session row ``pk`` (all of them when the row is new or reused),
        inside the caller's transaction, re-reading both rows so a concurrent update is not doubled."""
        import sqlalchemy as sa

        row = conn.execute(sa.text("SELECT session_id, subpath, entry_count FROM anycode_sessions WHERE pk = :pk"),
                           {"pk": pk}).first()
        st = conn.execute(sa.text(f"SELECT session_id, subpath, entry_count, message_count FROM {PREFIX}state "
                                  "WHERE session_pk = :pk"), {"pk": pk}).first()
        if row is None:
            if st is not None:
                self._drop(conn, pk)
            return
        start, messages = 0, 0
        if st is not None and (st[0], st[1]) == (row[0], row[1]) and st[2] <= row[2]:
            if st[2] == row[2]:
                return
            start, messages = st[2], st[3]
        elif st is not None:
            self._drop(conn, pk)
        data = conn.execute(sa.text("SELECT data FROM anycode_entries WHERE session_pk = :pk AND seq >= :a "
                                    "AND seq < :b ORDER BY seq"), {"pk": pk, "a": start, "b": row[2]}).scalars().all()
        entries = []
        for text in data:
            try:
                value = json.loads(text)
            except ValueError:
                continue  # a damaged row: the store's load() warns about it
            entries.append(value)
        docs = []
        for messages, doc in entry_documents(entries, messages):
            if doc is not None:
                docs.append(doc)
        if self.dialect == "sqlite":
            self._tables.add(conn.connection.driver_connection, pk, docs)
        elif docs:
            conn.execute(sa.text(f"INSERT INTO {PREFIX}docs(owner, idx, ts, role, text, fold) "
                                 "VALUES (:o, :i, :ts, :r, :t, :f)"),
                         [{"o": pk, "i": d.idx, "ts": d.ts, "r": d.role, "t": d.text,
                           "f": fold(d.text) if needs_fold(d.text) else None} for d in docs])
        params = {"pk": pk, "sid": row[0], "sub": row[1], "n": row[2], "m": messages}
        if st is None or start == 0:
            conn.execute(sa.text(f"DELETE FROM {PREFIX}state WHERE session_pk = :pk"), {"pk": pk})
            conn.execute(sa.text(f"INSERT INTO {PREFIX}state(session_pk, session_id, subpath, entry_count, "
                                 "message_count) VALUES (:pk, :sid, :sub, :n, :m)"), params)
        else:
            conn.execute(sa.text(f"UPDATE {PREFIX}state SET entry_count = :n, message_count = :m "
                                 "WHERE session_pk = :pk"), params)

    # --- queries ----------------------------------------------------------------------------

    def search(self, query: str, *, project_keys: list[str] | None = None, archived: bool = False,
               limit: int = 50) -> list[SearchHit]:
        """As :meth:`core.search.jsonl_index.JsonlSearchIndex.search`."""
        terms = parse_query(query)
        if not terms:
            return []
        limit = max(1, int(limit))
        self.update(project_keys)
        import sqlalchemy as sa

        where = "1=1"
        params: dict[str, Any] = {}
        if project_keys is not None:
            if not project_keys:
                return []
            where += " AND s.project_key IN :pks"
            params["pks"] = list(project_keys)
        if not archived:
            where += " AND s.archived = :f"
            params["f"] = False

        def bound(sql: str) -> Any:
            q = sa.text(sql)
            return q.bindparams(sa.bindparam("pks", expanding=True)) if "pks" in params else q

        with self.store._errors("search"), self.store._read() as conn:
            sessions = conn.execute(bound(
                "SELECT s.pk, s.project_key, s.session_id, s.subpath, s.archived, s.title, s.created_at, "
                f"s.updated_at, s.tags FROM anycode_sessions s WHERE {where}"), params).all()
            found = self._candidates(conn, terms, where, params, bound, limit, {r[0] for r in sessions})
            docs = self._fetch(conn, list(found.values()))
        return collect_hits(Scope(sessions), found, docs, terms, limit)

    def _candidates(self, conn: Any, terms: list[str], where: str, params: dict[str, Any], bound: Any,
                    limit: int, allowed: set[int]) -> dict[int, int]:
        if self.dialect == "sqlite":
            return self._tables.candidates(conn.connection.driver_connection, terms, allowed, limit)
        conds = []
        p = dict(params)
        for i, t in enumerate(dict.fromkeys(fold(t) for t in terms)):
            conds.append(f"COALESCE(d.fold, d.text) ILIKE :t{i}")
            p[f"t{i}"] = like_pattern(t)
        sql = (f"SELECT d.owner, max(d.id) AS top FROM {PREFIX}docs d JOIN anycode_sessions s ON s.pk = d.owner "
               f"WHERE {where} AND {' AND '.join(conds)} GROUP BY d.owner ORDER BY top DESC LIMIT {MAX_ROWS}")
        found: dict[int, int] = {}
        for owner, top in conn.execute(bound(sql), p):
            found[owner] = top
        return found

    def _fetch(self, conn: Any, ids: list[int]) -> dict[int, tuple[int, str, float | None, str]]:
        if self.dialect == "sqlite":
            return self._tables.fetch(conn.connection.driver_connection, ids)
        import sqlalchemy as sa

        if not ids:
            return {}
        q = sa.text(f"SELECT id, idx, role, ts, text FROM {PREFIX}docs WHERE id IN :ids").bindparams(
            sa.bindparam("ids", expanding=True))
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute(q, {"ids": ids})}
