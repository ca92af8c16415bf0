"""SqlSessionStore beyond the shared contract: multi-process appends, schema migrations, the
optional extra, database errors, list() cost, positioned appends, and store selection.

The contract itself (tests/core/stores/test_store_contract.py) runs against SQLite and PostgreSQL through
STORE_FACTORIES in conftest.py.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from core import LocalSessionStore, SessionConflict, SessionKey, StoreUnavailable, header_entry, message_entry
from core.stores.sql_store import SqlSessionStore
from core.storage import open_store
from core.stores.factory import store_from_spec
from tests.support.pg_server import fresh_database_url

ROOT = Path(__file__).resolve().parents[3]
PK = "-home-user-proj-0123456789abcdef"


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path) -> str:
    """An empty database of each kind (postgres skips with the reason when no server starts)."""
    return sqlite_url(tmp_path) if request.param == "sqlite" else fresh_database_url()


def run_children(script: str, argvs: list[list[str]], timeout: float = 120) -> list[str]:
    """Run ``python -c script`` once per argv, all at once; return their stdouts (fail on error)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_FSYNC": "0"}
    procs = [subprocess.Popen([sys.executable, "-c", script, *a], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argvs]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-3000:]
        outs.append(out)
    return outs


# Each child opens the store itself (so they race on creating the schema of an empty database),
# says so with a file, waits for the start file (the parent writes the header first: only a header
# starts a session), then appends N times a group of 1..3 entries tagged [writer, i, j, size].
APPENDER = textwrap.dedent("""
    import os, sys, time
    from core import SessionKey, message_entry
    from core.stores.sql_store import SqlSessionStore
    url, pk, sid, writer, n, go = sys.argv[1:7]
    store = SqlSessionStore(url)
    key = SessionKey(pk, sid)
    open(go + "." + writer, "w").close()  # opened (schema created or found)
    while not os.path.exists(go):
        time.sleep(0.002)
    for i in range(int(n)):
        size = 1 + (i % 3)
        store.append(key, [message_entry({"role": "user", "content": f"{writer}|{i}|{j}|{size}"}) for j in range(size)])
""")

# Compare-and-swap appenders: load, append with expected_count, retry on conflict; print the counts.
CAS = textwrap.dedent("""
    import os, sys, time
    from core import SessionConflict, SessionKey, message_entry
    from core.stores.sql_store import SqlSessionStore
    url, pk, sid, writer, n, go = sys.argv[1:7]
    store = SqlSessionStore(url)
    key = SessionKey(pk, sid)
    open(go + "." + writer, "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    got = []
    while len(got) < int(n):
        count = sum(1 for e in (store.load(key) or []) if e.get("type") == "message")
        try:
            got.append(store.append(key, [message_entry({"role": "user", "content": writer})], expected_count=count))
        except SessionConflict:
            continue
    print(" ".join(map(str, got)))
""")


def start_when_open(procs, go: Path, writers: int, url: str, sid: str) -> SqlSessionStore:
    """Wait until every child has opened the store, write the session's header, start them."""
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.w{w}").exists() for w in range(writers)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
            [p.stderr.read()[-2000:] for p in procs if p.poll() is not None]
        time.sleep(0.01)
    store = SqlSessionStore(url)
    store.append(SessionKey(PK, sid), [header_entry(sid, PK, "/x")])
    go.touch()
    return store


