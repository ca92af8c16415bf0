"""Checkpoints and rewind (issue 29): what the agent changed in files goes back with the
conversation, over real HTTP (the fake OpenAI server), real files and real processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager
from core.agent import checkpoints
from core.agent.runner import run_session
from core.agent.tools import Workspace
from core.stores.backup import backup_store, restore_backup
from core.stores.blobs import GRACE_SECONDS, collect_unreferenced, sha256_hex
from tests.support.storage import storage_of

REPO = Path(__file__).resolve().parents[3]
MODEL = "gpt-4o-mini"
OLD_APP = b"print('app')\n# \xe2\x9c\x93 kept byte for byte\r\n"


@pytest.fixture(autouse=True)
def no_approval(monkeypatch):
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
    monkeypatch.setenv("ANYCODE_MEMORY", "off")


@pytest.fixture
def home(tmp_path):
    return Path(os.environ["ANYCODE_HOME"])


@pytest.fixture
def store(home):
    return LocalSessionStore(home)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_bytes(OLD_APP)
    os.chmod(root / "app.py", 0o751)
    return root


def blob_store(of):
    """The checkpoint blobs of the storage over a store (or a manager's store)."""
    return storage_of(of.store if isinstance(of, SessionManager) else of).blobs


def write(path, content, cid=None):
    call = {"name": "write_file", "arguments": {"path": path, "content": content}}
    if cid:
        call["id"] = cid
    return call


def agent_chat(fake_openai, store, project):
    """A chat whose agent created two files (one in a new folder) and changed app.py, over two rounds."""
    mgr = SessionManager(store)
    session = mgr.create(project)
    fake_openai.push({"tool_calls": [write("notes.md", "# notes\n")]},
                     {"tool_calls": [write("src/new.py", "x = 1\n"), write("app.py", "print('new app')\n")]},
                     {"text": "Done."})
    run_session(session.key, store, "make the files", client=fake_openai.client(), model=MODEL, wait_for_title=10)
    return mgr, session.key


def cli(home, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "webui", "sessions", "--data-dir", str(home), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), "ANYCODE_HOME": str(home)})
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def snapshot(root):
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()}


class TestRecording:
    def test_each_round_records_what_it_changed(self, fake_openai, store, project):
        mgr, key = agent_chat(fake_openai, store, project)
        cps = checkpoints.checkpoints_of(store.load(key))
        assert [cp["at"] for cp in cps] == [4, 7]  # message count after each writing round
        assert [f["path"] for f in cps[0]["files"]] == ["notes.md"]
        new, app = cps[1]["files"]
        assert (new["path"], new["before"], new["after"]) == ("src/new.py", None, sha256_hex(b"x = 1\n"))
        assert app["before"] == sha256_hex(OLD_APP) and app["mode_before"] == 0o751 == app["mode_after"]
        blobs = storage_of(store).blobs
        assert blobs.get(app["before"]) == OLD_APP  # the old bytes are kept
        path = blobs.path_of(app["before"])
        assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
        out = cli(Path(os.environ["ANYCODE_HOME"]), "checkpoints", key.session_id).stdout
        assert "created  notes.md" in out and "changed  app.py" in out and "created  src/new.py" in out

    def test_a_sub_agents_writes_are_in_the_parents_checkpoint(self, fake_openai, store, project):
        session = SessionManager(store).create(project)
        fake_openai.push({"tool_calls": [{"name": "task", "id": "call_t", "arguments": {
            "description": "Write", "prompt": "sub: write it"}}]}, {"text": "done"})
        fake_openai.push({"tool_calls": [write("by_sub.txt", "from the sub-agent\n")]}, {"text": "written"},
                         kind="subagent", task="sub")
        run_session(session.key, store, "delegate", client=fake_openai.client(), model=MODEL, wait_for_title=10)
        assert (project / "by_sub.txt").exists()
        cps = checkpoints.checkpoints_of(store.load(session.key))
        assert [f["path"] for cp in cps for f in cp["files"]] == ["by_sub.txt"]

    def test_over_the_cap_only_the_hash_is_kept_and_rewind_says_so(self, fake_openai, store, project, monkeypatch):
        monkeypatch.setenv("ANYCODE_CHECKPOINT_MAX_BYTES", "16")
        mgr, key = agent_chat(fake_openai, store, project)
        app = checkpoints.checkpoints_of(store.load(key))[1]["files"][1]
        assert app["kept"] is False and not storage_of(store).blobs.has(app["before"])
        plan = checkpoints.plan_rewind(mgr, key, 1, Workspace(project), mode="files", blobs=blob_store(mgr))
        status = {f.path: f.status for f in plan.files}
        assert status == {"notes.md": "restore", "src/new.py": "restore", "app.py": "not_kept"}
        assert "over the checkpoint size limit" in next(f for f in plan.files if f.path == "app.py").sentence()


