"""Agent definitions (issue 30): Markdown files with YAML frontmatter from the project, Claude Code's
folder and the user's data dir."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.agent.definitions import (DESCRIPTION_CHARS, agents_listing, load_definitions, parse_definition)
from core.errors import AgentNotFound, InvalidAgentDefinition

REVIEWER = """---
name: reviewer
description: Reviews a change for bugs and style.
model: fake-review
tools: read_file, list_files
---
You are a strict code reviewer. Name the file and line of every problem.
"""

# Claude Code's documented sub-agent format (docs.claude.com/en/docs/claude-code/sub-agents).
CLAUDE_CODE_REVIEWER = """---
name: code-reviewer
description: Expert code review specialist. Proactively reviews code for quality, security, and maintainability. Use immediately after writing or modifying code.
tools: Read, Grep, Glob, Bash
model: inherit
color: blue
---
You are a senior code reviewer ensuring high standards of code quality and security.

When invoked:
1. Run git diff to see recent changes
2. Focus on modified files
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


class TestParsing:
    """Guards against a definition read wrongly: a lost key, a body that is not the prompt, a tool
    list taken as one name."""

    def test_every_key(self, tmp_path):
        agent = parse_definition(REVIEWER, tmp_path / "reviewer.md")
        assert agent.name == "reviewer" and agent.description == "Reviews a change for bugs and style."
        assert agent.model == "fake-review" and agent.tools == ("read_file", "list_files")
        assert agent.mode == "subagent" and not agent.expert
        assert agent.prompt == "You are a strict code reviewer. Name the file and line of every problem."

    def test_yaml_list_of_tools_and_expert_mode(self, tmp_path):
        agent = parse_definition("---\nname: arch\ndescription: Knows the design\nmode: expert\n"
                                 "tools: [read_file]\n---\nYou know the architecture.\n", tmp_path / "a.md")
        assert agent.expert and agent.tools == ("read_file",) and agent.model is None
        keeper = parse_definition("---\nname: keeper\ndescription: d\ntools: read_file, remember\n---\nb\n",
                                  tmp_path / "k.md")
        assert keeper.tools == ("read_file", "remember") and keeper.allows("remember") and not agent.allows("remember")

    def test_no_tools_key_means_every_tool(self, tmp_path):
        agent = parse_definition("---\nname: any\ndescription: d\n---\nbody\n", tmp_path / "a.md")
        assert agent.tools is None and agent.allows("write_file") and agent.allows("task")

    def test_claude_code_file_maps_tools_and_ignores_unknown_keys(self, tmp_path):
        agent = parse_definition(CLAUDE_CODE_REVIEWER, tmp_path / "code-reviewer.md", "claude")
        assert agent.name == "code-reviewer" and agent.source == "claude"
        assert agent.tools == ("read_file", "list_files")  # Read, Glob; Grep and Bash have no counterpart
        assert agent.model is None  # "inherit": the default model
        assert agent.prompt.startswith("You are a senior code reviewer")

    @pytest.mark.parametrize("text, words", [
        ("no frontmatter here\n", "'---' YAML frontmatter"),
        ("---\nname: [unclosed\n---\nbody\n", "not valid YAML"),
        ("---\n- a\n- b\n---\nbody\n", "'key: value'"),
        ("---\nname: Bad Name\ndescription: d\n---\nbody\n", "'name'"),
        ("---\nname: ok\n---\nbody\n", "'description'"),
        ("---\nname: ok\ndescription: d\nmode: boss\n---\nbody\n", "'mode'"),
        ("---\nname: ok\ndescription: d\n---\n\n", "body"),
        ("---\nname: ok\ndescription: d\ntools: 3\n---\nbody\n", "'tools'"),
    ])
    def test_a_bad_file_is_named_in_one_sentence(self, tmp_path, text, words):
        with pytest.raises(InvalidAgentDefinition) as err:
            parse_definition(text, tmp_path / "bad.md")
        message = str(err.value)
        assert message.startswith(str(tmp_path / "bad.md") + ": skipped, ") and words in message
        assert message.count(". ") == 0 and message.endswith(".") and "\n" not in message


