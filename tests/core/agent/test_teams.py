"""Teams (issue 30): the ``task`` tool names the defined agents and runs them; expert agents keep one
session per project across consultations — over real HTTP to the strict fake server."""
from __future__ import annotations

import json

import pytest

from core import SessionManager
from core.agent.runner import run_session_stream
from core.session.experts import expert_key, expert_info
from core.session.subagents import find_record, subagent_info
from core.stores.jsonl_store import LocalSessionStore
from tests.core.agent.test_runner import drain
from tests.core.agent.test_subagents import messages_of_record
from tests.support.stores import make_project, store  # noqa: F401  (fixtures)

MODEL = "gpt-4o-mini"

REVIEWER = """---
name: reviewer
description: Reviews a change for bugs.
model: fake-review
tools: read_file
---
You are a strict code reviewer. Quote the line of every bug.
"""

ARCHITECT = """---
name: architect
description: Knows the project's design and remembers what it was asked before.
mode: expert
tools: list_files, read_file
---
You are the project's architect. Keep the design consistent.
"""


@pytest.fixture
def workspace(tmp_path):
    root = make_project(tmp_path / "project", {"src/app.py": "print('the app')\n"})
    (root / ".anycode" / "agents").mkdir(parents=True)
    (root / ".anycode" / "agents" / "reviewer.md").write_text(REVIEWER)
    (root / ".anycode" / "agents" / "architect.md").write_text(ARCHITECT)
    return root


def agent_call(cid: str, agent: str, prompt: str) -> dict:
    return {"name": "task", "id": cid, "arguments": {"description": f"Ask {agent}", "prompt": prompt, "agent": agent}}


def task_spec(request: dict) -> dict:
    return next(t["function"] for t in request["tools"] if t["function"]["name"] == "task")


class TestTaskWithAgent:
    """Guards against the task tool hiding the defined agents, or running a named agent as a generic
    sub-agent (wrong prompt, model or tools), or its record forgetting which agent ran."""

    def test_schema_lists_the_agents(self, fake_openai, store, workspace):
        key = SessionManager(store).create(workspace).key
        drain(run_session_stream(key, store, "hi", client=fake_openai.client(), model=MODEL))
        spec = task_spec(fake_openai.chat_requests("chat")[0])
        assert spec["parameters"]["properties"]["agent"]["enum"] == ["architect", "reviewer"]
        assert "- reviewer: Reviews a change for bugs." in spec["description"]
        assert "- architect (expert" in spec["description"]

    def test_the_users_agents_come_from_the_storages_data_folder(self, fake_openai, store, workspace, tmp_path,
                                                                 anycode_home):
        """``anycode --data-dir X``: the user's agent definitions are X's (``X/agents``), handed to
        the turn in its storage — not those of ``$ANYCODE_HOME``, which the app no longer rewrites."""
        from core.storage import Storage

        data = tmp_path / "given-data-dir"
        (data / "agents").mkdir(parents=True)
        (data / "agents" / "planner.md").write_text("---\nname: planner\ndescription: Plans the work.\n---\nPlan.\n")
        (anycode_home / "agents").mkdir(parents=True)
        (anycode_home / "agents" / "stray.md").write_text("---\nname: stray\ndescription: Not this app's.\n---\nNo.\n")
        key = SessionManager(store).create(workspace).key
        drain(run_session_stream(key, store, "hi", client=fake_openai.client(), model=MODEL,
                                 storage=Storage(store, data_dir=data)))
        spec = task_spec(fake_openai.chat_requests("chat")[0])
        assert spec["parameters"]["properties"]["agent"]["enum"] == ["architect", "planner", "reviewer"]

    def test_named_agent_runs_its_definition(self, fake_openai, store, workspace):
        key = SessionManager(store).create(workspace).key
        fake_openai.push({"tool_calls": [agent_call("call_rev", "reviewer", "Review src/app.py")]},
                         {"text": "The reviewer found nothing."})
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
                         {"text": "No bug in src/app.py."}, kind="subagent")
        drain(run_session_stream(key, store, "review it", client=fake_openai.client(), model=MODEL))

        sub = fake_openai.chat_requests("subagent")
        assert len(sub) == 2
        assert all(r["model"] == "fake-review" for r in sub)
        assert all([t["function"]["name"] for t in r["tools"]] == ["read_file"] for r in sub)
        assert "You are a strict code reviewer." in sub[0]["messages"][0]["content"]
        assert 'You are the agent "reviewer"' in sub[0]["messages"][0]["content"]
        rec = find_record(store, key, "call_rev")
        info = subagent_info(rec.entries)
        assert info["agent"] == "reviewer" and info["model"] == "fake-review" and "expert" not in info
        assert messages_of_record(rec.entries)[-1]["content"] == "No bug in src/app.py."
        tool = [m for m in SessionManager(store).get(key).messages if m["role"] == "tool"]
        assert tool[0]["content"] == "No bug in src/app.py."

    def test_unknown_agent_is_an_error_result(self, fake_openai, store, workspace):
        key = SessionManager(store).create(workspace).key
        fake_openai.push({"tool_calls": [agent_call("call_x", "ghost", "Do it")]}, {"text": "ok"})
        drain(run_session_stream(key, store, "go", client=fake_openai.client(), model=MODEL))
        tool = [m for m in SessionManager(store).get(key).messages if m["role"] == "tool"][0]
        assert tool["content"].startswith("Error: No agent is named 'ghost'") and "architect, reviewer" in tool["content"]
        assert fake_openai.chat_requests("subagent") == []

    def test_without_agent_the_generic_subagent_runs(self, fake_openai, store, workspace):
        key = SessionManager(store).create(workspace).key
        fake_openai.push({"tool_calls": [{"name": "task", "id": "call_g", "arguments": {
            "description": "Look", "prompt": "Look around"}}]}, {"text": "ok"})
        drain(run_session_stream(key, store, "go", client=fake_openai.client(), model=MODEL))
        (req,) = fake_openai.chat_requests("subagent")
        assert "You are the agent" not in req["messages"][0]["content"] and req["model"] == MODEL
        assert "agent" not in subagent_info(find_record(store, key, "call_g").entries)


