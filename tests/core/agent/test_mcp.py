"""Tools from MCP servers in a turn (core.agent.mcp), against real MCP servers written with the
official SDK (tests/support/mcp_server.py: one over stdio, one over streamable HTTP on 127.0.0.1)
and the strict fake OpenAI server: tools listed and called in a streamed turn, approval asked,
results stored, resumes after the server is renamed, changed or removed, a server killed mid-call,
a hanging tool, a 10 MB result, a project configuration nobody approved."""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from core.agent import approval as ap
from core.agent.events import ApprovalRequested, ToolCallFinished
from core.agent.mcp.config import config_dir, load_config
from core.agent.mcp.hub import McpHub
from core.agent.runner import run_session_stream
from core.session.export import session_to_jsonl, session_to_markdown
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from tests.support.mcp_server import HttpServer, stdio_entry, write_config

SECRET = "s3cret-token-0123456789"


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("ANYCODE_MEMORY", "off")  # no memory requests between the scripted replies


@pytest.fixture
def project(tmp_path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def store(tmp_path):
    return LocalSessionStore(tmp_path / "data")


@pytest.fixture
def hub():
    made = McpHub()
    yield made
    made.close()


def call(tool: str, call_id: str, /, **arguments) -> dict:
    return {"name": tool, "arguments": arguments, "id": call_id}


class Chat:
    """One session of ``project`` driven turn by turn through the runner with the hub's offer."""

    def __init__(self, store, project, hub, fake_openai):
        self.store, self.hub, self.fake = store, hub, fake_openai
        self.manager = SessionManager(store)
        self.key = self.manager.create(project).key

    def turn(self, text: str | None, *replies: dict, mode: str = "ask", decisions: dict | None = None,
             cancel=None) -> list:
        self.fake.push(*replies)
        policy = ap.ApprovalPolicy(mode=mode, decisions=decisions or {})
        return list(run_session_stream(
            self.key, self.store, text, client=self.fake.client(timeout=60), model="gpt-test", approval=policy,
            cancel=cancel, extra_tools=lambda ws, messages, stop: self.hub.turn(ws.root if ws else None, messages, stop)))

    @property
    def messages(self) -> list[dict]:
        return self.manager.get(self.key).messages

    def results(self) -> dict[str, str]:
        return {m["tool_call_id"]: m["content"] for m in self.messages if m.get("role") == "tool"}

    def entries(self) -> list[dict]:
        return self.store.load(self.key)


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


class TestATurnWithMcpTools:
    """Guards against MCP tools missing from the request, a call running without the user's yes,
    a result or the server's name lost on the way to the session, the server's instructions
    stored into the conversation, and a configuration secret reaching the session or the log."""

    def test_stdio_tools_are_offered_asked_for_called_and_stored(self, store, project, hub, fake_openai, caplog,
                                                                  tmp_path):
        caplog.set_level(logging.INFO, logger="core.agent.mcp")
        started = tmp_path / "started"
        write_config(project, {"tests": stdio_entry(MCP_SECRET=SECRET, MCP_STARTED_FILE=str(started))})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)

        events = chat.turn("say hi through the tool", {"tool_calls": [call("mcp__tests__echo", "call_e", text="hi")]})
        asked = [e for e in events if isinstance(e, ApprovalRequested)]
        assert [a.pending.tool for a in asked] == ["mcp__tests__echo"]
        assert "MCP server: tests" in asked[0].pending.preview and '"text": "hi"' in asked[0].pending.preview
        first = fake_openai.chat_requests()[0]
        echo = next(t for t in first["tools"] if t["function"]["name"] == "mcp__tests__echo")
        assert echo["function"]["parameters"]["properties"]["text"]["type"] == "string"
        assert {"mcp__tests__add", "mcp__tests__big", "read_file"} <= set(tool_names(first))
        assert first["messages"][0]["content"].count("Use echo to repeat text.") == 1
        assert "call_e" not in chat.results()  # nothing ran before the answer

        events = chat.turn(None, {"text": "It said hi."},
                           decisions={"call_e": ap.Decision(True)})
        finished = [e for e in events if isinstance(e, ToolCallFinished)]
        assert [(f.name, f.result, f.is_error) for f in finished] == [("mcp__tests__echo", "echo: hi", False)]
        assert chat.results() == {"call_e": "echo: hi"}
        assert chat.messages[-1] == {"role": "assistant", "content": "It said hi."}
        # the server and tool are recorded beside the assistant message, the message as the API takes it
        holder = next(e for e in chat.entries() if e.get("type") == "message" and e["message"].get("tool_calls"))
        assert holder["mcp"] == {"call_e": {"server": "tests", "tool": "echo"}}
        assert set(holder["message"]) == {"role", "content", "tool_calls"}
        assert chat.manager.get(chat.key).mcp_calls == {"call_e": {"server": "tests", "tool": "echo"}}
        # instructions at request time only, once
        assert "Use echo" not in chat.messages[0]["content"]
        assert fake_openai.chat_requests()[-1]["messages"][0]["content"].count("Use echo to repeat text.") == 1

        # the same server serves the next turn (no second process)
        chat.turn("again", {"tool_calls": [call("mcp__tests__echo", "call_2", text="again")]}, {"text": "ok"},
                  mode="auto")
        assert chat.results()["call_2"] == "echo: again"
        assert len(started.read_text().split()) == 1
        # stderr reached the log, its secret hidden; the secret is nowhere in the session
        assert "MCP server tests (stderr): echo called with secret [hidden]" in caplog.text
        assert SECRET not in caplog.text
        session = chat.manager.get(chat.key)
        assert SECRET not in session_to_jsonl(chat.entries()).decode() and SECRET not in session_to_markdown(session)

    def test_results_of_every_kind_under_a_cleaned_name(self, store, project, hub, fake_openai):
        # a server name the API would refuse in a tool name: offered cleaned (the strict fake fails the
        # test on a refused name), recorded as configured
        write_config(project, {"tests.prod v2": stdio_entry(MCP_SECRET=SECRET)})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("show it", {"tool_calls": [call("mcp__tests_prod_v2__show_env", "c1", name="MCP_SECRET"),
                                             call("mcp__tests_prod_v2__picture", "c2"),
                                             call("mcp__tests_prod_v2__report", "c3")]},
                  {"text": "done"}, mode="auto")
        assert "mcp__tests_prod_v2__echo" in tool_names(fake_openai.chat_requests()[0])
        assert chat.manager.get(chat.key).mcp_calls["c2"] == {"server": "tests.prod v2", "tool": "picture"}
        results = chat.results()
        assert results["c1"] == "[hidden]"
        assert results["c2"] == "[image: image/png, 2.0 KB]"
        assert json.loads(results["c3"]) == {"status": "green", "count": 3}
        assert all(SECRET not in json.dumps(e) for e in chat.entries())

    def test_http_server_with_a_header_from_the_environment(self, store, project, hub, fake_openai, caplog,
                                                            monkeypatch):
        caplog.set_level(logging.INFO)
        with HttpServer(token=SECRET) as server:
            monkeypatch.setenv("DOCS_TOKEN", SECRET)
            # the user's own file: trusted, no approval asked
            write_config(config_dir(), {"docs": {"type": "http", "url": server.url,
                                                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}, "mcp.json")
            chat = Chat(store, project, hub, fake_openai)
            chat.turn("add", {"tool_calls": [call("mcp__docs__add", "c1", a=2, b=3)]}, {"text": "5"}, mode="auto")
            assert chat.results() == {"c1": "5"}
            assert chat.manager.get(chat.key).mcp_calls == {"c1": {"server": "docs", "tool": "add"}}
            # a wrong token: the server refuses, the turn goes on without its tools, saying nothing secret
            monkeypatch.setenv("DOCS_TOKEN", "wrong-token-value")
            chat.turn("again", {"text": "no tools now"})
            assert not any(n.startswith("mcp__") for n in tool_names(fake_openai.chat_requests()[-1]))
            status = hub.status(str(project)).servers[0]
            assert status.state == "failed" and status.error
        assert SECRET not in caplog.text and "wrong-token-value" not in caplog.text
        assert all(SECRET not in json.dumps(e) for e in chat.entries())

    def test_an_unapproved_project_configuration_is_not_started(self, store, project, hub, fake_openai, tmp_path):
        started = tmp_path / "started"
        write_config(project, {"tests": stdio_entry(MCP_STARTED_FILE=str(started))})
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("hello", {"text": "hi"})
        assert not any(n.startswith("mcp__") for n in tool_names(fake_openai.chat_requests()[-1]))
        assert not started.exists()
        status = hub.status(str(project))
        assert status.needs_approval and not status.changed and status.servers[0].state == "needs approval"
        assert not hub.test(str(project), "tests").ok and not started.exists()

        hub.approve(str(project))
        # changed after the approval (a pull brought another command): not started, asked again
        write_config(project, {"tests": stdio_entry(MCP_STARTED_FILE=str(started), EXTRA="1")})
        chat.turn("hello again", {"text": "hi"})
        assert not started.exists()
        assert hub.status(str(project)).changed

    def test_read_only_marks_count_only_when_the_user_trusts_them(self, store, project, hub, fake_openai):
        write_config(project, {"tests": {**stdio_entry(), "readOnly": ["echo"]}})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        events = chat.turn("add", {"tool_calls": [call("mcp__tests__add", "c1", a=1, b=1)]})
        assert any(isinstance(e, ApprovalRequested) for e in events)  # the hint alone: asked
        chat.turn("never mind", {"text": "ok"})  # denies the waiting call
        hub.trust.set_trust_read_only(True)
        events = chat.turn("now", {"tool_calls": [call("mcp__tests__add", "c2", a=1, b=1),
                                                  call("mcp__tests__echo", "c3", text="x"),
                                                  call("mcp__tests__picture", "c4")]})
        asked = [e.pending.call_id for e in events if isinstance(e, ApprovalRequested)]
        assert asked == ["c4"]  # the annotated and the configured read-only tools ran
        assert chat.results()["c2"] == "2" and chat.results()["c3"] == "echo: x"


class TestAcrossTime:
    """Guards against a resumed chat breaking when its server is gone, renamed or changed: the old
    calls stay as they were, a new call of a missing tool gets a result saying why (never a crash,
    never a request a strict server refuses — the fake fails the test on one)."""

    def test_renamed_changed_and_removed_server(self, store, project, hub, fake_openai):
        write_config(project, {"tests": stdio_entry()})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("one", {"tool_calls": [call("mcp__tests__echo", "c1", text="one")]}, {"text": "1"}, mode="auto")

        write_config(project, {"renamed": stdio_entry()})  # renamed
        hub.approve(str(project))
        chat.turn("two", {"tool_calls": [call("mcp__tests__echo", "c2", text="two"),
                                         call("mcp__renamed__echo", "c3", text="three")]}, {"text": "2"}, mode="auto")
        results = chat.results()
        assert results["c1"] == "echo: one"  # the old call as it was
        assert results["c2"].startswith("Error: the tool mcp__tests__echo is not available: no MCP server 'tests' is "
                                         "configured for this project any more.")
        assert "mcp__renamed__echo" in results["c2"] and results["c3"] == "echo: three"

        write_config(project, {"renamed": stdio_entry("v2")})  # its tools changed
        hub.approve(str(project))
        chat.turn("three", {"tool_calls": [call("mcp__renamed__echo", "c4", text="x"),
                                           call("mcp__renamed__shout", "c5", text="x")]}, {"text": "3"}, mode="auto")
        results = chat.results()
        assert "the MCP server 'renamed' no longer offers the tool 'echo'" in results["c4"]
        assert results["c5"] == "SHOUT: X"

        write_config(project, {})  # removed
        chat.turn("four", {"tool_calls": [call("mcp__renamed__shout", "c6", text="x")]}, {"text": "4"}, mode="auto")
        assert "no MCP server 'renamed' is configured" in chat.results()["c6"]
        assert "No MCP tool is available now." in chat.results()["c6"]
        assert not any(n.startswith("mcp__") for n in tool_names(fake_openai.chat_requests()[-1]))
        calls = chat.manager.get(chat.key).mcp_calls
        assert calls["c1"] == {"server": "tests", "tool": "echo"} and calls["c5"] == {"server": "renamed", "tool": "shout"}
        assert "c2" not in calls and "c6" not in calls  # not offered: no server to record

    def test_a_waiting_call_answered_after_its_server_was_removed(self, store, project, hub, fake_openai):
        write_config(project, {"tests": stdio_entry()})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("echo", {"tool_calls": [call("mcp__tests__echo", "c1", text="late")]})
        (project / ".mcp.json").unlink()
        chat.turn(None, {"text": "It is gone."}, decisions={"c1": ap.Decision(True)})
        assert chat.results()["c1"].startswith("Error: the tool mcp__tests__echo is not available")
        assert chat.messages[-1]["content"] == "It is gone."


class TestLimits:
    """Guards against one bad call taking more than itself: a tool that hangs, a server killed or
    dying mid-call after writing garbage, a result of 10 MB."""

    def test_a_hanging_tool_times_out_with_a_sentence(self, store, project, hub, fake_openai, monkeypatch):
        monkeypatch.setenv("ANYCODE_MCP_TIMEOUT", "1")
        write_config(project, {"tests": stdio_entry()})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("wait", {"tool_calls": [call("mcp__tests__hang", "c1", seconds=60),
                                          call("mcp__tests__echo", "c2", text="still here")]}, {"text": "ok"},
                  mode="auto")
        results = chat.results()
        assert results["c1"] == ("Error: the MCP server 'tests' did not answer hang within 1 seconds; the call was "
                                 "abandoned.")
        assert results["c2"] == "echo: still here"

    def test_a_server_killed_mid_call_costs_that_call_only(self, store, project, hub, fake_openai, tmp_path):
        pid_file, started = tmp_path / "pid", tmp_path / "started"
        write_config(project, {"tests": stdio_entry(MCP_PID_FILE=str(pid_file), MCP_STARTED_FILE=str(started))})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)

        def kill_when_called() -> None:
            deadline = time.monotonic() + 30
            while not pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            os.kill(int(pid_file.read_text()), signal.SIGKILL)

        killer = threading.Thread(target=kill_when_called)
        killer.start()
        chat.turn("slow", {"tool_calls": [call("mcp__tests__slow", "c1", seconds=60)]}, {"text": "it died"},
                  mode="auto")
        killer.join()
        assert chat.results()["c1"].startswith("Error: the MCP server 'tests' stopped while answering slow")
        chat.turn("again", {"tool_calls": [call("mcp__tests__echo", "c2", text="back")]}, {"text": "ok"}, mode="auto")
        assert chat.results()["c2"] == "echo: back"
        assert len(started.read_text().split()) == 2  # started again

    def test_stop_ends_a_running_call_at_once(self, store, project, hub, fake_openai, tmp_path):
        pid_file = tmp_path / "pid"
        write_config(project, {"tests": stdio_entry(MCP_PID_FILE=str(pid_file))})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        stop = threading.Event()

        def press_stop() -> None:
            deadline = time.monotonic() + 30
            while not pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            stop.set()

        presser = threading.Thread(target=press_stop)
        presser.start()
        chat.turn("slow", {"tool_calls": [call("mcp__tests__slow", "c1", seconds=60)]}, mode="auto", cancel=stop)
        presser.join()
        assert chat.results()["c1"] == "Error: the tool call was stopped by the user before it finished."
        chat.turn("still there?", {"tool_calls": [call("mcp__tests__echo", "c2", text="yes")]}, {"text": "ok"},
                  mode="auto")
        assert chat.results()["c2"] == "echo: yes"  # the server was not harmed

    def test_garbage_then_exit_costs_that_call_only(self, store, project, hub, fake_openai):
        write_config(project, {"tests": stdio_entry()})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("break it", {"tool_calls": [call("mcp__tests__garbage", "c1"), call("mcp__tests__die", "c2"),
                                              call("mcp__tests__echo", "c3", text="after")]}, {"text": "ok"},
                  mode="auto")
        results = chat.results()
        assert results["c1"] == "answered after garbage"
        assert results["c2"].startswith("Error: the MCP server 'tests' stopped while answering die")
        assert results["c3"] == "echo: after"

    def test_a_server_that_cannot_start_is_left_out_and_not_retried_at_once(self, store, project, hub,
                                                                           fake_openai, caplog):
        caplog.set_level(logging.WARNING, logger="core.agent.mcp.hub")
        write_config(project, {"broken": {"command": str(project / "no-such-server")}, "tests": stdio_entry()})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("one", {"text": "1"})
        chat.turn("two", {"text": "2"})
        names = tool_names(fake_openai.chat_requests()[-1])
        assert "mcp__tests__echo" in names and not any(n.startswith("mcp__broken__") for n in names)
        assert caplog.text.count("MCP server broken: it did not start") == 1  # the second turn did not wait for it
        status = {s.name: s for s in hub.status(str(project)).servers}
        assert status["broken"].state == "failed" and "was not found" in status["broken"].error
        assert not hub.test(str(project), "broken").ok  # Test always tries
        assert caplog.text.count("MCP server broken: it did not start") == 2

    def test_a_ten_megabyte_result_is_cut_with_a_note(self, store, project, hub, fake_openai, monkeypatch):
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "200000")  # the cut result fits the request whole
        write_config(project, {"tests": stdio_entry()})
        hub.approve(str(project))
        chat = Chat(store, project, hub, fake_openai)
        chat.turn("big", {"tool_calls": [call("mcp__tests__big", "c1", size=10_000_000)]}, {"text": "ok"}, mode="auto")
        result = chat.results()["c1"]
        assert result.startswith("x" * 1000) and len(result) < 100_200
        assert result.endswith("[The result was cut here: it was 10,000,000 characters long; the first 100,000 are "
                               "kept.]")
        sent = fake_openai.chat_requests()[-1]["messages"][-1]
        assert sent["role"] == "tool" and sent["content"] == result
        assert sum(f.stat().st_size for f in Path(store.base_dir).rglob("*.jsonl")) < 1_000_000


