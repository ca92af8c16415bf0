"""``python -m core.stores.index_helper``: a helper process of
:func:`core.stores.jsonl_index.scan_many`. Reads session file paths, one per line, on stdin and
prints their index records as one JSON array of ``[path, record or null]`` on stdout.

A module of its own (not ``python -m core.stores.jsonl_index``) because ``import core`` already
imports the index module, and running an imported module as ``__main__`` runs it twice.
"""
from __future__ import annotations

import sys

import orjson

from core.stores.jsonl_index import _scan_batch


def main() -> int:
    """Scan the paths on stdin; write the records to stdout; exit status 0."""
    paths = [p for p in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\n") if p]
    sys.stdout.buffer.write(orjson.dumps(_scan_batch(paths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
