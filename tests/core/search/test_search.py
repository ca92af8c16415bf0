"""Full-text search across conversations (issue 16), run against every store (JSONL, SQLite, PostgreSQL)."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, message_entry
from core.search.jsonl_index import SCHEMA_VERSION
from core.search.text import make_snippet, parse_query
from core.storage import Storage

ROOT = Path(__file__).resolve().parents[3]

CONVERSATION = [
    {"role": "user", "content": "We need to fix the database migration before Friday"},
    {"role": "assistant", "content": "I will look at core.stores.sql_schema and the parse_line helper."},
    {"role": "user", "content": "请帮我修复数据库迁移的问题"},
    {"role": "assistant", "content": "データベースの移行を直しました 🎉 done"},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "src/legacy_loader.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def load_legacy_config():\n    return {}"},
]


def _ids(hits):
    return [h.session_id for h in hits]


_STORAGES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def open_search(store):
    """The search index of the one :class:`Storage` a test holds over ``store`` (as the app holds
    one storage per store: the index it builds is told of that store's writes)."""
    if store not in _STORAGES:
        _STORAGES[store] = Storage(store)
    return _STORAGES[store].search


@pytest.fixture
def filled(store, tmp_path):
    """A store holding one conversation (CONVERSATION) and an unrelated one, in one project."""
    (tmp_path / "ws").mkdir(exist_ok=True)
    m = SessionManager(store)
    a = m.create(tmp_path / "ws")
    m.add_messages(a.key, CONVERSATION)
    b = m.create(tmp_path / "ws")
    m.add_messages(b.key, [{"role": "user", "content": "What is the weather like on Mars?"}])
    return m, a, b


class TestFindsWhatWasSaid:
    """A word said in a conversation is not found (English, Chinese, Japanese, emoji, identifiers)."""

    @pytest.mark.parametrize("query, index", [
        ("migration", 0),
        ("MIGRATION friday", 0),            # case-insensitive, every term, any order
        ('"database migration"', 0),        # a phrase
        ("数据库", 2),                       # Chinese inside a sentence without spaces
        ("迁移", 2),                         # two characters: too short for a trigram, still found
        ("データベース", 3),                  # Japanese
        ("🎉", 3),                           # emoji
        ("sql_schema", 1),                  # part of a dotted name
        ("parse_line", 1),
        ("stores", 1),
        ("legacy_loader", 4),               # a tool call's arguments
        ("read_file", 4),                   # a tool call's name
        ("load_legacy_config", 5),          # a tool result
    ])
    def test_query_finds_the_message(self, filled, query, index):
        m, a, b = filled
        hits = open_search(m.store).search(query, project_keys=[a.key.project_key])
        assert _ids(hits) == [a.id]
        assert hits[0].message_index == index
        assert hits[0].marks, hits[0].snippet
        s, e = hits[0].marks[0]
        assert hits[0].snippet[s:e].casefold() in query.casefold().replace('"', "")

    def test_a_phrase_must_be_adjacent(self, filled):
        m, a, _ = filled
        assert open_search(m.store).search('"migration database"', project_keys=[a.key.project_key]) == []
        assert _ids(open_search(m.store).search("migration database", project_keys=[a.key.project_key])) == [a.id]

    def test_every_term_must_match(self, filled):
        m, a, _ = filled
        assert open_search(m.store).search("migration mars", project_keys=[a.key.project_key]) == []

    def test_title_is_searched(self, filled):
        m, a, b = filled
        m.rename(b.key, "Planetary climate notes")
        hits = open_search(m.store).search("climate", project_keys=[b.key.project_key])
        assert _ids(hits) == [b.id] and hits[0].role == "title" and hits[0].title == "Planetary climate notes"

    @pytest.mark.parametrize("query", ['"', "*", "NEAR(", "NEAR(a b)", "-", "(", ")", "a OR b", 'x"y', "''",
                                       "^", "col:on", "%", "_", "\\", "AND", "*migration*", "-migration",
                                       '"unclosed migration', "(migration)"])
    def test_fts_syntax_never_raises(self, filled, query):
        m, a, _ = filled
        hits = open_search(m.store).search(query, project_keys=[a.key.project_key])
        assert isinstance(hits, list)

    def test_a_lone_surrogate_in_the_query_never_raises(self, filled):
        """A browser sends half an emoji as a lone surrogate (issue 28): UnicodeEncodeError, not hits."""
        m, a, _ = filled
        assert open_search(m.store).search("\ud83c", project_keys=[a.key.project_key]) == []
        hits = open_search(m.store).search("migration \udc00", project_keys=[a.key.project_key])
        assert isinstance(hits, list)
        m.add_messages(a.key, [{"role": "user", "content": "broken \ud83c emoji"}])  # stored as U+FFFD
        assert _ids(open_search(m.store).search("broken \ud83c", project_keys=[a.key.project_key])) == [a.id]

    def test_operator_characters_are_literal(self, store, tmp_path):
        (tmp_path / "ws").mkdir()
        m = SessionManager(store)
        s = m.create(tmp_path / "ws")
        m.add_messages(s.key, [{"role": "user", "content": "call f(x) with -v and 100% of a*b NEAR the end"}])
        idx = open_search(store)
        for q in ["f(x)", "-v", "100%", "a*b", "NEAR", '"NEAR the"']:
            assert _ids(idx.search(q, project_keys=[s.key.project_key])) == [s.id], q
        assert idx.search("100_", project_keys=[s.key.project_key]) == []  # LIKE wildcards are literal
        assert idx.search("f_", project_keys=[s.key.project_key]) == []
        assert _ids(idx.search("0%", project_keys=[s.key.project_key])) == [s.id]


class TestScopeAndLifecycle:
    """Stale results: a deleted session still found, an archived one shown unmarked, the wrong project."""

    def test_new_messages_are_found_at_once(self, filled):
        m, a, b = filled
        idx = open_search(m.store)
        assert idx.search("saturn", project_keys=[b.key.project_key]) == []
        m.add_messages(b.key, [{"role": "assistant", "content": "Saturn has rings"}])
        hits = idx.search("saturn", project_keys=[b.key.project_key])
        assert _ids(hits) == [b.id] and hits[0].message_index == 1

    def test_deleted_session_vanishes_at_once(self, filled):
        m, a, _ = filled
        idx = open_search(m.store)
        assert idx.search("migration", project_keys=[a.key.project_key])
        m.delete(a.key)
        assert idx.search("migration", project_keys=[a.key.project_key]) == []

    def test_archived_only_on_request_and_marked(self, filled):
        m, a, _ = filled
        idx = open_search(m.store)
        m.archive(a.key)
        assert idx.search("migration", project_keys=[a.key.project_key]) == []
        hits = idx.search("migration", project_keys=[a.key.project_key], archived=True)
        assert _ids(hits) == [a.id] and hits[0].archived
        m.unarchive(a.key)
        hits = idx.search("migration", project_keys=[a.key.project_key])
        assert _ids(hits) == [a.id] and not hits[0].archived

    def test_other_projects_only_when_asked(self, filled, tmp_path):
        m, a, _ = filled
        (tmp_path / "other").mkdir()
        o = m.create(tmp_path / "other")
        m.add_messages(o.key, [{"role": "user", "content": "another migration elsewhere"}])
        idx = open_search(m.store)
        assert _ids(idx.search("migration", project_keys=[a.key.project_key])) == [a.id]
        assert set(_ids(idx.search("migration"))) == {a.id, o.id}

    def test_fork_shows_its_own_matches(self, filled):
        m, a, _ = filled
        fork = m.fork(a.key, 1)
        m.add_messages(fork.key, [{"role": "user", "content": "only in the branch: zeppelin"}])
        idx = open_search(m.store)
        pk = [a.key.project_key]
        assert _ids(idx.search("zeppelin", project_keys=pk)) == [fork.id]
        assert set(_ids(idx.search("migration", project_keys=pk))) == {a.id, fork.id}
        assert _ids(idx.search("データベース", project_keys=pk)) == [a.id]  # after the fork point

    def test_sub_agent_records_are_found_on_their_parent(self, filled):
        m, a, _ = filled
        sub = SessionKey(a.key.project_key, a.id, "subagents/agent-1")
        m.store.append(sub, [message_entry({"role": "assistant", "content": "sub-agent found the flux capacitor"})])
        hits = open_search(m.store).search("capacitor", project_keys=[a.key.project_key])
        assert _ids(hits) == [a.id] and hits[0].subpath == "subagents/agent-1"

    def test_compaction_summary_is_searched(self, filled):
        m, a, _ = filled
        m.store.append(a.key, [{"type": "compaction", "ts": time.time(),
                                "summary": "Earlier we agreed on the quokka protocol"}])
        hits = open_search(m.store).search("quokka", project_keys=[a.key.project_key])
        assert _ids(hits) == [a.id] and hits[0].role == "compaction"

    def test_results_are_newest_first_and_limited(self, store, tmp_path):
        (tmp_path / "ws").mkdir()
        m = SessionManager(store)
        made = []
        for i in range(5):
            s = m.create(tmp_path / "ws")
            m.add_messages(s.key, [{"role": "user", "content": f"kangaroo number {i}"}])
            made.append(s.id)
        hits = open_search(store).search("kangaroo", project_keys=[s.key.project_key], limit=3)
        assert _ids(hits) == made[::-1][:3]


def _as_before_tags(store):
    """A fresh index of ``store`` over what its index file or tables held before tags were
    searched. JSONL: the index file as schema 3 left it (no ``tags`` or ``ctime_ns`` column); SQL: the same
    tables (titles and tags are read from ``anycode_sessions``, which migration 7 gave tags)."""
    import sqlite3

    from core.search.jsonl_index import JsonlSearchIndex
    from core.search.sql_index import SqlSearchIndex

    index = open_search(store)
    if not isinstance(index, JsonlSearchIndex):
        return SqlSearchIndex(store)
    index.close()
    conn = sqlite3.connect(index.path)
    conn.execute("ALTER TABLE files DROP COLUMN tags")
    conn.execute("ALTER TABLE files DROP COLUMN ctime_ns")
    conn.execute("PRAGMA user_version=3")
    conn.commit()
    conn.close()
    return JsonlSearchIndex(store.base_dir)


def _search_cli(capsys, store, ws, *argv):
    """``anycode sessions search …`` on ``store`` (by its spec: ``jsonl:FOLDER`` or its URL)."""
    from webui.cli.sessions import main

    spec = (f"jsonl:{store.base_dir}" if isinstance(store, LocalSessionStore)
            else store.engine.url.render_as_string(hide_password=False))
    code = main(["search", *argv, "--project", str(ws), "--store", spec])
    return code, capsys.readouterr().out


class TestTagsAreSearched:
    """Issue 31, item 14: a plain word equal to (or part of) a chat's tag did not find it, since
    tags were in no index; a removed tag must stop finding it, an index built before must pick
    tags up without a rebuild, and the terminal must say the match was a tag."""

    def test_a_tag_word_finds_the_chat_once_and_a_removed_tag_does_not(self, filled):
        m, a, b = filled
        idx = open_search(m.store)
        pk = [b.key.project_key]
        assert idx.search("gazebo", project_keys=pk) == []
        m.tag(b.key, add=["gazebo-plans", "garden"])
        for query in ("gazebo", "GAZEBO-plans", "garden gazebo", "#gazebo"):
            hits = idx.search(query, project_keys=pk)
            assert _ids(hits) == [b.id], query
            assert hits[0].role == "tag" and hits[0].message_index is None
            assert hits[0].snippet == "#gazebo-plans #garden"
        hits = idx.search("gazebo", project_keys=pk)
        assert [hits[0].snippet[s:e] for s, e in hits[0].marks] == ["gazebo"]
        m.rename(b.key, "Backyard")
        assert _ids(idx.search("backyard gazebo", project_keys=pk)) == [b.id]  # a title word and a tag word
        assert idx.search("gazebo nowhere", project_keys=pk) == []
        # As for a title: every term in the title and tags, or every term in one message.
        assert idx.search("gazebo mars", project_keys=pk) == []
        m.tag(b.key, remove=["gazebo-plans"])
        assert idx.search("gazebo", project_keys=pk) == []
        assert _ids(idx.search("garden", project_keys=pk)) == [b.id]
        # A message holding the word too: the chat keeps its rank and shows the message, as for a title.
        m.add_messages(b.key, [{"role": "user", "content": "we weeded the garden"}])
        hits = idx.search("garden", project_keys=pk)
        assert _ids(hits) == [b.id] and (hits[0].role, hits[0].message_index) == ("user", 1)

    def test_a_tag_of_an_archived_chat_only_with_archived(self, filled):
        m, a, b = filled
        m.tag(b.key, add=["gazebo"])
        m.archive(b.key)
        idx = open_search(m.store)
        assert idx.search("gazebo", project_keys=[b.key.project_key]) == []
        hits = idx.search("gazebo", project_keys=[b.key.project_key], archived=True)
        assert _ids(hits) == [b.id] and hits[0].archived and hits[0].role == "tag"

    def test_an_index_built_before_tags_were_searched_picks_them_up(self, filled):
        m, a, b = filled
        m.tag(b.key, add=["gazebo"])
        open_search(m.store).update()
        old = _as_before_tags(m.store)
        assert old.update() == 0  # upgraded, not rebuilt: no session read again
        hits = old.search("gazebo", project_keys=[b.key.project_key])
        assert _ids(hits) == [b.id] and hits[0].role == "tag"
        assert _ids(old.search("migration", project_keys=[a.key.project_key])) == [a.id]
        m.tag(b.key, remove=["gazebo"])
        assert old.search("gazebo", project_keys=[b.key.project_key]) == []

    def test_the_terminal_says_tag_and_shows_one_block_on_the_version_in_use(self, filled, capsys, tmp_path):
        m, a, b = filled
        m.tag(b.key, add=["gazebo-plans"])
        v = m.fork(b.key, 0, version=True)  # in use now; the tags stay the conversation's (its root's)
        code, out = _search_cli(capsys, m.store, tmp_path / "ws", "gazebo")
        assert code == 0
        assert out.count("\n    ") == 1 and "    tag: #[gazebo]-plans" in out, out
        assert v.id[:8] in out and "version" not in out, out
        m.tag(b.key, remove=["gazebo-plans"])
        assert _search_cli(capsys, m.store, tmp_path / "ws", "gazebo")[1].strip() == "No matches."


class TestJsonlIndexFile:
    """The JSONL index file going stale or bad: a hand edit, a damaged file, a crash mid-update."""

    @pytest.fixture
    def jsonl(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home", fsync=False)
        (tmp_path / "ws").mkdir()
        m = SessionManager(store)
        s = m.create(tmp_path / "ws")
        m.add_messages(s.key, [{"role": "user", "content": "the original wording"}])
        return store, m, s

    def test_hand_edited_session_is_reindexed(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        assert _ids(idx.search("original", project_keys=[s.key.project_key])) == [s.id]
        path = store._main_file(s.key, False)
        path.write_bytes(path.read_bytes().replace(b"original", b"replaced"))
        assert idx.search("original", project_keys=[s.key.project_key]) == []
        assert _ids(idx.search("replaced", project_keys=[s.key.project_key])) == [s.id]

    @staticmethod
    def _edit_keeping_size_and_mtime(path, old, new):
        st = path.stat()
        path.write_bytes(path.read_bytes().replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as a sync tool or `touch -r` leaves it
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)

    def test_same_size_edit_with_its_mtime_set_back_is_reindexed(self, jsonl):
        # The index compared size and mtime only: such an edit kept showing the old words.
        store, m, s = jsonl
        idx = open_search(store)
        assert _ids(idx.search("original", project_keys=[s.key.project_key])) == [s.id]
        self._edit_keeping_size_and_mtime(store._main_file(s.key, False), b"original", b"replaced")
        assert idx.search("original", project_keys=[s.key.project_key]) == []
        assert _ids(idx.search("replaced", project_keys=[s.key.project_key])) == [s.id]

    def test_version_4_index_is_kept_and_then_sees_such_edits(self, jsonl):
        import sqlite3

        store, m, s = jsonl
        idx = open_search(store)
        idx.update()
        idx.close()
        conn = sqlite3.connect(idx.path)  # the index file as schema 4 left it
        conn.execute("ALTER TABLE files DROP COLUMN ctime_ns")
        conn.execute("PRAGMA user_version=4")
        conn.commit()
        conn.close()
        old = open_search(store)
        assert old.update() == 0  # nothing read again: each row's ctime is recorded as it stands
        assert old._open().execute("SELECT count(*) FROM files WHERE ctime_ns IS NULL").fetchone()[0] == 0
        self._edit_keeping_size_and_mtime(store._main_file(s.key, False), b"original", b"replaced")
        assert old.update() == 1
        assert _ids(old.search("replaced", project_keys=[s.key.project_key])) == [s.id]

    def test_other_writers_show_within_the_freshness_window(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        idx.fresh_seconds = 0.3
        assert idx.search("quetzal", project_keys=[s.key.project_key]) == []
        other = LocalSessionStore(store.base_dir, fsync=False)  # another process's store
        other.append(s.key, [message_entry({"role": "user", "content": "a quetzal flew by"})])
        time.sleep(0.35)
        assert _ids(idx.search("quetzal", project_keys=[s.key.project_key])) == [s.id]

    def test_writes_through_this_store_show_at_once(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        idx.fresh_seconds = 3600
        assert idx.search("ocelot", project_keys=[s.key.project_key]) == []
        m.add_messages(s.key, [{"role": "user", "content": "an ocelot"}])
        assert _ids(idx.search("ocelot", project_keys=[s.key.project_key])) == [s.id]
        other = LocalSessionStore(store.base_dir, fsync=False)
        other.remove(s.key)  # deleted by another process: gone from the very next results
        assert idx.search("ocelot", project_keys=[s.key.project_key]) == []

    def test_damaged_index_is_rebuilt(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        idx.search("original")
        idx.close()
        idx.path.write_bytes(b"this is not a database" * 100)
        assert _ids(idx.search("original", project_keys=[s.key.project_key])) == [s.id]

    def test_deleted_index_is_rebuilt(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        idx.search("original")
        idx.close()
        for p in idx.path.parent.iterdir():
            p.unlink()
        assert _ids(idx.search("original", project_keys=[s.key.project_key])) == [s.id]

    def test_index_file_is_private(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        idx.search("original")
        assert stat.S_IMODE(idx.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(idx.path.parent.stat().st_mode) == 0o700

    def test_torn_tail_is_indexed_once_complete(self, jsonl):
        store, m, s = jsonl
        idx = open_search(store)
        idx.fresh_seconds = 0  # walk on every search: the file is written by hand below
        path = store._main_file(s.key, False)
        line = b'{"type":"message","ts":1.0,"message":{"role":"user","content":"half a platypus"}}\n'
        with open(path, "ab") as f:
            f.write(line[:30])
        assert idx.search("platypus", project_keys=[s.key.project_key]) == []
        with open(path, "ab") as f:
            f.write(line[30:])
        hits = idx.search("platypus", project_keys=[s.key.project_key])
        assert _ids(hits) == [s.id] and hits[0].message_index == 1

    @pytest.mark.parametrize("indexed_before", [False, True])
    def test_a_damaged_line_is_named_by_its_line_number(self, jsonl, caplog, indexed_before):
        # The warning named line 0 whatever the line; it must name the line the store's read
        # names (1-based), also when only the lines appended since the last update are read.
        import logging

        store, m, s = jsonl  # lines 1-2: the header and a message
        idx = open_search(store)
        idx.fresh_seconds = 0  # walk on every search: the file is written by hand below
        if indexed_before:
            assert _ids(idx.search("original", project_keys=[s.key.project_key])) == [s.id]
        path = store._main_file(s.key, False)
        with open(path, "ab") as f:
            f.write(b'{"type":"message","ts":1.0,"message":{"role":"user","content":"a capybara"}}\n'
                    b'{damaged by hand\n'
                    b'{"type":"message","ts":2.0,"message":{"role":"user","content":"an okapi"}}\n')
        with caplog.at_level(logging.WARNING):
            assert _ids(idx.search("okapi", project_keys=[s.key.project_key])) == [s.id]
            store.load(s.key)
        found = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
        assert found and all(f"{path}:4:" in w for w in found), found

    def test_version_3_index_with_an_unreadable_row_rereads_only_that_file(self, jsonl, tmp_path):
        import sqlite3

        store, m, s = jsonl
        other = m.create(tmp_path / "ws")
        m.add_messages(other.key, [{"role": "user", "content": "a second chat"}])
        m.tag(other.key, add=["gazebo"])
        open_search(store).update()
        path = open_search(store).path
        old = _as_before_tags(store)
        conn = sqlite3.connect(path)
        conn.execute("UPDATE files SET state = '{not json' WHERE session_id = ?", (other.id,))
        conn.commit()
        conn.close()
        assert old.update() == 1  # that file alone, read again in full
        assert _ids(old.search("gazebo", project_keys=[s.key.project_key])) == [other.id]
        assert old._open().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert old._open().execute("SELECT count(*) FROM docs").fetchone()[0] == 2  # nothing doubled

    @pytest.mark.slow
    def test_killed_mid_build_is_repaired_on_next_use(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home", fsync=False)
        (tmp_path / "ws").mkdir()
        m = SessionManager(store)
        keys = []
        for i in range(300):
            s = m.create(tmp_path / "ws")
            m.add_messages(s.key, [{"role": "user", "content": f"wombat {i} " + "filler text " * 400}])
            keys.append(s.id)
        code = ("import sys; from core import LocalSessionStore; from core.storage import Storage\n"
                "idx = Storage(LocalSessionStore(sys.argv[1])).search; print('start', flush=True); idx.update()\n")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "home")], stdout=subprocess.PIPE, env=env)
        try:
            assert p.stdout.readline().strip() == b"start"
            time.sleep(0.3)
            p.send_signal(signal.SIGKILL)
        finally:
            p.wait(timeout=30)
        hits = open_search(store).search("wombat", project_keys=[s.key.project_key], limit=1000)
        assert sorted(_ids(hits)) == sorted(keys)
        hits = open_search(store).search('"wombat 7 filler"', project_keys=[s.key.project_key])
        assert len(hits) == 1
        # nothing indexed twice: one document per message
        conn = open_search(store)._open()
        assert conn.execute("SELECT count(*) FROM docs").fetchone()[0] == 300


class TestQueryParsing:
    """Odd queries raising or losing words."""

    def test_terms(self):
        assert parse_query('fix "the bug" now') == ["fix", "the bug", "now"]
        assert parse_query('"unclosed phrase') == ["unclosed phrase"]
        assert parse_query("   ") == []
        assert parse_query("a A a") == ["a"]

    def test_snippet_marks_every_occurrence_around_the_first(self):
        text = "x " * 200 + "the Bug and the bug again" + " y" * 200
        snippet, marks = make_snippet(text, ["bug"])
        assert snippet.startswith("…") and snippet.endswith("…")
        assert [snippet[s:e] for s, e in marks] == ["Bug", "bug"]


class TestSearchCommand:
    """``anycode sessions search``: wrong project searched, archived shown unmarked, JSON unparsable."""

    @pytest.fixture
    def home(self, anycode_home, monkeypatch, tmp_path):
        monkeypatch.delenv("ANYCODE_STORE", raising=False)
        monkeypatch.delenv("ANYCODE_MIRROR", raising=False)
        m = SessionManager(LocalSessionStore(anycode_home))
        here, there = tmp_path / "here", tmp_path / "there"
        here.mkdir()
        there.mkdir()
        a = m.create(here, title="Login work")
        m.add_messages(a.key, [{"role": "user", "content": "the login form rejects 数据 emails"}])
        b = m.create(there)
        m.add_messages(b.key, [{"role": "user", "content": "login from the other project"}])
        c = m.create(here)
        m.add_messages(c.key, [{"role": "user", "content": "an old login discussion"}])
        m.archive(c.key)
        return m, here, a, b, c

    def _run(self, capsys, *argv):
        from webui.cli.sessions import main

        code = main(list(argv))
        return code, capsys.readouterr()

    def test_text_output_marks_the_match(self, home, capsys):
        m, here, a, b, c = home
        code, out = self._run(capsys, "search", "数据", "--project", str(here))
        assert code == 0
        assert a.id[:8] in out.out and "Login work" in out.out and "[数据]" in out.out
        assert b.id[:8] not in out.out and c.id[:8] not in out.out

    def test_json_all_projects_and_archived(self, home, capsys):
        m, here, a, b, c = home
        code, out = self._run(capsys, "search", "login", "--all-projects", "--archived", "--json")
        assert code == 0
        rows = json.loads(out.out)
        by_id = {r["session_id"]: r for r in rows}
        assert set(by_id) == {a.id, b.id, c.id}
        assert by_id[c.id]["archived"] is True and by_id[a.id]["archived"] is False
        assert all(r["snippet"][s:e].lower() == "login" for r in rows for s, e in r["marks"] if r["role"] != "title")

    def test_no_match_and_odd_query(self, home, capsys):
        m, here, *_ = home
        code, out = self._run(capsys, "search", 'NEAR("(*', "--project", str(here))
        assert code == 0 and out.out.strip() == "No matches."
