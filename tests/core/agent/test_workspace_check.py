"""Which folder a session's tools may touch (issue 10, defect 4): never simply what the session
file's header says."""
from __future__ import annotations

import os

import pytest

from core import LocalSessionStore, SessionManager
from core.agent.runner import run_session_stream
from core.agent.events import TitleStarted
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


class TestForeignFolders:
    """Issue 28, items 9, 13, 14: an imported file's recorded folder, anycode's own data folder or a
    hard-linked AGENTS.md handing the model files it was never given."""

    def test_an_imported_chats_folder_is_not_used_on_its_own(self, fake_openai, store, tmp_path):
        from core.importers import claude_code
        from core.importers.base import import_sessions
        from tests.core.importers.test_import import _cc

        target = tmp_path / "etc-like"
        target.mkdir()
        (target / "shadow").write_text("root:$6$hash")
        root = tmp_path / "claude" / "-etc"
        root.mkdir(parents=True)
        lines = [_cc("user", "u1", None, "hello", 1, cwd=str(target)),
                 _cc("assistant", "a1", "u1", [{"type": "text", "text": "hi"}], 2, cwd=str(target),
                     message_extra={"id": "m1"})]
        (root / "11111111-2222-3333-4444-555555555555.jsonl").write_text("\n".join(__import__("json").dumps(x) for x in lines))
        report = import_sessions(store, claude_code.read_sessions(tmp_path / "claude"))
        key = SessionKey(project_key(str(target)), report.imported[0])
        [read] = turn(fake_openai, store, key, {"name": "read_file", "arguments": {"path": "shadow"}})
        assert read["content"].startswith("Error:") and "imported from another tool" in read["content"]
        assert "root:" not in read["content"]
        checked = check_workspace(key, str(target), origin="imported")
        assert checked.workspace is None and checked.choosable
        # Opened in that folder (anycode started there) or chosen: then it is the workspace.
        assert check_workspace(key, str(target), origin="imported", opened_in=str(target)).workspace is not None
        assert check_workspace(key, str(target), origin="imported", chosen=str(target)).workspace is not None

    def test_the_data_folder_is_never_a_project(self, store, tmp_path, monkeypatch):
        from core.errors import ForbiddenProjectFolder
        from core.stores.move import move_conversation

        monkeypatch.setenv("ANYCODE_HOME", str(store.base_dir))
        project = tmp_path / "project"
        project.mkdir()
        session = SessionManager(store).create(project)
        for folder in (store.base_dir, store.base_dir / "projects"):
            folder.mkdir(parents=True, exist_ok=True)
            with pytest.raises(ForbiddenProjectFolder, match="data folder"):
                move_conversation(store, session.key, str(folder))
            with pytest.raises(ForbiddenProjectFolder):
                SessionManager(store).create(folder)
            key = SessionKey(project_key(str(folder)), new_session_id())
            checked = check_workspace(key, str(folder))
            assert checked.workspace is None and "data folder" in checked.problem
            assert check_workspace(key, str(folder), chosen=str(folder)).workspace is None
        assert store.exists(session.key), "a refused move must leave the chat where it was"

    @pytest.mark.parametrize("spec", ["jsonl", "sqlite:///sessions.db"])
    def test_the_data_folder_given_with_data_dir_is_refused_too(self, tmp_path, spec):
        """The data folder given as ``--data-dir`` (not the settings' one) is the storage's: no
        chat, move or workspace may be inside it, whatever the store kind."""
        from core.errors import ForbiddenProjectFolder
        from core.storage import open_store
        from core.stores.move import move_conversation

        with open_store(spec, tmp_path / "custom-data") as storage:
            manager = SessionManager(storage.sessions, protected_dirs=storage.protected_dirs())
            project = tmp_path / "project"
            project.mkdir()
            session = manager.create(project)
            inside = tmp_path / "custom-data" / "x"
            inside.mkdir(parents=True)
            with pytest.raises(ForbiddenProjectFolder):
                move_conversation(storage.sessions, session.key, str(inside), protected_dirs=storage.protected_dirs())
            with pytest.raises(ForbiddenProjectFolder):
                manager.create(inside)
            key = SessionKey(project_key(str(inside)), new_session_id())
            checked = check_workspace(key, str(inside), protected_dirs=storage.protected_dirs())
            assert checked.workspace is None and "data folder" in checked.problem

    def test_a_hard_linked_agents_md_is_not_read(self, tmp_path):
        from core.memory.context import instruction_files

        project = tmp_path / "project"
        project.mkdir()
        outside = tmp_path / "private-notes.md"
        outside.write_text("the launch codes are 0000")
        os.link(outside, project / "AGENTS.md")
        (project / "CLAUDE.md").write_text("Use tabs.")
        assert instruction_files(project) == [("CLAUDE.md", "Use tabs.")]
        os.mkfifo(project / "AGENTS.md.fifo")
        os.unlink(project / "AGENTS.md")
        os.rename(project / "AGENTS.md.fifo", project / "AGENTS.md")
        assert instruction_files(project) == [("CLAUDE.md", "Use tabs.")], "a FIFO must be skipped, never waited on"
