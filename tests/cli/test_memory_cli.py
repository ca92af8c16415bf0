"""``anycode memory …`` as a user runs it: a real process, the data dir of the test."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from tests.support.cli import run_anycode

ROOT = Path(__file__).resolve().parents[2]


def anycode(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_anycode(home, "memory", *args, cwd=cwd)


class TestMemoryCli:
    """Memories unreachable from a terminal, a secret accepted, a typo deleting the wrong memory."""

    def test_add_list_edit_rm_export(self, tmp_path):
        home, proj = tmp_path / "home", tmp_path / "proj"
        proj.mkdir()
        out = anycode(home, "add", "Tests run with pytest -q", "--project", str(proj))
        assert out.returncode == 0 and out.stdout.startswith("Remembered (project) "), out.stderr
        mid = out.stdout.split()[2].rstrip(":")
        assert anycode(home, "add", "I prefer short answers", "--global").returncode == 0
        listed = anycode(home, "list", cwd=proj)
        assert "Tests run with pytest -q" in listed.stdout and "I prefer short answers" in listed.stdout
        only_user = anycode(home, "list", "--global", "--json")
        assert [m["text"] for m in json.loads(only_user.stdout)] == ["I prefer short answers"]
        assert anycode(home, "edit", mid[:6], "Tests run with pytest -q -x", "--project", str(proj)).returncode == 0
        target = tmp_path / "memories.md"
        assert anycode(home, "export", "-o", str(target), cwd=proj).returncode == 0
        text = target.read_text()
        assert "## Project\n\n- Tests run with pytest -q -x" in text and "- I prefer short answers" in text
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
        refused = anycode(home, "rm", mid, "--project", str(proj))  # not a terminal, no --yes
        assert refused.returncode == 2 and "--yes" in refused.stderr
        assert anycode(home, "rm", mid, "--yes", "--project", str(proj)).returncode == 0
        assert "pytest" not in anycode(home, "list", cwd=proj).stdout

    def test_secret_and_unknown_id_fail_with_a_sentence(self, tmp_path):
        home = tmp_path / "home"
        out = anycode(home, "add", "the api key is sk-proj-Qw3rTy8UiOp2AsDf5GhJk", "--global")
        assert out.returncode == 1 and "secret" in out.stderr and "Traceback" not in out.stderr
        out = anycode(home, "rm", "ffffffff", "--yes", "--global")
        assert out.returncode == 1 and "No memory" in out.stderr
        out = anycode(home, "list", "--global", "--project", ".")
        assert out.returncode == 2
