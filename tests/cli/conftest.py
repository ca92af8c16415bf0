"""Set-ups shared by the terminal tests: a project folder, a manager over the test's data dir with
no store or mirror from the environment (``run_anycode``, the real ``python -m webui`` as a
subprocess, is in ``tests/support/cli.py``)."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager


@pytest.fixture
def proj(tmp_path):
    """A project folder ``tmp_path/work/proj`` (created)."""
    d = tmp_path / "work" / "proj"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def mgr(anycode_home, monkeypatch):
    """A :class:`SessionManager` over ``anycode_home``; ``ANYCODE_STORE``/``ANYCODE_MIRROR`` from the
    developer's shell are removed so the CLI under test uses the same local store."""
    monkeypatch.delenv("ANYCODE_STORE", raising=False)
    monkeypatch.delenv("ANYCODE_MIRROR", raising=False)
    return SessionManager(LocalSessionStore(anycode_home))
