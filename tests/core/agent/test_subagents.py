"""Sub-agents (the ``task`` tool): their runs, records, parallelism, Stop and crashes, over real HTTP
to the strict fake server (which answers sub-agent requests from its own scripted queues)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core import SessionManager
from core.agent.events import RoundCompleted, SubagentEvent, SubagentStarted, TitleStarted
from core.agent.repair import INTERRUPTED_RESULT
from core.agent.runner import run_session, run_session_stream
from core.session.keys import SessionKey
from core.session.subagents import find_record, record_subpath, subagent_info, subagent_records
from tests.core.agent.test_runner import drain
from tests.support.stores import make_project, session, store  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[3]
MODEL = "gpt-4o-mini"


@pytest.fixture
def workspace(tmp_path):
    return make_project(tmp_path / "project", {"src/app.py": "print('the app')\n",
                                               "notes.txt": "remember the milk\n"})


def task_call(cid: str, description: str, prompt: str) -> dict:
    return {"name": "task", "id": cid, "arguments": {"description": description, "prompt": prompt}}


def messages_of_record(entries) -> list[dict]:
    return [e["message"] for e in entries if e.get("type") == "message"]


class TestTaskRun:
    """Guards against a sub-agent leaking into the main conversation or losing its own steps."""

    def test_task_that_lists_and_reads_files(self, fake_openai, store, session, monkeypatch):
        monkeypatch.setenv("ANYCODE_SUBAGENT_MODEL", "fake-large")
        fake_openai.push({"tool_calls": [task_call("call_survey", "Survey the project", "Find the app and say what it prints.")]},
                         {"text": "The app prints 'the app'."})
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {"path": "src"}}]},
                         {"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
                         {"text": "src/app.py prints 'the app'."}, kind="subagent")
        events = drain(run_session_stream(session.key, store, "what does the app print?",
                                          client=fake_openai.client(), model=MODEL))

        parent = SessionManager(store).get(session.key).messages
        assert [m["role"] for m in parent] == ["system", "user", "assistant", "tool", "assistant"]
        assert parent[2]["tool_calls"][0]["function"]["name"] == "task"
        assert parent[3] == {"role": "tool", "tool_call_id": "call_survey", "content": "src/app.py prints 'the app'."}
        assert not any("remember" in str(m) or "print('the app')" in str(m) for m in parent)  # no sub-agent steps

        (rec,) = subagent_records(store, session.key)
        assert rec.key.subpath == "subagents/call_survey" and rec.tool_call_id == "call_survey"
        assert rec.description == "Survey the project" and rec.parent is None
        info = subagent_info(rec.entries)
        assert info["model"] == "fake-large" and info["depth"] == 1
        sub = messages_of_record(rec.entries)
        assert [m["role"] for m in sub] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
        assert sub[1] == {"role": "user", "content": "Find the app and say what it prints."}
        assert sub[3]["content"] == "app.py" and sub[5]["content"] == "print('the app')\n"
        assert store.list(session.key.project_key)[0].message_count == 5  # the record is not listed

        sub_requests = fake_openai.chat_requests("subagent")
        assert len(sub_requests) == 3
        assert all(r["model"] == "fake-large" for r in sub_requests)
        assert all("what does the app print" not in str(r["messages"]) for r in sub_requests)  # own messages only
        assert all([t["function"]["name"] for t in r["tools"]] == ["list_files", "read_file", "write_file"]
                   for r in sub_requests)  # depth 1: no task tool inside
        main_tools = [t["function"]["name"] for t in fake_openai.chat_requests("chat")[0]["tools"]]
        assert "task" in main_tools
        started = [e for e in events if isinstance(e, SubagentStarted)]
        assert [(e.call_id, e.description) for e in started] == [("call_survey", "Survey the project")]
        nested = [type(e.event).__name__ for e in events if isinstance(e, SubagentEvent)]
        assert nested.count("ToolCallStarted") == 2 and nested.count("RoundCompleted") == 3

    def test_parallel_tasks_run_at_once_and_are_stored_apart(self, fake_openai, store, session):
        fake_openai.push({"tool_calls": [task_call("call_a", "Slow one", "alpha: count the files"),
                                         task_call("call_b", "Quick one", "beta: read notes")]},
                         {"text": "Both reported."})
        fake_openai.push({"text": "alpha found 2 entries", "wait": 1.5}, kind="subagent", task="alpha")
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                         {"text": "beta: the notes say remember the milk"}, kind="subagent", task="beta")
        drain(run_session_stream(session.key, store, "do both", client=fake_openai.client(), model=MODEL))

        parent = SessionManager(store).get(session.key).messages
        assert [m.get("content") for m in parent if m["role"] == "tool"] == [
            "alpha found 2 entries", "beta: the notes say remember the milk"]
        a = find_record(store, session.key, "call_a")
        b = find_record(store, session.key, "call_b")
        assert a.key != b.key
        assert messages_of_record(a.entries)[-1]["content"] == "alpha found 2 entries"
        assert "remember the milk" in messages_of_record(b.entries)[-1]["content"]
        assert "notes.txt" not in str(a.entries)
        # Run at once: the quick one finished while the slow one was still waiting for its reply.
        assert b.entries[-1]["ts"] < a.entries[-1]["ts"]

    def test_concurrency_limit_queues_the_rest(self, fake_openai, store, session, monkeypatch):
        monkeypatch.setenv("ANYCODE_SUBAGENT_CONCURRENCY", "1")
        fake_openai.push({"tool_calls": [task_call("call_a", "Slow one", "alpha: wait"),
                                         task_call("call_b", "Next one", "beta: go")]},
                         {"text": "Both reported."})
        fake_openai.push({"text": "alpha done", "wait": 1.0}, kind="subagent", task="alpha")
        fake_openai.push({"text": "beta done"}, kind="subagent", task="beta")
        drain(run_session_stream(session.key, store, "do both", client=fake_openai.client(), model=MODEL))
        a = find_record(store, session.key, "call_a")
        b = find_record(store, session.key, "call_b")
        # One at a time: the second sub-agent answered only after the first had finished.
        assert b.entries[-1]["ts"] > a.entries[-1]["ts"]
        assert [m["content"] for m in SessionManager(store).get(session.key).messages if m["role"] == "tool"] == [
            "alpha done", "beta done"]

    def test_bad_task_arguments_are_an_error_result_and_no_record(self, fake_openai, store, session):
        fake_openai.push({"tool_calls": [{"name": "task", "id": "call_bad", "arguments": {"description": "x"}}]},
                         {"text": "I will say it differently."})
        drain(run_session_stream(session.key, store, "go", client=fake_openai.client(), model=MODEL))
        parent = SessionManager(store).get(session.key).messages
        assert parent[3]["content"].startswith("Error:") and "prompt" in parent[3]["content"]
        assert subagent_records(store, session.key) == []

    def test_depth_zero_turns_the_task_tool_off(self, fake_openai, store, session, monkeypatch):
        monkeypatch.setenv("ANYCODE_SUBAGENT_DEPTH", "0")
        drain(run_session_stream(session.key, store, "hi", client=fake_openai.client(), model=MODEL))
        names = [t["function"]["name"] for t in fake_openai.chat_requests()[0]["tools"]]
        # The workspace tools (and memory's `remember`, issue 14), no `task`.
        assert "task" not in names and names[:3] == ["list_files", "read_file", "write_file"]

    def test_depth_has_a_ceiling(self, monkeypatch):
        """ANYCODE_SUBAGENT_DEPTH=1000 ended in a RecursionError (issue 28, item 15)."""
        from core.agent.subagents import MAX_DEPTH, SubagentConfig

        monkeypatch.setenv("ANYCODE_SUBAGENT_DEPTH", "1000")
        assert SubagentConfig.from_env().max_depth == MAX_DEPTH
        monkeypatch.setenv("ANYCODE_SUBAGENT_DEPTH", "2")
        assert SubagentConfig.from_env().max_depth == 2

    def test_depth_two_nests_records_under_their_parent_record(self, fake_openai, store, session, monkeypatch):
        monkeypatch.setenv("ANYCODE_SUBAGENT_DEPTH", "2")
        fake_openai.push({"tool_calls": [task_call("call_outer", "Outer", "outer: delegate")]}, {"text": "done"})
        fake_openai.push({"tool_calls": [task_call("call_inner", "Inner", "inner: list")]}, {"text": "outer done"},
                         kind="subagent", task="outer")
        fake_openai.push({"text": "inner done"}, kind="subagent", task="inner")
        drain(run_session_stream(session.key, store, "go", client=fake_openai.client(), model=MODEL))
        records = {r.tool_call_id: r for r in subagent_records(store, session.key)}
        assert records["call_inner"].parent == records["call_outer"].key.subpath
        assert messages_of_record(records["call_outer"].entries)[-2]["content"] == "inner done"

    def test_iteration_limit_is_the_sub_agents_own(self, fake_openai, store, session, monkeypatch):
        monkeypatch.setenv("ANYCODE_SUBAGENT_MAX_ITERATIONS", "2")
        fake_openai.push({"tool_calls": [task_call("call_loop", "Loop", "loop forever")]}, {"text": "ok"})
        fake_openai.push(*[{"tool_calls": [{"name": "list_files", "arguments": {}}]}] * 3, kind="subagent")
        drain(run_session_stream(session.key, store, "go", client=fake_openai.client(), model=MODEL))
        result = SessionManager(store).get(session.key).messages[3]["content"]
        assert "stopped after 2 model calls" in result
        assert len(fake_openai.chat_requests("subagent")) == 2

    def test_record_name_of_an_unsafe_call_id(self):
        assert record_subpath("call_1") == "subagents/call_1"
        unsafe = record_subpath("functions.task:0")
        assert unsafe.startswith("subagents/call-") and SessionKey("p-1", "s", unsafe).subpath == unsafe


class TestStopAndCrash:
    """Guards against Stop or a kill mid-task losing the sub-agent's work or breaking the next request."""

    def test_stop_mid_task_keeps_what_each_did(self, fake_openai, store, session):
        fake_openai.push({"tool_calls": [task_call("call_a", "A", "alpha: look around"),
                                         task_call("call_b", "B", "beta: look around")]})
        for marker in ("alpha", "beta"):
            fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}],
                              "text": f"Looking around for {marker} first."},
                             {"text": "still thinking " * 200, "delay": 0.02}, kind="subagent", task=marker)
        cancel = threading.Event()
        rounds_done: set[str] = set()
        t0 = time.monotonic()
        for event in run_session_stream(session.key, store, "go", client=fake_openai.client(), model=MODEL,
                                        cancel=cancel):
            if isinstance(event, SubagentEvent) and isinstance(event.event, RoundCompleted):
                rounds_done.add(event.call_id)
                if rounds_done == {"call_a", "call_b"}:
                    cancel.set()
            if isinstance(event, TitleStarted):
                event.thread.join(10)
        assert time.monotonic() - t0 < 15
        parent = SessionManager(store).get(session.key).messages
        assert [m["role"] for m in parent] == ["system", "user", "assistant", "tool", "tool"]
        # Issue 27: each result carries what its sub-agent did and found up to the stop (its
        # steps and last text, from its record), not a bare "interrupted", so the next turn
        # can build on it.
        for m, marker in zip(parent[3:], ("alpha", "beta")):
            assert m["content"].startswith("Interrupted: the user stopped this sub-agent")
            assert "1. list_files({}) -> notes.txt src/" in m["content"]
            assert f"Its last text:\nLooking around for {marker} first." in m["content"]
        for cid in ("call_a", "call_b"):
            sub = messages_of_record(find_record(store, session.key, cid).entries)
            assert [m["role"] for m in sub][:4] == ["system", "user", "assistant", "tool"]
            assert sub[3]["content"] == "notes.txt\nsrc/"  # the finished round is kept
        # The next turn sends a request the strict server accepts.
        result = run_session(session.key, store, "go on", client=fake_openai.client(), model=MODEL)
        assert result.messages[-1] == {"role": "assistant", "content": "You said: go on"}

    @pytest.mark.slow
    def test_sigkill_mid_task_then_resume(self, fake_openai, store, session, tmp_path):
        fake_openai.push({"tool_calls": [task_call("call_k", "Killed task", "kappa: work slowly")]})
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                         {"text": "never arrives", "wait": 60}, kind="subagent", task="kappa")
        child = textwrap.dedent("""
            import sys, openai
            from core import LocalSessionStore, SessionKey
            from core.agent.runner import run_session_stream
            base_url, home, project, sid = sys.argv[1:5]
            client = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0, timeout=90)
            for event in run_session_stream(SessionKey(project, sid), LocalSessionStore(home), "work",
                                            client=client, model="gpt-4o-mini"):
                pass
        """)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.Popen([sys.executable, "-c", child, fake_openai.base_url, str(store.base_dir),
                                 session.key.project_key, session.id], env=env)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                rec = find_record(store, session.key, "call_k")
                if rec is not None and len(messages_of_record(rec.entries)) >= 4:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the sub-agent never stored its first round")
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL

        parent = SessionManager(store).get(session.key).messages
        assert [m["role"] for m in parent] == ["system", "user", "assistant"]  # the call, dangling
        sub = messages_of_record(find_record(store, session.key, "call_k").entries)
        assert [m["role"] for m in sub] == ["system", "user", "assistant", "tool"]
        assert sub[3]["content"] == "remember the milk\n"

        fake_openai.clear()
        result = run_session(session.key, store, "are you there?", client=fake_openai.client(), model=MODEL)
        assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "tool", "user", "assistant"]
        assert result.messages[3] == {"role": "tool", "tool_call_id": "call_k", "content": INTERRUPTED_RESULT}
        assert fake_openai.chat_requests()[-1]["messages"] == result.messages[:5]  # accepted by the strict server
        assert find_record(store, session.key, "call_k") is not None


