"""Importing history from ChatGPT, Claude Code and Codex (issue 19).

The source files are small synthetic ones written here from each format's public description
(a ChatGPT ``conversations.json`` message tree, Claude Code session JSONL, Codex rollout JSONL);
no real user data.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from core import SessionManager, run_session
from core.importers import chatgpt, claude_code, codex
from core.importers.base import import_session_id, import_sessions
from core.session.keys import SessionKey, project_key

REPO = Path(__file__).resolve().parents[3]
T0 = 1_700_000_000.0  # 2023-11-14, well before "now": imported sessions keep their own times


# --- synthetic sources ---------------------------------------------------------------------------


def _node(nid, parent, children, role=None, text=None, t=None, content=None, **msg_extra):
    message = None
    if role is not None:
        message = {"id": nid, "author": {"role": role, "name": msg_extra.pop("name", None), "metadata": {}},
                   "create_time": t, "content": content or {"content_type": "text", "parts": [text]},
                   "status": "finished_successfully", "metadata": msg_extra.pop("metadata", {}), **msg_extra}
    return {"id": nid, "parent": parent, "children": children, "message": message}


def chatgpt_conversation(conv_id="conv-1", title="Fixing the parser"):
    """root → hidden system → u1 → a1 → u2 → {a2 (regenerated: a2x), a2 current}; a1 → u2' (edited) → a3."""
    nodes = [
        _node("root", None, ["sys"]),
        _node("sys", "root", ["u1"], "system", "You are ChatGPT", T0 + 1,
              metadata={"is_visually_hidden_from_conversation": True}),
        _node("u1", "sys", ["a1"], "user", "Why does my parser fail on tabs?", T0 + 10),
        _node("a1", "u1", ["u2", "u2e"], "assistant", "Because the lexer splits on spaces only.", T0 + 20),
        _node("u2", "a1", ["a2x", "a2"], "user", None, T0 + 30, content={
            "content_type": "multimodal_text",
            "parts": [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-abc123"},
                      "Here is a screenshot, how do I fix it?"]}),
        _node("a2x", "u2", [], "assistant", "First answer (regenerated away).", T0 + 40),
        _node("a2", "u2", [], "assistant", "Use str.split() without arguments.", T0 + 50),
        _node("u2e", "a1", ["a3"], "user", "Edited: what about newlines?", T0 + 60),
        _node("a3", "u2e", [], "assistant", None, T0 + 70,
              content={"content_type": "code", "language": "python", "text": "text.splitlines()"}),
    ]
    return {"id": conv_id, "conversation_id": conv_id, "title": title, "create_time": T0, "update_time": T0 + 70,
            "current_node": "a2", "mapping": {n["id"]: n for n in nodes}}


def write_chatgpt(path: Path, conversations) -> Path:
    path.write_text(json.dumps(conversations), encoding="utf-8")
    return path


def _cc(kind, uid, parent, content, t, sid="11111111-2222-3333-4444-555555555555", cwd=None, **extra):
    role = "assistant" if kind == "assistant" else "user"
    rec = {"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": sid, "cwd": cwd,
           "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + t)) + ".000Z",
           "isSidechain": extra.pop("isSidechain", False), "userType": "external", "version": "2.0.0"}
    if content is not None:
        rec["message"] = {"role": role, "content": content, **extra.pop("message_extra", {})}
    rec.update(extra)
    return rec