class TestConfiguration:
    """Guards against Claude Code's format read differently than Claude Code reads it, and a
    project able to approve itself."""

    def test_expansion_scopes_and_problems(self, project, monkeypatch):
        monkeypatch.setenv("TOOL_HOME", "/opt/tools")
        monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
        write_config(config_dir(), {"mine": {"command": "${TOOL_HOME}/mine", "args": ["--level=${LEVEL:-3}"]},
                                    "shared": {"command": "user-version"}}, "mcp.json")
        write_config(project, {"shared": {"command": "project-version"},
                               "web": {"url": "https://example.com/mcp?key=${NOT_SET_ANYWHERE}"},
                               "old": {"type": "sse", "url": "https://example.com/sse"}})
        write_config(project, {"local": {"command": "x", "readOnly": True, "timeout": 5}}, ".anycode/mcp.json")
        config = load_config(project)
        servers = config.servers
        assert servers["mine"].command == "/opt/tools/mine" and servers["mine"].args == ("--level=3",)
        assert servers["mine"].trusted_source and not servers["shared"].trusted_source
        assert servers["shared"].command == "project-version"  # the more specific file wins
        assert "NOT_SET_ANYWHERE" in servers["web"].problem and servers["web"].transport == "http"
        assert "not supported" in servers["old"].problem
        assert servers["local"].read_only is True and servers["local"].timeout == 5.0
        digest = config.project_digest
        monkeypatch.setenv("NOT_SET_ANYWHERE", "now-set")
        assert load_config(project).project_digest == digest  # the environment changes no approval
        write_config(project, {"local": {"command": "y"}}, ".anycode/mcp.json")
        assert load_config(project).project_digest != digest

    def test_broken_file_is_a_sentence_and_still_changes_the_digest(self, project, hub):
        (project / ".mcp.json").write_text("{not json")
        config = load_config(project)
        assert config.servers == {} and "is not valid JSON" in config.problems[0]
        assert hub.status(str(project)).needs_approval
        hub.approve(str(project))
        (project / ".mcp.json").write_text("{still not json")
        assert hub.status(str(project)).changed

    def test_the_trust_file_is_private_and_merges_two_writers(self, project, tmp_path):
        from core.agent.mcp.trust import McpTrust

        a, b = McpTrust(tmp_path / "d"), McpTrust(tmp_path / "d")
        a.approve("p1", "/p1", "d1")
        b.allow_always("p1", "mcp__x__y", "s1")
        b.approve("p2", "/p2", "d2")
        assert a.approved("p1", "d1") and a.approved("p2", "d2") and a.always_allowed("p1") == {"mcp__x__y": "s1"}
        assert not a.approved("p1", "d-other")
        assert (a.path.stat().st_mode & 0o777) == 0o600
