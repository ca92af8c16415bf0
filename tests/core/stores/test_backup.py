"""``anycode backup`` / ``anycode restore`` and the import command line (issue 19)."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager
from core.session.entries import header_entry, message_entry
from core.session.keys import SessionKey
from core.stores import backup as backups
from core.stores.backup import BackupArchive, BackupError
from tests.support.storage import storage_of
from tests.core.importers.test_import import chatgpt_conversation, write_chatgpt


def backup_store(store, path, **kwargs):
    """:func:`core.stores.backup.backup_store` of ``store`` with its storage's memories and blobs."""
    storage = storage_of(store)
    return backups.backup_store(storage.sessions, path, memory_log=storage.memory_log, blobs=storage.blobs, **kwargs)


def restore_backup(path, store, **kwargs):
    """:func:`core.stores.backup.restore_backup` into ``store`` with its storage's memories and blobs."""
    storage = storage_of(store)
    return backups.restore_backup(path, storage.sessions, memory_log=storage.memory_log, blobs=storage.blobs,
                                  **kwargs)

REPO = Path(__file__).resolve().parents[3]


def _fill(store, ws: Path) -> dict:
    """Three sessions in two projects: one archived, one with a sub-agent record, one forked."""
    mgr = SessionManager(store)
    ws2 = ws.parent / "ws2"
    ws2.mkdir(exist_ok=True)
    a = mgr.create(ws, title="Alpha")
    mgr.add_messages(a.key, [{"role": "user", "content": "héllo 你好"}, {"role": "assistant", "content": "hi"}])
    sub = SessionKey(a.key.project_key, a.key.session_id, "subagents/task-1")
    store.append(sub, [header_entry("task-1", a.key.project_key, str(ws)),
                       message_entry({"role": "user", "content": "sub task"})])
    b = mgr.create(ws2)
    mgr.add_messages(b.key, [{"role": "user", "content": "second project"}])
    mgr.archive(b.key)
    c = mgr.fork(a.key, 0)
    return {"a": a.key, "b": b.key, "c": c.key, "sub": sub}


def _session_files(home: Path) -> dict[str, bytes]:
    root = home / "projects"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


@pytest.fixture
def saved(tmp_path):
    """A JSONL store with :func:`_fill`'s sessions, backed up: ``(store, keys, zip path)``."""
    ws = tmp_path / "ws"
    ws.mkdir()
    src = LocalSessionStore(tmp_path / "src")
    keys = _fill(src, ws)
    zpath = tmp_path / "b.zip"
    backup_store(src, zpath)
    return src, keys, zpath


