"""Memory rules that need no model: the secrets filter, parsing real model answers, the JSONL log on
disk (damage, permissions), the prompt's token budget and instruction files, the mode switch."""
from __future__ import annotations

import json
import logging
import os
import stat

import pytest

from core import LocalSessionStore, project_key
from core.agent.memory_job import parse_memory_changes
from core.memory.context import (
    MEMORY_HEADING,
    estimate_tokens,
    instruction_files,
    memories_in_prompt,
    memory_section,
    session_context,
)
from core.memory.mode import memory_mode, set_automatic
from core.memory.model import Memory
from core.memory.secrets import hide_secrets, looks_secret
from core.stores.memory_log import project_scope
from tests.support.storage import storage_of

PK = project_key("/home/user/my-project")


class TestSecretsFilter:
    """A credential stored as a "fact" and sent to the model in every later prompt."""

    @pytest.mark.parametrize("text", [
        "The OpenAI key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t",
        "Use sk-ant-api03-abcdefghijklmnopqrstuv for Claude",
        "GitHub token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "AWS key AKIAIOSFODNN7EXAMPLE in the deploy script",
        "slack bot token xoxb-123456789012-abcdefghijkl",
        "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        "The staging DB is postgres://admin:s3cr3t@db.internal:5432/app",
        "The admin password is hunter2",
        "password: Tr0ub4dor&3",
        "数据库密码是 abc12345",
        "Das Passwort ist Sommer2024!",
        "the api key = 9f8e7d6c5b4a",
        "CI secret token Zk8Qm2Xr7Lp4Nv9Tb3Wd6Yh1",
        # issue 28: shapes the filter missed
        "The cache is redis://:s3cretpass@cache.internal:6379/0",
        "Connect with postgres://u:p@h/db",
        "password=hunter",
        "SECRET_KEY=django-insecure-7x!k2m@q9w#e4r5t6y",
        "encryption_key: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "DB_PASSWORD: correcthorse",
        "The key is sk-proj-Ab3d\u200bEf6hIj9k\u200cLm2nOp5qRs8t (zero-width spaces inside)",
        "Key: sk-proj-Ab3d Ef6h Ij9k Lm2n Op5q Rs8t",
        "ｓｋ－ｐｒｏｊ－Ａｂ３ｄＥｆ６ｈＩｊ９ｋＬｍ２ｎＯｐ５ｑＲｓ８ｔ",
        "Mailchimp key 0123456789abcdef0123456789abcdef-us12",
    ])
    def test_secrets_are_caught(self, text):
        assert looks_secret(text)

    @pytest.mark.parametrize("text", [
        "We use tabs for indentation",
        "The user prefers answers in French",
        "Passwords are hashed with argon2 in auth/hash.py",
        "The password policy is strict",
        "API keys live in the OPENAI_API_KEY environment variable, never in code",
        "Release commit is 3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
        "项目使用 pytest 运行测试",
        "Max tokens for the summariser is 4096",
        "max_tokens = 4096",
        "The server is at 203.0.113.5 on port 8443",
        "The tenant id is 123e4567-e89b-12d3-a456-426614174000",
    ])
    def test_ordinary_facts_pass(self, text):
        assert not looks_secret(text)