class TestLifecycle:
    """Guards against sub-agent records outliving, missing or leaking across their parent session."""

    def _two_tasks(self, fake_openai, store, session):
        fake_openai.push({"tool_calls": [task_call("call_one", "First", "one: go")]}, {"text": "first answer"},
                         {"tool_calls": [task_call("call_two", "Second", "two: go")]}, {"text": "second answer"})
        run_session(session.key, store, "first", client=fake_openai.client(), model=MODEL)
        run_session(session.key, store, "second", client=fake_openai.client(), model=MODEL)
        return SessionManager(store).get(session.key).messages

    def test_fork_keeps_records_of_calls_in_the_prefix_only(self, fake_openai, store, session):
        messages = self._two_tasks(fake_openai, store, session)
        manager = SessionManager(store)
        after_first = messages.index({"role": "assistant", "content": "first answer"})
        fork = manager.fork(session.key, after_first)
        assert [r.tool_call_id for r in subagent_records(store, fork.key)] == ["call_one"]
        before_any = manager.fork(session.key, 1)
        assert subagent_records(store, before_any.key) == []
        whole = manager.fork(session.key, len(messages) - 1)
        assert sorted(r.tool_call_id for r in subagent_records(store, whole.key)) == ["call_one", "call_two"]
        original = find_record(store, session.key, "call_one")
        assert find_record(store, fork.key, "call_one").entries == original.entries
        manager.delete(fork.key)  # the original's records are untouched
        assert len(subagent_records(store, session.key)) == 2

    def test_delete_and_archive_carry_the_records(self, fake_openai, store, session):
        self._two_tasks(fake_openai, store, session)
        manager = SessionManager(store)
        manager.archive(session.key)
        assert len(subagent_records(store, session.key)) == 2
        manager.unarchive(session.key)
        assert len(subagent_records(store, session.key)) == 2
        manager.delete(session.key)
        assert subagent_records(store, session.key) == []
        assert store.load(SessionKey(session.key.project_key, session.id, "subagents/call_one")) is None

