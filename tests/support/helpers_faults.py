"""Child-process scripts for the fault-injection tests (run as ``python -m tests.support.helpers_faults``).

``fork STORE PK SID AT``
    open STORE (a store spec: ``jsonl:FOLDER`` or a database URL), print ``go`` (flushed), then
    fork session SID at message AT with :class:`core.SessionManager` and print ``done <new id>``.
``create STORE PK SID N``
    print ``go``, then create session SID holding N messages with ``SessionStore.create_whole``
    (an import or restore of a big session) and print ``done``.

``restore STORE ZIP``
    print ``go``, then restore the backup ZIP into STORE (``anycode restore``) and print ``done``.

The parent kills the process with SIGKILL at a random moment after ``go``.
"""
from __future__ import annotations

import sys

from core import SessionKey, SessionManager, header_entry, message_entry
from core.storage import open_store


def big_entries(key: SessionKey, n: int) -> list[dict]:
    """A header and ``n`` messages of a few hundred bytes each (so a write takes a while)."""
    body = "lorem ipsum dolor sit amet, é中🎉 " * 8
    return [header_entry(key.session_id, key.project_key, "/home/user/my-project", created_at=1.0e9)] + [
        message_entry({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {body}"}, ts=1.0e9 + i)
        for i in range(n)
    ]


def main(argv: list[str]) -> int:
    cmd, spec = argv[0], argv[1]
    storage = open_store(spec)
    store = storage.sessions
    if cmd == "restore":
        from core.stores.backup import restore_backup

        print("go", flush=True)
        report = restore_backup(argv[2], store, memory_log=storage.memory_log, blobs=storage.blobs)
        print("done" if report.ok else f"failed {report.to_dict()}", flush=True)
        return 0
    pk, sid = argv[2], argv[3]
    key = SessionKey(pk, sid)
    if cmd == "fork":
        mgr = SessionManager(store)
        print("go", flush=True)
        new = mgr.fork(key, int(argv[4]))
        print(f"done {new.id}", flush=True)
        return 0
    if cmd == "create":
        entries = big_entries(key, int(argv[4]))
        print("go", flush=True)
        store.create_whole(key, entries)
        print("done", flush=True)
        return 0
    raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
