"""Reply leases (issue 25): a reply being written is visible to every writer of the store — other
threads and other processes — and a holder killed with SIGKILL never leaves a chat locked."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core import SessionKey, header_entry
from core.storage import Storage
from core.stores.leases import LEASE_SECONDS, HeldLease

ROOT = Path(__file__).resolve().parents[3]
PK = "-home-user-proj-0123456789abcdef"


def made(store, sid="s1"):
    key = SessionKey(PK, sid)
    store.create_whole(key, [header_entry(sid, PK, "/x")])
    return key


def test_one_holder_at_a_time(store):
    key = made(store)
    storage = Storage(store)
    board = storage.leases
    assert board.current(key) is None
    assert board.acquire(key, "tab-a")
    assert not board.acquire(key, "tab-b"), "another tab's reply is being written"
    assert board.current(key).holder == "tab-a"
    assert board.acquire(key, "tab-a"), "renewing one's own lease"
    board.release(key, "tab-b")  # not B's to give up
    assert board.current(key).holder == "tab-a"
    board.release(key, "tab-a")
    assert board.current(key) is None and board.acquire(key, "tab-b")
    assert storage.leases is board, "one board per storage"


def test_an_unrenewed_lease_expires(store):
    key = made(store)
    board = Storage(store).leases
    assert board.acquire(key, "gone", ttl=0.3)
    assert not board.acquire(key, "next")
    time.sleep(0.4)
    assert board.current(key) is None and board.acquire(key, "next")


def test_held_lease_is_renewed_while_held(store, monkeypatch):
    import core.stores.leases as leases

    monkeypatch.setattr(leases, "LEASE_SECONDS", 0.4)
    monkeypatch.setattr(leases, "RENEW_SECONDS", 0.1)
    key = made(store)
    board = Storage(store).leases
    held = HeldLease.take(board, key)
    try:
        assert held is not None and HeldLease.take(board, key) is None
        time.sleep(1.0)  # well past one lease: still held, it was renewed
        assert board.current(key).holder == held.holder
    finally:
        held.release()
    assert board.current(key) is None


def test_a_lease_held_on_another_host_expires_by_time(store):
    key = made(store)
    board = Storage(store).leases
    from core.stores import leases

    real = leases.HOST
    try:
        leases.HOST = "other-machine"  # written as if by a process elsewhere
        assert board.acquire(key, "remote", ttl=0.5)
    finally:
        leases.HOST = real
    assert board.current(key).host == "other-machine", "its pid means nothing here: time decides"
    time.sleep(0.6)
    assert board.current(key) is None


CHILD = textwrap.dedent("""
    import sys, time
    from core import SessionKey
    from core.stores.factory import store_from_spec
    from core.stores.leases import HeldLease
    store = store_from_spec(sys.argv[1])
    held = HeldLease.take(store.leases(), SessionKey(sys.argv[2], sys.argv[3]))
    print("HELD" if held else "BUSY", flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_kill_9_of_the_holder_frees_the_chat_within_15_s(kind, tmp_path):
    """A process writing a reply is killed with SIGKILL: another process on the same store sees
    the lease while it lived and can take it at once after (same host: its pid is gone; another
    host would wait at most LEASE_SECONDS)."""
    from core.stores.factory import store_from_spec

    if kind == "jsonl":
        spec = f"jsonl:{tmp_path / 'home'}"
    elif kind == "sqlite":
        spec = f"sqlite:///{tmp_path / 's.db'}"
    else:
        from tests.support.pg_server import fresh_database_url

        spec = fresh_database_url()
    store = store_from_spec(spec)
    try:
        key = made(store)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        child = subprocess.Popen([sys.executable, "-c", CHILD, spec, PK, key.session_id], env=env,
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "HELD"
            board = Storage(store).leases
            assert board.current(key) is not None and board.current(key).pid == child.pid
            assert HeldLease.take(board, key) is None
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        started = time.monotonic()
        while board.current(key) is not None and time.monotonic() - started < 15:
            time.sleep(0.05)
        assert time.monotonic() - started < LEASE_SECONDS + 1
        mine = HeldLease.take(board, key)
        assert mine is not None
        assert mine.took_over is not None and mine.took_over.pid == child.pid, "it knows a writer died"
        mine.release()
        again = HeldLease.take(board, key)
        assert again.took_over is None, "a lease given up normally is no one's to take over"
        again.release()
    finally:
        store.close()


def test_list_token_moves_with_every_change_of_the_list(store):
    """The live list's change check (issue 25): create, rename, archive, unarchive, delete and
    a new message each change the token; nothing else does."""
    from core import SessionManager

    manager = SessionManager(store)
    tokens = [store.list_token(PK)]

    def moved():
        tokens.append(store.list_token(PK))
        return tokens[-1] != tokens[-2]

    key = made(store)
    assert moved()
    assert not moved(), "no change, same token"
    manager.rename(key, "Renamed elsewhere")
    assert moved()
    manager.add_messages(key, [{"role": "user", "content": "hi"}])
    assert moved()
    manager.archive(key)
    assert moved()
    manager.unarchive(key)
    assert moved()
    manager.delete(key)
    assert moved()
