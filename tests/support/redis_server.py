"""A Redis server for the tests: Debian's ``redis-server`` on 127.0.0.1, started once per test
process in a temporary folder (append-only file on, so a kill and restart keeps its data) and
stopped at exit. Each caller gets a database number of its own, flushed (:func:`fresh_redis_url`).
When ``redis-server`` or redis-py is missing, the caller is skipped with the reason, never silently.
"""
from __future__ import annotations

import atexit
import itertools
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

_server: dict = {}
_dbs = itertools.count(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(port: int | None = None, folder: str | None = None) -> tuple[subprocess.Popen, int, str]:
    """Start ``redis-server`` on 127.0.0.1 (a free port unless given) keeping its data in
    ``folder``; wait until it answers. Returns ``(process, port, folder)``; skips when missing."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    try:
        import redis
    except ImportError:
        pytest.skip('redis-py is not installed (pip install -e ".[redis]")')
    port = port or _free_port()
    folder = folder or tempfile.mkdtemp(prefix="anycode-redis-")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                             "--appendfsync", "always", "--dir", folder, "--databases", "256"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client.ping()
            return proc, port, folder
        except redis.exceptions.RedisError:
            if proc.poll() is not None:
                pytest.skip(f"redis-server exited with {proc.returncode}")
            time.sleep(0.05)
    proc.kill()
    pytest.skip("redis-server did not answer within 10 s")


def _stop() -> None:
    proc = _server.get("proc")
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def fresh_redis_url() -> str:
    """``redis://127.0.0.1:PORT/N`` of an empty database on the shared test server."""
    import redis

    if "port" not in _server:
        proc, port, _ = start_redis()
        _server.update(proc=proc, port=port)
        atexit.register(_stop)
    db = next(_dbs) % 256
    url = f"redis://127.0.0.1:{_server['port']}/{db}"
    redis.Redis.from_url(url).flushdb()
    return url