class TestExpertSession:
    """Guards against an expert forgetting its earlier consultations, its session showing up as a
    chat, or it being lost on a restart."""

    def test_second_chat_sends_the_earlier_consultation(self, fake_openai, tmp_path, workspace):
        home = tmp_path / "home"
        store = LocalSessionStore(home)
        first = SessionManager(store).create(workspace).key
        fake_openai.push({"tool_calls": [agent_call("call_1", "architect", "Where does the app start?")]},
                         {"text": "It starts in src/app.py."})
        fake_openai.push({"text": "The entry point is src/app.py."}, kind="subagent")
        drain(run_session_stream(first, store, "ask the architect", client=fake_openai.client(), model=MODEL))

        (req1,) = fake_openai.chat_requests("subagent")
        assert "You are the project's architect." in req1["messages"][0]["content"]
        assert [m["role"] for m in req1["messages"]] == ["system", "user"]

        # A restart: a new store object over the same folder, another chat of the same project.
        store = LocalSessionStore(home)
        manager = SessionManager(store)
        second = manager.create(workspace).key
        fake_openai.push({"tool_calls": [agent_call("call_2", "architect", "And where would a CLI go?")]},
                         {"text": "A CLI would go in src/cli.py."})
        fake_openai.push({"text": "Put it in src/cli.py, beside src/app.py."}, kind="subagent")
        drain(run_session_stream(second, store, "ask again", client=fake_openai.client(), model=MODEL))

        req2 = fake_openai.chat_requests("subagent")[1]
        said = [(m["role"], m.get("content")) for m in req2["messages"]]
        assert said[1:] == [("user", "Where does the app start?"), ("assistant", "The entry point is src/app.py."),
                            ("user", "And where would a CLI go?")]
        assert "You are the project's architect." in said[0][1]

        ekey = expert_key(first.project_key, "architect")
        expert = manager.get(ekey)
        assert expert.title == "architect" and expert.title_source == "user"
        assert [m["role"] for m in expert.messages] == ["system", "user", "assistant", "user", "assistant"]
        assert expert_info(store.load(ekey)) == {"name": "architect", "source": "project"}
        # Listed under Agents, not under chats.
        assert {m.id for m in manager.conversations(first.project_key)} == {first.session_id, second.session_id}
        assert {m.id for m in manager.list(first.project_key)} == {first.session_id, second.session_id}
        assert [m.id for m in manager.experts(first.project_key)] == ["expert-architect"]
        # Each chat's record names the expert and holds that consultation only.
        info = subagent_info(find_record(store, second, "call_2").entries)
        assert info["agent"] == "architect" and info["expert"] == "expert-architect"
        rec = messages_of_record(find_record(store, second, "call_2").entries)
        assert [m["content"] for m in rec[1:]] == ["And where would a CLI go?", "Put it in src/cli.py, beside src/app.py."]

    def test_two_calls_in_one_reply_take_turns(self, fake_openai, store, workspace):
        key = SessionManager(store).create(workspace).key
        fake_openai.push({"tool_calls": [agent_call("call_a", "architect", "alpha question"),
                                         agent_call("call_b", "architect", "beta question")]},
                         {"text": "Both answered."})
        fake_openai.push({"text": "answer one"}, {"text": "answer two"}, kind="subagent")
        drain(run_session_stream(key, store, "ask twice", client=fake_openai.client(), model=MODEL))
        expert = SessionManager(store).get(expert_key(key.project_key, "architect"))
        roles = [m["role"] for m in expert.messages]
        assert roles == ["system", "user", "assistant", "user", "assistant"]  # never two questions in a row
        second = fake_openai.chat_requests("subagent")[1]
        assert len(second["messages"]) == 4  # the first consultation, then the second question
        json.dumps(expert.messages)


