"""Agent definitions in subfolders, and frontmatter Claude Code reads though YAML refuses it.

Guards against: definitions kept in subfolders of ``.claude/agents/`` (published collections are
organised by topic) being ignored without a word; two of them sharing a name silently hiding one;
a published Claude Code agent whose unquoted ``description:`` holds ``Examples: … user: "…"
assistant: "…"`` being refused as invalid YAML while Claude Code runs it.
"""
from __future__ import annotations

import os
from pathlib import Path

from core.agent.definitions import addressed_agent, lenient_frontmatter, load_definitions, parse_definition

# The shape of agents published in community collections (e.g. "contains-studio/agents"): one
# long unquoted description with literal \n escapes, "Examples:" and dialogue lines holding ": ".
PUBLISHED = r"""---
name: test-writer-fixer
description: Use this agent when code changes have been made and you need to write new tests, run existing tests, analyze failures, and fix them while maintaining test integrity. Examples:\n\n<example>\nContext: The user has just implemented a new feature.\nuser: "I've updated the user authentication logic to support OAuth"\nassistant: "I've updated the authentication logic. Now let me run the test-writer-fixer agent to ensure all tests pass."\n<commentary>\nSince code changes were made, use the test-writer-fixer agent.\n</commentary>\n</example>
color: cyan
tools: Write, Read, MultiEdit, Bash, Grep
---

You are an elite test automation expert. Run the tests, read the failures, fix them.
"""

# The other shape Claude Code users write: the examples on lines of their own, not indented.
MULTILINE = """---
name: my-agent
description: Does something useful.

Examples:
<example>
user: "Do the thing"
assistant: "I'll use my-agent to do the thing."
</example>
model: sonnet
---

You are an expert at doing the thing.
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def agent(name: str, what: str) -> str:
    return f"---\nname: {name}\ndescription: {what}\n---\nYou are {what}.\n"


class TestClaudeCodeFrontmatter:
    def test_a_published_agent_with_examples_in_its_description_is_read(self, tmp_path):
        found = parse_definition(PUBLISHED, tmp_path / "test-writer-fixer.md", "claude")
        assert found.name == "test-writer-fixer"
        assert found.description.startswith("Use this agent when code changes have been made")
        assert 'user: "I\'ve updated the user authentication logic to support OAuth"' in found.description
        assert "\\n" not in found.description and "</example>" in found.description
        assert found.tools == ("write_file", "read_file")  # Write, Read, MultiEdit mapped; Bash, Grep none
        assert found.prompt.startswith("You are an elite test automation expert")

    def test_examples_on_lines_of_their_own_continue_the_description(self, tmp_path):
        found = parse_definition(MULTILINE, tmp_path / "my-agent.md", "claude")
        assert found.name == "my-agent" and found.model is None  # sonnet: the default model
        assert found.description.startswith("Does something useful. Examples: <example> user: \"Do the thing\"")

    def test_it_loads_from_the_claude_folder_with_no_problem(self, tmp_path):
        write(tmp_path / ".claude" / "agents", "test-writer-fixer.md", PUBLISHED)
        found = load_definitions(tmp_path, user_dir=tmp_path / "none")
        assert list(found.agents) == ["test-writer-fixer"] and found.problems == []

    def test_the_lenient_reading_itself(self):
        assert lenient_frontmatter('name: a\ndescription: "x: y"\ntools:\n  - Read\n  - Write\n') == {
            "name": "a", "description": "x: y", "tools": ["Read", "Write"]}


class TestSubfolders:
    def test_definitions_in_subfolders_are_found(self, tmp_path):
        root = tmp_path / ".claude" / "agents"
        write(root / "engineering", "backend-architect.md", agent("backend-architect", "a backend architect"))
        write(root / "design" / "ui", "ui-designer.md", agent("ui-designer", "a UI designer"))
        write(root / ".git", "ignored.md", agent("ignored", "not an agent"))
        found = load_definitions(tmp_path, user_dir=tmp_path / "none")
        assert sorted(found.agents) == ["backend-architect", "ui-designer"] and found.problems == []
        assert found.get("ui-designer").source == "claude"

    def test_a_name_clash_uses_the_folder_as_namespace_and_is_reported(self, tmp_path):
        root = tmp_path / ".anycode" / "agents"
        write(root, "reviewer.md", agent("reviewer", "the team's reviewer"))
        write(root / "security", "reviewer.md", agent("reviewer", "a security reviewer"))
        write(root / "Front End", "reviewer.md", agent("reviewer", "a front-end reviewer"))
        found = load_definitions(tmp_path, user_dir=tmp_path / "none")
        assert sorted(found.agents) == ["front-end.reviewer", "reviewer", "security.reviewer"]
        assert found.get("reviewer").description == "the team's reviewer"
        assert found.get("security.reviewer").description == "a security reviewer"
        [problem] = found.problems
        assert "'reviewer' is given by 3 files" in problem and "'security.reviewer' (security/reviewer.md)" in problem
        definitions = load_definitions(tmp_path, user_dir=tmp_path / "none")
        assert addressed_agent("@security.reviewer look at auth.py", definitions).description == "a security reviewer"
        assert addressed_agent("@reviewer. Look", definitions).description == "the team's reviewer"

    def test_a_new_file_in_a_subfolder_is_seen(self, tmp_path):
        root = tmp_path / ".claude" / "agents"
        write(root, "a.md", agent("a", "first"))
        assert list(load_definitions(tmp_path, user_dir=tmp_path / "none").agents) == ["a"]
        write(root / "more", "b.md", agent("b", "second"))
        assert sorted(load_definitions(tmp_path, user_dir=tmp_path / "none").agents) == ["a", "b"]

    def test_a_folder_linked_into_itself_is_read_once(self, tmp_path):
        root = tmp_path / ".claude" / "agents"
        write(root / "team", "a.md", agent("a", "first"))
        os.symlink(root, root / "team" / "loop")
        found = load_definitions(tmp_path, user_dir=tmp_path / "none")
        assert list(found.agents) == ["a"] and found.problems == []
