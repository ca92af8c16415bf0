"""MirroredSessionStore: the primary answers and is never slowed or failed by the mirror; the
mirror catches up through the durable outbox, after failures, hangs and a SIGKILL, with nothing
lost and nothing duplicated."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, header_entry, message_entry
from core.stores.mirror import MirroredSessionStore
from core.stores.sql_store import SqlSessionStore

ROOT = Path(__file__).resolve().parents[3]
PK = "-home-user-proj-0123456789abcdef"


class Flaky:
    """A mirror store whose calls raise (``mode = "raise"``), hang until released (``"hang"``)
    or pass through (``"ok"``)."""

    def __init__(self, inner):
        self.inner = inner
        self.mode = "ok"
        self.release = threading.Event()
        self.hanging = threading.Event()

    def _gate(self):
        if self.mode == "raise":
            raise ConnectionError("mirror is down")
        if self.mode == "hang":
            self.hanging.set()
            self.release.wait(60)

    def __getattr__(self, name):
        target = getattr(self.inner, name)
        if not callable(target) or name == "close":
            return target

        def call(*args, **kwargs):
            self._gate()
            return target(*args, **kwargs)

        return call

    def append(self, *args, **kwargs):  # present as an attribute: this is a store, not an opener
        self._gate()
        return self.inner.append(*args, **kwargs)


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def user(text):
    return {"role": "user", "content": text}


def all_keys(store):
    keys = []
    for p in store.list_projects():
        for archived in (False, True):
            for m in store.list(p.project_key, archived=archived):
                keys.append(m.key)
    return keys


@pytest.fixture
def primary(tmp_path):
    return LocalSessionStore(tmp_path / "primary", fsync=False)


# Every mirror backend passes this suite (issue 26): a database, an object store, a key-value store.
MIRROR_KINDS = ["sqlite", "s3", "redis"]


def mirror_url(kind, tmp_path):
    """A fresh, empty mirror of ``kind`` (a real server on 127.0.0.1 for S3 and Redis)."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'mirror.db'}"
        SqlSessionStore(url).close()  # the schema up front, as for a database set up once
        return url
    if kind == "s3":
        from tests.support.s3_server import fresh_s3_url

        return fresh_s3_url()
    from tests.support.redis_server import fresh_redis_url

    return fresh_redis_url()


def open_mirror(url):
    from core.stores.factory import store_from_spec

    return SqlSessionStore(url, fsync=False) if url.startswith("sqlite") else store_from_spec(url)


@pytest.fixture(params=MIRROR_KINDS)
def mirror_db(request, tmp_path):
    store = open_mirror(mirror_url(request.param, tmp_path))
    yield store
    close = getattr(store, "close", None)
    if callable(close):
        close()


def mirrored(primary, mirror, tmp_path, **kw):
    kw = {"retry_initial": 0.02, "retry_max": 0.1, "poll_interval": 0.05, **kw}
    return MirroredSessionStore(primary, mirror, outbox_path=tmp_path / "outbox.sqlite3", **kw)