class TestRewind:
    def test_rewind_through_the_cli_then_undo(self, fake_openai, store, project, home):
        mgr, key = agent_chat(fake_openai, store, project)
        after = snapshot(project)
        dry = cli(home, "rewind", key.session_id, "--to", "1", "--dry-run").stdout
        assert "notes.md: removed" in dry and "app.py: old contents back" in dry
        assert snapshot(project) == after  # a dry run writes nothing
        out = cli(home, "rewind", key.session_id, "--to", "1").stdout
        assert "continues in version" in out
        assert not (project / "notes.md").exists() and not (project / "src" / "new.py").exists()
        assert (project / "app.py").read_bytes() == OLD_APP
        assert (project / "app.py").stat().st_mode & 0o777 == 0o751
        version = mgr.current_version(key)
        assert version != key and [m["role"] for m in mgr.get(version).messages] == ["system", "user"]
        assert len(mgr.get(key).messages) == 8  # nothing deleted
        # Undo: the files are what they were just before, and the conversation is the old one again.
        out = cli(home, "rewind", key.session_id, "--undo").stdout
        assert snapshot(project) == after
        assert mgr.current_version(key) == key

    def test_files_only_and_conversation_only(self, fake_openai, store, project):
        mgr, key = agent_chat(fake_openai, store, project)
        ws = Workspace(project)
        after = snapshot(project)
        r = checkpoints.rewind(mgr, key, 3, ws, mode="files", blobs=blob_store(mgr))  # after the 1st round: notes.md stays
        assert r.key == key and len(mgr.get(key).messages) == 8
        assert (project / "notes.md").exists() and not (project / "src/new.py").exists()
        assert (project / "app.py").read_bytes() == OLD_APP
        checkpoints.undo(mgr, key, ws, blobs=blob_store(mgr))
        assert snapshot(project) == after
        r = checkpoints.rewind(mgr, key, 1, None, mode="conversation", blobs=blob_store(mgr))
        assert r.key != key and len(mgr.get(r.key).messages) == 2 and snapshot(project) == after

    def test_rewinding_twice_to_one_message_makes_one_version(self, fake_openai, store, project):
        """Guards against trial 7's two identical versions: a rewind to the message a version
        already ends at (from that version, or again from the original) makes no new one."""
        mgr, key = agent_chat(fake_openai, store, project)
        first = checkpoints.rewind(mgr, key, 1, None, mode="conversation", blobs=blob_store(mgr))
        assert first.key != key and len(mgr.family(key)) == 2
        again = checkpoints.rewind(mgr, first.key, 1, None, mode="conversation",
                                   blobs=blob_store(mgr))  # from the version itself
        assert again.key == first.key and len(mgr.family(key)) == 2
        mgr.switch_version(key, key.session_id)
        back = checkpoints.rewind(mgr, key, 1, None, mode="conversation", blobs=blob_store(mgr))  # from the original, again
        assert back.key == first.key and len(mgr.family(key)) == 2
        assert mgr.current_version(key) == first.key, "that version is the one in use again"
        other = checkpoints.rewind(mgr, key, 3, None, mode="conversation",
                                   blobs=blob_store(mgr))  # another message: a new one
        assert other.key not in (key, first.key) and len(mgr.family(key)) == 3

    def test_a_hand_edited_file_is_left_alone_unless_chosen(self, fake_openai, store, project):
        mgr, key = agent_chat(fake_openai, store, project)
        ws = Workspace(project)
        (project / "app.py").write_text("edited by hand\n")
        plan = checkpoints.plan_rewind(mgr, key, 1, ws, mode="files", blobs=blob_store(mgr))
        assert {f.path: f.status for f in plan.files}["app.py"] == "outside"
        r = checkpoints.rewind(mgr, key, 1, ws, mode="files", blobs=blob_store(mgr))
        assert [c.path for c in r.left] == ["app.py"]
        assert (project / "app.py").read_text() == "edited by hand\n" and not (project / "notes.md").exists()
        checkpoints.undo(mgr, key, ws, blobs=blob_store(mgr))
        r = checkpoints.rewind(mgr, key, 1, ws, mode="files", chosen=["app.py"], blobs=blob_store(mgr))
        assert (project / "app.py").read_bytes() == OLD_APP and not r.left

    def test_kill_9_mid_rewind_then_rerun_finishes_it(self, fake_openai, store, project, home):
        mgr, key = agent_chat(fake_openai, store, project)
        child = (
            "import os, signal, sys\n"
            "from core import LocalSessionStore, SessionManager\n"
            "from core.agent import checkpoints\n"
            "from core.agent.tools import Workspace\n"
            "from core.session.keys import SessionKey\n"
            "from core.storage import Storage\n"
            "real, n = checkpoints._restore_one, [0]\n"
            "def one(ws, change):\n"
            "    n[0] += 1\n"
            "    if n[0] == 2: os.kill(os.getpid(), signal.SIGKILL)\n"
            "    real(ws, change)\n"
            "checkpoints._restore_one = one\n"
            "store = LocalSessionStore(sys.argv[1])\n"
            "checkpoints.rewind(SessionManager(store), SessionKey(sys.argv[2], sys.argv[3]), 1, Workspace(sys.argv[4]),\n"
            "                   blobs=Storage(store).blobs)\n")
        proc = subprocess.run([sys.executable, "-c", child, str(home), key.project_key, key.session_id, str(project)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
        assert proc.returncode == -signal.SIGKILL
        # One file went back, the others are whole and still new; no temp file is left in view as the file.
        assert not (project / "notes.md").exists()
        assert (project / "src/new.py").read_bytes() == b"x = 1\n"
        assert (project / "app.py").read_bytes() == b"print('new app')\n"
        versions = len(mgr.family(key))
        r = checkpoints.rewind(mgr, key, 1, Workspace(project), blobs=blob_store(mgr))  # the same rewind again: finished
        assert not (project / "src/new.py").exists() and (project / "app.py").read_bytes() == OLD_APP
        assert len(mgr.family(key)) == versions  # no second version
        assert r.key != key and len(mgr.get(r.key).messages) == 2
        checkpoints.undo(mgr, r.key, Workspace(project), blobs=blob_store(mgr))  # and Undo still knows every file
        assert (project / "notes.md").read_text() == "# notes\n"
        assert (project / "app.py").read_bytes() == b"print('new app')\n"


class TestBlobLifecycle:
    def test_blobs_travel_in_backups_and_cleanup_removes_unreferenced_ones(self, fake_openai, store, project,
                                                                          tmp_path):
        mgr, key = agent_chat(fake_openai, store, project)
        blobs = storage_of(store).blobs
        names = set(blobs.names())
        assert sha256_hex(OLD_APP) in names
        zip_path = tmp_path / "b.zip"
        backup_store(store, zip_path, memory_log=storage_of(store).memory_log, blobs=storage_of(store).blobs)
        other = LocalSessionStore(tmp_path / "other")
        report = restore_backup(zip_path, other, memory_log=storage_of(other).memory_log, blobs=storage_of(other).blobs)
        assert not report.errors
        assert set(storage_of(other).blobs.names()) == names and storage_of(other).blobs.get(sha256_hex(OLD_APP)) == OLD_APP
        # A rewind in the restored data dir works from its own blobs.
        assert storage_of(other).blobs.root != blobs.root
        # Cleanup: referenced blobs stay; an unreferenced old one goes, a fresh one waits its grace period.
        orphan = blobs.put(b"nobody refers to me")
        fresh = blobs.put(b"a round not stored yet")
        old = time.time() - GRACE_SECONDS - 10
        os.utime(blobs.path_of(orphan), (old, old))
        cli(Path(os.environ["ANYCODE_HOME"]), "cleanup")  # `anycode sessions cleanup` collects blobs
        assert not blobs.has(orphan) and blobs.has(fresh) and names <= set(blobs.names())
        mgr.delete(key)
        removed = collect_unreferenced(store, blobs, now=time.time() + 2 * GRACE_SECONDS)
        assert set(removed) == names | {fresh} and not list(blobs.names())

    def test_migrate_to_another_data_dir_carries_the_blobs(self, fake_openai, store, project, tmp_path, home):
        mgr, key = agent_chat(fake_openai, store, project)
        target = tmp_path / "elsewhere"
        cli(home, "migrate", "--to", f"jsonl:{target}", "--no-progress")
        moved = LocalSessionStore(target)
        assert set(storage_of(moved).blobs.names()) == set(storage_of(store).blobs.names())
        plan = checkpoints.plan_rewind(SessionManager(moved), key, 1, Workspace(project), mode="files",
                                       blobs=blob_store(moved))
        assert {f.status for f in plan.files} == {"restore"}
