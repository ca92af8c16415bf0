"""Set-ups the core agent tests share: a JSONL store, a project folder with files in it, and a new
session on them.

Fixtures ``store`` (a JSONL store in ``tmp_path / "home"``) and ``session`` (a new session of ``store``
on the module's own ``workspace`` fixture, which says what the project holds — usually
``make_project(tmp_path / "project", {...})``). Importing ``store`` into a module replaces the root
conftest's ``store`` (every store kind) for that module.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager


def make_project(root: Path, files: dict[str, str]) -> Path:
    """``root`` created (parents too) with ``files`` (path relative to ``root`` -> text) written in it."""
    root.mkdir(parents=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def store(tmp_path):
    return LocalSessionStore(tmp_path / "home")


@pytest.fixture
def session(store, workspace):
    return SessionManager(store).create(workspace)
