"""SQLite FTS5 tables holding indexed documents, shared by the JSONL index file and the SQLite store.

Two tables per prefix, kept in step by :class:`FtsTables` in the same transaction (the
external-content pattern of https://sqlite.org/fts5.html#external_content_tables, without
triggers: one ``INSERT … SELECT`` per record is about three times faster than a row trigger):

- ``<p>docs(id INTEGER PRIMARY KEY, idx, ts, role, text, fold)``: one row per document (the
  owner — the indexed record: a file of the JSONL store, a session row of the SQL store — is in
  the id, below); ``fold`` is the folded text (:func:`core.session.fold.fold`: accents, width and
  case) when the text is not plain ASCII, NULL otherwise (``LIKE`` and the trigram tokenizer
  already ignore ASCII case), so what is searched is ``COALESCE(fold, text)``.
- ``<p>fts``: a contentless FTS5 table over that searched text with the ``trigram`` tokenizer
  (SQLite ≥ 3.34): substring matching, so ``数据`` inside a Chinese sentence and ``jsonl_io`` inside
  ``core.stores.jsonl_io.parse_line`` are found, and — the terms folded the same way — ``creme``
  finds "Crème". Terms shorter than three characters cannot use a trigram index; they are matched
  with ``LIKE`` on the candidates (or on a scan when every term is short), newest first, stopping
  as soon as enough sessions are found.

Tables of the layout before ``fold`` (a ``docs`` table without the column) are brought to this one
in place by :meth:`FtsTables.upgrade`: the column filled from the text already there, the FTS
table made again from it; no session is read again.

A search walks matches by id, highest owner first, and stops as soon as it has enough owners;
the owners are numbered in the order they were first indexed (a first build goes oldest file
first), so the sessions found first are the more recent ones.
"""
from __future__ import annotations

import logging
import sqlite3
from typing import Iterable

from core.search.text import MIN_INDEXED_TERM, Document, fts5_phrase, like_pattern
from core.session.fold import fold, needs_fold

log = logging.getLogger(__name__)