class TestAddressedInTheChat:
    """Guards against ``@name`` at the start of a message answered by the default assistant (its
    prompt, its model), an agent's reply stored without its name, or a retry losing the agent."""

    def test_reviewer_answers_with_its_prompt_and_model(self, fake_openai, store, workspace):
        from core.agent.events import AgentAnswering
        from core.session.export import session_to_markdown

        manager = SessionManager(store)
        key = manager.create(workspace).key
        fake_openai.push({"text": "Line 1 prints; no bug."})
        events = drain(run_session_stream(key, store, "@reviewer check this", client=fake_openai.client(),
                                          model=MODEL))
        assert [(e.name, e.model) for e in events if isinstance(e, AgentAnswering)] == [("reviewer", "fake-review")]
        (req,) = fake_openai.chat_requests("chat")
        assert req["model"] == "fake-review"
        system = req["messages"][0]["content"]
        assert system.startswith("You are anycode") and "You are a strict code reviewer." in system
        # its definition's tools only (`remember` too only if it lists it), and its prompt says which
        assert [t["function"]["name"] for t in req["tools"]] == ["read_file"]
        assert "Of the tools mentioned above you have only: read_file." in system
        entries = store.load(key)
        replies = [e for e in entries if e.get("type") == "message" and e["message"]["role"] == "assistant"]
        assert [e.get("agent") for e in replies] == ["reviewer"]
        assert "agent" not in next(e for e in entries if e.get("type") == "message" and e["message"]["role"] == "user")
        session = manager.get(key)
        assert session.reply_agents == {2: "reviewer"}
        assert session.messages[0]["content"].startswith("You are anycode")  # the stored prompt is the chat's
        assert "## Assistant (reviewer)" in session_to_markdown(session)

        # Without "@": the default assistant, its model and prompt, on the same messages.
        drain(run_session_stream(key, store, "thanks", client=fake_openai.client(), model=MODEL))
        req = fake_openai.chat_requests("chat")[1]
        assert req["model"] == MODEL and "strict code reviewer" not in req["messages"][0]["content"]
        assert "Line 1 prints; no bug." in str(req["messages"])
        assert manager.get(key).reply_agents == {2: "reviewer"}

    def test_regenerate_keeps_the_agent(self, fake_openai, store, workspace):
        manager = SessionManager(store)
        key = manager.create(workspace).key
        drain(run_session_stream(key, store, "@reviewer look at src/app.py", client=fake_openai.client(), model=MODEL))
        # Regenerate (core.session.versions): a version cut at the user message, then the model again.
        version = manager.fork(key, 1, version=True)
        drain(run_session_stream(version.key, store, None, client=fake_openai.client(), model=MODEL))
        req = fake_openai.chat_requests("chat")[-1]
        assert req["model"] == "fake-review" and "strict code reviewer" in req["messages"][0]["content"]
        assert manager.get(version.key).reply_agents == {2: "reviewer"}

    def test_unknown_name_is_just_text(self, fake_openai, store, workspace):
        key = SessionManager(store).create(workspace).key
        drain(run_session_stream(key, store, "@nobody hello", client=fake_openai.client(), model=MODEL))
        (req,) = fake_openai.chat_requests("chat")
        assert req["model"] == MODEL and SessionManager(store).get(key).reply_agents == {}