class TestLoading:
    """Guards against a bad file hiding the good ones, or the wrong definition winning for a name."""

    def test_three_folders_first_found_wins(self, tmp_path):
        project, user = tmp_path / "project", tmp_path / "home" / "agents"
        write(project / ".anycode" / "agents", "reviewer.md", REVIEWER)
        write(project / ".claude" / "agents", "code-reviewer.md", CLAUDE_CODE_REVIEWER)
        write(project / ".claude" / "agents", "reviewer.md", REVIEWER.replace("strict", "lenient"))
        write(user, "mine.md", "---\nname: mine\ndescription: The user's own\n---\nHello.\n")
        write(user, "reviewer.md", REVIEWER.replace("strict", "user's"))
        found = load_definitions(project, user_dir=user)
        assert sorted(found.agents) == ["code-reviewer", "mine", "reviewer"]
        assert "strict" in found.get("reviewer").prompt and found.get("reviewer").source == "project"
        assert found.get("code-reviewer").source == "claude" and found.get("mine").source == "user"
        assert found.problems == []  # a project file overriding the user's is not a problem

    def test_the_default_user_folder_is_in_the_data_dir(self, tmp_path):
        write(Path(__import__("os").environ["ANYCODE_HOME"]) / "agents", "mine.md",
              "---\nname: mine\ndescription: d\n---\nHello.\n")
        assert list(load_definitions(None).agents) == ["mine"]

    def test_bad_file_skipped_and_named(self, tmp_path, caplog):
        folder = tmp_path / "project" / ".anycode" / "agents"
        write(folder, "good.md", REVIEWER)
        bad = write(folder, "broken.md", "---\nname: x\ndescription: [\n---\nbody\n")
        write(folder, "notes.txt", "not a definition")
        write(folder, "again.md", REVIEWER)  # a second "reviewer" in the same folder
        (folder / "latin1.md").write_bytes(b"---\nname: l\ndescription: caf\xe9\n---\nbody\n")
        with caplog.at_level(logging.WARNING, logger="core.agent.definitions"):
            found = load_definitions(tmp_path / "project", user_dir=tmp_path / "none")
        assert list(found.agents) == ["reviewer"]
        assert len(found.problems) == 3
        assert any(p.startswith(f"{bad}: skipped") and "YAML" in p for p in found.problems)
        assert any("already defined" in p for p in found.problems)
        assert any("UTF-8" in p for p in found.problems)
        assert all(p in caplog.text for p in found.problems)

    def test_unknown_name(self, tmp_path):
        found = load_definitions(tmp_path, user_dir=tmp_path / "none")
        with pytest.raises(AgentNotFound, match="defined: none"):
            found.get("ghost")


class TestReadAgainOnlyWhenChanged:
    """Guards against every state change of a tab reading and parsing each definition again, and
    against a cache that misses an edited, added or removed file."""

    def test_edit_add_remove_are_seen_and_nothing_else_rereads(self, tmp_path, monkeypatch):
        from core.agent import definitions

        folder = tmp_path / "project" / ".anycode" / "agents"
        path = write(folder, "reviewer.md", REVIEWER)
        parsed = []
        real = definitions.parse_definition
        monkeypatch.setattr(definitions, "parse_definition", lambda *a, **k: parsed.append(a[1]) or real(*a, **k))
        load = lambda: load_definitions(tmp_path / "project", user_dir=tmp_path / "none")  # noqa: E731
        assert load().get("reviewer").model == "fake-review"
        load().agents.clear()  # the caller's own copy: clearing it changes nothing for the next one
        assert list(load().agents) == ["reviewer"] and parsed == [path]
        path.write_text(REVIEWER.replace("fake-review", "fake-review-2"), encoding="utf-8")
        assert load().get("reviewer").model == "fake-review-2" and len(parsed) == 2
        write(folder, "mine.md", "---\nname: mine\ndescription: d\n---\nHello.\n")
        assert sorted(load().agents) == ["mine", "reviewer"]
        path.unlink()
        assert list(load().agents) == ["mine"]

    def test_a_bad_file_is_logged_once_not_on_every_reply(self, tmp_path, caplog):
        folder = tmp_path / "project" / ".anycode" / "agents"
        write(folder, "broken.md", "no frontmatter\n")
        with caplog.at_level(logging.WARNING, logger="core.agent.definitions"):
            for _ in range(3):
                assert len(load_definitions(tmp_path / "project", user_dir=tmp_path / "none").problems) == 1
        assert caplog.text.count("broken.md: skipped") == 1


class TestListing:
    """Guards against a hundred definitions blowing up every request's task tool description."""

    def test_names_descriptions_and_a_budget(self, tmp_path):
        folder = tmp_path / ".anycode" / "agents"
        for i in range(60):
            write(folder, f"a{i:02}.md", f"---\nname: a{i:02}\ndescription: {'word ' * 100}\n---\nbody\n")
        found = load_definitions(tmp_path, user_dir=tmp_path / "none")
        text = agents_listing(found, budget=2000)
        lines = text.splitlines()
        assert lines[0].startswith("- a00: word word") and len(lines[0]) <= DESCRIPTION_CHARS + 10
        assert lines[-1].startswith("- … and ") and "more" in lines[-1]
        assert len(text) < 2000 + 300
