"""``anycode mcp list|add|remove|test|approve`` as a user runs them (``python -m webui mcp …`` in a
subprocess), with a real stdio MCP server (tests/support/mcp_server.py)."""
from __future__ import annotations

import json
import sys

from core.agent.mcp.config import config_dir
from tests.support.cli import ROOT, run_anycode


def test_add_list_approve_test_remove(tmp_path, proj, anycode_home):
    env_secret = "cli-secret-value-42"
    added = run_anycode(anycode_home, "mcp", "add", "tests", "--project", str(proj), "-e", f"MCP_SECRET={env_secret}",
                        "-e", f"PYTHONPATH={ROOT}", "--", sys.executable, "-m", "tests.support.mcp_server", "stdio")
    assert added.returncode == 0, added.stderr
    assert "approve" in added.stdout
    saved = json.loads((proj / ".mcp.json").read_text())["mcpServers"]["tests"]
    assert saved["args"] == ["-m", "tests.support.mcp_server", "stdio"]

    listed = run_anycode(anycode_home, "mcp", "list", "--project", str(proj))
    assert listed.returncode == 0 and "needs approval" in listed.stdout and "not approved yet" in listed.stdout
    assert env_secret not in listed.stdout + listed.stderr  # env values are never shown

    refused = run_anycode(anycode_home, "mcp", "test", "tests", "--project", str(proj))
    assert refused.returncode == 1 and "not approved" in refused.stderr

    assert run_anycode(anycode_home, "mcp", "approve", "--project", str(proj)).returncode == 0
    tested = run_anycode(anycode_home, "mcp", "test", "tests", "--project", str(proj))
    assert tested.returncode == 0, tested.stderr
    assert "mcp__tests__echo" in tested.stdout and "[read-only]" in tested.stdout
    assert "Use echo to repeat text." in tested.stdout and env_secret not in tested.stdout + tested.stderr

    as_json = json.loads(run_anycode(anycode_home, "mcp", "list", "--project", str(proj), "--json").stdout)
    assert as_json["servers"][0]["state"] == "not started" and not as_json["needs_approval"]

    removed = run_anycode(anycode_home, "mcp", "remove", "tests", "--project", str(proj))
    assert removed.returncode == 0 and json.loads((proj / ".mcp.json").read_text()) == {"mcpServers": {}}
    again = run_anycode(anycode_home, "mcp", "remove", "tests", "--project", str(proj))
    assert again.returncode == 1 and "no MCP server named 'tests'" in again.stderr


def test_user_scope_is_private_and_a_broken_file_is_left_alone(tmp_path, proj, anycode_home, monkeypatch):
    user = run_anycode(anycode_home, "mcp", "add", "docs", "--scope", "user", "--transport", "http",
                       "https://docs.example.com/mcp", "-H", "Authorization: Bearer ${DOCS_TOKEN}",
                       "--project", str(proj))
    assert user.returncode == 0, user.stderr
    path = config_dir() / "mcp.json"
    assert (path.stat().st_mode & 0o777) == 0o600
    assert json.loads(path.read_text())["mcpServers"]["docs"]["headers"] == {"Authorization": "Bearer ${DOCS_TOKEN}"}
    listed = run_anycode(anycode_home, "mcp", "list", "--project", str(proj))
    assert "DOCS_TOKEN, which is not set" in listed.stdout  # the variable is named, no value shown

    (proj / ".mcp.json").write_text("{broken")
    broken = run_anycode(anycode_home, "mcp", "add", "x", "--project", str(proj), "--", "cmd")
    assert broken.returncode == 1 and "is not valid JSON" in broken.stderr
    assert (proj / ".mcp.json").read_text() == "{broken"
    dup = run_anycode(anycode_home, "mcp", "add", "docs", "--scope", "user", "--project", str(proj), "--", "cmd")
    assert dup.returncode == 1 and "already has a server named 'docs'" in dup.stderr
    bad = run_anycode(anycode_home, "mcp", "add", "web", "--transport", "http", "--project", str(proj), "a", "b")
    assert bad.returncode == 2
