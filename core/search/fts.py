"""SQLite FTS5 tables holding indexed documents, shared by the JSONL index file and the SQLite store.

Two tables per prefix, kept in step by :class:`FtsTables` in the same transaction (the
external-content pattern of https://sqlite.org/fts5.html#external_content_tables, without
triggers: one ``INSERT … SELECT`` per record is about three times faster than a row trigger):

- ``<p>docs(id INTEGER PRIMARY KEY, owner, idx, ts, role, text)``: one row per document; ``owner``
  is the indexed record (a file of the JSONL store, a session row of the SQL store), indexed so a
  record's documents are dropped in one indexed delete.
- ``<p>fts``: an FTS5 table over ``text`` with the ``trigram`` tokenizer (SQLite ≥ 3.34):
  case-insensitive substring matching, so ``数据`` inside a Chinese sentence and ``jsonl_io`` inside
  ``core.stores.jsonl_io.parse_line`` are found. Terms shorter than three characters cannot use a
  trigram index; they are matched with ``LIKE`` on the candidates (or on a scan when every term is
  short), newest first, stopping as soon as enough sessions are found.

Ids grow with every insert, so ``ORDER BY id DESC`` is "most recently indexed first" — the order
results are wanted in — and the scan can stop early.
"""
from __future__ import annotations

import logging
import sqlite3
from typing import Any, Iterable

from core.search.text import MIN_INDEXED_TERM, Document, fts5_phrase, like_pattern

log = logging.getLogger(__name__)

MAX_SCAN = 20_000  # candidate rows looked at per query before giving up on finding more sessions


def has_trigram(conn: sqlite3.Connection) -> bool:
    """True when this SQLite has FTS5 with the trigram tokenizer (3.34 or later, FTS5 compiled in)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._anycode_probe USING fts5(x, tokenize='trigram')")
        conn.execute("DROP TABLE temp._anycode_probe")
        return True
    except sqlite3.Error:
        return False


class FtsTables:
    """The documents and FTS5 tables named ``<prefix>docs`` / ``<prefix>fts`` on a sqlite3 connection.

    Methods take the connection and never commit: the caller's transaction makes a record's update
    all-or-nothing (a crash mid-update rolls it back, and the record is indexed again next time)."""

    def __init__(self, prefix: str, *, use_fts: bool = True):
        self.docs, self.fts = prefix + "docs", prefix + "fts"
        self.use_fts = use_fts  # False: no FTS5 trigram in this SQLite; every term is a LIKE scan

    def create(self, conn: sqlite3.Connection) -> None:
        """Create the tables and triggers when missing."""
        d, f = self.docs, self.fts
        conn.execute(f"CREATE TABLE IF NOT EXISTS {d}(id INTEGER PRIMARY KEY, owner INTEGER NOT NULL, "
                     "idx INTEGER, ts REAL, role TEXT, text TEXT NOT NULL)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {d}_owner ON {d}(owner)")
        if not self.use_fts:
            return
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {f} USING fts5(text, content='{d}', content_rowid='id', "
                     "tokenize='trigram')")
        # No triggers: a row-by-row trigger makes FTS5 inserts ~3x slower than one INSERT … SELECT.
        conn.execute(f"DROP TRIGGER IF EXISTS {d}_ai")
        conn.execute(f"DROP TRIGGER IF EXISTS {d}_ad")

    def drop(self, conn: sqlite3.Connection) -> None:
        """Remove the tables (for a rebuild)."""
        for sql in (f"DROP TRIGGER IF EXISTS {self.docs}_ai", f"DROP TRIGGER IF EXISTS {self.docs}_ad",
                    f"DROP TABLE IF EXISTS {self.fts}", f"DROP TABLE IF EXISTS {self.docs}"):
            conn.execute(sql)

    def add(self, conn: sqlite3.Connection, owner: int, docs: Iterable[Document]) -> int:
        """Insert ``docs`` of ``owner``; return how many."""
        rows = [(owner, d.idx, d.ts, d.role, d.text) for d in docs]
        if not rows:
            return 0
        last = conn.execute(f"SELECT max(id) FROM {self.docs}").fetchone()[0] or 0
        conn.executemany(f"INSERT INTO {self.docs}(owner, idx, ts, role, text) VALUES (?,?,?,?,?)", rows)
        if self.use_fts:
            conn.execute(f"INSERT INTO {self.fts}(rowid, text) SELECT id, text FROM {self.docs} WHERE id > ?", (last,))
        return len(rows)

    def delete_owner(self, conn: sqlite3.Connection, owner: int) -> None:
        """Drop every document of ``owner`` (from the FTS index first: it needs the old text)."""
        if self.use_fts:
            conn.execute(f"INSERT INTO {self.fts}({self.fts}, rowid, text) SELECT 'delete', id, text "
                         f"FROM {self.docs} WHERE owner = ?", (owner,))
        conn.execute(f"DELETE FROM {self.docs} WHERE owner = ?", (owner,))

    def candidates(self, conn: sqlite3.Connection, terms: list[str], scope_sql: str, scope_params: list[Any],
                   limit: int) -> dict[int, int]:
        """``{owner: doc_id}``: for up to ``limit`` owners accepted by ``scope_sql`` (a condition
        on ``d.owner``), the newest document containing every term. Never raises for odd text."""
        long = [t for t in terms if len(t) >= MIN_INDEXED_TERM] if self.use_fts else []
        short = [t for t in terms if t not in long]
        # "+" keeps SQLite from driving the scan through the owner index and sorting everything:
        # walking ids newest first lets the scan stop as soon as enough owners are found.
        where, params = [f"(+{scope_sql})"], list(scope_params)
        for t in short:
            where.append("d.text LIKE ? ESCAPE '\\'")
            params.append(like_pattern(t))
        if long:
            sql = (f"SELECT d.id, d.owner FROM {self.fts} JOIN {self.docs} d ON d.id = {self.fts}.rowid "
                   f"WHERE {self.fts} MATCH ? AND {' AND '.join(where)} ORDER BY {self.fts}.rowid DESC")
            params.insert(0, " AND ".join(fts5_phrase(t) for t in long))
        else:
            sql = f"SELECT d.id, d.owner FROM {self.docs} d WHERE {' AND '.join(where)} ORDER BY d.id DESC"
        found: dict[int, int] = {}
        cur = conn.execute(sql, params)
        scanned = 0
        while len(found) < limit:
            rows = cur.fetchmany(512)
            if not rows:
                break
            for doc_id, owner in rows:
                if owner not in found:
                    found[owner] = doc_id
                    if len(found) >= limit:
                        break
            scanned += len(rows)
            if scanned >= MAX_SCAN:
                break
        cur.close()
        return found

    def fetch(self, conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, tuple[int, str, float | None, str]]:
        """``{doc_id: (idx, role, ts, text)}`` for ``ids``."""
        ids = list(ids)
        out: dict[int, tuple[int, str, float | None, str]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            q = f"SELECT id, idx, role, ts, text FROM {self.docs} WHERE id IN ({','.join('?' * len(chunk))})"
            for doc_id, idx, role, ts, text in conn.execute(q, chunk):
                out[doc_id] = (idx, role, ts, text)
        return out
