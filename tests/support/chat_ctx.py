"""The web UI's chat operations under test without a browser: a project folder, a JSONL store and a
``WebContext`` over them that talks to the fake OpenAI server (real HTTP).

Fixtures ``project`` (``tmp_path / "proj"`` holding ``notes.txt``), ``store`` (a JSONL store in
``tmp_path / "data"``), ``ctx`` (the two, with the fake server as the model server); helpers
:func:`make_ctx` (a context with other model settings or another store) and :func:`run_send` (one
message sent to the end). A test module imports the fixtures it uses from here.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from webui.chat import handlers
from webui.chat.context import WebContext
from tests.support.storage import storage_of


@pytest.fixture
def project(tmp_path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "notes.txt").write_text("remember the milk\n")
    return path


@pytest.fixture
def store(tmp_path):
    return LocalSessionStore(tmp_path / "data")


def make_ctx(store, project, **overrides) -> WebContext:
    """A ``WebContext`` on ``store`` (a store, or a Storage: :func:`tests.support.storage.storage_of`)
    for ``project``; ``overrides`` are the model settings (``api_key``, ``base_url``, ``max_retries``
    ...); exports go to ``project.parent / "exports"``."""
    storage = storage_of(store)
    return WebContext(storage=storage, manager=SessionManager(storage.sessions), project_path=str(project),
                      model_overrides=overrides, export_dir=project.parent / "exports")


@pytest.fixture
def ctx(store, project, fake_openai):
    return make_ctx(store, project, api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)


def run_send(ctx, state, text, tab="t1"):
    """``handlers.send`` run to its end; the list of updates (the last one done)."""
    updates = list(handlers.send(ctx, state, text, None, tab))
    assert updates[-1].done
    return updates


def page_config(tmp_path) -> dict:
    """The Gradio config of the app's page (as the browser gets it: JSON) for a fresh store and
    project under ``tmp_path``: its blocks, events and layout."""
    import json

    from webui.gui.app import build_app

    (tmp_path / "proj").mkdir()
    ctx = make_ctx(LocalSessionStore(tmp_path / "data"), tmp_path / "proj")
    return json.loads(json.dumps(build_app(ctx).get_config_file(), default=str))