class TestMirrorNeverBlocksWrites:
    """Guards against a down or hung mirror failing or slowing the user's writes, and against
    the mirror not catching up (or status() lying) once it recovers."""

    def test_raise_then_hang_then_recover(self, primary, mirror_db, tmp_path):
        flaky = Flaky(mirror_db)
        store = mirrored(primary, flaky, tmp_path)
        mgr = SessionManager(store)
        written = []

        def write(i, key):
            mgr.add_messages(key, [user(f"message {i}")])
            written.append(i)

        try:
            flaky.mode = "raise"
            keys = [mgr.create(tmp_path / "work").key for _ in range(3)]
            sub = SessionKey(keys[0].project_key, keys[0].session_id, "subagents/helper")
            store.append(sub, [message_entry(user("sub-agent work"))])
            for i in range(30):
                write(i, keys[i % 3])
            assert wait_for(lambda: store.status()["state"] == "failing")
            st = store.status()
            assert "mirror is down" in st["last_error"] and st["pending_entries"] >= 34

            flaky.mode = "hang"
            assert wait_for(flaky.hanging.is_set)  # the delivery thread is now stuck in the mirror
            writer = threading.Thread(target=lambda: [write(i, keys[i % 3]) for i in range(30, 60)], daemon=True)
            writer.start()
            writer.join(30)
            # Writes never waited for the mirror: all of them returned while it still hung (one
            # that waited would return only once the mirror is released, below, or after 60 s).
            # Not a time bound: on a loaded machine a write's own fsyncs may take a while.
            assert not writer.is_alive() and len(written) == 60 and not flaky.release.is_set()
            assert store.status()["pending_entries"] >= 64
            assert mirror_db.list(keys[0].project_key) == []  # nothing delivered while down or hung

            flaky.mode = "ok"
            flaky.release.set()
            assert store.flush(15), store.status()
            for key in keys + [sub]:
                assert mirror_db.load(key) == primary.load(key)
            st = store.status()
            assert st["state"] == "ok" and st["pending_entries"] == 0 and st["last_error"] is None
            assert st["last_success_at"] is not None and st["last_success_at"] <= time.time()

            # Lifecycle operations are mirrored too.
            mgr.archive(keys[0])
            mgr.delete(keys[1])
            assert store.flush(10)
            assert [m.id for m in mirror_db.list(keys[0].project_key, archived=True)] == [keys[0].session_id]
            assert not mirror_db.exists(keys[1])
            assert mirror_db.exists(sub)  # archived with its session, not removed
        finally:
            flaky.mode = "ok"
            flaky.release.set()
            store.close()

    def test_primary_errors_propagate_and_queue_nothing(self, primary, mirror_db, tmp_path):
        from core import SessionConflict, SessionNotFound

        store = mirrored(primary, mirror_db, tmp_path, start=False)
        try:
            key = SessionKey(PK, "s")
            header = header_entry("s", PK, "/x")
            store.append(key, [header])
            assert store.status()["pending_items"] == 1
            with pytest.raises(SessionConflict):
                store.append(key, [message_entry(user("x"))], expected_count=5)
            with pytest.raises(SessionNotFound):
                store.remove(SessionKey(PK, "missing"))
            with pytest.raises(ValueError):
                store.append(key, [{"type": "message", "bad": float("nan")}])
            assert store.status()["pending_items"] == 1  # refused writes leave nothing queued
            store.start()
            assert store.flush(5)
            assert mirror_db.load(key) == primary.load(key) == [header]
        finally:
            store.close()

    def test_broken_outbox_does_not_fail_writes(self, primary, mirror_db, tmp_path):
        store = mirrored(primary, mirror_db, tmp_path, start=False)
        store.outbox._db.close()  # as if the outbox file had become unusable
        key = SessionKey(PK, "s")
        store.append(key, [header_entry("s", PK, "/x")])
        assert primary.load(key) is not None
        assert store.status()["state"] == "failing"


class TestIdempotentDelivery:
    """Guards against duplicated or mixed entries in the mirror when the same writes are
    delivered twice (a crash after the mirror write, before the outbox forgot the item) or when
    a record is removed and re-created while the mirror is down."""

    @pytest.mark.parametrize("kind", ["sql", "jsonl"])
    def test_redelivery_changes_nothing(self, primary, tmp_path, kind):
        mirror = (SqlSessionStore(f"sqlite:///{tmp_path / 'm.db'}") if kind == "sql"
                  else LocalSessionStore(tmp_path / "mirror-jsonl", fsync=False))  # no append_at: generic path
        store = mirrored(primary, mirror, tmp_path)
        try:
            keys = [SessionKey(PK, f"s{i}") for i in range(3)]
            for k in keys:
                store.append(k, [header_entry(k.session_id, PK, "/x")])
                for j in range(5):
                    store.append(k, [message_entry(user(f"{k.session_id}-{j}"))])
            assert store.flush(10)
            before = {k: mirror.load(k) for k in keys}
            for k in keys:  # the same items again, as after a crash before they were marked done
                for _ in range(3):
                    store.outbox.add("append", k, 1, ready=True)
            assert store.flush(10)
            assert {k: mirror.load(k) for k in keys} == before == {k: primary.load(k) for k in keys}
        finally:
            store.close()

    def test_remove_and_recreate_while_down(self, primary, mirror_db, tmp_path):
        flaky = Flaky(mirror_db)
        store = mirrored(primary, flaky, tmp_path)
        try:
            main = SessionKey(PK, "s")
            sub = SessionKey(PK, "s", "subagents/a")
            store.append(main, [header_entry("s", PK, "/x")])
            store.append(sub, [message_entry(user(f"old {i}")) for i in range(3)])
            assert store.flush(10) and len(mirror_db.load(sub)) == 3
            flaky.mode = "raise"
            store.append(sub, [message_entry(user("old 3"))])
            store.remove(sub)
            store.append(sub, [message_entry(user(f"new {i}")) for i in range(5)])
            flaky.mode = "ok"
            assert store.flush(10)
            assert mirror_db.load(sub) == primary.load(sub)
            assert [e["message"]["content"] for e in mirror_db.load(sub)] == [f"new {i}" for i in range(5)]
        finally:
            store.close()