def write_claude_code(root: Path, cwd: Path) -> Path:
    """A Claude Code project folder: one session with a title, a split assistant response with a
    tool call, a tool result, thinking, a meta record, a sidechain, a compaction, a damaged line,
    and an agent file under <session>/subagents/."""
    sid = "11111111-2222-3333-4444-555555555555"
    folder = root / "-tmp-project"
    folder.mkdir(parents=True)
    c = str(cwd)
    lines = [
        {"type": "summary", "summary": "Rename the config loader", "leafUuid": "a4"},
        _cc("user", "m0", None, "Caveat: local commands", 0, cwd=c, isMeta=True),
        _cc("user", "u1", "m0", "Rename load_cfg to load_config", 1, cwd=c),
        _cc("assistant", "a1", "u1", [{"type": "thinking", "thinking": "secret plan", "signature": "x"}], 2, cwd=c,
            message_extra={"id": "msg_1", "model": "claude"}),
        _cc("assistant", "a1b", "a1", [{"type": "text", "text": "I'll look at the file first."}], 3, cwd=c,
            message_extra={"id": "msg_1"}),
        _cc("assistant", "a1c", "a1b", [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                          "input": {"file_path": "config.py"}}], 4, cwd=c, message_extra={"id": "msg_1"}),
        _cc("assistant", "a1d", "a1c", [{"type": "tool_use", "id": "toolu_2", "name": "Grep",
                                          "input": {"pattern": "load_cfg"}}], 5, cwd=c, message_extra={"id": "msg_1"}),
        _cc("user", "r1", "a1d", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def load_cfg(): ..."}], 6, cwd=c),
        _cc("user", "r2", "r1", [{"type": "tool_result", "tool_use_id": "toolu_2",
                                  "content": [{"type": "text", "text": "config.py:1"}], "is_error": False}], 7, cwd=c),
        "{this line is damaged",
        _cc("assistant", "a2", "r2", [{"type": "text", "text": "Renamed in config.py."}], 8, cwd=c,
            message_extra={"id": "msg_2"}),
        {"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None, "logicalParentUuid": "a2",
         "sessionId": sid, "timestamp": "2023-11-14T22:15:00.000Z", "compactMetadata": {"trigger": "manual", "preTokens": 12345}},
        _cc("user", "cs", "cb", "Summary: the user renamed load_cfg to load_config.", 9, cwd=c, isCompactSummary=True),
        _cc("user", "u3", "cs", "Now update the docs", 10, cwd=c),
        _cc("assistant", "a4", "u3", [{"type": "text", "text": "Docs updated."}], 11, cwd=c, message_extra={"id": "msg_3"}),
        # a sidechain (an older Claude Code sub-agent, in the same file)
        _cc("user", "s1", None, "Search for load_cfg uses", 3.5, cwd=c, isSidechain=True, agentId="abc123"),
        _cc("assistant", "s2", "s1", [{"type": "text", "text": "Found 2 uses."}], 3.6, cwd=c, isSidechain=True,
            agentId="abc123", message_extra={"id": "msg_s"}),
    ]
    path = folder / f"{sid}.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    agent_dir = folder / sid / "subagents"
    agent_dir.mkdir(parents=True)
    (agent_dir / "agent-def456.jsonl").write_text("\n".join(json.dumps(x) for x in [
        _cc("user", "g1", None, "Check the tests", 4.1, cwd=c, isSidechain=True, agentId="def456"),
        _cc("assistant", "g2", "g1", [{"type": "text", "text": "Tests pass."}], 4.2, cwd=c, isSidechain=True,
            agentId="def456", message_extra={"id": "msg_g"}),
    ]) + "\n", encoding="utf-8")
    # a file with only a title: nothing to import, and no complaint
    (folder / "99999999-2222-3333-4444-555555555555.jsonl").write_text(
        json.dumps({"type": "summary", "summary": "empty", "leafUuid": "zz"}) + "\n")
    return root


def _cx(kind, payload, t):
    return {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + t)) + ".500Z", "type": kind, "payload": payload}


