"""Multi-entry creations killed at random points: whole or absent, never a short session that lists.

A fork of a long session (and the reusable ``SessionStore.create_whole`` that imports, restores,
migrations and versions write through) runs in a real child process that is SIGKILLed at a
random moment of its run; afterwards the store lists the original untouched and either no new
session or the new one complete. Bounded: a fixed number of kills per store.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, new_session_id, project_key
from core.stores.factory import store_from_spec
from core.stores.whole_file import STALE_SECONDS, sweep_stale
from tests.support.helpers_faults import big_entries

ROOT = Path(__file__).resolve().parents[3]
PK = project_key("/home/user/my-project")
MESSAGES = 20_000  # ~6 MB: a write that takes long enough to be cut
AT = MESSAGES - 10
KILLS = 10  # per store and path; each costs a Python start-up plus a partial write


def spec_for(kind: str, tmp: Path) -> str:
    return f"jsonl:{tmp / 'home'}" if kind == "jsonl" else f"sqlite:///{tmp / 'sessions.db'}"


def child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.support.helpers_faults", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_to_end(*args: str) -> float:
    """Run a child to completion; the seconds from its ``go`` to its ``done``."""
    p = child(*args)
    assert p.stdout.readline().strip() == "go"
    t0 = time.monotonic()
    line = p.stdout.readline()
    took = time.monotonic() - t0
    p.wait(timeout=60)
    assert line.startswith("done"), p.stderr.read()
    return took


def kill_at_random(args: list[str], span: float, rng: random.Random) -> bool:
    """Start a child, SIGKILL it a random time into its run; True if it finished first."""
    p = child(*args)
    try:
        assert p.stdout.readline().strip() == "go", p.stderr.read()
        time.sleep(rng.uniform(0.0, span))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        return p.returncode == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


def snapshot(store, key: SessionKey) -> str:
    return json.dumps(store.load(key))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """One long session per store kind (made once: writing 20,000 messages takes a moment)."""
    made = {}
    for kind in ("jsonl", "sqlite"):
        tmp = tmp_path_factory.mktemp(kind)
        store = store_from_spec(spec_for(kind, tmp))
        key = SessionKey(PK, new_session_id())
        store.create_whole(key, big_entries(key, MESSAGES))
        made[kind] = (tmp, key, snapshot(store, key))
        getattr(store, "close", lambda: None)()
    return made


@pytest.mark.slow
class TestKilledMidCreation:
    """A fork or import killed mid-write used to list as a normal, silently short session."""

    def check_whole_or_absent(self, store, original: SessionKey, before: str, expect_new: int) -> int:
        """The original is untouched; every other listed session is complete. Returns how many
        complete copies there are."""
        assert snapshot(store, original) == before
        metas = store.list(PK)
        others = [m for m in metas if m.id != original.session_id]
        for m in others:
            assert m.message_count == expect_new, f"a short session lists: {m.message_count} messages"
            assert len([e for e in store.load(m.key) if e.get("type") == "message"]) == expect_new
        return len(others)

    @pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
    def test_fork_killed_at_random_points(self, sources, kind):
        tmp, key, before = sources[kind]
        spec = spec_for(kind, tmp)
        args = ["fork", spec, PK, key.session_id, str(AT)]
        store = store_from_spec(spec)
        try:
            forks = self.check_whole_or_absent(store, key, before, AT + 1)
            span = run_to_end(*args) * 1.2
            rng = random.Random(f"fork-{kind}")
            finished = 1
            for _ in range(KILLS):
                finished += kill_at_random(args, span, rng)
            found = self.check_whole_or_absent(store, key, before, AT + 1)
            # Every fork that finished is there; killed ones are there whole or not at all.
            assert finished + forks <= found <= forks + 1 + KILLS
        finally:
            getattr(store, "close", lambda: None)()

    @pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
    def test_create_whole_killed_at_random_points(self, tmp_path, kind):
        spec = spec_for(kind, tmp_path)
        store = store_from_spec(spec)
        try:
            span = run_to_end("create", spec, PK, new_session_id(), str(MESSAGES)) * 1.2
            rng = random.Random(f"create-{kind}")
            for _ in range(KILLS):
                sid = new_session_id()
                finished = kill_at_random(["create", spec, PK, sid, str(MESSAGES)], span, rng)
                key = SessionKey(PK, sid)
                entries = store.load(key)
                if finished:
                    assert entries is not None
                if entries is not None:
                    assert entries == big_entries(key, MESSAGES)
                    assert store.exists(key)
                else:
                    assert not store.exists(key)
            for m in store.list(PK):
                assert m.message_count == MESSAGES
        finally:
            getattr(store, "close", lambda: None)()

    def test_debris_of_killed_writers_is_swept_and_never_listed(self, sources):
        tmp, key, before = sources["jsonl"]
        store = LocalSessionStore(tmp / "home")
        folder = store.projects_dir / PK
        # A writer killed mid-fork leaves a hidden temporary file (made here for certain: a
        # stale one of a dead writer), which lists as nothing and goes after STALE_SECONDS.
        debris = folder / f".{new_session_id()}.jsonl.abc123.part"
        debris.write_bytes(b'{"type":"header"')
        listed = {m.id for m in store.list(PK)}
        parts = [n for n in os.listdir(folder) if n.endswith(".part")]
        assert debris.name in parts and key.session_id in listed
        assert store.list(PK) and len(store.list(PK)) == len(listed)
        later = time.time() + STALE_SECONDS + 1
        sweep_stale(folder, parts, now=later)
        assert [n for n in os.listdir(folder) if n.endswith(".part")] == []
        assert {m.id for m in store.list(PK)} == listed


@pytest.mark.slow
class TestRestoreKilledMidway:
    """A restore killed mid-way leaves each session whole or absent, and running it again
    completes it (migrate and import write through the same ``create_whole``)."""

    @pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
    def test_every_session_whole_or_absent(self, tmp_path, kind):
        from core.storage import Storage
        from core.stores.backup import backup_store, restore_backup

        source = LocalSessionStore(tmp_path / "source")
        expected = {}
        for i in range(12):
            key = SessionKey(PK, new_session_id())
            expected[key.session_id] = big_entries(key, 1500)
            source.create_whole(key, expected[key.session_id])
        zip_path = tmp_path / "backup.zip"
        backup_store(source, zip_path, memory_log=Storage(source).memory_log, blobs=Storage(source).blobs)
        rng = random.Random(f"restore-{kind}")
        for run in range(KILLS // 2):
            spec = spec_for(kind, tmp_path / f"run{run}")
            (tmp_path / f"run{run}").mkdir()
            kill_at_random(["restore", spec, str(zip_path)], 0.8, rng)  # a restore takes ~0.5 s
            target = store_from_spec(spec)
            try:
                for meta in target.list(PK):
                    loaded = target.load(meta.key)
                    loaded[0].pop("restored_from", None)  # a database's record of the arrival
                    assert loaded == expected[meta.id], f"run {run}: {meta.id} is partial"
                with_target = Storage(target)
                assert restore_backup(zip_path, target, memory_log=with_target.memory_log,
                                      blobs=with_target.blobs).ok  # again: the rest is restored
                assert {m.id for m in target.list(PK)} == set(expected)
            finally:
                target.close()


class TestMirroredCreation:
    """A whole creation through a mirrored store reaches the mirror whole too, and a refused one
    (the record exists) is not queued for it."""

    @pytest.mark.parametrize("mirror_kind", ["sqlite", "jsonl"])
    def test_created_whole_in_both(self, tmp_path, mirror_kind):
        from core import SessionExists
        from core.stores.mirror import MirroredSessionStore

        primary = LocalSessionStore(tmp_path / "primary")
        mirror = store_from_spec(spec_for(mirror_kind, tmp_path / "mirror"))
        store = MirroredSessionStore(primary, mirror, outbox_path=tmp_path / "outbox.sqlite3")
        try:
            key = SessionKey(PK, new_session_id())
            entries = big_entries(key, 500)
            assert store.create_whole(key, entries) == 500
            with pytest.raises(SessionExists):
                store.create_whole(key, entries[:3])
            assert store.flush(30)
            assert mirror.load(key) == entries == primary.load(key)
            assert store.status()["pending_items"] == 0
        finally:
            store.close()
            getattr(mirror, "close", lambda: None)()
