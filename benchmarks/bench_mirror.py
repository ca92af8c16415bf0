"""Mirror lag and catch-up per backend (issue 26): a JSONL primary mirrored to SQLite, PostgreSQL,
S3 and Redis, each a real server on 127.0.0.1 (a throwaway PostgreSQL, moto's S3 server,
redis-server).

For each backend it prints:

- the local write (``append`` of one message through the mirrored store) p50/p99 — what the user
  waits for; the mirror must not add to it;
- the mirror lag p50/p99: from an append returning to its entry being readable in the mirror
  (polled every 2 ms), one append every 20 ms;
- the catch-up after an outage: the mirror refuses every call while ``--outage`` messages are
  written across 5 sessions, then comes back; the time until the outbox is empty and every
  copy equals its primary.

    python -m benchmarks.bench_mirror            # about 1-2 minutes
    python -m benchmarks.bench_mirror --quick    # fewer rounds
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_store import machine_info, med, ms, pct  # noqa: E402
from core import LocalSessionStore, SessionKey, header_entry, message_entry  # noqa: E402
from core.stores.mirror import MirroredSessionStore  # noqa: E402


class Gate:
    """A mirror wrapper that raises while ``down`` is set (an outage), else passes through."""

    def __init__(self, inner: Any):
        self.inner, self.down = inner, False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise ConnectionError("mirror is down")
            return target(*args, **kwargs)

        return call

    def append(self, *args: Any, **kwargs: Any) -> Any:  # an attribute of its own: a store, not an opener
        if self.down:
            raise ConnectionError("mirror is down")
        return self.inner.append(*args, **kwargs)


def _count(mirror: Any, key: SessionKey) -> int:
    counter = getattr(mirror, "entry_count", None)
    return counter(key) if callable(counter) else len(mirror.load(key) or [])


def bench(name: str, open_mirror: Callable[[], Any], rounds: int, outage: int, tmp: Path) -> str:
    """One backend's table row."""
    mirror = open_mirror()
    gate = Gate(mirror)
    folder = tmp / name
    store = MirroredSessionStore(LocalSessionStore(folder / "primary", fsync=False), gate,
                                 outbox_path=folder / "outbox.sqlite3", retry_initial=0.05, retry_max=0.2,
                                 poll_interval=0.05)
    pk = "-bench-mirror-0123456789abcdef"
    try:
        key = SessionKey(pk, "lag")
        store.append(key, [header_entry("lag", pk, "/bench")])
        store.flush(30)
        writes, lags = [], []
        for i in range(rounds):
            t0 = time.perf_counter()
            n = store.append(key, [message_entry({"role": "user", "content": f"message {i}"})])
            t1 = time.perf_counter()
            writes.append(t1 - t0)
            want = n + 1  # entries: the header and n messages
            while _count(mirror, key) < want:
                time.sleep(0.002)
                if time.perf_counter() - t1 > 30:
                    raise RuntimeError(f"{name}: the mirror did not catch up within 30 s")
            lags.append(time.perf_counter() - t1)
            time.sleep(0.02)
        gate.down = True
        keys = [SessionKey(pk, f"outage{j}") for j in range(5)]
        for k in keys:
            store.append(k, [header_entry(k.session_id, pk, "/bench")])
        for i in range(outage):
            store.append(keys[i % 5], [message_entry({"role": "assistant", "content": "x" * 200 + str(i)})])
        t0 = time.perf_counter()
        gate.down = False
        ok = store.flush(300)
        catch_up = time.perf_counter() - t0
        same = ok and all(mirror.load(k) == store.primary.load(k) for k in keys)
    finally:
        store.close()
        close = getattr(mirror, "close", None)
        if callable(close):
            close()
    return (f"| {name} | {ms(med(writes))} | {ms(pct(writes, 99))} | {ms(med(lags))} | {ms(pct(lags, 99))} "
            f"| {outage:,} messages, 5 sessions | {catch_up:.2f} s | {'yes' if same else 'NO'} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="appends timed for the lag")
    ap.add_argument("--outage", type=int, default=500, help="messages written while the mirror is down")
    ap.add_argument("--quick", action="store_true", help="50 rounds, 200 messages in the outage")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.outage = 50, 200
    os.environ.setdefault("ANYCODE_FSYNC", "0")
    tmp = Path(tempfile.mkdtemp(prefix="anycode-bench-mirror-"))
    rows, notes, stops = [], [], []
    backends: list[tuple[str, Callable[[], Callable[[], Any]]]] = []

    def sqlite() -> Callable[[], Any]:
        from core.stores.sql_store import SqlSessionStore

        return lambda: SqlSessionStore(f"sqlite:///{tmp / 'mirror.sqlite'}", fsync=False)

    def postgres() -> Callable[[], Any]:
        from core.stores.sql_store import SqlSessionStore
        from tests import pg_server

        server = pg_server._start_throwaway()
        stops.append(server.stop)
        return lambda: SqlSessionStore(server.url, fsync=False)

    def s3() -> Callable[[], Any]:
        from core.stores.s3_store import S3SessionStore
        from tests.support.s3_server import fresh_s3_url

        url = fresh_s3_url()
        return lambda: S3SessionStore(url)

    def redis() -> Callable[[], Any]:
        from core.stores.redis_store import RedisSessionStore
        from tests.support.redis_server import start_redis

        proc, port, _ = start_redis()
        stops.append(proc.kill)
        return lambda: RedisSessionStore(f"redis://127.0.0.1:{port}/0")

    backends = [("SQLite", sqlite), ("PostgreSQL", postgres), ("S3 (moto server)", s3), ("Redis", redis)]
    try:
        for name, make in backends:
            try:
                opener = make()
            except BaseException as err:  # noqa: BLE001 - pytest.skip from a helper, a missing server
                notes.append(f"{name} skipped: {err}")
                continue
            rows.append(bench(name, opener, args.rounds, args.outage, tmp))
            print(rows[-1], flush=True)
    finally:
        for stop in stops:
            try:
                stop()
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["# Mirror benchmark", ""] + machine_info() + ["", f"One append every 20 ms, {args.rounds} rounds; lag = "
             "append returned → entry readable in the mirror.", "",
             "| mirror | local write p50 | local write p99 | lag p50 | lag p99 | outage | catch-up | copies equal |",
             "|---|---:|---:|---:|---:|---|---:|---|"] + rows
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
