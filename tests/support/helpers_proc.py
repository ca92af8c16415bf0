"""Child-process scripts for the concurrency and crash tests (run as ``python -m tests.support.helpers_proc``).

Commands (all take the store's base dir, a project key and a session id first):

``append BASE PK SID WRITER N START_FILE``
    wait until START_FILE exists (so every writer starts together), then append N messages whose
    content is :func:`payload` (WRITER, i), one append each.
``ack BASE PK SID RUN``
    append :func:`payload` (RUN, i, big=True) for i = 0, 1, ... forever, printing ``ack <i>`` on stdout
    (flushed) after each append has returned; the parent kills it with SIGKILL.
``cas BASE PK SID WRITER N``
    N times: load the session, append one message with ``expected_count`` = the loaded count,
    retrying on SessionConflict; print every count ``append`` returned, one per line.
``list BASE PK``
    print ``[id, title, message_count, updated_at]`` of each listed session as one JSON line.
``touch BASE PK SID TEXT``
    append one user message TEXT.
"""
from __future__ import annotations

import json
import os
import random
import sys
import time

from core import LocalSessionStore, SessionConflict, SessionKey, message_entry
from core.session.entries import messages_of


def payload(writer: str, i: int, big: bool = False) -> str:
    """A deterministic message text of varied size (some far above PIPE_BUF = 4 KiB), with
    newlines, quotes and non-ASCII inside, so a torn or interleaved write cannot pass as intact.
    ``big`` adds sizes up to 200 KB (slow writes that a SIGKILL can cut in half)."""
    rng = random.Random(f"{writer}:{i}")
    size = rng.choice([10, 100, 900, 3000, 4500, 9000] + ([30_000, 200_000] if big else []))
    body = "".join(rng.choice("abc xyz\n\"\\é中🎉\t{}[]:,") for _ in range(size))
    return f"<{writer}:{i}>{body}</{writer}:{i}>"


def _key(pk: str, sid: str) -> SessionKey:
    return SessionKey(pk, sid)


def main(argv: list[str]) -> int:
    cmd, base = argv[0], argv[1]
    store = LocalSessionStore(base)
    if cmd == "append":
        pk, sid, writer, n, start_file = argv[2], argv[3], argv[4], int(argv[5]), argv[6]
        key = _key(pk, sid)
        deadline = time.monotonic() + 30
        while not os.path.exists(start_file) and time.monotonic() < deadline:
            time.sleep(0.002)
        for i in range(n):
            store.append(key, [message_entry({"role": "user", "content": payload(writer, i)})])
        return 0
    if cmd == "ack":
        pk, sid, run = argv[2], argv[3], argv[4]
        key = _key(pk, sid)
        i = 0
        while True:
            store.append(key, [message_entry({"role": "user", "content": payload(run, i, big=True)})])
            sys.stdout.write(f"ack {i}\n")
            sys.stdout.flush()
            i += 1
    if cmd == "cas":
        pk, sid, writer, n = argv[2], argv[3], argv[4], int(argv[5])
        key = _key(pk, sid)
        got = []
        while len(got) < n:
            count = len(messages_of(store.load(key) or []))
            try:
                got.append(store.append(key, [message_entry({"role": "user", "content": f"{writer}-{len(got)}"})],
                                        expected_count=count))
            except SessionConflict:
                continue
        print("\n".join(map(str, got)))
        return 0
    if cmd == "list":
        for m in store.list(argv[2]):
            print(json.dumps([m.id, m.title, m.message_count, m.updated_at]))
        return 0
    if cmd == "touch":
        store.append(_key(argv[2], argv[3]), [message_entry({"role": "user", "content": argv[4]})])
        return 0
    raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
