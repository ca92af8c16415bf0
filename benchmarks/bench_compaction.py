"""Benchmark of automatic compaction (issue 9): a 300-round session against a strict server.

Run as ``python -m benchmarks.bench_compaction``. Options: ``--rounds 300``, ``--window 8000``
(tokens; the fake server's limit, reported like vLLM), ``--quick`` (60 rounds, fewer load repeats).

What it does: the fake OpenAI server (``tests/support/fake_openai.py``, real HTTP on 127.0.0.1) enforces
a context limit (HTTP 400 ``context_length_exceeded`` past it) and reports usage; each round is
a user message, a tool call reading a ~3 KB file, its result and a text answer, run through
``core.agent.runner.run_session_stream`` on a JSONL store. Then ``load()`` + fold of a session
with 10 compaction entries is timed beside the same session without them.

Prints Markdown: request size per round (the server's own count; percentiles and the maximum
against the window and the compaction threshold), compactions and the time spent in them
(the summary requests included), rejected requests, and the load() comparison with its target
(≤ 1.1×).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LOAD_RATIO_MAX = 1.1


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def run_rounds(rounds: int, window: int, home: Path) -> dict:
    """The long session: returns request sizes, compaction times, counts."""
    # the data folder beside the workspace, never around it (a project folder inside anycode's
    # data folder is refused: core.session.manager.refuse_data_dir)
    os.environ["ANYCODE_HOME"] = str(home / "data")
    from core import LocalSessionStore, SessionManager
    from core.agent import context as ctx
    from core.agent.events import CompactionFinished, CompactionStarted
    from core.agent.runner import run_session_stream
    from tests.support.fake_openai import FakeOpenAI, count_tokens

    ctx.forget_windows()
    fake = FakeOpenAI().start()
    fake.context_limit, fake.window_api = window, "vllm"
    fake.models = ["bench-model"]  # listed with its max_model_len, as vLLM lists the model it serves
    ws = home / "ws"
    ws.mkdir(parents=True)
    (ws / "log.txt").write_text("2026-11-30 12:00:01 worker 7 restarted after a timeout of 30 s\n" * 48)
    store = LocalSessionStore(home / "data")
    manager = SessionManager(store)
    session = manager.create(ws)
    client = fake.client(timeout=30)
    compaction_s: list[float] = []
    started = 0.0
    t0 = time.perf_counter()
    try:
        for n in range(rounds):
            fake.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "log.txt"}}]},
                      {"text": f"Round {n}: the worker restarted again; nothing new."})
            for event in run_session_stream(session.key, store, f"Round {n}: check log.txt again",
                                            client=client, model="bench-model"):
                if isinstance(event, CompactionStarted):
                    started = time.perf_counter()
                elif isinstance(event, CompactionFinished):
                    compaction_s.append(time.perf_counter() - started)
        total = time.perf_counter() - t0
        chat = [r for r in fake.requests if r["path"] == "/v1/chat/completions"]
        sizes = [count_tokens(r["body"]) for r in chat if r["status"] == 200 and fake._kind(r["body"]) == "chat"]
        summaries = [r for r in chat if r["status"] == 200 and fake._kind(r["body"]) == "summary"]
        rejected = [r for r in chat if r["status"] != 200]
    finally:
        fake.stop()
    got = manager.get(session.key)
    return {"sizes": sizes, "compaction_s": compaction_s, "total_s": total, "rejected": len(rejected),
            "summary_requests": len(summaries), "messages": len(got.messages),
            "compactions": len(got.compactions), "rounds": rounds, "window": window,
            "threshold": int(window * 0.8)}


def load_comparison(home: Path, messages: int, repeats: int) -> dict:
    """load() + fold of the same session with 10 compaction entries and without any, each read
    by a fresh store (parsed, not from the store's cache)."""
    from core import LocalSessionStore, SessionManager
    from core.session.compaction import compaction_entry
    from core.session.entries import header_entry, message_entry
    from core.session.keys import SessionKey, new_session_id

    store = LocalSessionStore(home / "load")
    manager = SessionManager(store)
    body = "A line of ordinary conversation about the invoice module and its tests. " * 6
    msgs = [message_entry({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {body}"}, ts=1e9 + i)
            for i in range(messages)]
    keys = {}
    for name, every in (("without", None), ("with 10 compactions", messages // 10)):
        key = SessionKey("bench-project", new_session_id())
        entries = [header_entry(key.session_id, key.project_key, "/tmp/bench", created_at=1e9)]
        for i, entry in enumerate(msgs, 1):
            entries.append(entry)
            if every and i % every == 0:
                entries.append(compaction_entry("Summary: " + body * 3, i - 4, tokens_before=7000,
                                                tokens_after=2000, model="m", trigger="auto", ts=1e9 + i))
        store.create_whole(key, entries)
        keys[name] = key
    times: dict[str, list[float]] = {name: [] for name in keys}
    for _ in range(repeats):
        for name, key in keys.items():  # interleaved: drift hits both alike
            # A fresh store and manager each time: the file read and folded, as a first open
            # does (one store keeps an unchanged session parsed: core.stores.entry_cache).
            fresh = SessionManager(LocalSessionStore(home / "load"))
            t = time.perf_counter()
            session = fresh.get(key)
            times[name].append(time.perf_counter() - t)
            assert len(session.messages) == messages
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    return {"messages": messages, "medians": medians,
            "ratio": medians["with 10 compactions"] / medians["without"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds = 60 if args.quick else args.rounds
    import logging

    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="anycode-bench-compaction-") as tmp:
        res = run_rounds(rounds, args.window, Path(tmp))
        load = load_comparison(Path(tmp), 2000, 5 if args.quick else 15)
    sizes, comp = res["sizes"], res["compaction_s"]
    print(f"# Compaction benchmark ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs)\n")
    print(f"{res['rounds']} rounds (user message, a tool call reading a 3 KB file, its result, an answer) "
          f"against a server with a {res['window']:,}-token window (HTTP 400 past it); compaction at 80% "
          f"({res['threshold']:,} tokens).\n")
    print("| request size (server's count) | tokens | of the window |")
    print("|---|---:|---:|")
    for label, value in (("median", statistics.median(sizes)), ("p90", _pct(sizes, 90)),
                         ("p99", _pct(sizes, 99)), ("max", max(sizes))):
        print(f"| {label} | {value:,.0f} | {value / res['window']:.0%} |")
    print()
    print("| | |")
    print("|---|---:|")
    print(f"| model requests (chat) | {len(sizes):,} |")
    print(f"| requests rejected (context_length_exceeded) | {res['rejected']} |")
    print(f"| messages in the session file | {res['messages']:,} (all of them) |")
    print(f"| compactions | {res['compactions']} ({res['summary_requests']} summary requests) |")
    if comp:
        print(f"| time compacting, total | {sum(comp):.2f} s of {res['total_s']:.1f} s "
              f"({sum(comp) / res['total_s']:.0%}) |")
        print(f"| time per compaction, median / max | {statistics.median(comp) * 1000:.0f} ms / "
              f"{max(comp) * 1000:.0f} ms |")
    print()
    print(f"load() + fold of a {load['messages']:,}-message session (JSONL, medians):\n")
    print("| session | load() |")
    print("|---|---:|")
    for name, value in load["medians"].items():
        print(f"| {name} | {value * 1000:.1f} ms |")
    ok_size = max(sizes) <= res["threshold"] and res["rejected"] == 0
    ok_load = load["ratio"] <= LOAD_RATIO_MAX
    print(f"\n- every request under the threshold, none rejected: {'PASS' if ok_size else 'FAIL'}")
    print(f"- load() with 10 compactions / without: {load['ratio']:.2f}× (target ≤ {LOAD_RATIO_MAX}×): "
          f"{'PASS' if ok_load else 'FAIL'}")
    return 0 if ok_size and ok_load else 1


if __name__ == "__main__":
    sys.exit(main())