class TestRefusedRecords:
    """Guards against one record the mirror can never accept blocking every later delivery."""

    def test_headless_session_is_reported_and_skipped(self, primary, mirror_db, tmp_path):
        store = mirrored(primary, mirror_db, tmp_path)
        try:
            folder = primary.base_dir / "projects" / PK
            folder.mkdir(parents=True)
            (folder / "by-hand.jsonl").write_text('{"type":"message","ts":1.0,"message":{"role":"user","content":"x"}}\n')
            store.append(SessionKey(PK, "by-hand"), [message_entry(user("more"))])
            good = SessionKey(PK, "good")
            store.append(good, [header_entry("good", PK, "/x")])
            assert store.flush(10)
            assert mirror_db.load(good) == primary.load(good)
            st = store.status()
            assert st["state"] == "ok" and "by-hand" in st["last_warning"]
        finally:
            store.close()


CHILD = textwrap.dedent("""
    import sys, time
    from core import LocalSessionStore, SessionKey, header_entry, message_entry
    from core.stores.mirror import MirroredSessionStore
    from core.stores.factory import store_from_spec
    base, url, outbox, mode, pk = sys.argv[1:6]

    def down():
        raise ConnectionError("mirror is down")

    class Slow:
        def __init__(self, inner):
            self.inner = inner
        def __getattr__(self, name):
            return getattr(self.inner, name)
        def append(self, *a, **kw):
            return self.inner.append(*a, **kw)
        def append_at(self, *a, **kw):
            time.sleep(0.003)
            return self.inner.append_at(*a, **kw)

    mirror = down if mode == "down" else Slow(store_from_spec(url))
    store = MirroredSessionStore(LocalSessionStore(base, fsync=False), mirror, outbox_path=outbox,
                                 retry_initial=0.01, retry_max=0.05, poll_interval=0.01)
    keys = [SessionKey(pk, f"s{i}") for i in range(3)]
    for k in keys:
        store.append(k, [header_entry(k.session_id, pk, "/x")])
    i = 0
    while True:
        k = keys[i % 3]
        store.append(k, [message_entry({"role": "user", "content": f"{i}"}) for _ in range(1 + i % 2)])
        print("ack", i, flush=True)
        i += 1
""")


class TestCrash:
    """Guards against entries lost or duplicated in the mirror when the process is SIGKILLed with
    writes queued (mirror down) or in the middle of delivering them (mirror slow)."""

    @pytest.mark.parametrize("kind", MIRROR_KINDS)
    @pytest.mark.parametrize("mode", ["down", "slow"])
    def test_sigkill_then_restart_catches_up_exactly(self, tmp_path, mode, kind):
        base, outbox = tmp_path / "primary", tmp_path / "outbox.sqlite3"
        url = mirror_url(kind, tmp_path)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_FSYNC": "0"}
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(base), url, str(outbox), mode, PK],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        acked = -1
        try:
            for line in proc.stdout:
                acked = int(line.split()[1])
                if acked >= 150:
                    break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert acked >= 150, proc.stderr.read()[-2000:]

        primary = LocalSessionStore(base, fsync=False)
        mirror = open_mirror(url)
        store = mirrored(primary, mirror, tmp_path)
        try:
            if mode == "down":
                assert store.status()["pending_items"] > 0  # the queue survived the kill
            assert store.flush(30), store.status()
            keys = [SessionKey(PK, f"s{i}") for i in range(3)]
            for k in keys:
                assert mirror.load(k) == primary.load(k)
            contents = [e["message"]["content"] for k in keys for e in primary.load(k) if e["type"] == "message"]
            assert {str(i) for i in range(acked + 1)} <= set(contents)  # every acknowledged write is there
            assert store.status()["pending_entries"] == 0
        finally:
            store.close()