class TestConcurrentProcesses:
    """Guards against lost or interleaved appends when several processes write one session
    (missing row lock / BEGIN IMMEDIATE, racing schema creation, racing row creation)."""

    def test_appends_lose_nothing_and_never_interleave(self, db_url, tmp_path):
        writers, n = 4, 30
        sid = "shared-session"
        go = tmp_path / "go"
        argvs = [[db_url, PK, sid, f"w{w}", str(n), str(go)] for w in range(writers)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_FSYNC": "0"}
        procs = [subprocess.Popen([sys.executable, "-c", APPENDER, *a], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argvs]
        store = start_when_open(procs, go, writers, db_url, sid)
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]

        entries = store.load(SessionKey(PK, sid))[1:]  # after the header
        tags = [e["message"]["content"].split("|") for e in entries]
        assert len(tags) == writers * sum(1 + (i % 3) for i in range(n))
        pos = 0
        seen = {f"w{w}": -1 for w in range(writers)}
        while pos < len(tags):
            writer, i, j, size = tags[pos][0], int(tags[pos][1]), int(tags[pos][2]), int(tags[pos][3])
            assert j == 0 and i == seen[writer] + 1, f"entry {pos} out of order: {tags[pos]}"
            group = tags[pos:pos + size]
            assert group == [[writer, str(i), str(k), str(size)] for k in range(size)], f"interleaved at {pos}"
            seen[writer] = i
            pos += size
        assert all(v == n - 1 for v in seen.values())
        meta = store.list(PK)[0]
        assert meta.message_count == len(entries) == store.entry_count(SessionKey(PK, sid)) - 1
        store.close()

    def test_expected_count_is_atomic_across_processes(self, db_url, tmp_path):
        writers, n = 3, 15
        go = tmp_path / "go"
        argvs = [[db_url, PK, "cas-session", f"w{w}", str(n), str(go)] for w in range(writers)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_FSYNC": "0"}
        procs = [subprocess.Popen([sys.executable, "-c", CAS, *a], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argvs]
        store = start_when_open(procs, go, writers, db_url, "cas-session")
        counts = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]
            counts += [int(c) for c in out.split()]
        # Every successful compare-and-swap got a distinct count: no two "won" the same slot.
        assert sorted(counts) == list(range(1, writers * n + 1))
        assert len(store.load(SessionKey(PK, "cas-session"))) == 1 + writers * n
        store.close()


class TestSchema:
    """Guards against unrecorded, re-applied or skipped migrations, and against opening a
    database written by a newer version."""

    def versions(self, url: str) -> list[int]:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT version FROM anycode_schema_version ORDER BY version")).scalars().all()
        engine.dispose()
        return list(rows)

    def test_fresh_database_records_every_migration_once(self, db_url):
        from core.stores.sql_schema import LATEST, MIGRATIONS

        SqlSessionStore(db_url).close()
        SqlSessionStore(db_url).close()  # re-open: nothing applied twice
        assert self.versions(db_url) == [v for v, _, _ in MIGRATIONS] == list(range(1, LATEST + 1))

    def test_old_database_is_upgraded_and_keeps_data(self, tmp_path, monkeypatch):
        from core.stores import sql_schema

        url = sqlite_url(tmp_path)
        first = SqlSessionStore(url)
        key = SessionKey(PK, "kept")
        first.append(key, [header_entry("kept", PK, "/x", created_at=5.0)])
        first.close()
        # Turn it into a database as version 1 left it: what later steps added goes again.
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("DROP INDEX anycode_sessions_list"))
            conn.execute(sa.text("DROP TABLE anycode_memory"))
            conn.execute(sa.text("DROP TABLE anycode_leases"))
            conn.execute(sa.text("DROP TABLE anycode_blobs"))
            for column in ("version_of", "current_version", "pinned", "tags"):
                conn.execute(sa.text(f"ALTER TABLE anycode_sessions DROP COLUMN {column}"))
            conn.execute(sa.text("DELETE FROM anycode_schema_version WHERE version > 1"))
        engine.dispose()
        assert self.versions(url) == [1]
        new = SqlSessionStore(url)
        assert self.versions(url) == [v for v, _, _ in sql_schema.MIGRATIONS]  # every later step
        assert new.load(key) == [header_entry("kept", PK, "/x", created_at=5.0)]
        assert [m.id for m in new.list(PK)] == ["kept"]
        engine = sa.create_engine(url)
        assert "anycode_sessions_list" in {i["name"] for i in sa.inspect(engine).get_indexes("anycode_sessions")}
        engine.dispose()
        new.close()

    def test_newer_database_is_refused(self, tmp_path):
        url = sqlite_url(tmp_path)
        SqlSessionStore(url).close()
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO anycode_schema_version VALUES (99, 'future', 0)"))
        engine.dispose()
        with pytest.raises(StoreUnavailable, match="newer"):
            SqlSessionStore(url)


class TestFailures:
    """Guards against raw driver tracebacks or hangs instead of one readable StoreUnavailable."""

    def test_extra_missing(self, tmp_path):
        script = textwrap.dedent(f"""
            import sys
            sys.modules["sqlalchemy"] = None  # as if anycode[sql] were not installed
            import core
            from core.errors import StoreUnavailable
            for make in (lambda: core.SqlSessionStore("sqlite:///{tmp_path}/x.db"),
                         lambda: core.open_store("sqlite:///{tmp_path}/x.db")):
                try:
                    make()
                except StoreUnavailable as e:
                    print(e)
        """)
        out = run_children(script, [[]])[0]
        assert out.count("install anycode[sql]") == 2

    def test_unreachable_postgres(self):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again: nothing listens there
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="The session database is unreachable"):
            SqlSessionStore(f"postgresql+psycopg://nobody:secret@127.0.0.1:{port}/nothing")
        assert time.monotonic() - started < 15

    def test_password_never_shown(self):
        with pytest.raises(StoreUnavailable) as info:
            SqlSessionStore("postgresql+psycopg://nobody:s3cr3t@127.0.0.1:1/nothing")
        assert "s3cr3t" not in str(info.value)

    @pytest.mark.parametrize("url", ["mysql://x@localhost/db", "not a url://", "oracle+cx://a@b/c"])
    def test_unsupported_urls(self, url):
        with pytest.raises(StoreUnavailable):
            SqlSessionStore(url)

    def test_sqlite_locked_past_timeout_is_unavailable(self, tmp_path, monkeypatch):
        import core.stores.sql_store as mod

        monkeypatch.setattr(mod, "BUSY_TIMEOUT", 0.2)
        url = sqlite_url(tmp_path)
        store = SqlSessionStore(url)
        blocker = __import__("sqlite3").connect(tmp_path / "sessions.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreUnavailable):
                store.append(SessionKey(PK, "s"), [header_entry("s", PK, "/x")])
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        store.append(SessionKey(PK, "s"), [header_entry("s", PK, "/x")])  # works once the lock is gone
        store.close()


class TestStorage:
    """Guards against entries changed on the way through the database, list() reading entries
    (or one query per session), duplicate positioned appends, and world-readable files."""

    def test_entries_come_back_exactly_as_in_the_jsonl_store(self, db_url, tmp_path):
        entries = [
            {"type": "header", "zeta": 1, "alpha": [1, 2.5, None, True], "id": "x", "created_at": 1764504000.123456789},
            message_entry({"role": "user", "content": "é中🎉 \u2028 \x00 \"q\" \\ \n"}, ts=1.0),
            {"type": "future-kind", "big": 2**62, "neg": -0.0, "nested": {"b": {"a": []}}},
            message_entry({"role": "user", "content": "lone \ud800 surrogate"}, ts=2.0),
        ]
        sql, jsonl = SqlSessionStore(db_url), LocalSessionStore(tmp_path / "j")
        key = SessionKey(PK, "exact")
        sql.append(key, entries)
        jsonl.append(key, entries)
        got = sql.load(key)
        assert got == jsonl.load(key)
        assert [list(e) for e in got] == [list(e) for e in jsonl.load(key)]  # key order kept (text, not JSONB)
        assert got[3]["message"]["content"] == "lone \ufffd surrogate"
        sql.close()

    def test_list_is_one_query_without_entries(self, db_url):
        store = SqlSessionStore(db_url)
        for i in range(20):
            k = SessionKey(PK, f"s{i:02d}")
            store.append(k, [header_entry(k.session_id, PK, "/x", created_at=float(i))]
                         + [message_entry({"role": "user", "content": "m"}, ts=100.0 + i) for _ in range(3)])
        statements: list[str] = []
        sa.event.listen(store.engine, "before_cursor_execute",
                        lambda conn, cur, stmt, *a: statements.append(stmt))
        metas = store.list(PK)
        selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(selects) == 1 and "anycode_entries" not in selects[0]
        assert [m.id for m in metas] == [f"s{i:02d}" for i in reversed(range(20))]
        assert all(m.message_count == 3 for m in metas)
        store.close()

    def test_append_at_skips_what_it_has_and_refuses_gaps(self, db_url):
        store = SqlSessionStore(db_url)
        key = SessionKey(PK, "pos")
        batch = [header_entry("pos", PK, "/x")] + [message_entry({"role": "user", "content": str(i)}) for i in range(4)]
        assert store.append_at(key, batch[:3], 0) == 3
        assert store.append_at(key, batch[:3], 0) == 3  # same range again: nothing added
        assert store.append_at(key, batch[1:], 1) == 5  # overlapping range: only the new tail
        assert store.load(key) == batch
        with pytest.raises(SessionConflict):
            store.append_at(key, batch[:1], 7)  # a gap
        assert store.load(key) == batch
        assert store.list(PK)[0].message_count == 4
        store.close()

    def test_only_a_header_starts_a_main_session(self, db_url):
        from core import SessionNotFound

        store = SqlSessionStore(db_url)
        key = SessionKey(PK, "gone")
        with pytest.raises(SessionNotFound):
            store.append(key, [message_entry({"role": "user", "content": "late"})])
        assert store.load(key) is None and store.list(PK) == []
        sub = SessionKey(PK, "gone", "subagents/a")  # sub-agent records need no header
        store.append(sub, [message_entry({"role": "user", "content": "x"})])
        assert store.exists(sub) and not store.exists(key)
        store.close()

    def test_sqlite_file_is_private(self, tmp_path):
        SqlSessionStore(f"sqlite:///{tmp_path / 'deep' / 'sessions.db'}").close()
        assert stat.S_IMODE((tmp_path / "deep" / "sessions.db").stat().st_mode) == 0o600

    def test_list_subpaths(self, db_url):
        store = SqlSessionStore(db_url)
        main = SessionKey(PK, "parent")
        store.append(main, [header_entry("parent", PK, "/x")])
        for sub in ("subagents/b", "subagents/a"):
            store.append(SessionKey(PK, "parent", sub), [message_entry({"role": "user", "content": sub})])
        store.archive(main)
        assert store.list_subpaths(main) == ["subagents/a", "subagents/b"]
        store.close()


class TestOpenStore:
    """Guards against the wrong store being opened for a setting (the agent and UI get whatever
    open_store returns, so a mistake here silently writes sessions somewhere else)."""

    def test_default_is_jsonl_in_the_data_dir(self, anycode_home, monkeypatch):
        monkeypatch.delenv("ANYCODE_STORE", raising=False)
        monkeypatch.delenv("ANYCODE_MIRROR", raising=False)
        storage = open_store()
        assert isinstance(storage.sessions, LocalSessionStore) and storage.sessions.base_dir == anycode_home
        assert storage.local is storage.sessions and storage.mirror is None and storage.data_dir == anycode_home

    def test_env_and_argument(self, tmp_path, monkeypatch):
        monkeypatch.delenv("ANYCODE_MIRROR", raising=False)
        monkeypatch.setenv("ANYCODE_STORE", sqlite_url(tmp_path))
        with open_store() as storage:
            assert isinstance(storage.sessions, SqlSessionStore) and storage.sessions.dialect == "sqlite"
        assert isinstance(open_store("jsonl", tmp_path / "b").sessions, LocalSessionStore)  # argument beats env
        other = store_from_spec(f"jsonl:{tmp_path / 'elsewhere'}")
        assert other.base_dir == tmp_path / "elsewhere"

    def test_relative_sqlite_path_is_in_the_data_dir(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        store = store_from_spec("sqlite:///sessions.db", tmp_path / "data")
        store.close()
        assert (tmp_path / "data" / "sessions.db").is_file() and not (tmp_path / "sessions.db").exists()

    def test_bare_postgres_scheme_means_psycopg(self, pg_server):
        url = fresh_database_url().replace("postgresql+psycopg://", "postgres://")
        store = store_from_spec(url)
        assert store.engine.url.drivername == "postgresql+psycopg"
        store.close()

    def test_unknown_spec(self):
        with pytest.raises(StoreUnavailable, match="Unknown session store"):
            open_store("mongo")

    def test_mirror_env_wraps(self, tmp_path, monkeypatch):
        from core.stores.mirror import MirroredSessionStore

        monkeypatch.setenv("ANYCODE_MIRROR", sqlite_url(tmp_path))
        with open_store("jsonl", tmp_path / "home") as storage:
            assert isinstance(storage.sessions, MirroredSessionStore) and storage.mirror is storage.sessions
            assert isinstance(storage.local, LocalSessionStore) and storage.mirror.mirrors_from(storage.local)
            assert storage.mirror.outbox.path == tmp_path / "home" / "mirror" / "outbox.sqlite3"

    def test_unreachable_mirror_does_not_stop_the_app(self, tmp_path):
        storage = open_store("jsonl", tmp_path / "home", mirror="postgresql+psycopg://x@127.0.0.1:1/none")
        try:
            key = SessionKey(PK, "s")
            storage.sessions.append(key, [header_entry("s", PK, "/x")])
            assert storage.sessions.load(key) is not None
        finally:
            storage.close(timeout=0.1)


# pg_server fixture used by TestOpenStore
from tests.support.pg_server import pg_server  # noqa: E402,F401
