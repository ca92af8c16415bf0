"""Which folder a session's tools may touch (issue 10, defect 4): never simply what the session
file's header says."""
from __future__ import annotations

import os

import pytest

from core import LocalSessionStore, SessionManager
from core.agent.runner import TitleStarted, run_session_stream
from core.agent.tools import Workspace
from core.agent.workspace import check_workspace
from core.session.entries import header_entry
from core.session.keys import SessionKey, new_session_id, project_key

MODEL = "gpt-4o-mini"


@pytest.fixture(autouse=True)
def no_approval(monkeypatch):
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")  # the check must hold even when nothing asks


@pytest.fixture
def store(tmp_path):
    return LocalSessionStore(tmp_path / "home")


def crafted(store, stored_under: str, header_cwd: str) -> SessionKey:
    """A session stored under ``stored_under``'s project whose header claims ``header_cwd``
    (a shared export, a copied file, a row of a shared database)."""
    key = SessionKey(project_key(stored_under), new_session_id())
    store.append(key, [header_entry(key.session_id, key.project_key, header_cwd)])
    return key


def turn(fake_openai, store, key, *calls):
    fake_openai.push({"tool_calls": list(calls)}, {"text": "done"})
    for event in run_session_stream(key, store, "go", client=fake_openai.client(), model=MODEL):
        if isinstance(event, TitleStarted):
            event.thread.join(10)
    return [m for m in SessionManager(store).get(key).messages if m["role"] == "tool"]


class TestCraftedHeaders:
    """Guards against a session file whose header records "cwd": "/" (or another project's
    folder) getting file tools confined to that folder instead of its own project."""

    def test_header_cwd_root(self, fake_openai, store, tmp_path):
        project = tmp_path / "project"
        project.mkdir()
        key = crafted(store, "/", "/")
        victim = tmp_path / "victim.txt"
        victim.write_text("precious")
        [read, write] = turn(fake_openai, store, key,
                             {"name": "read_file", "arguments": {"path": "/etc/hostname"}},
                             {"name": "write_file", "arguments": {"path": str(victim), "content": "pwned"}})
        assert read["content"].startswith("Error:") and "root of the file system" in read["content"]
        assert write["content"].startswith("Error:")
        assert victim.read_text() == "precious"

    def test_header_names_another_projects_folder(self, fake_openai, store, tmp_path):
        mine, other = tmp_path / "mine", tmp_path / "other"
        mine.mkdir()
        other.mkdir()
        (other / "secret.txt").write_text("other project's secret")
        key = crafted(store, str(mine), str(other))
        [read, write] = turn(fake_openai, store, key,
                             {"name": "read_file", "arguments": {"path": "secret.txt"}},
                             {"name": "write_file", "arguments": {"path": "planted.txt", "content": "x"}})
        assert "stored under another project" in read["content"]
        assert "other project's secret" not in read["content"]
        assert "stored under another project" in write["content"]
        assert not (other / "planted.txt").exists() and not (mine / "planted.txt").exists()

    def test_home_folder_and_missing_folder(self, tmp_path, monkeypatch):
        home = tmp_path / "user-home"
        (home / "code").mkdir(parents=True)
        monkeypatch.setenv("HOME", str(home))
        key = SessionKey(project_key(str(home)), new_session_id())
        checked = check_workspace(key, str(home))
        assert checked.workspace is None and "home folder" in checked.problem and checked.choosable
        above = SessionKey(project_key(str(tmp_path)), new_session_id())
        assert "holds your home folder" in check_workspace(above, str(tmp_path)).problem
        gone = tmp_path / "gone"
        missing = check_workspace(SessionKey(project_key(str(gone)), new_session_id()), str(gone))
        assert missing.workspace is None and "does not exist" in missing.problem and not missing.choosable
        inside = check_workspace(SessionKey(project_key(str(home / "code")), new_session_id()), str(home / "code"))
        assert inside.problem is None and inside.workspace.root == os.path.realpath(home / "code")

    def test_explicit_choice_is_honoured(self, fake_openai, store, tmp_path):
        project = tmp_path / "project"
        project.mkdir()
        key = crafted(store, "/", "/")
        assert check_workspace(key, "/", chosen=str(project)).workspace.root == os.path.realpath(project)
        fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "ok.txt", "content": "y"}}]},
                         {"text": "done"})
        for event in run_session_stream(key, store, "go", client=fake_openai.client(), model=MODEL,
                                        workspace=Workspace(project)):
            if isinstance(event, TitleStarted):
                event.thread.join(10)
        assert (project / "ok.txt").read_text() == "y"

    def test_normal_session_works(self, fake_openai, store, tmp_path):
        project = tmp_path / "project"
        project.mkdir()
        session = SessionManager(store).create(project)
        [write] = turn(fake_openai, store, session.key,
                       {"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}})
        assert write["content"].startswith("Wrote") and (project / "a.txt").read_text() == "A"
