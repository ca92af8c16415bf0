"""Shared pytest fixtures.

Store fixture: every :class:`core.session.store.SessionStore` implementation must pass the contract
suite (``tests/core/stores/test_store_contract.py``). Implementations are listed once, in
``STORE_FACTORIES``: name -> ``factory(tmp_path) -> store``. A factory may call ``pytest.skip``
when its backend is unavailable (no database server); if the store it returns has a ``close()``
method, it is called after the test.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Callable

import pytest

from core import LocalSessionStore

# Every test (and every app process a test starts, which inherits this) checks that no caller
# changes an entry the JSONL store shares between reads (core.stores.entry_cache).
os.environ.setdefault("ANYCODE_CHECK_SHARED_ENTRIES", "1")

# A suite started as a background job of a non-interactive shell (`sh -c 'pytest &'`, nohup)
# inherits SIGINT ignored, and so would every app it starts: Ctrl+C tests would then wait 30 s
# for a stop the app, rightly, never makes (POSIX: a background job ignores the terminal's
# interrupt; Python then installs no KeyboardInterrupt handler). Started from a terminal or CI,
# nothing changes; here the apps get Ctrl+C as a terminal would send it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _jsonl_store(tmp_path: Path) -> Any:
    return LocalSessionStore(tmp_path / "home")


def _sqlite_store(tmp_path: Path) -> Any:
    from core.stores.sql_store import SqlSessionStore

    return SqlSessionStore(f"sqlite:///{tmp_path / 'sessions.db'}")


def _postgres_store(tmp_path: Path) -> Any:
    from core.stores.sql_store import SqlSessionStore
    from tests.support.pg_server import fresh_database_url

    return SqlSessionStore(fresh_database_url())  # skips with the reason when no server can start


# name -> factory(tmp_path) -> SessionStore. Add new stores here ("sqlite", "postgres", ...).
STORE_FACTORIES: dict[str, Callable[[Path], Any]] = {
    "jsonl": _jsonl_store,
    "sqlite": _sqlite_store,
    "postgres": _postgres_store,
}


def _s3_store(tmp_path: Path) -> Any:
    from core.stores.s3_store import S3SessionStore
    from tests.support.s3_server import fresh_s3_url

    return S3SessionStore(fresh_s3_url())  # skips with the reason when moto's server is missing


def _redis_store(tmp_path: Path) -> Any:
    from core.stores.redis_store import RedisSessionStore
    from tests.support.redis_server import fresh_redis_url

    return RedisSessionStore(fresh_redis_url())  # skips with the reason when redis-server is missing


# Stores that are mirrors first (no search index, no local files): they pass the store contract
# suite and the mirror suite, not every test written against a primary store.
MIRROR_STORE_FACTORIES: dict[str, Callable[[Path], Any]] = {
    "s3": _s3_store,
    "redis": _redis_store,
}


@pytest.fixture(autouse=True)
def anycode_home(tmp_path, monkeypatch):
    """Never touch the real data dir: ANYCODE_HOME points into tmp_path; env defaults reset. The
    user's config folder too (ANYCODE_CONFIG_DIR): a developer's own MCP servers (mcp.json) would
    otherwise start in every test's turn."""
    home = tmp_path / "anycode-home"
    monkeypatch.setenv("ANYCODE_HOME", str(home))
    monkeypatch.setenv("ANYCODE_CONFIG_DIR", str(tmp_path / "anycode-config"))
    monkeypatch.delenv("ANYCODE_MCP_TIMEOUT", raising=False)
    monkeypatch.delenv("ANYCODE_MCP_TRUST_READONLY", raising=False)
    monkeypatch.delenv("ANYCODE_CLEANUP_DAYS", raising=False)
    monkeypatch.delenv("ANYCODE_FSYNC", raising=False)
    monkeypatch.delenv("ANYCODE_APPROVAL", raising=False)
    monkeypatch.delenv("ANYCODE_TOOL_TIMEOUT", raising=False)
    return home


def made_store(factory: Callable[[Path], Any], tmp_path: Path) -> Any:
    """Yield the store ``factory`` makes in ``tmp_path``; close it afterwards when it can be closed."""
    made = factory(tmp_path)
    try:
        yield made
    finally:
        close = getattr(made, "close", None)
        if callable(close):
            close()


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request, tmp_path):
    """A fresh, empty store of each kind in ``STORE_FACTORIES``."""
    yield from made_store(STORE_FACTORIES[request.param], tmp_path)


@pytest.fixture
def session(store, tmp_path):
    """A new, empty session (header only) of ``store`` whose workspace is ``tmp_path / "ws"``."""
    from core import SessionManager

    (tmp_path / "ws").mkdir()
    return SessionManager(store).create(tmp_path / "ws")


from tests.support.fake_openai import _fake_openai_server, fake_openai  # noqa: F401  (issue 3: fake OpenAI server)


@pytest.fixture(autouse=True)
def patient_browser_waits(request):
    """Browser tests: ``expect`` waits up to ``TIMEOUT_MS`` (30 s) instead of Playwright's 5 s.
    Every wait goes through the app's queue, which a loaded 2-core machine (CI) can hold up for
    more than 5 s; an approval card once missed it in a fresh-clone run. Only failures get slower."""
    if request.node.get_closest_marker("browser") is None:
        yield
        return
    from playwright.sync_api import expect

    from tests.support.chromium import TIMEOUT_MS

    expect.set_options(timeout=TIMEOUT_MS)
    try:
        yield
    finally:
        expect.set_options(timeout=5_000)