class TestHideSecrets:
    """Guards against an error reason kept in a session or shown on the page carrying a key a
    model server echoed (in its message, a URL or a header), or losing the words around it."""

    @pytest.mark.parametrize("text, shown", [
        ("Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwxyz0123.",
         "Incorrect API key provided: [hidden]."),
        ("Could not reach http://me:pw@host:8080/v1?key=AIzaSyA-very-secret-value-1234567890 now",
         "Could not reach http://[hidden]@host:8080/v1?key=[hidden] now"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz123", "Authorization: Bearer [hidden]"),
        ("x-api-key: abc123def456 was refused", "x-api-key: [hidden] was refused"),
        ("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
         None),
        ("The model server rejected the request (HTTP 400: model gpt-4o-mini-2024-07-18 does not exist).", None),
        ("Could not reach the model server at http://127.0.0.1:9; check that it is running.", None),
    ])
    def test_secrets_hidden_words_kept(self, text, shown):
        assert hide_secrets(text) == (text if shown is None else shown)


class TestParsingRealAnswers:
    """A model wrapping its JSON in fences or prose (or answering garbage) breaking or poisoning memory."""

    def test_plain_json(self):
        got = parse_memory_changes('{"add": ["We use tabs"], "remove": ["abc123"]}')
        assert got.add == [("We use tabs", "project")] and got.remove == ["abc123"]

    def test_fenced_json_with_prose_around(self):
        answer = "Sure! Here are the changes:\n```json\n{\"add\": [\"Tests run with pytest\"], \"remove\": []}\n```\nHope it helps."
        assert parse_memory_changes(answer).add == [("Tests run with pytest", "project")]

    def test_json_inside_prose_without_fence(self):
        answer = 'After reading the exchange I suggest {"add": [{"text": "Prefers short answers", "scope": "user"}]} as the update.'
        assert parse_memory_changes(answer).add == [("Prefers short answers", "user")]

    def test_think_block_is_ignored(self):
        answer = '<think>maybe {"add": ["wrong"]}</think>{"add": [], "remove": []}'
        got = parse_memory_changes(answer)
        assert got.add == [] and got.remove == []

    @pytest.mark.parametrize("answer", ["", "   ", None, "Nothing to remember.", "{not json", '{"facts": ["x"]}',
                                        '["We use tabs"]', '{"add": "We use tabs"}'])
    def test_unusable_answers_give_none(self, answer):
        assert parse_memory_changes(answer) is None


class TestLogOnDisk:
    """A hand-edited or torn memory log losing every memory, or memories readable by other users."""

    def test_damaged_line_is_skipped_with_a_warning(self, tmp_path, caplog):
        store = LocalSessionStore(tmp_path / "home")
        memories = storage_of(store).memories
        a = memories.add("We use tabs", project_key=PK)
        path = storage_of(store).memory_log.path(project_scope(PK))
        with open(path, "ab") as f:
            f.write(b'{"op": "add", "eid": "torn", "id": "x", "te\n')
        b = memories.add("Tests run with pytest", project_key=PK)
        with caplog.at_level(logging.WARNING):
            listed = storage_of(LocalSessionStore(tmp_path / "home")).memories.list(PK)
        assert {m.id for m in listed} == {a.id, b.id}
        assert any("damaged" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)

    def test_torn_tail_does_not_swallow_the_next_entry(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        memories = storage_of(store).memories
        memories.add("first", scope="user")
        path = storage_of(store).memory_log.path("user")
        with open(path, "ab") as f:
            f.write(b'{"op": "add", "ei')  # a crash mid-write, no newline
        second = memories.add("second", scope="user")
        assert second in memories.list(None, "user")

    def test_files_are_private(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        storage_of(store).memories.add("We use tabs", project_key=PK)
        path = storage_of(store).memory_log.path(project_scope(PK))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        for d in (path.parent, path.parent.parent):
            assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def _memory(i: int, text: str, scope: str = "project") -> Memory:
    return Memory(id=f"m{i}", text=text, scope=scope, project_key=PK, source="user", session_id=None,
                  message_index=None, created_at=float(i), updated_at=float(i))


class TestPromptContext:
    """An unbounded memory list crowding out the conversation, or the project's instructions ignored."""

    def test_budget_keeps_the_most_recent(self):
        memories = [_memory(i, f"fact number {i} " + "x" * 100) for i in range(100)]
        text, used = memory_section(memories, budget=300)
        assert 0 < len(used) < 100 and used == memories[: len(used)]
        assert estimate_tokens(text) <= 300
        assert memories_in_prompt("intro\n\n" + text) == [f"[project] {m.text}" for m in used]

    def test_cjk_counts_one_token_per_character(self):
        assert estimate_tokens("项目使用") == 4 and estimate_tokens("abcd") == 1

    def test_no_memories_no_section(self):
        assert memory_section([]) == ("", [])
        assert memories_in_prompt("You are anycode.") == []

    def test_agents_and_claude_md_are_read(self, tmp_path):
        (tmp_path / "AGENTS.md").write_text("Run `make test` before committing.")
        (tmp_path / "CLAUDE.md").write_text("Use British spelling.")
        ctx = session_context([_memory(1, "We use tabs")], tmp_path)
        assert ctx.files == ["AGENTS.md", "CLAUDE.md"]
        assert ctx.text.index(MEMORY_HEADING) < ctx.text.index("make test") < ctx.text.index("British")

    def test_huge_instruction_file_is_cut(self, tmp_path):
        (tmp_path / "AGENTS.md").write_text("rule. " * 50_000)
        [(name, text)] = instruction_files(tmp_path, budget=1000)
        assert estimate_tokens(text) < 1100 and "was cut" in text

    def test_symlink_out_of_the_workspace_is_not_read(self, tmp_path):
        outside = tmp_path / "secret.md"
        outside.write_text("private notes")
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "AGENTS.md").symlink_to(outside)
        assert instruction_files(ws) == []


class TestMode:
    """The automatic-memory switch not sticking, or ANYCODE_MEMORY=off being overridden."""

    def test_default_is_auto_and_switch_persists(self, tmp_path, monkeypatch):
        monkeypatch.delenv("ANYCODE_MEMORY", raising=False)
        assert memory_mode(tmp_path) == "auto"
        assert set_automatic(False, tmp_path) == "manual"
        assert memory_mode(tmp_path) == "manual"
        assert json.loads((tmp_path / "memory" / "settings.json").read_text()) == {"auto": False}
        assert stat.S_IMODE(os.stat(tmp_path / "memory" / "settings.json").st_mode) == 0o600
        assert set_automatic(True, tmp_path) == "auto"

    def test_env_off_wins(self, tmp_path, monkeypatch):
        set_automatic(True, tmp_path)
        monkeypatch.setenv("ANYCODE_MEMORY", "off")
        assert memory_mode(tmp_path) == "off"

    def test_unknown_value_falls_back_to_auto(self, tmp_path, monkeypatch, caplog):
        monkeypatch.setenv("ANYCODE_MEMORY", "sometimes")
        assert memory_mode(tmp_path) == "auto"
        assert "ANYCODE_MEMORY" in caplog.text