class TestBackupRoundTrip:
    """A backup that misses archived sessions, sub-agent records or memories, or a restore that
    changes a byte of what was saved."""

    def test_restore_into_empty_dir_is_byte_identical(self, tmp_path):
        ws = tmp_path / "ws"
        ws.mkdir()
        src = LocalSessionStore(tmp_path / "src")
        keys = _fill(src, ws)
        zpath = tmp_path / "backup.zip"
        report = backup_store(src, zpath)
        assert report.sessions == 3 and report.records == 4
        assert stat.S_IMODE(os.stat(zpath).st_mode) == 0o600
        with zipfile.ZipFile(zpath) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            for rec in manifest["records"]:
                assert hashlib.sha256(zf.read(rec["path"])).hexdigest() == rec["sha256"]
        dst = LocalSessionStore(tmp_path / "dst")
        restored = restore_backup(zpath, dst)
        assert restored.ok and len(restored.copied) == 4
        assert _session_files(tmp_path / "dst") == _session_files(tmp_path / "src")
        assert [m.id for m in SessionManager(dst).list(keys["b"].project_key, archived=True)] == [keys["b"].session_id]

    def test_restore_again_skips_identical_and_never_overwrites(self, store, saved):
        src, keys, zpath = saved
        assert restore_backup(zpath, store).ok
        # the user carries on in the restored store; a second restore must not undo that
        SessionManager(store).add_messages(keys["a"], [{"role": "user", "content": "new since backup"}])
        other = SessionManager(store).store.load(keys["c"])
        again = restore_backup(zpath, store)
        assert len(again.identical) == 3 and again.copied == [] and again.conflicts == []
        assert again.newer == [str(keys["a"])]
        assert SessionManager(store).get(keys["a"]).messages[-1]["content"] == "new since backup"
        assert store.load(keys["c"]) == other

    def test_conflicting_session_reported_and_left_alone(self, tmp_path, saved):
        src, keys, zpath = saved
        ws = tmp_path / "ws"
        dst = LocalSessionStore(tmp_path / "dst")
        dst.append(keys["a"], [header_entry(keys["a"].session_id, keys["a"].project_key, str(ws)),
                              message_entry({"role": "user", "content": "a different life"})])
        report = restore_backup(zpath, dst)
        assert [k for k, _ in report.conflicts] == [str(keys["a"])]
        assert SessionManager(dst).get(keys["a"]).messages == [{"role": "user", "content": "a different life"}]

    def test_damaged_member_is_named(self, tmp_path, saved):
        src, keys, zpath = saved
        tampered = tmp_path / "t.zip"
        with zipfile.ZipFile(zpath) as zin, zipfile.ZipFile(tampered, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info)
                if info.filename.endswith(f"{keys['b'].session_id}.jsonl"):
                    data = data.replace(b"second project", b"SECOND PROJECT")
                zout.writestr(info, data)
        assert any(keys["b"].session_id in s for s in BackupArchive(tampered).verify())
        report = restore_backup(tampered, LocalSessionStore(tmp_path / "dst"))
        assert [k for k, _ in report.errors] == [str(keys["b"])]
        assert "damaged" in report.errors[0][1]
        assert len(report.copied) == 3

    def test_memories_travel_and_a_removed_one_stays_removed(self, tmp_path, store):

        ws = tmp_path / "ws"
        ws.mkdir()
        src = LocalSessionStore(tmp_path / "src")
        keys = _fill(src, ws)
        mem = storage_of(src).memories
        kept = mem.add("The user prefers tabs over spaces.", scope="user")
        gone = mem.add("The project uses Python 3.8.", scope="project", project_key=keys["a"].project_key)
        mem.remove(gone.id, project_key=keys["a"].project_key)
        zpath = tmp_path / "m.zip"
        assert backup_store(src, zpath).memories == 3  # two adds and a removal
        report = restore_backup(zpath, store)
        assert report.ok, report.to_dict()
        restored = storage_of(store).memories
        assert [m.text for m in restored.list(keys["a"].project_key)] == [kept.text]
        assert restore_backup(zpath, store).ok  # again: nothing doubled, nothing revived
        assert [m.text for m in storage_of(store).memories.list(keys["a"].project_key)] == [kept.text]

    def test_not_a_backup(self, tmp_path):
        junk = tmp_path / "junk.zip"
        junk.write_bytes(b"PK nonsense")
        with pytest.raises(BackupError, match="not an anycode backup"):
            BackupArchive(junk)

    def test_unwritable_target_leaves_nothing(self, tmp_path):
        src = LocalSessionStore(tmp_path / "src")
        (tmp_path / "ws").mkdir()
        _fill(src, tmp_path / "ws")
        with pytest.raises(BackupError, match="cannot be written"):
            backup_store(src, tmp_path / "missing-folder" / "b.zip")


def _cli(*argv, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANYCODE_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "webui", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


class TestCommandLine:
    """The import/backup/restore commands print tracebacks, or import twice when re-run."""

    def test_import_dry_run_then_import_then_rerun(self, tmp_path):
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation()])
        home = tmp_path / "home"
        dry = _cli("import", "chatgpt", str(src), "--dry-run", home=home, cwd=tmp_path)
        assert dry.returncode == 0, dry.stderr
        assert "Would import 3 conversations (12 messages)" in dry.stdout
        assert not (home / "projects").exists() or not list((home / "projects").rglob("*.jsonl"))
        first = _cli("import", "chatgpt", str(src), "--json", home=home, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert len(json.loads(first.stdout)["imported"]) == 3
        again = _cli("import", "chatgpt", str(src), home=home, cwd=tmp_path)
        assert "Imported 0 conversations" in again.stdout and "3 already imported" in again.stdout
        listed = _cli("sessions", "list", "--json", home=home, cwd=tmp_path)
        assert len(json.loads(listed.stdout)) == 3

    def test_backup_restore_and_errors_in_one_sentence(self, tmp_path):
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation()])
        home = tmp_path / "home"
        assert _cli("import", "chatgpt", str(src), home=home, cwd=tmp_path).returncode == 0
        out = _cli("backup", str(tmp_path / "all.zip"), home=home, cwd=tmp_path)
        assert out.returncode == 0 and "Backed up 3 sessions" in out.stdout, out.stderr
        restored = _cli("restore", str(tmp_path / "all.zip"), home=tmp_path / "home2", cwd=tmp_path)
        assert restored.returncode == 0 and "Restored 3 records" in restored.stdout, restored.stderr
        for argv in (("restore", str(tmp_path / "nope.zip")), ("backup", str(tmp_path / "no" / "x.zip")),
                     ("import", "claude-code", str(tmp_path / "no-such-dir"))):
            bad = _cli(*argv, home=home, cwd=tmp_path)
            assert bad.returncode == 1, (argv, bad.stdout, bad.stderr)
            assert "Traceback" not in bad.stderr and bad.stderr.strip(), argv


