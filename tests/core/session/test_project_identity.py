"""A project known beyond its path (issue 26, item 5): the same repository checked out at two
paths (two machines) is one project — its sessions are found, and their tools use this machine's
folder — while stored project keys never change.

Guards against the project key of an absolute path hiding a project's history on another machine
(anthropics/claude-code #51337), and against two different repositories being taken for one.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from core import LocalSessionStore, SessionManager
from core.agent.workspace import check_workspace
from core.session.identity import normalize_remote, project_identity
from core.session.keys import project_key
from core.stores.aliases import ProjectAliases, learn_from_store
from core.storage import Storage
from core.stores.pull import pull_sessions
from tests.support.machines import checkout


class TestIdentity:
    """Two spellings of one remote taken as two projects, or a folder outside git given one."""

    @pytest.mark.parametrize("url", ["git@github.com:ann/app.git", "https://github.com/ann/app",
                                     "https://ann:token@GitHub.com/ann/app.git/", "ssh://git@github.com:22/ann/app.git"])
    def test_spellings_of_one_remote_agree(self, url):
        assert normalize_remote(url) == "github.com/ann/app"

    def test_checkouts_and_subfolders(self, tmp_path):
        a = checkout(tmp_path / "machine-a" / "app", "git@github.com:ann/app.git")
        b = checkout(tmp_path / "machine-b" / "work" / "app-copy", "https://github.com/ann/app")
        (a / "services" / "api").mkdir(parents=True)
        (b / "services" / "api").mkdir(parents=True)
        assert project_identity(a) == project_identity(b) == "git:github.com/ann/app"
        assert project_identity(a / "services" / "api") == "git:github.com/ann/app/services/api"
        assert project_identity(b / "services" / "api") == project_identity(a / "services" / "api")
        other = checkout(tmp_path / "other", "git@github.com:ann/other.git")
        assert project_identity(other) != project_identity(a)
        plain = tmp_path / "plain"
        plain.mkdir()
        assert project_identity(plain) is None
        local_only = tmp_path / "local-only"
        subprocess.run(["git", "init", "-q", str(local_only)], check=True)
        assert project_identity(local_only) is None  # no remote: today's path key only

    def test_a_linked_worktree_has_its_checkouts_identity(self, tmp_path):
        main = checkout(tmp_path / "app", "git@github.com:ann/app.git")
        subprocess.run(["git", "-C", str(main), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                        "--allow-empty", "-m", "init"], check=True)
        subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
        assert project_identity(tmp_path / "wt") == "git:github.com/ann/app"


class TestOtherMachine:
    """Machine B's checkout at another path sees "No sessions yet" and tools off for A's chats."""

    def test_pulled_sessions_are_this_projects_and_use_this_folder(self, tmp_path, monkeypatch):
        a_dir = checkout(tmp_path / "a" / "src" / "app", "git@github.com:ann/app.git")
        b_dir = checkout(tmp_path / "b" / "work" / "app", "https://github.com/ann/app.git")
        machine_a = LocalSessionStore(tmp_path / "a-data")
        chat = SessionManager(machine_a).create(a_dir)
        SessionManager(machine_a).add_messages(chat.key, [{"role": "user", "content": "hi"}])
        assert machine_a.load(chat.key)[0]["project_identity"] == "git:github.com/ann/app"

        machine_b = LocalSessionStore(tmp_path / "b-data")
        aliases = ProjectAliases(tmp_path / "b-data")
        aliases.record(project_identity(b_dir), project_key(str(b_dir)), str(b_dir))  # B opened its folder
        b_storage = Storage(machine_b)
        pull_sessions(machine_a, machine_b, aliases=aliases, memory_log=b_storage.memory_log,
                      blobs=b_storage.blobs)  # A's store stands in for the mirror
        keys = aliases.keys_for(project_identity(b_dir))
        assert set(keys) == {project_key(str(b_dir)), chat.key.project_key}, "A's project is B's project"
        assert chat.key.project_key != project_key(str(b_dir))  # stored keys never change

        # Resumed on B: A's folder does not exist there; the tools use B's checkout.
        session = SessionManager(machine_b).get(chat.key)
        os.rename(a_dir, tmp_path / "a-gone")
        checked = check_workspace(chat.key, session.cwd, identity=session.identity, opened_in=str(b_dir))
        assert checked.workspace is not None and checked.workspace.root == os.path.realpath(b_dir)
        # Another repository opened on B is not taken for it.
        other = checkout(tmp_path / "b" / "other", "git@github.com:ann/other.git")
        assert check_workspace(chat.key, session.cwd, identity=session.identity, opened_in=str(other)).workspace is None

    def test_learn_from_store_rebuilds_the_registry_from_headers(self, tmp_path):
        repo = checkout(tmp_path / "repo", "git@example.org:team/tool.git")
        store = LocalSessionStore(tmp_path / "data")
        SessionManager(store).create(repo)
        aliases = ProjectAliases(tmp_path / "data")
        assert learn_from_store(store, aliases) == 1
        assert aliases.keys_for("git:example.org/team/tool") == {project_key(str(repo)): str(repo)}
        assert oct((tmp_path / "data" / "projects.json").stat().st_mode & 0o777) == "0o600"
        assert learn_from_store(store, aliases) == 0  # nothing new
