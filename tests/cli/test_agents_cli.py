"""``anycode agents list|show`` as a user runs it: a real process, the data dir of the test."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.cli import run_anycode

from core import LocalSessionStore
from core.agent.definitions import AgentDefinition
from core.agent.experts import Consultation
from core.session.keys import project_key
from tests.support.storage import storage_of

ROOT = Path(__file__).resolve().parents[2]


def anycode(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_anycode(home, "agents", *args, cwd=cwd)


class TestAgentsCli:
    """Guards against definitions invisible from a terminal, a bad file failing the whole list, or an
    expert's session nowhere to be found."""

    def test_list_and_show(self, tmp_path):
        home, proj = tmp_path / "home", tmp_path / "proj"
        (proj / ".anycode" / "agents").mkdir(parents=True)
        (proj / ".anycode" / "agents" / "arch.md").write_text(
            "---\nname: architect\ndescription: Knows the design\nmode: expert\nmodel: big\ntools: read_file\n---\n"
            "You are the architect.\n")
        (proj / ".anycode" / "agents" / "bad.md").write_text("no frontmatter\n")
        (home / "agents").mkdir(parents=True)
        (home / "agents" / "mine.md").write_text("---\nname: mine\ndescription: The user's own\n---\nHi.\n")
        agent = AgentDefinition("architect", "Knows the design", "You are the architect.", mode="expert")
        store = LocalSessionStore(home)
        with Consultation.open(storage_of(store), project_key(os.path.realpath(proj)), agent, str(proj), "sys") as c:
            c.ask("What is the design?")

        out = anycode(home, "list", cwd=proj)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].split()[:5] == ["architect", "expert", "project", "big", "Knows"]
        assert lines[1].split()[:3] == ["mine", "subagent", "user"]
        assert lines[0].index("expert") == lines[1].index("subagent"), "one column per field, aligned"
        assert "expert-architect  2 messages" in out.stdout
        assert out.stderr.strip() == f"anycode agents: {proj / '.anycode' / 'agents' / 'bad.md'}: skipped, it does " \
                                     "not start with a '---' YAML frontmatter block."
        data = json.loads(anycode(home, "list", "--json", "--project", str(proj)).stdout)
        assert [a["name"] for a in data["agents"]] == ["architect", "mine"] and len(data["problems"]) == 1
        assert data["experts"][0]["session_id"] == "expert-architect"

        shown = anycode(home, "show", "architect", cwd=proj)
        assert shown.returncode == 0 and "tools:       read_file" in shown.stdout
        assert "expert-architect, 1 consultations" in shown.stdout
        assert shown.stdout.rstrip().endswith("You are the architect.")

    def test_unknown_agent_is_one_sentence(self, tmp_path):
        out = anycode(tmp_path / "home", "show", "ghost", cwd=tmp_path)
        assert out.returncode == 1 and out.stderr.strip() == "anycode agents: No agent is named 'ghost' (defined: none)."
