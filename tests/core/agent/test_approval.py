"""Approval before side effects (issue 10, part 9), through the runner over real HTTP to the fake
OpenAI server: pause, store, resume (allow / deny with a reason), restart, new message, Stop."""
from __future__ import annotations

import json

import pytest

from core import LocalSessionStore, SessionManager
from core.agent import approval as ap
from core.agent.events import ApprovalRequested, RoundCompleted, TitleStarted
from core.agent.runner import run_session_stream
from core.agent.tools import Tool, ToolRegistry, Workspace
from tests.support.stores import make_project, session, store  # noqa: F401  (fixtures)

MODEL = "gpt-4o-mini"
WRITE = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "new\ntext\n"}, "id": "call_w"}


@pytest.fixture
def workspace(tmp_path):
    return make_project(tmp_path / "project", {"notes.txt": "old\ntext\n"})


def run(store, key, text, client, **kw):
    events = []
    for event in run_session_stream(key, store, text, client=client, model=MODEL, **kw):
        events.append(event)
        if isinstance(event, TitleStarted):
            event.thread.join(10)
    return events


def pending_of(store, key):
    return ap.ApprovalState.from_entries(store.load(key)).pending()


class TestPausesBeforeSideEffects:
    """Guards against the agent changing a file without the user's approval, or losing the
    paused turn (and its pending approval) when the app restarts."""

    def test_write_pauses_with_a_diff_and_changes_nothing(self, fake_openai, store, session, workspace):
        fake_openai.push({"tool_calls": [WRITE]}, {"text": "should not be asked for"})
        events = run(store, session.key, "update the notes", fake_openai.client())
        kinds = [type(e).__name__ for e in events if type(e).__name__ not in ("TitleStarted", "MemoryStarted")]
        assert kinds[-2:] == ["ApprovalRequested", "RoundCompleted"]
        assert (workspace / "notes.txt").read_text() == "old\ntext\n"
        assert len(fake_openai.chat_requests()) == 1  # the turn waits: no second model call
        [p] = pending_of(store, session.key)
        assert p.call_id == "call_w" and p.tool == "write_file"
        assert "-old\n" in p.preview and "+new\n" in p.preview and " text\n" in p.preview
        assert p.preview.startswith("--- a/notes.txt\n+++ b/notes.txt\n")
        messages = SessionManager(store).get(session.key).messages
        assert messages[-1]["tool_calls"][0]["id"] == "call_w"  # the call, not yet answered

    def test_new_file_preview_is_its_content(self, fake_openai, store, session, workspace):
        fake_openai.push({"tool_calls": [{"name": "write_file", "id": "c_new",
                                          "arguments": {"path": "src/new.py", "content": "print(1)\n"}}]})
        run(store, session.key, "make a file", fake_openai.client())
        [p] = pending_of(store, session.key)
        assert p.preview == "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,1 @@\n+print(1)\n"
        assert not (workspace / "src").exists()

    def test_restart_shows_it_again_then_allow_once_runs_it(self, fake_openai, store, session, workspace, tmp_path):
        fake_openai.push({"tool_calls": [WRITE]})
        run(store, session.key, "update the notes", fake_openai.client())
        # "restart": a new store object over the same folder, a resume without an answer
        store2 = LocalSessionStore(tmp_path / "home")
        run(store2, session.key, None, fake_openai.client())
        [p] = pending_of(store2, session.key)
        requests = [e for e in store2.load(session.key) if e.get("type") == "approval"]
        assert len(requests) == 1  # shown again, not stored twice
        assert (workspace / "notes.txt").read_text() == "old\ntext\n"
        # the user allows it: the call runs, then the model goes on
        fake_openai.push({"text": "Notes updated."})
        store2.append(session.key, [ap.decision_entry(p.call_id, True)])
        policy = ap.ApprovalPolicy(decisions={p.call_id: ap.Decision(True)})
        run(store2, session.key, None, fake_openai.client(), approval=policy)
        assert (workspace / "notes.txt").read_text() == "new\ntext\n"
        messages = SessionManager(store2).get(session.key).messages
        assert messages[-2]["role"] == "tool" and messages[-2]["content"].startswith("Wrote")
        assert messages[-1] == {"role": "assistant", "content": "Notes updated."}
        assert pending_of(store2, session.key) == []
        assert fake_openai.rejected() == []

    def test_deny_with_reason_reaches_the_model(self, fake_openai, store, session, workspace):
        fake_openai.push({"tool_calls": [WRITE]}, {"text": "OK, I will leave it."})
        run(store, session.key, "update the notes", fake_openai.client())
        policy = ap.ApprovalPolicy(decisions={"call_w": ap.Decision(False, reason="keep the old notes")})
        run(store, session.key, None, fake_openai.client(), approval=policy)
        assert (workspace / "notes.txt").read_text() == "old\ntext\n"
        sent = fake_openai.chat_requests()[-1]["messages"]
        assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "call_w"
        assert "denied" in sent[-1]["content"] and "keep the old notes" in sent[-1]["content"]

    def test_a_decision_read_from_the_file_grants_nothing(self, fake_openai, store, session, workspace):
        """A copied or hand-edited session file must not approve its own calls."""
        fake_openai.push({"tool_calls": [WRITE]})
        run(store, session.key, "update the notes", fake_openai.client())
        store.append(session.key, [ap.decision_entry("call_w", True, scope="chat")])
        run(store, session.key, None, fake_openai.client())  # no answer from the running app
        assert (workspace / "notes.txt").read_text() == "old\ntext\n"
        assert [p.call_id for p in pending_of(store, session.key)] == ["call_w"]

    def test_new_message_instead_of_an_answer_denies(self, fake_openai, store, session, workspace):
        fake_openai.push({"tool_calls": [WRITE, {"name": "list_files", "arguments": {}, "id": "call_l"}]})
        run(store, session.key, "update the notes", fake_openai.client())
        fake_openai.push({"text": "Sure, something else."})
        run(store, session.key, "actually, never mind", fake_openai.client())
        assert (workspace / "notes.txt").read_text() == "old\ntext\n"
        sent = fake_openai.chat_requests()[-1]["messages"]
        assert [m["role"] for m in sent[-4:]] == ["assistant", "tool", "tool", "user"]
        assert ap.NEW_MESSAGE_REASON in sent[-3]["content"]
        assert pending_of(store, session.key) == []
        assert fake_openai.rejected() == []

    def test_read_only_tools_never_ask(self, fake_openai, store, session):
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}},
                                         {"name": "list_files", "arguments": {}}]}, {"text": "Read it."})
        events = run(store, session.key, "read the notes", fake_openai.client())
        assert not any(isinstance(e, ApprovalRequested) for e in events)
        assert SessionManager(store).get(session.key).messages[-1] == {"role": "assistant", "content": "Read it."}

    @pytest.mark.parametrize("path", ["../outside.txt", "/etc/anycode-test.txt", ""])
    def test_a_write_the_tools_refuse_comes_back_without_asking(self, fake_openai, store, session, workspace, path):
        """Guards against an approval card for a change that cannot happen: the tool layer's
        refusal is the call's result, the turn goes on, nothing is pending."""
        bad = {"name": "write_file", "arguments": {"path": path, "content": "x"}, "id": "call_out"}
        fake_openai.push({"tool_calls": [bad]}, {"text": "I cannot write there."})
        events = run(store, session.key, "write outside", fake_openai.client())
        assert not any(isinstance(e, ApprovalRequested) for e in events)
        assert pending_of(store, session.key) == []
        messages = SessionManager(store).get(session.key).messages
        result = next(m for m in messages if m.get("role") == "tool")
        assert result["content"].startswith("Error: ") and ("outside the workspace" in result["content"]
                                                            or "path" in result["content"])
        assert messages[-1] == {"role": "assistant", "content": "I cannot write there."}
        assert not (workspace.parent / "outside.txt").exists()

    def test_auto_mode_never_asks(self, fake_openai, store, session, workspace, monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
        fake_openai.push({"tool_calls": [WRITE]}, {"text": "Done."})
        run(store, session.key, "update the notes", fake_openai.client())
        assert (workspace / "notes.txt").read_text() == "new\ntext\n"

    def test_second_write_in_the_same_reply_asks_again(self, fake_openai, store, session, workspace):
        second = {"name": "write_file", "arguments": {"path": "b.txt", "content": "B"}, "id": "call_b"}
        fake_openai.push({"tool_calls": [WRITE, second]}, {"text": "Both done."})
        run(store, session.key, "write two", fake_openai.client())
        run(store, session.key, None, fake_openai.client(),
            approval=ap.ApprovalPolicy(decisions={"call_w": ap.Decision(True)}))
        assert (workspace / "notes.txt").read_text() == "new\ntext\n" and not (workspace / "b.txt").exists()
        assert [p.call_id for p in pending_of(store, session.key)] == ["call_b"]
        run(store, session.key, None, fake_openai.client(),
            approval=ap.ApprovalPolicy(decisions={"call_b": ap.Decision(True)}))
        assert (workspace / "b.txt").read_text() == "B"
        messages = SessionManager(store).get(session.key).messages
        assert [m["role"] for m in messages[-4:]] == ["assistant", "tool", "tool", "assistant"]
        assert fake_openai.rejected() == []


class TestPolicy:
    """Guards against a typo in ANYCODE_APPROVAL switching asking off, and against a tool's
    side-effect flag being ignored (each tool declares its own)."""

    @pytest.mark.parametrize("raw,mode", [("", "ask"), ("ask", "ask"), ("AUTO", "auto"), ("yes", "ask"),
                                          ("never", "ask")])
    def test_env(self, monkeypatch, raw, mode):
        monkeypatch.setenv("ANYCODE_APPROVAL", raw)
        assert ap.approval_mode() == mode

    def test_flag_is_per_tool(self, tmp_path):
        registry = ToolRegistry([
            Tool("remember", "store a fact", {"type": "object", "properties": {}}, lambda ws, **a: "ok"),
            Tool("deploy", "ship it", {"type": "object", "properties": {"to": {"type": "string"}}},
                 lambda ws, **a: "shipped", side_effects=True),
        ])
        gate = ap.ApprovalGate(ap.ApprovalPolicy(mode="ask"), registry)
        ws = Workspace(tmp_path)
        assert gate.check("c1", "remember", "{}", ws).action == "run"
        verdict = gate.check("c2", "deploy", '{"to": "prod"}', ws)
        assert verdict.action == "ask" and json.loads(verdict.pending.preview) == {"to": "prod"}
        chat = ap.Grants()
        chat.decide("s", "c2", ap.Decision(True, scope="chat"))
        assert ap.ApprovalGate(chat.policy("s"), registry).check("c3", "deploy", "{}", ws).action == "run"

    def test_a_preview_that_breaks_still_asks(self, tmp_path):
        """A bug in a tool's preview (a TypeError that is not about its arguments) must not end
        the agent run: the user is asked with a preview that says it cannot be shown."""
        def broken(ws, **a):
            return "x" + 1  # TypeError: can only concatenate str (not "int") to str

        registry = ToolRegistry([Tool("deploy", "ship it", {"type": "object", "properties": {}},
                                      lambda ws, **a: "shipped", side_effects=True, preview=broken)])
        verdict = ap.ApprovalGate(ap.ApprovalPolicy(mode="ask"), registry).check("c1", "deploy", "{}",
                                                                                  Workspace(tmp_path))
        assert verdict.action == "ask" and verdict.pending.preview.startswith("(the change cannot be shown")


class TestSubagentsCannotBypass:
    """Guards against a sub-agent (the ``task`` tool) writing files the main agent would have had
    to ask for: it runs in a worker and cannot pause the turn, so it is refused instead."""

    def _turn(self, fake_openai, store, session):
        fake_openai.push({"tool_calls": [{"name": "task", "id": "call_t", "arguments": {
            "description": "Edit notes", "prompt": "Rewrite notes.txt"}}]}, {"text": "Done."})
        fake_openai.push({"tool_calls": [WRITE]}, {"text": "I rewrote it."}, kind="subagent")
        run(store, session.key, "delegate the edit", fake_openai.client())

    def test_ask_mode_refuses_the_sub_agents_write(self, fake_openai, store, session, workspace):
        self._turn(fake_openai, store, session)
        assert (workspace / "notes.txt").read_text() == "old\ntext\n"
        sub = [r for r in fake_openai.requests if r["status"] == 200 and r["body"] and r["body"]["messages"][0]["role"] == "system"
               and any(m.get("role") == "tool" for m in r["body"]["messages"])]
        assert any("cannot ask" in m["content"] for r in sub for m in r["body"]["messages"] if m.get("role") == "tool")

    def test_auto_mode_lets_it_write(self, fake_openai, store, session, workspace, monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
        self._turn(fake_openai, store, session)
        assert (workspace / "notes.txt").read_text() == "new\ntext\n"