def write_codex(root: Path, cwd: Path) -> Path:
    """A Codex sessions folder: one rollout with two parallel function calls, a damaged line,
    reasoning and a compaction; and one old-format rollout (no envelope)."""
    day = root / "2025" / "12" / "08"
    day.mkdir(parents=True)
    lines = [
        _cx("session_meta", {"id": "0199-codex-1", "timestamp": "2023-11-14T22:13:20.000Z", "cwd": str(cwd),
                             "cli_version": "0.65.0", "source": "cli"}, 0),
        _cx("response_item", {"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]}, 1),
        _cx("response_item", {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}, 1),
        _cx("response_item", {"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "List the python files and count lines"}]}, 2),
        _cx("event_msg", {"type": "user_message", "message": "List the python files and count lines"}, 2),
        _cx("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "xxx"}, 3),
        _cx("response_item", {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_a"}, 4),
        _cx("response_item", {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"wc\",\"-l\"]}", "call_id": "call_b"}, 4),
        _cx("response_item", {"type": "function_call_output", "call_id": "call_a", "output": "{\"output\":\"a.py\\nb.py\",\"metadata\":{}}"}, 5),
        _cx("response_item", {"type": "function_call_output", "call_id": "call_b", "output": {"content": "12 total", "success": True}}, 5),
        "not json at all",
        _cx("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files, 12 lines."}]}, 6),
        _cx("compacted", {"message": "The user listed files."}, 7),
        _cx("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}, 8),
    ]
    (day / "rollout-2025-12-08T00-37-46-0199-codex-1.jsonl").write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    old = [{"id": "old-codex-2", "timestamp": "2023-11-14T22:13:20Z", "instructions": None},
           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "old format question"}]},
           {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "old answer"}]}]
    (day / "rollout-old.jsonl").write_text("\n".join(json.dumps(x) for x in old) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


# --- ChatGPT -------------------------------------------------------------------------------------


class TestChatGPTImport:
    """A ChatGPT export's branches, placeholders and times are lost or mangled on import."""

    def test_current_branch_becomes_the_session_and_other_branches_forks(self, store, tmp_path, project):
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation()])
        report = import_sessions(store, chatgpt.read_export(src), default_cwd=project)
        assert report.ok and len(report.imported) == 3, report.to_dict()
        mgr = SessionManager(store)
        pk = project_key(project)
        main = mgr.get(SessionKey(pk, import_session_id("chatgpt", "conv-1")))
        assert main.title == "Fixing the parser"
        assert [m["content"] for m in main.messages] == [
            "Why does my parser fail on tabs?", "Because the lexer splits on spaces only.",
            "[image: file-abc123]\nHere is a screenshot, how do I fix it?", "Use str.split() without arguments."]
        assert main.created_at == T0 and main.updated_at == T0 + 50  # original times, not now
        forks = {m.id: m for m in mgr.list(pk) if m.id != main.id}
        assert len(forks) == 2
        regen = mgr.get(SessionKey(pk, import_session_id("chatgpt", "conv-1:a2x")))
        assert [m["content"] for m in regen.messages][-1] == "First answer (regenerated away)."
        assert regen.forked_from == {"session_id": main.id, "message_index": 2}
        edited = mgr.get(SessionKey(pk, import_session_id("chatgpt", "conv-1:a3")))
        assert edited.messages[2]["content"] == "Edited: what about newlines?"
        assert edited.messages[3]["content"].startswith("[code]\ntext.splitlines()")
        assert edited.forked_from == {"session_id": main.id, "message_index": 1}
        # The sidebar orders by the original activity time.
        assert mgr.list(pk)[0].updated_at == T0 + 70

    def test_reimport_writes_nothing_twice(self, store, tmp_path, project):
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation()])
        first = import_sessions(store, chatgpt.read_export(src), default_cwd=project)
        again = import_sessions(store, chatgpt.read_export(src), default_cwd=project)
        assert len(first.imported) == 3 and again.imported == [] and len(again.skipped) == 3
        assert len(SessionManager(store).list(project_key(project))) == 3

    def test_zip_export_and_dry_run(self, store, tmp_path, project):
        src = tmp_path / "export.zip"
        with zipfile.ZipFile(src, "w") as zf:
            zf.writestr("user.json", "{}")
            zf.writestr("conversations.json", json.dumps([chatgpt_conversation("c-9", "From zip")]))
        dry = import_sessions(store, chatgpt.read_export(src), default_cwd=project, dry_run=True)
        assert len(dry.imported) == 3 and dry.messages == 12
        assert SessionManager(store).list(project_key(project)) == []
        real = import_sessions(store, chatgpt.read_export(src), default_cwd=project)
        assert len(real.imported) == 3

    def test_a_broken_conversation_is_named_and_the_rest_imported(self, store, tmp_path, project):
        broken = {"id": "bad", "title": "Broken", "current_node": "x"}  # no mapping
        src = write_chatgpt(tmp_path / "conversations.json", [broken, chatgpt_conversation("ok-1")])
        report = import_sessions(store, chatgpt.read_export(src), default_cwd=project)
        assert len(report.imported) == 3
        assert len(report.problems) == 1 and f"{src}:1" in str(report.problems[0])

    def test_not_an_export_is_one_sentence(self, store, tmp_path, project):
        bad = tmp_path / "notes.txt"
        bad.write_text("hello")
        report = import_sessions(store, chatgpt.read_export(bad), default_cwd=project)
        assert report.imported == [] and "not a ChatGPT export" in str(report.problems[0])