CHILD_CONSULTATION = """
import sys, time
from core.agent.definitions import find_agent
from core.agent.experts import Consultation
from core.storage import Storage
from core.stores.jsonl_store import LocalSessionStore
home, workspace, pk, hold = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
agent = find_agent("architect", workspace)
c = Consultation.open(Storage(LocalSessionStore(home)), pk, agent, workspace, "You are the project's architect.")
with c:
    c.ask("the other window's question")
    print("turn taken", flush=True)
    time.sleep(hold)  # the other window's expert is still thinking
    c.store_round([{"role": "assistant", "content": "the other window's answer"}])
print("done", flush=True)
"""


class TestExpertAcrossProcesses:
    """Guards against two processes consulting one expert at once writing their rounds into each
    other's (a question between another question and its answer breaks the expert's session), or a
    consultation waiting forever for a busy expert."""

    def _child(self, home, workspace, pk, hold):
        import os
        import subprocess
        import sys
        from pathlib import Path
        root = Path(__file__).resolve().parents[3]
        proc = subprocess.Popen([sys.executable, "-c", CHILD_CONSULTATION, str(home), str(workspace), pk, str(hold)],
                                stdout=subprocess.PIPE, text=True, cwd=root,
                                env=dict(os.environ, PYTHONPATH=str(root)))
        assert proc.stdout.readline().strip() == "turn taken"
        return proc

    def _chat_beside_a_consultation(self, tmp_path, workspace, hold):
        """A chat of the project in a store at ``tmp_path/home`` and another process holding the
        architect's turn for ``hold`` seconds: ``(store, chat key, that process)``."""
        home = tmp_path / "home"
        store = LocalSessionStore(home)
        key = SessionManager(store).create(workspace).key
        return store, key, self._child(home, workspace, key.project_key, hold)

    def test_a_consultation_waits_for_the_other_process(self, fake_openai, tmp_path, workspace):
        store, key, child = self._chat_beside_a_consultation(tmp_path, workspace, hold=2.0)
        fake_openai.push({"tool_calls": [agent_call("call_1", "architect", "this window's question")]},
                         {"text": "Answered."})
        fake_openai.push({"text": "this window's answer"}, kind="subagent")
        drain(run_session_stream(key, store, "ask the architect", client=fake_openai.client(), model=MODEL))
        assert child.wait(timeout=30) == 0
        expert = SessionManager(store).get(expert_key(key.project_key, "architect"))
        said = [(m["role"], m.get("content")) for m in expert.messages[1:]]
        assert said == [("user", "the other window's question"), ("assistant", "the other window's answer"),
                        ("user", "this window's question"), ("assistant", "this window's answer")]
        # this window's expert saw the other window's consultation, whole
        (req,) = fake_openai.chat_requests("subagent")
        assert [m.get("content") for m in req["messages"][1:]] == [c for _r, c in said[:3]]

    def test_a_busy_expert_ends_the_task_with_a_sentence(self, fake_openai, tmp_path, workspace, monkeypatch):
        from core.agent import experts
        monkeypatch.setattr(experts, "WAIT_SECONDS", 0.5)
        store, key, child = self._chat_beside_a_consultation(tmp_path, workspace, hold=4.0)
        fake_openai.push({"tool_calls": [agent_call("call_1", "architect", "this window's question")]},
                         {"text": "The architect is busy; I will ask later."})
        drain(run_session_stream(key, store, "ask the architect", client=fake_openai.client(), model=MODEL))
        assert fake_openai.chat_requests("subagent") == []
        final = fake_openai.chat_requests("chat")[-1]["messages"]
        result = next(m["content"] for m in final if m["role"] == "tool")
        assert "The expert 'architect' is answering another consultation" in result
        assert child.wait(timeout=30) == 0  # the other window's consultation went on undisturbed
        expert = SessionManager(store).get(expert_key(key.project_key, "architect"))
        assert [m.get("content") for m in expert.messages[1:]] == ["the other window's question",
                                                                   "the other window's answer"]
