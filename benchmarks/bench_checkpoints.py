"""Benchmark of checkpoints (issue 29): what recording a checkpoint adds to a ``write_file``, and
the blob storage of many small edits of one file.

Run as ``python -m benchmarks.bench_checkpoints`` (``--writes N``, ``--kib K``; defaults 1,000
writes of a 100 KiB file). Measures, on this machine's disk, in a temporary folder:

- ``write_file`` alone and with a recorder attached (the old file read and hashed, old and new
  bytes stored as blobs, fsynced, before the rename): p50 and p95 per write, and the added p50;
- blob storage after N writes of a K KiB source-like text file, each changing one line (every
  version's bytes kept, zlib-compressed, named by their SHA-256), against the raw bytes.

Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.agent.checkpoints import Recorder  # noqa: E402
from core.agent.tools import Workspace, write_file  # noqa: E402
from core.stores.blobs import BlobStore  # noqa: E402


def source_text(kib: int, rng: random.Random) -> list[str]:
    """Lines of a Python-like file of about ``kib`` KiB (names vary, as in real code)."""
    words = ["parse", "value", "token", "index", "buffer", "result", "config", "session", "entry", "offset"]
    lines, size = [], 0
    n = 0
    while size < kib * 1024:
        a, b = rng.choice(words), rng.choice(words)
        line = f"    {a}_{n} = compute_{b}({a}, {rng.randint(0, 10_000)})  # step {n}\n"
        lines.append(line)
        size += len(line)
        n += 1
    return lines


def run(writes: int, kib: int) -> list[tuple[str, str]]:
    rng = random.Random(29)
    with tempfile.TemporaryDirectory(prefix="anycode-bench-cp-") as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        ws = Workspace(root)
        lines = source_text(kib, rng)
        times: dict[str, list[float]] = {"plain": [], "checkpointed": []}
        blobs = BlobStore(Path(tmp) / "blobs")
        raw = 0
        for i in range(writes):
            lines[rng.randrange(len(lines))] = f"    edited_{i} = {rng.random()}\n"  # a small edit
            content = "".join(lines)
            for kind in ("plain", "checkpointed"):
                name = f"{kind}.py"
                object.__setattr__(ws, "recorder", Recorder(blobs) if kind == "checkpointed" else None)
                t0 = time.perf_counter()
                write_file(ws, name, content)
                times[kind].append(time.perf_counter() - t0)
            raw += len(content.encode())
        stored = blobs.size_on_disk()
        count = sum(1 for _ in blobs.names())

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))] * 1000

    plain50, cp50 = statistics.median(times["plain"]) * 1000, statistics.median(times["checkpointed"]) * 1000
    return [
        ("write_file p50 / p95, no checkpoint", f"{plain50:.2f} / {pct(times['plain'], .95):.2f} ms"),
        ("write_file p50 / p95, checkpointed", f"{cp50:.2f} / {pct(times['checkpointed'], .95):.2f} ms"),
        ("added by the checkpoint, p50", f"{cp50 - plain50:.2f} ms"),
        (f"blobs after {writes:,} writes of {kib} KiB", f"{count:,} blobs, {stored / 2**20:.1f} MiB on disk"),
        ("the same versions raw", f"{raw / 2**20:.1f} MiB ({stored / raw:.0%} of it stored)"),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--writes", type=int, default=1000)
    p.add_argument("--kib", type=int, default=100)
    args = p.parse_args(argv)
    rows = run(args.writes, args.kib)
    print("| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
