"""Full-text search finds text whatever its accents and width, on every store (JSONL, SQLite,
PostgreSQL), and never folds Japanese marks away.

Guards against a search finding nothing unless the accents are typed exactly as stored ("creme
brulee" for "Crème brûlée"), full-width letters missing their ASCII twins, a decomposed "é" in a
pasted text never matching a typed one — and against the opposite mistake, "か" finding "が".
An index built before text was folded is brought up to date in place (JSONL, SQLite: no session
read again) or rebuilt (PostgreSQL).
"""
from __future__ import annotations

import sqlite3

import pytest

from core import SessionManager
from tests.support.storage import storage_of
from core.search.jsonl_index import SCHEMA_VERSION, JsonlSearchIndex
from core.search.sql_index import PREFIX, SqlSearchIndex

MESSAGES = [
    {"role": "user", "content": "My Crème brûlée recipe uses the Ångström scale"},   # 0
    {"role": "assistant", "content": "The ＡＰＩ ｋｅｙ rotation is documented"},        # 1 full-width
    {"role": "user", "content": "A cafe\u0301 in Zu\u0308rich"},                      # 2 decomposed
    {"role": "assistant", "content": "がっこうへ行きます"},                             # 3 hiragana with dakuten
    {"role": "user", "content": "ｶﾞｯｺｳの ＫＥＹ"},                                      # 4 half-width katakana
    {"role": "assistant", "content": "Ça va, Straße"},                                # 5
]


@pytest.fixture
def filled(store, tmp_path):
    (tmp_path / "ws").mkdir(exist_ok=True)
    m = SessionManager(store)
    s = m.create(tmp_path / "ws", title="Désirée's notes")
    m.add_messages(s.key, MESSAGES)
    return m, s


def _search(m, s, query):
    return storage_of(m.store).search.search(query, project_keys=[s.key.project_key])


class TestFolded:
    @pytest.mark.parametrize("query, index, marked", [
        ("creme brulee", 0, "Crème"),
        ("CRÈME", 0, "Crème"),
        ("angstrom", 0, "Ångström"),
        ("api key", 1, "ＡＰＩ"),
        ("ｒｏｔａｔｉｏｎ", 1, "rotation"),
        ("café", 2, "cafe\u0301"),
        ("zurich", 2, "Zu\u0308rich"),
        ("Zürich", 2, "Zu\u0308rich"),
        ("ca va", 5, "Ça"),       # two-letter terms: the scan, not the trigram index
        ("strasse", 5, "Straße"),
        ("ガッコウ", 4, "ｶﾞｯｺｳ"),  # width folded in Japanese too
    ])
    def test_found_and_marked_whatever_the_accents_and_width(self, filled, query, index, marked):
        m, s = filled
        hits = _search(m, s, query)
        assert [h.session_id for h in hits] == [s.id], query
        assert hits[0].message_index == index
        a, b = hits[0].marks[0]
        assert hits[0].snippet[a:b] == marked

    def test_japanese_marks_are_not_folded(self, filled):
        m, s = filled
        assert _search(m, s, "かっこう") == []  # が is not か
        assert _search(m, s, "カッコウ") == []
        assert [h.message_index for h in _search(m, s, "がっこう")] == [3]
        assert [h.message_index for h in _search(m, s, "か\u3099っこう")] == [3]  # typed decomposed

    def test_the_title_is_matched_folded(self, filled):
        m, s = filled
        hits = _search(m, s, "desiree")
        assert hits[0].role == "title" and hits[0].snippet[slice(*hits[0].marks[0])] == "Désirée"


def _as_before_fold(store) -> None:
    """The store's search tables as they were before text was folded: no ``fold`` column, the FTS
    table over the raw text (external content), the JSONL index file at schema 5."""
    index = storage_of(store).search
    index.update()
    if isinstance(index, JsonlSearchIndex):
        index.close()
        conn = sqlite3.connect(index.path)
        prefix = ""
    elif store.dialect == "sqlite":
        conn = sqlite3.connect(store.engine.url.database)
        prefix = PREFIX
    else:
        import sqlalchemy as sa

        with store.engine.begin() as pg:
            pg.execute(sa.text(f"DROP INDEX IF EXISTS {PREFIX}docs_fold_trgm"))
            pg.execute(sa.text(f"ALTER TABLE {PREFIX}docs DROP COLUMN fold"))
        return
    conn.execute(f"DROP TABLE {prefix}fts")
    conn.execute(f"ALTER TABLE {prefix}docs DROP COLUMN fold")
    conn.execute(f"CREATE VIRTUAL TABLE {prefix}fts USING fts5(text, content='{prefix}docs', content_rowid='id', "
                 "tokenize='trigram')")
    conn.execute(f"INSERT INTO {prefix}fts({prefix}fts) VALUES('rebuild')")
    if not prefix:
        conn.execute("PRAGMA user_version=5")
    conn.commit()
    conn.close()


class TestIndexFromBeforeFolding:
    def test_an_older_index_is_brought_up_to_date(self, filled):
        m, s = filled
        _as_before_fold(m.store)
        fresh = JsonlSearchIndex(m.store.base_dir) if hasattr(m.store, "base_dir") else SqlSearchIndex(m.store)
        fresh.fresh_seconds = 0  # not the store's own index: it is told of no write, so it looks each time
        read_again = fresh.update()
        if getattr(m.store, "dialect", "sqlite") == "postgresql":
            assert read_again >= 1  # rebuilt from the sessions (a cache)
        else:
            assert read_again == 0  # folded in place: no session read again
        hits = fresh.search("creme brulee", project_keys=[s.key.project_key])
        assert [h.message_index for h in hits] == [0]
        assert [h.message_index for h in fresh.search("zurich", project_keys=[s.key.project_key])] == [2]
        assert fresh.search("かっこう", project_keys=[s.key.project_key]) == []
        if isinstance(fresh, JsonlSearchIndex):
            assert fresh._open().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        # What is written after the upgrade is indexed folded too.
        m.add_messages(s.key, [{"role": "user", "content": "Résumé attached"}])
        assert [h.message_index for h in fresh.search("resume", project_keys=[s.key.project_key])] == [6]