class TestRealBackendOutage:
    """Guards against acknowledged writes lost when the mirror's server itself dies mid-run (a
    SIGKILL of redis-server, not a wrapper) and comes back: writes stay local and fast meanwhile,
    and the outbox delivers everything once the server is back (issue 26)."""

    def test_redis_killed_and_restarted(self, primary, tmp_path):
        from core.stores.redis_store import RedisSessionStore
        from tests.support.redis_server import start_redis

        proc, port, folder = start_redis()
        url = f"redis://127.0.0.1:{port}/0"
        store = mirrored(primary, RedisSessionStore(url), tmp_path)
        mgr = SessionManager(store)
        try:
            key = mgr.create(tmp_path / "work").key
            for i in range(20):
                mgr.add_messages(key, [user(f"before {i}")])
            assert store.flush(10)
            proc.kill()
            proc.wait(10)
            latencies = []
            for i in range(40):
                t = time.monotonic()
                mgr.add_messages(key, [user(f"during {i}")])
                latencies.append(time.monotonic() - t)
            assert wait_for(lambda: store.status()["state"] == "failing", 15), store.status()
            assert max(latencies) < 0.5, max(latencies)  # the dead mirror never slowed a write
            proc, _, _ = start_redis(port, folder)  # same data folder: the AOF brings back what it had
            assert store.flush(30), store.status()
            assert RedisSessionStore(url).load(key) == primary.load(key)
            assert store.status()["pending_entries"] == 0
        finally:
            store.close()
            proc.kill()


class TestWhatOtherMachinesRead:
    """Guards against a mirror backend that cannot answer what another machine asks of it: the
    checkpoint blobs a rewind needs (stored once, read back checked, a damaged one refused), and,
    from metadata only, its project keys and each project's git identity (how a machine finds its
    own project recorded at another path)."""

    def test_blobs_project_keys_and_identity(self, mirror_db):
        import zlib

        from core.stores.blobs import BlobCarrier, sha256_hex

        carrier = BlobCarrier.of(mirror_db)
        data = b"\x00bytes of a file \xe2\x9c\x93\n" * 50
        name = sha256_hex(data)
        assert not carrier.has(name) and carrier.get_packed(name) is None
        packed = zlib.compress(data, 1)
        assert carrier.put_packed(name, packed) and carrier.put_packed(name, packed)  # twice: one blob
        assert carrier.has(name) and zlib.decompress(carrier.get_packed(name)) == data
        wrong = sha256_hex(b"other")
        mirror_db.put_blob(wrong, packed)  # stored under a name its bytes do not have
        assert carrier.get_packed(wrong) is None, "a blob whose bytes do not match its name reads as missing"

        key = SessionKey("-srv-shop-0123456789abcdef", "s1")
        head = header_entry("s1", key.project_key, "/srv/shop", created_at=10.0)
        head["project_identity"] = "git:example.org/team/shop"
        mirror_db.append(key, [head, message_entry({"role": "user", "content": "hi"}, ts=11.0)])
        plain = SessionKey("-srv-other-0123456789abcdef", "s2")
        mirror_db.append(plain, [header_entry("s2", plain.project_key, "/srv/other", created_at=12.0)])
        assert sorted(mirror_db.project_keys()) == sorted([key.project_key, plain.project_key])
        assert mirror_db.project_identity(key.project_key) == "git:example.org/team/shop"
        assert mirror_db.project_identity(plain.project_key) is None


class TestRedisExpiryKeepsWhatAChatNames:
    """Guards against ``ANYCODE_MIRROR_TTL_DAYS`` letting a checkpoint's bytes expire in the Redis
    mirror while the chat that names them is still written to: a blob kept the expiry of its first
    write, the chat's records were given a new one on every write, and rewinding that older
    checkpoint on another machine found no bytes to restore."""

    def test_every_write_of_the_session_sets_its_blobs_expiry_again(self, monkeypatch):
        import zlib

        import redis

        from core.agent.checkpoints import checkpoint_entry
        from core.stores.blobs import sha256_hex
        from core.stores.redis_store import NS, RedisSessionStore
        from tests.support.redis_server import fresh_redis_url

        monkeypatch.setenv("ANYCODE_MIRROR_TTL_DAYS", "2")
        url = fresh_redis_url()
        store, raw = RedisSessionStore(url), redis.Redis.from_url(url)
        data = b"print('the first version')\n"
        name = sha256_hex(data)
        store.put_blob(name, zlib.compress(data, 1))
        key = SessionKey(PK, "s1")
        store.append(key, [header_entry("s1", PK, "/home/user/proj", created_at=1.0), user("write it"),
                           checkpoint_entry(1, [{"path": "app.py", "before": None, "after": name}])])
        two_days = 2 * 86400
        assert two_days - 60 < raw.ttl(f"{NS}:b:{name}") <= two_days
        raw.expire(f"{NS}:b:{name}", 30)  # as if most of the two days had passed
        store.append(key, [user("a week later, the chat goes on")])  # no checkpoint in this write
        assert raw.ttl(f"{NS}:b:{name}") > two_days - 60, "the blob lives as long as the chat again"
        assert raw.ttl(store._meta_key(key)) > two_days - 60
        store.remove(key)
        assert not raw.exists(f"{NS}:bs:{PK}:s1"), "the session's blob list goes with it"