# --- Claude Code ---------------------------------------------------------------------------------


class TestClaudeCodeImport:
    """Claude Code's block-per-record assistant messages, tool results, sidechains and compactions
    become an invalid or incomplete OpenAI history."""

    def test_main_line_tools_subagents_and_compaction(self, store, tmp_path, project):
        root = write_claude_code(tmp_path / "claude", project)
        report = import_sessions(store, claude_code.read_sessions(root))
        assert report.ok and len(report.imported) == 1, report.to_dict()
        assert report.subagent_records == 2
        assert len(report.problems) == 1 and report.problems[0].line == 10  # the damaged line, by number
        key = SessionKey(project_key(project), import_session_id("claude-code", "11111111-2222-3333-4444-555555555555"))
        session = SessionManager(store).get(key)
        assert session.title == "Rename the config loader"
        msgs = session.messages
        assert msgs[0] == {"role": "user", "content": "Rename load_cfg to load_config"}
        # the thinking / text / two tool_use records of msg_1 are one assistant message
        assert msgs[1]["role"] == "assistant" and msgs[1]["content"] == "I'll look at the file first."
        assert [c["function"]["name"] for c in msgs[1]["tool_calls"]] == ["Read", "Grep"]
        assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {"file_path": "config.py"}
        assert [(m["role"], m.get("tool_call_id")) for m in msgs[2:4]] == [("tool", "toolu_1"), ("tool", "toolu_2")]
        assert msgs[3]["content"] == "config.py:1"
        assert [m.get("content") for m in msgs[4:]] == ["Renamed in config.py.", "Now update the docs", "Docs updated."]
        assert not any("secret plan" in json.dumps(m) for m in msgs)
        entries = store.load(key)
        comp = [e for e in entries if e["type"] == "compaction"]
        assert len(comp) == 1 and comp[0]["first_kept_index"] == 5 and comp[0]["trigger"] == "manual"
        assert comp[0]["summary"].startswith("Summary: the user renamed")
        subs = {sub: store.load(SessionKey(key.project_key, key.session_id, sub)) for sub in
                ("subagents/abc123", "subagents/agent-def456")}
        assert all(subs.values())
        texts = [e["message"]["content"] for e in subs["subagents/abc123"] if e["type"] == "message"]
        assert texts == ["Search for load_cfg uses", "Found 2 uses."]
        # the sub-agent records never list as sessions
        assert [m.id for m in SessionManager(store).list(key.project_key)] == [key.session_id]

    def test_mcp_calls_keep_their_server(self, store, tmp_path, project):
        """Guards against an imported call to an MCP server losing which server it went to."""
        sid = "22222222-2222-3333-4444-555555555555"
        folder = tmp_path / "claude" / "-tmp-project"
        folder.mkdir(parents=True)
        c = str(project)
        lines = [
            _cc("user", "u1", None, "File an issue", 1, sid=sid, cwd=c),
            _cc("assistant", "a1", "u1", [{"type": "tool_use", "id": "toolu_m", "name": "mcp__github__create_issue",
                                           "input": {"title": "Bug"}}], 2, sid=sid, cwd=c, message_extra={"id": "m1"}),
            _cc("user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "toolu_m", "content": "#12"}], 3,
                sid=sid, cwd=c),
            _cc("assistant", "a2", "r1", [{"type": "text", "text": "Filed #12."}], 4, sid=sid, cwd=c,
                message_extra={"id": "m2"}),
        ]
        (folder / f"{sid}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
        assert import_sessions(store, claude_code.read_sessions(tmp_path / "claude")).ok
        key = SessionKey(project_key(project), import_session_id("claude-code", sid))
        session = SessionManager(store).get(key)
        assert session.messages[1]["tool_calls"][0]["function"]["name"] == "mcp__github__create_issue"
        assert session.mcp_calls == {"toolu_m": {"server": "github", "tool": "create_issue"}}

    def test_project_filter(self, store, tmp_path, project):
        root = write_claude_code(tmp_path / "claude", project)
        other = tmp_path / "other"
        other.mkdir()
        assert import_sessions(store, claude_code.read_sessions(root, project=str(other))).imported == []
        assert len(import_sessions(store, claude_code.read_sessions(root, project=str(project))).imported) == 1


# --- Codex ---------------------------------------------------------------------------------------


class TestCodexImport:
    """Codex's Responses-API items (parallel function calls, outputs as objects or JSON text,
    preambles, the old envelope-less format) come out as an invalid chat history."""

    def test_rollouts(self, store, tmp_path, project):
        root = write_codex(tmp_path / "codex", project)
        report = import_sessions(store, codex.read_sessions(root), default_cwd=project)
        assert report.ok and len(report.imported) == 2, report.to_dict()
        assert len(report.problems) == 1 and report.problems[0].line == 11
        key = SessionKey(project_key(project), import_session_id("codex", "0199-codex-1"))
        msgs = SessionManager(store).get(key).messages
        assert msgs[0] == {"role": "user", "content": "List the python files and count lines"}
        assert [c["id"] for c in msgs[1]["tool_calls"]] == ["call_a", "call_b"] and msgs[1]["content"] is None
        assert msgs[2] == {"role": "tool", "tool_call_id": "call_a", "content": "a.py\nb.py"}
        assert msgs[3] == {"role": "tool", "tool_call_id": "call_b", "content": "12 total"}
        assert msgs[4] == {"role": "assistant", "content": "Two files, 12 lines."}
        assert msgs[5] == {"role": "user", "content": "thanks"}
        assert [e for e in store.load(key) if e["type"] == "compaction"][0]["first_kept_index"] == 5
        old = SessionManager(store).get(SessionKey(project_key(project), import_session_id("codex", "old-codex-2")))
        assert [m["content"] for m in old.messages] == ["old format question", "old answer"]


# --- imported sessions resume --------------------------------------------------------------------


class TestImportedSessionsResume:
    """An imported history that a strict server rejects (a call without its result, an unknown
    key, a bad role) makes the imported conversation a dead end."""

    @pytest.mark.parametrize("source", ["chatgpt", "claude-code", "codex"])
    def test_resume_passes_strict_validation(self, source, fake_openai, tmp_path, project):
        from core import LocalSessionStore

        store = LocalSessionStore(tmp_path / "home")
        if source == "chatgpt":
            items = chatgpt.read_export(write_chatgpt(tmp_path / "c.json", [chatgpt_conversation()]))
        elif source == "claude-code":
            items = claude_code.read_sessions(write_claude_code(tmp_path / "claude", project))
        else:
            items = codex.read_sessions(write_codex(tmp_path / "codex", project))
        report = import_sessions(store, items, default_cwd=project)
        assert report.imported
        for sid in report.imported:
            key = SessionKey(project_key(project), sid)
            before = len(store.load(key))
            fake_openai.push({"text": "Carrying on."})
            result = run_session(key, store, "and now?", client=fake_openai.client(), model="gpt-test",
                                 wait_for_title=0)
            assert result.messages[-1] == {"role": "assistant", "content": "Carrying on."}
            assert len(store.load(key)) > before
        assert fake_openai.rejected() == []


# --- whole or absent -----------------------------------------------------------------------------


CHILD = r"""
import sys
from core import LocalSessionStore
from core.importers import chatgpt
from core.importers.base import import_sessions
store = LocalSessionStore(sys.argv[1])
print("start", flush=True)
import_sessions(store, chatgpt.read_export(sys.argv[2]), default_cwd=sys.argv[3])
print("done", flush=True)
"""


@pytest.mark.slow
class TestImportKilledMidway:
    """An import killed at a random point leaves a half-written conversation that lists as a
    normal session (the user would think it was complete), or a re-run that skips it for good."""

    def test_every_session_whole_or_absent_then_rerun_completes(self, tmp_path, project):
        from core import LocalSessionStore

        convs = []
        for i in range(60):
            conv = chatgpt_conversation(f"conv-{i}", f"Conversation {i}")
            # make every conversation long enough that a kill lands inside writes
            conv["mapping"]["a2"]["message"]["content"]["parts"] = ["x" * 20000]
            convs.append(conv)
        src = write_chatgpt(tmp_path / "big.json", convs)
        expected = {}
        for s in chatgpt.read_export(src):
            expected[s.session_id] = len(s.messages)
        rng = random.Random(19)
        env = {**os.environ, "PYTHONPATH": str(REPO), "ANYCODE_FSYNC": "0"}
        for run in range(8):
            home = tmp_path / f"home{run}"
            proc = subprocess.Popen([sys.executable, "-c", CHILD, str(home), str(src), str(project)],
                                    env=env, stdout=subprocess.PIPE, text=True)
            assert proc.stdout.readline().strip() == "start"
            time.sleep(rng.uniform(0.0, 0.6))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            store = LocalSessionStore(home)
            mgr = SessionManager(store)
            for meta in mgr.list(project_key(project)):
                assert meta.message_count == expected[meta.id], f"run {run}: {meta.id} is partial"
            # a re-run completes what is missing and leaves the rest as it was
            report = import_sessions(store, chatgpt.read_export(src), default_cwd=project)
            assert report.ok
            metas = mgr.list(project_key(project))
            assert {m.id: m.message_count for m in metas} == expected


class TestImportedHistorySurvivesCleanup:
    """Imported conversations keep their original (old) times, so the next start's cleanup and
    auto-archive took them for idle sessions: importing ChatGPT history and opening the app
    deleted it (found in a fresh-user trial)."""

    def test_cleanup_and_auto_archive_count_from_the_import(self, store, tmp_path, project):
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation()])
        assert len(import_sessions(store, chatgpt.read_export(src), default_cwd=project).imported) == 3
        mgr = SessionManager(store)
        pk = project_key(project)
        assert mgr.cleanup(30) == [] and mgr.auto_archive(14) == []
        assert len(mgr.list(pk)) == 3
        # ... and once they have been idle in anycode that long, the rules apply as to any session
        later = time.time() + 31 * 86400
        assert len(mgr.cleanup(30, now=later)) == 3
        assert mgr.list(pk) == []

    def test_restored_sessions_are_kept_too(self, tmp_path, project):
        from core import LocalSessionStore
        from core.stores.backup import backup_store, restore_backup

        src = LocalSessionStore(tmp_path / "src")
        items = chatgpt.read_export(write_chatgpt(tmp_path / "c.json", [chatgpt_conversation()]))
        import_sessions(src, items, default_cwd=project)
        backup_store(src, tmp_path / "b.zip")
        dst = LocalSessionStore(tmp_path / "dst")
        assert restore_backup(tmp_path / "b.zip", dst).ok
        assert SessionManager(dst).cleanup(30) == []
        assert len(SessionManager(dst).list(project_key(project))) == 3