MAX_SCAN = 200_000  # candidate rows looked at per query before giving up on finding more sessions
OWNER_SHIFT = 24  # document id = owner << OWNER_SHIFT | n: up to 16,777,215 documents per record
OWNER_MASK = (1 << OWNER_SHIFT) - 1


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

    A document's id is ``owner << OWNER_SHIFT | n`` (``n`` counting the owner's documents): the
    owner is read off the id without a lookup, an owner's documents are one id range (deleted by
    range, no extra index), and a search skips the rest of an owner once it has a match for it.
    Methods take the connection and never commit: the caller's transaction makes a record's update
    all-or-nothing (a crash mid-update rolls it back, and the record is indexed again next time)."""

    def __init__(self, prefix: str, *, use_fts: bool = True):
        self.docs, self.fts = prefix + "docs", prefix + "fts"
        self.use_fts = use_fts  # False: no FTS5 trigram in this SQLite; every term is a LIKE scan

    def create(self, conn: sqlite3.Connection) -> None:
        """Create the tables when missing."""
        d = self.docs
        conn.execute(f"CREATE TABLE IF NOT EXISTS {d}(id INTEGER PRIMARY KEY, idx INTEGER, ts REAL, role TEXT, "
                     "text TEXT NOT NULL, fold TEXT)")
        self._create_fts(conn)

    def _create_fts(self, conn: sqlite3.Connection) -> None:
        if self.use_fts:
            # Contentless: what it indexes (the folded text) is no column of the documents table.
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.fts} USING fts5(text, content='', "
                         "tokenize='trigram')")

    def has_fold(self, conn: sqlite3.Connection) -> bool:
        """Whether the documents table has the ``fold`` column (False: the layout before it, or none)."""
        return "fold" in [r[1] for r in conn.execute(f"PRAGMA table_info({self.docs})")]

    def upgrade(self, conn: sqlite3.Connection) -> None:
        """Bring tables of the layout before ``fold`` to this one, in the caller's transaction: the
        column added and filled from each document's text, the FTS table made again over the
        folded text. Documents stay; no session is read again. Tables that have the column already
        are left as they are."""
        if self.has_fold(conn):
            return
        conn.create_function("anycode_fold", 1, lambda t: fold(t) if isinstance(t, str) and needs_fold(t) else None,
                             deterministic=True)
        conn.execute(f"ALTER TABLE {self.docs} ADD COLUMN fold TEXT")
        conn.execute(f"UPDATE {self.docs} SET fold = anycode_fold(text)")
        conn.execute(f"DROP TABLE IF EXISTS {self.fts}")
        self._create_fts(conn)
        if self.use_fts:
            conn.execute(f"INSERT INTO {self.fts}(rowid, text) SELECT id, COALESCE(fold, text) FROM {self.docs}")

    def drop(self, conn: sqlite3.Connection) -> None:
        """Remove the tables (for a rebuild)."""
        for sql in (f"DROP TRIGGER IF EXISTS {self.docs}_ai", f"DROP TRIGGER IF EXISTS {self.docs}_ad",
                    f"DROP TABLE IF EXISTS {self.fts}", f"DROP TABLE IF EXISTS {self.docs}"):
            conn.execute(sql)

    @staticmethod
    def _range(owner: int) -> tuple[int, int]:
        lo = owner << OWNER_SHIFT
        return lo, lo | OWNER_MASK

    def add(self, conn: sqlite3.Connection, owner: int, docs: Iterable[Document]) -> int:
        """Insert ``docs`` of ``owner`` after its earlier ones; return how many."""
        lo, hi = self._range(owner)
        last = conn.execute(f"SELECT max(id) FROM {self.docs} WHERE id BETWEEN ? AND ?", (lo, hi)).fetchone()[0]
        first = lo if last is None else last + 1
        rows = [(first + n, d.idx, d.ts, d.role, d.text, fold(d.text) if needs_fold(d.text) else None)
                for n, d in enumerate(docs)]
        if rows and rows[-1][0] > hi:  # over 16 million documents in one session: the rest is not indexed
            log.warning("search: record %d has too many documents; the newest are not indexed", owner)
            rows = [r for r in rows if r[0] <= hi]
        if not rows:
            return 0
        conn.executemany(f"INSERT INTO {self.docs}(id, idx, ts, role, text, fold) VALUES (?,?,?,?,?,?)", rows)
        if self.use_fts:
            # One INSERT … SELECT, not a row trigger: about three times faster into FTS5.
            conn.execute(f"INSERT INTO {self.fts}(rowid, text) SELECT id, COALESCE(fold, text) FROM {self.docs} "
                         "WHERE id BETWEEN ? AND ?", (first, hi))
        return len(rows)

    def delete_owner(self, conn: sqlite3.Connection, owner: int) -> None:
        """Drop every document of ``owner`` (from the FTS index first: it needs the old text)."""
        lo, hi = self._range(owner)
        if self.use_fts:
            conn.execute(f"INSERT INTO {self.fts}({self.fts}, rowid, text) SELECT 'delete', id, COALESCE(fold, text) "
                         f"FROM {self.docs} WHERE id BETWEEN ? AND ?", (lo, hi))
        conn.execute(f"DELETE FROM {self.docs} WHERE id BETWEEN ? AND ?", (lo, hi))

    def candidates(self, conn: sqlite3.Connection, terms: list[str], allowed: set[int] | None,
                   limit: int) -> dict[int, int]:
        """``{owner: doc_id}``: for up to ``limit`` owners (of ``allowed``; None: any), the document
        with the highest id that contains every term. Never raises for odd text."""
        terms = [t for t in dict.fromkeys(fold(t) for t in terms) if t]  # matched folded, as the text is
        if not terms:
            return {}
        long = [t for t in terms if len(t) >= MIN_INDEXED_TERM] if self.use_fts else []
        short = [t for t in terms if t not in long]
        likes = [like_pattern(t) for t in short]
        like_sql = " AND ".join(["COALESCE(d.fold, d.text) LIKE ? ESCAPE '\\'"] * len(likes))
        found: dict[int, int] = {}
        if not long:
            # Every term is short: a scan of the text, newest first, jumping past an owner as soon
            # as it matched (or is out of scope), so only one match per session is looked for.
            upper = 1 << 62
            scanned_owners = 0
            while len(found) < limit and scanned_owners < MAX_SCAN:
                row = conn.execute(f"SELECT d.id FROM {self.docs} d WHERE d.id < ? AND {like_sql} "
                                   "ORDER BY d.id DESC LIMIT 1", [upper, *likes]).fetchone()
                if row is None:
                    break
                owner = row[0] >> OWNER_SHIFT
                if allowed is None or owner in allowed:
                    found[owner] = row[0]
                upper = owner << OWNER_SHIFT
                scanned_owners += 1
            return found
        match = " AND ".join(fts5_phrase(t) for t in long)
        if likes:
            sql = (f"SELECT d.id FROM {self.fts} JOIN {self.docs} d ON d.id = {self.fts}.rowid "
                   f"WHERE {self.fts} MATCH ? AND {like_sql} ORDER BY {self.fts}.rowid DESC")
        else:  # rowids only: no lookup in the documents table per match
            sql = f"SELECT rowid FROM {self.fts} WHERE {self.fts} MATCH ? ORDER BY rowid DESC"
        cur = conn.execute(sql, [match, *likes])
        scanned = 0
        while len(found) < limit and scanned < MAX_SCAN:
            rows = cur.fetchmany(1024)
            if not rows:
                break
            scanned += len(rows)
            for (doc_id,) in rows:
                owner = doc_id >> OWNER_SHIFT
                if owner not in found and (allowed is None or owner in allowed):
                    found[owner] = doc_id
                    if len(found) >= limit:
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
