"""Importing again a conversation that went on, Claude Code's slash commands, and tool-call ids.

Guards against: a re-import of a source conversation that has grown saying "1 already imported"
and bringing none of its new messages; a re-import duplicating what was there, or overwriting a
chat the user continued here; Claude Code's command records imported as user messages made of
markup (``<command-name>…``, terminal colour codes) while the prompt the command expanded to is
lost; two imported tool calls sharing one id making a strict server refuse the whole chat
(HTTP 400 "Duplicate tool_call id").
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager, run_session
from core.importers import claude_code, codex
from core.importers.base import import_session_id, import_sessions
from core.session.keys import SessionKey, project_key

from tests.core.importers.test_import import _cc, _cx

SID = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


def _append(path: Path, records: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")


def _turn(n: int, parent: str | None, cwd: Path, t: float) -> list[dict]:
    c = str(cwd)
    return [_cc("user", f"u{n}", parent, f"question {n}", t, cwd=c),
            _cc("assistant", f"a{n}", f"u{n}", [{"type": "text", "text": f"answer {n}"}], t + 0.5, cwd=c,
                message_extra={"id": f"m{n}"})]


def _contents(store, key) -> list:
    return [m["content"] for m in SessionManager(store).get(key).messages]


class TestGrownSourceReimport:
    def test_claude_code_appends_what_the_source_added(self, tmp_path, project):
        root = tmp_path / "claude"
        path = root / "-proj" / f"{SID}.jsonl"
        _append(path, _turn(1, None, project, 1))
        store = LocalSessionStore(tmp_path / "home")
        first = import_sessions(store, claude_code.read_sessions(root))
        key = SessionKey(project_key(project), first.imported[0])
        # Claude Code went on in the same file: two more turns and a newer title.
        _append(path, _turn(2, "a1", project, 10) + _turn(3, "a2", project, 20)
                + [{"type": "summary", "summary": "Questions one to three", "leafUuid": "a3"}])
        second = import_sessions(store, claude_code.read_sessions(root))
        assert second.updated == [key.session_id] and not second.imported and not second.skipped, second.to_dict()
        assert second.messages == 4
        assert "1 conversation that had grown was brought up to date" in second.summary()
        assert _contents(store, key) == ["question 1", "answer 1", "question 2", "answer 2", "question 3", "answer 3"]
        assert SessionManager(store).get(key).title == "Questions one to three"
        assert len(store.list(project_key(project))) == 1  # the same conversation, same id
        third = import_sessions(store, claude_code.read_sessions(root))
        assert third.skipped == [key.session_id] and third.messages == 0
        assert len(_contents(store, key)) == 6

    def test_codex_appends_and_a_dry_run_only_counts(self, tmp_path, project):
        root = tmp_path / "codex"
        path = root / "rollout-grow.jsonl"
        _append(path, [_cx("session_meta", {"id": "0199-grow", "timestamp": "2023-11-14T22:13:20.000Z",
                                            "cwd": str(project)}, 0),
                       _cx("response_item", {"type": "message", "role": "user",
                                             "content": [{"type": "input_text", "text": "first"}]}, 1)])
        store = LocalSessionStore(tmp_path / "home")
        import_sessions(store, codex.read_sessions(root))
        _append(path, [_cx("response_item", {"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": "reply"}]}, 2)])
        key = SessionKey(project_key(project), import_session_id("codex", "0199-grow"))
        dry = import_sessions(store, codex.read_sessions(root), dry_run=True)
        assert dry.updated == [key.session_id] and dry.messages == 1 and _contents(store, key) == ["first"]
        import_sessions(store, codex.read_sessions(root))
        assert _contents(store, key) == ["first", "reply"]

    def test_a_chat_continued_here_is_kept_and_the_source_becomes_a_version(self, tmp_path, project, fake_openai):
        root = tmp_path / "claude"
        path = root / "-proj" / f"{SID}.jsonl"
        _append(path, _turn(1, None, project, 1))
        store = LocalSessionStore(tmp_path / "home")
        key = SessionKey(project_key(project), import_sessions(store, claude_code.read_sessions(root)).imported[0])
        fake_openai.push({"text": "continued here"})
        run_session(key, store, "my own question", client=fake_openai.client(), model="gpt-test", wait_for_title=0,
                    wait_for_memory=10)
        mine = _contents(store, key)
        _append(path, _turn(2, "a1", project, 10))
        report = import_sessions(store, claude_code.read_sessions(root))
        assert len(report.versions) == 1 and not report.updated, report.to_dict()
        assert _contents(store, key) == mine  # the chat continued here is untouched
        version = SessionManager(store).get(SessionKey(key.project_key, report.versions[0]))
        assert version.version_of == {"session_id": key.session_id, "message_index": 1}
        assert [m["content"] for m in version.messages] == ["question 1", "answer 1", "question 2", "answer 2"]
        # The source goes on: the same version is brought up to date, no third copy.
        _append(path, _turn(3, "a2", project, 20))
        again = import_sessions(store, claude_code.read_sessions(root))
        assert again.versions == report.versions and again.messages == 2
        assert len(SessionManager(store).get(SessionKey(key.project_key, report.versions[0])).messages) == 6
        assert import_sessions(store, claude_code.read_sessions(root)).skipped == report.versions


class TestClaudeCodeCommands:
    def _transcript(self, root: Path, cwd: Path) -> Path:
        c = str(cwd)
        path = root / "-proj" / f"{SID}.jsonl"
        _append(path, [
            _cc("user", "c0", None, "Caveat: The messages below were generated by the user while running local "
                                    "commands. DO NOT respond to these messages.", 1, cwd=c, isMeta=True),
            _cc("user", "c1", "c0", "<command-name>/model</command-name>\n            <command-message>model"
                                    "</command-message>\n            <command-args></command-args>", 2, cwd=c),
            _cc("user", "c2", "c1", "<local-command-stdout>Set model to \u001b[1mOpus 4\u001b[22m"
                                    "</local-command-stdout>", 3, cwd=c),
            _cc("user", "c3", "c2", "<command-message>review is running…</command-message>\n"
                                    "<command-name>/review</command-name>\n<command-args>PR 12</command-args>", 4, cwd=c),
            _cc("user", "c4", "c3", [{"type": "text", "text": "Review the pull request PR 12: check tests and style."}],
                5, cwd=c, isMeta=True),
            _cc("assistant", "c5", "c4", [{"type": "text", "text": "The tests pass; two style nits."}], 6, cwd=c,
                message_extra={"id": "m5"}),
            _cc("user", "c6", "c5", "<bash-input>git status</bash-input>", 7, cwd=c),
            _cc("user", "c7", "c6", "<bash-stdout>\u001b[32mOn branch main\u001b[0m</bash-stdout><bash-stderr></bash-stderr>",
                8, cwd=c),
            {"type": "system", "subtype": "local_command", "uuid": "c8", "parentUuid": "c7", "sessionId": SID,
             "cwd": c, "timestamp": "2023-11-14T22:15:00.000Z", "isSidechain": False,
             "content": "<command-name>/cost</command-name>\n<command-message>cost</command-message>"},
            {"type": "system", "subtype": "local_command", "uuid": "c9", "parentUuid": "c8", "sessionId": SID,
             "cwd": c, "timestamp": "2023-11-14T22:15:01.000Z", "isSidechain": False,
             "content": "<local-command-stdout>Total cost: \u001b[1m$0.12\u001b[22m</local-command-stdout>"},
            _cc("user", "c10", "c9", "thanks, fix the nits", 9, cwd=c),
            _cc("assistant", "c11", "c10", [{"type": "text", "text": "Fixed."}], 10, cwd=c, message_extra={"id": "m11"}),
        ])
        return root

    def test_commands_become_what_the_user_meant(self, tmp_path, project):
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, claude_code.read_sessions(self._transcript(tmp_path / "claude", project)))
        assert report.ok and not report.problems, report.to_dict()
        key = SessionKey(project_key(project), report.imported[0])
        msgs = SessionManager(store).get(key).messages
        assert msgs == [
            {"role": "user", "content": "/review PR 12\n\nReview the pull request PR 12: check tests and style."},
            {"role": "assistant", "content": "The tests pass; two style nits."},
            {"role": "user", "content": "thanks, fix the nits"},
            {"role": "assistant", "content": "Fixed."}]
        raw = json.dumps(store.load(key))
        assert "<command-" not in raw and "\\u001b" not in raw and "<local-command" not in raw
        notes = [(e["at"], e["command"], e["text"]) for e in store.load(key) if e["type"] == "note"]
        assert notes == [(0, "/model", "Set model to Opus 4"), (2, "!git status", "On branch main"),
                         (2, "/cost", "Total cost: $0.12")]


class TestRepeatedToolCallIds:
    def test_ids_are_made_unique_on_import_and_the_chat_resumes(self, tmp_path, project, fake_openai):
        """Two tool calls named ``toolu_1`` (a hand-merged transcript): each result stays with its
        call, ids unique, and a strict server takes the resumed chat."""
        c = str(project)
        root = tmp_path / "claude"
        _append(root / "-proj" / f"{SID}.jsonl", [
            _cc("user", "u1", None, "read a", 1, cwd=c),
            _cc("assistant", "a1", "u1", [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                           "input": {"file_path": "a"}}], 2, cwd=c, message_extra={"id": "m1"}),
            _cc("user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"}], 3, cwd=c),
            _cc("assistant", "a2", "r1", [{"type": "text", "text": "a holds A"}], 4, cwd=c, message_extra={"id": "m2"}),
            _cc("user", "u2", "a2", "read b", 5, cwd=c),
            _cc("assistant", "a3", "u2", [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                           "input": {"file_path": "b"}}], 6, cwd=c, message_extra={"id": "m3"}),
            _cc("user", "r2", "a3", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "B"}], 7, cwd=c),
            _cc("assistant", "a4", "r2", [{"type": "text", "text": "b holds B"}], 8, cwd=c, message_extra={"id": "m4"}),
        ])
        store = LocalSessionStore(tmp_path / "home")
        key = SessionKey(project_key(project), import_sessions(store, claude_code.read_sessions(root)).imported[0])
        msgs = SessionManager(store).get(key).messages
        calls = [c["id"] for m in msgs for c in m.get("tool_calls") or []]
        results = [(m["tool_call_id"], m["content"]) for m in msgs if m["role"] == "tool"]
        assert calls == ["toolu_1", "toolu_1~2"] and results == [("toolu_1", "A"), ("toolu_1~2", "B")]
        fake_openai.push({"text": "Carrying on."})
        run_session(key, store, "and c?", client=fake_openai.client(), model="gpt-test", wait_for_title=0,
                    wait_for_memory=10)
        assert fake_openai.rejected() == []
        # Importing again changes nothing: the renaming is the same every time.
        assert import_sessions(store, claude_code.read_sessions(root)).skipped == [key.session_id]
