"""Store migration: JSONL -> SQLite -> JSONL (and -> PostgreSQL) keeps every record, entry by entry,
with archived flags and sub-agent records; re-runs are safe; conflicts are reported, not
overwritten."""
from __future__ import annotations

from pathlib import Path

from core import LocalSessionStore, SessionKey, SessionManager, message_entry
from core.stores.migrate import migrate_sessions
from core.stores.sql_store import SqlSessionStore
from tests.support.pg_server import fresh_database_url


def user(text):
    return {"role": "user", "content": text}


def populate(store, tmp_path: Path) -> list[tuple[SessionKey, bool]]:
    """Two projects; titles, a fork, tool calls, odd text, archived sessions, sub-agent records
    (on an active and on an archived session). Returns every (record key, archived)."""
    mgr = SessionManager(store)
    records = []
    a = mgr.create(tmp_path / "proj-a", title="Fix the login bug")
    mgr.add_messages(a.key, [{"role": "system", "content": "be brief"}, user("hi é中🎉 \u2028"),
                             {"role": "assistant", "content": None, "tool_calls": [
                                 {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"x\"}"}}]},
                             {"role": "tool", "tool_call_id": "c1", "content": "```\nfile\n```"}])
    mgr.set_generated_title(a.key, "ignored, the user titled it")
    fork = mgr.fork(a.key, 1)
    b = mgr.create(tmp_path / "proj-a")
    mgr.add_messages(b.key, [user("second")])
    sub_b = SessionKey(b.key.project_key, b.id, "subagents/explorer")
    store.append(sub_b, [message_entry(user("sub-agent task"))])
    c = mgr.create(tmp_path / "proj-b", title="Old work")
    mgr.add_messages(c.key, [user("old")])
    sub_c = SessionKey(c.key.project_key, c.id, "subagents/deep/nested")
    store.append(sub_c, [message_entry(user("nested"))])
    mgr.archive(c.key)
    d = mgr.create(tmp_path / "proj-b")
    records += [(a.key, False), (fork.key, False), (b.key, False), (sub_b, False), (c.key, True),
                (sub_c, True), (d.key, False)]
    return records


def assert_same(source, target, records):
    for key, archived in records:
        assert target.load(key) == source.load(key), key
        if key.subpath is None:
            ids = {m.id for m in target.list(key.project_key, archived=archived)}
            assert key.session_id in ids, (key, archived)
    for pk in {k.project_key for k, _ in records}:
        for archived in (False, True):
            assert [m.id for m in target.list(pk, archived=archived)] == [m.id for m in source.list(pk, archived=archived)]


class TestRoundTrip:
    """Guards against sessions, sub-agent records, archived flags or entry details lost or
    altered by a migration between store kinds."""

    def test_jsonl_to_sqlite_to_jsonl(self, tmp_path):
        src = LocalSessionStore(tmp_path / "a", fsync=False)
        records = populate(src, tmp_path)
        sql = SqlSessionStore(f"sqlite:///{tmp_path / 'db.sqlite'}", fsync=False)
        report = migrate_sessions(src, sql)
        assert report.ok and report.records == len(records) and len(report.copied) == len(records)
        assert len(report.archive_synced) == 1
        assert_same(src, sql, records)

        back = LocalSessionStore(tmp_path / "b", fsync=False)
        report = migrate_sessions(sql, back)
        assert report.ok and len(report.copied) == len(records)
        assert_same(src, back, records)
        # The files themselves are byte-identical to the originals.
        for key, _ in records:
            rel = [p.relative_to(src.base_dir) for p in src.base_dir.rglob(f"{key.session_id}*.jsonl")]
            for r in rel:
                assert (back.base_dir / r).read_bytes() == (src.base_dir / r).read_bytes()
        sql.close()

    def test_jsonl_to_postgres(self, tmp_path):
        src = LocalSessionStore(tmp_path / "a", fsync=False)
        records = populate(src, tmp_path)
        pg = SqlSessionStore(fresh_database_url())
        report = migrate_sessions(src, pg)
        assert report.ok and len(report.copied) == len(records)
        assert_same(src, pg, records)
        pg.close()

    def test_subpaths_enumerated_in_jsonl(self, tmp_path):
        src = LocalSessionStore(tmp_path / "a", fsync=False)
        records = populate(src, tmp_path)
        subs = {(k.session_id, k.subpath) for k, _ in records if k.subpath}
        found = {(k.session_id, s) for k, _ in records if k.subpath is None for s in src.list_subpaths(k)}
        assert found == subs


class TestRerun:
    """Guards against duplicates on a re-run, a grown session not being brought up to date, and
    a differing target record being overwritten."""

    def test_rerun_skips_identical_and_extends_grown(self, tmp_path):
        src = LocalSessionStore(tmp_path / "a", fsync=False)
        records = populate(src, tmp_path)
        dst = SqlSessionStore(f"sqlite:///{tmp_path / 'db.sqlite'}", fsync=False)
        migrate_sessions(src, dst)
        again = migrate_sessions(src, dst)
        assert again.ok and len(again.identical) == len(records) and not again.copied and not again.extended
        grown = records[0][0]
        src.append(grown, [message_entry(user("added later"))])
        third = migrate_sessions(src, dst)
        assert third.ok and third.extended == [str(grown)]
        assert dst.load(grown) == src.load(grown)
        dst.close()

    def test_conflict_is_reported_and_left_alone(self, tmp_path):
        src = LocalSessionStore(tmp_path / "a", fsync=False)
        records = populate(src, tmp_path)
        dst = SqlSessionStore(f"sqlite:///{tmp_path / 'db.sqlite'}", fsync=False)
        migrate_sessions(src, dst)
        key = records[2][0]
        dst.append(key, [message_entry(user("written only in the target"))])
        theirs = dst.load(key)
        report = migrate_sessions(src, dst)
        assert not report.ok and [k for k, _ in report.conflicts] == [str(key)]
        assert dst.load(key) == theirs
        assert len(report.identical) == len(records) - 1
        dst.close()

    def test_archive_flag_follows_the_source(self, tmp_path):
        src = LocalSessionStore(tmp_path / "a", fsync=False)
        records = populate(src, tmp_path)
        dst = LocalSessionStore(tmp_path / "b", fsync=False)
        migrate_sessions(src, dst)
        key = records[0][0]
        src.archive(key)
        report = migrate_sessions(src, dst)
        assert report.ok and report.archive_synced == [str(key)]
        assert key.session_id in {m.id for m in dst.list(key.project_key, archived=True)}
