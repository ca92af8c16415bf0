"""Benchmark of the SQL session store on SQLite and PostgreSQL: ``list()``, ``append`` and ``load()``.

Run as ``python -m benchmarks.bench_sql`` (or ``python benchmarks/bench_sql.py``). Options:
``--sessions 1000,10000`` (list sizes), ``--messages 20`` (messages per listed session: list()
reads session rows only, so this just sizes the database), ``--pg-url URL`` (default
``$ANYCODE_TEST_PG_URL``, else a throwaway server as the tests start one; that server runs with
``fsync=off``, so its append times are a floor, said in the output), ``--no-pg``, ``--quick``.

Prints Markdown tables shaped like ``benchmarks/bench_store.py``'s (same message pool): list()
warm (same store) and cold (fresh store instance: new connection pool), append p50/p99 of a
user+assistant round on a 200-message session, and load() of a 10,000-message session against
bare ``json.loads`` of the same lines. Data goes to a temp dir / fresh schema, removed at the end.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_store import LOAD_MESSAGES, LIST_WARM_MAX_S, Pool, machine_info, med, ms, pct, timed  # noqa: E402
from core.session.entries import message_entry  # noqa: E402
from core.session.keys import SessionKey, new_session_id  # noqa: E402
from core.stores.sql_store import SqlSessionStore, encode_entry  # noqa: E402

PROJECT = "-home-dev-projects-anycode-demo-0123456789abcdef"


def populate(store: SqlSessionStore, pool: Pool, n_sessions: int, n_messages: int, seed: int) -> None:
    """Write ``n_sessions`` sessions through ``append`` (one transaction per session, as in use)."""
    rng = random.Random(seed)
    now = time.time()
    for _ in range(n_sessions):
        sid = new_session_id()
        created = now - rng.uniform(0, 30 * 86400) - n_messages * 40
        store.append(SessionKey(PROJECT, sid), pool.session_entries(sid, PROJECT, n_messages, created, rng))


def bench_backend(name: str, make_url: Any, args: argparse.Namespace, pool: Pool, out: dict[str, list[str]]) -> None:
    """Fill one backend and append its rows to the ``out`` tables. ``make_url()`` -> an empty DB URL."""
    quick = args.quick
    for n in [int(s) for s in args.sessions.split(",") if s.strip()]:
        url = make_url()
        store = SqlSessionStore(url, fsync=False)
        t0 = time.perf_counter()
        populate(store, pool, n, args.messages, seed=n)
        fill = time.perf_counter() - t0
        assert len(store.list(PROJECT)) == n
        warm = timed(lambda: store.list(PROJECT), 5 if quick else 15)

        def fresh() -> SqlSessionStore:
            return SqlSessionStore(url, fsync=False)

        def cold_list(s: SqlSessionStore) -> Any:
            try:
                return s.list(PROJECT)
            finally:
                s.close()

        cold = timed(cold_list, 3 if quick else 7, setup=fresh)
        out["list"].append(f"| {name} | {n:,} | {ms(fill)} ({fill / n * 1000:.2f} ms/session) | {ms(med(warm))} "
                           f"| {ms(med(cold))} | {'PASS' if med(warm) <= LIST_WARM_MAX_S else 'FAIL'} |")
        store.close()

    for fsync in ([True, False] if name == "SQLite" else [None]):
        url = make_url()
        store = SqlSessionStore(url, fsync=bool(fsync))
        key = SessionKey(PROJECT, new_session_id())
        store.append(key, pool.session_entries(key.session_id, PROJECT, 200, time.time() - 9999, random.Random(1)))
        rounds = 50 if quick else 200
        times = []
        for i in range(rounds):
            entries = [message_entry(pool.user[i % pool.VARIANTS]), message_entry(pool.assistant[i % pool.VARIANTS])]
            t0 = time.perf_counter()
            store.append(key, entries)
            times.append(time.perf_counter() - t0)
        label = {True: "on (synchronous=FULL)", False: "off (synchronous=NORMAL)"}.get(fsync, args.pg_fsync)
        out["append"].append(f"| {name} | user+assistant | {label} | {rounds} | {ms(pct(times, 50))} | {ms(pct(times, 99))} |")
        store.close()

    url = make_url()
    store = SqlSessionStore(url, fsync=False)
    key = SessionKey(PROJECT, new_session_id())
    entries = pool.session_entries(key.session_id, PROJECT, LOAD_MESSAGES, time.time() - 10**6, random.Random(2))
    store.append(key, entries)
    lines = [encode_entry(e)[0] for e in entries]
    runs = 3 if quick else 7
    t_store = timed(lambda: store.load(key), runs)
    t_bare = timed(lambda: [json.loads(s) for s in lines], runs)
    assert store.load(key) == entries
    out["load"].append(f"| {name} | {len(entries):,} | {ms(med(t_store))} | {ms(med(t_bare))} "
                       f"| {med(t_store) / med(t_bare):.2f}× |")
    store.close()


def main(argv: list[str] | None = None) -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1000,10000", help="comma-separated session counts for list()")
    ap.add_argument("--messages", type=int, default=20, help="messages per listed session")
    ap.add_argument("--pg-url", default=os.environ.get("ANYCODE_TEST_PG_URL", ""), help="PostgreSQL server URL")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args(argv)
    args.pg_fsync = ""
    pool = Pool()
    tmp = Path(tempfile.mkdtemp(prefix="anycode-bench-sql-"))
    out: dict[str, list[str]] = {"list": [], "append": [], "load": []}
    notes = []
    counter = iter(range(10**6))
    try:
        bench_backend("SQLite", lambda: f"sqlite:///{tmp / f'db{next(counter)}.sqlite'}", args, pool, out)
        if not args.no_pg:
            server = None
            try:
                from sqlalchemy.engine import make_url

                from tests.support import pg_server

                if args.pg_url:
                    server = pg_server.PgServer(args.pg_url)
                    args.pg_fsync = "server's setting"
                else:
                    server = pg_server._start_throwaway()
                    args.pg_fsync = "off (throwaway server, fsync=off)"

                def pg_url() -> str:
                    name = f"bench_{next(counter)}_{os.getpid()}"
                    pg_server._admin_exec(server.url, f'CREATE SCHEMA "{name}"')
                    server.schemas.append(name)
                    return make_url(server.url).update_query_dict({"options": f"-csearch_path={name}"}).render_as_string(
                        hide_password=False)

                bench_backend("PostgreSQL", pg_url, args, pool, out)
            except Exception as e:  # no server: say so, keep the SQLite results
                notes.append(f"PostgreSQL skipped: {e}")
            finally:
                if server is not None:
                    server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["# SQL session store benchmark", ""] + machine_info() + [""]
    lines += ["## list() (one indexed query; entries never read)", "",
              f"| store | sessions | fill via append | list() warm | list() cold (fresh instance) | warm ≤ {ms(LIST_WARM_MAX_S)} |",
              "|---|---:|---:|---:|---:|---|"] + out["list"]
    lines += ["", "## append (one transaction: lock row, insert entries, update metadata)", "",
              "| store | round | fsync | rounds | p50 | p99 |", "|---|---|---|---:|---:|---:|"] + out["append"]
    lines += ["", f"## load() of a {LOAD_MESSAGES:,}-message session", "",
              "| store | entries | store.load() | bare json.loads per row | ratio |", "|---|---:|---:|---:|---:|"] + out["load"]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
