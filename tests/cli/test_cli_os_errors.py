"""``anycode sessions …`` meeting the operating system's refusals: one sentence, exit status 1.

Guards against tracebacks (and half-written or leftover files) when an export goes to a missing
folder, a folder, a read-only place, an over-long name or a full disk, and when any write
command runs on a read-only or full data dir. Uses real tmpfs mounts (skipped with the reason
where mounting is not permitted).
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager
from tests.support.tiny_disk import mounted
from webui.cli.sessions import main

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "anycode sessions: "


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    yield from mounted(tmp_path_factory, "cli-tiny")


@pytest.fixture
def data(disk, request, monkeypatch, tmp_path):
    """A data dir on the tiny disk with a session of 4 messages and an archived one."""
    home = disk.path / request.node.name[:50].replace("[", "_").replace("]", "_").replace("/", "_")
    home.mkdir()
    monkeypatch.setenv("ANYCODE_HOME", str(home))
    monkeypatch.delenv("ANYCODE_STORE", raising=False)
    monkeypatch.delenv("ANYCODE_MIRROR", raising=False)
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.chdir(proj)
    mgr = SessionManager(LocalSessionStore(home))
    s = mgr.create(proj, title="Kept")
    mgr.add_messages(s.key, [{"role": "user", "content": f"m{i}"} for i in range(4)])
    old = mgr.create(proj, title="Old")
    mgr.add_messages(old.key, [{"role": "user", "content": "archived"}])
    mgr.archive(old.key)
    yield s, old, home
    disk.read_only(False)
    disk.free()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_sentence(code: int, err: str) -> str:
    assert code == 1, err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith(PREFIX), err
    return err[len(PREFIX):].strip()


class TestExportToABadPath:
    """``sessions export -o BADPATH`` used to end in a traceback (and could leave half a file)."""

    @pytest.mark.parametrize("case", ["missing folder", "a folder", "over-long name"])
    def test_bad_output_path(self, capsys, data, tmp_path, case):
        s, _, _ = data
        target = {"missing folder": tmp_path / "no" / "such" / "out.md", "a folder": tmp_path,
                  "over-long name": tmp_path / ("x" * 300 + ".md")}[case]
        code, _, err = run(capsys, "export", s.id, "-o", str(target))
        sentence = one_sentence(code, err)
        expected = {"missing folder": f"The folder {target.parent} does not exist",
                    "a folder": f"{target} is a folder, not a file",
                    "over-long name": "is too long"}[case]
        assert expected in sentence and sentence.endswith("nothing was written.")
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]

    def test_read_only_place(self, capsys, data, disk):
        s, _, home = data
        disk.read_only()
        code, _, err = run(capsys, "export", s.id, "-o", str(home / "out.md"))
        assert "read-only" in one_sentence(code, err)

    def test_full_disk_leaves_no_partial_export(self, capsys, data, disk):
        s, _, home = data
        disk.fill()
        target = home / "big.jsonl"
        code, _, err = run(capsys, "export", s.id, "--format", "jsonl", "-o", str(target))
        assert one_sentence(code, err) == "The disk is full; nothing was written."
        assert not target.exists() and not [n for n in os.listdir(home) if n.endswith(".part")]
        disk.free()
        code, _, err = run(capsys, "export", s.id, "--format", "jsonl", "-o", str(target))
        assert code == 0, err
        assert target.read_bytes().count(b"\n") == 6  # header, title, 4 messages
        assert stat.S_IMODE(target.stat().st_mode) == 0o600  # conversation text is private


class TestWriteCommandsOnAReadOnlyDataDir:
    """Every write command on a data dir it cannot write: one sentence, exit 1, nothing changed;
    reading still works."""

    @pytest.mark.parametrize("argv", [
        ["fork", "{s}", "--at", "1"], ["rename", "{s}", "New"], ["archive", "{s}"],
        ["unarchive", "{old}"], ["rm", "{s}", "--yes"], ["cleanup", "--days", "0.000001"],
        ["migrate", "--to", "jsonl:{home}/copy", "--no-progress"],
    ], ids=lambda a: a[0])
    def test_one_sentence(self, capsys, data, disk, argv):
        s, old, home = data
        time.sleep(0.1)  # for cleanup: the sessions are idle for longer than 0.000001 days
        disk.read_only()
        args = [a.format(s=s.id, old=old.id, home=home) for a in argv]
        code, out, err = run(capsys, *args)
        if argv[0] == "migrate":  # per-record failures are reported in its report, exit 1
            assert code == 1 and "Traceback" not in out + err and "read-only" in out.lower()
        else:
            assert "read-only" in one_sentence(code, err).lower()
        code, out, _ = run(capsys, "show", s.id)
        assert code == 0 and "m3" in out

    def test_fork_on_a_full_disk(self, capsys, data, disk):
        s, _, _ = data
        disk.fill()
        code, _, err = run(capsys, "fork", s.id, "--at", "2")
        assert one_sentence(code, err) == "The disk is full; nothing was saved."
        code, out, _ = run(capsys, "list", "--json")
        assert code == 0 and out.count('"id"') == 1
        disk.free()
        code, out, err = run(capsys, "fork", s.id, "--at", "2")
        assert code == 0 and out.startswith("Forked into"), err


class TestRealProcess:
    """The same sentence from the installed entry point, not only from ``main()``."""

    def test_export_to_a_folder(self, data, tmp_path):
        s, _, home = data
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_HOME": str(home)}
        done = subprocess.run([sys.executable, "-m", "webui", "sessions", "export", s.id, "-o", str(tmp_path)],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert done.stderr == f"{PREFIX}{tmp_path} is a folder, not a file; nothing was written.\n"


class TestTopLevelCommandsInARealProcess:
    """``anycode backup``, ``restore`` and ``import`` meeting bad output paths and a read-only data
    dir: readable lines, exit status 1, never a traceback."""

    def run(self, home: Path, *argv: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_HOME": str(home)}
        env.pop("ANYCODE_STORE", None)
        return subprocess.run([sys.executable, "-m", "webui", *argv], env=env, capture_output=True, text=True,
                              timeout=120, cwd=home.parent)

    @pytest.mark.parametrize("case", ["missing folder", "a folder", "over-long name"])
    def test_backup_to_a_bad_path(self, data, tmp_path, case):
        _, _, home = data
        target = {"missing folder": tmp_path / "no" / "b.zip", "a folder": tmp_path,
                  "over-long name": tmp_path / ("x" * 300 + ".zip")}[case]
        done = self.run(home, "backup", str(target))
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith("anycode backup: ") and done.stderr.count("\n") == 1, done.stderr
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

    def test_restore_and_import_into_a_read_only_data_dir(self, data, disk, tmp_path):
        _, _, home = data
        backup = tmp_path / "all.zip"
        assert self.run(home, "backup", str(backup)).returncode == 0
        export = tmp_path / "conversations.json"
        export.write_text('[{"id": "c1", "title": "T", "create_time": 1.0e9, "current_node": "u", '
                          '"mapping": {"u": {"id": "u", "parent": null, "children": [], "message": '
                          '{"author": {"role": "user"}, "create_time": 1.0e9, '
                          '"content": {"content_type": "text", "parts": ["hi"]}}}}}]')
        other = disk.path / "empty-home"
        other.mkdir()
        disk.read_only()
        for argv in (["restore", str(backup)], ["import", "chatgpt", str(export)]):
            done = self.run(other, *argv)
            out = done.stdout + done.stderr
            assert done.returncode == 1 and "Traceback" not in out and "Errno" not in out, out
            assert "read-only" in out