class TestExistingBackupFile:
    """Guards against ``anycode backup`` silently overwriting an earlier backup (perhaps the only
    copy of sessions deleted since)."""

    def test_core_refuses_then_replaces_when_asked(self, saved, tmp_path):
        src, _, zpath = saved
        before = zpath.read_bytes()
        with pytest.raises(BackupError, match="already exists.*--force"):
            backup_store(src, zpath)
        assert zpath.read_bytes() == before
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".anycode-backup-")]
        SessionManager(src).create(tmp_path / "ws", title="Later")
        assert backup_store(src, zpath, replace=True).sessions == 4
        assert zpath.read_bytes() != before and BackupArchive(zpath).verify() == []

    def test_command_line_says_so_and_force_replaces(self, saved, tmp_path):
        src, _, zpath = saved
        before = zpath.read_bytes()
        home = Path(src.base_dir)
        out = _cli("backup", str(zpath), home=home, cwd=tmp_path)
        assert out.returncode == 1 and "already exists" in out.stderr and "--force" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and zpath.read_bytes() == before
        forced = _cli("backup", str(zpath), "--force", home=home, cwd=tmp_path)
        assert forced.returncode == 0 and "Backed up 3 sessions" in forced.stdout, forced.stderr


class TestRestoredSessionsArrive:
    """Guards against cleanup expiring (or auto-archive archiving) sessions just restored into a
    database: their messages are old, but they arrived now (a SQL store has no file time)."""

    @pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
    def test_old_sessions_restored_are_not_idle(self, tmp_path, kind):
        from core.session.keys import new_session_id, project_key
        from core.stores.sql_store import SqlSessionStore

        ws = tmp_path / "ws"
        ws.mkdir()
        src = LocalSessionStore(tmp_path / "src")
        old = 1_600_000_000.0  # 2020: far past any cleanup age
        pk, sid = project_key(ws), new_session_id()
        src.create_whole(SessionKey(pk, sid), [
            header_entry(sid, pk, str(ws), created_at=old),
            message_entry({"role": "user", "content": "an old question"}, ts=old),
            message_entry({"role": "assistant", "content": "an old answer"}, ts=old + 5)])
        zpath = tmp_path / "old.zip"
        backup_store(src, zpath)
        target = (SqlSessionStore(f"sqlite:///{tmp_path / 'db.sqlite'}") if kind == "sqlite"
                  else LocalSessionStore(tmp_path / "dst"))
        try:
            report = restore_backup(zpath, target)
            assert report.ok and len(report.copied) == 1
            mgr = SessionManager(target)
            assert mgr.idle_sessions(30) == []          # arrived now: not idle
            assert mgr.cleanup(30) == [] and mgr.get(SessionKey(pk, sid)).messages
            header = target.load(SessionKey(pk, sid))[0]
            if kind == "sqlite":  # a database has no file time: the header says when it arrived
                assert header["restored_from"]["file"] == "old.zip"
            later = time.time() + 31 * 86400
            assert [m.id for m in mgr.idle_sessions(30, now=later)] == [sid]  # then the usual rules
            again = restore_backup(zpath, target)       # a re-run: already there, no conflict
            assert again.ok and again.identical and not again.conflicts and not again.copied
        finally:
            close = getattr(target, "close", None)
            if callable(close):
                close()
