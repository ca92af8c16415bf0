"""The agent loop over real HTTP against the strict fake server (no sessions involved)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from core.agent.loop import agent_loop, agent_loop_stream
from core.agent.events import RoundCompleted, TextDelta, ToolCallFinished, ToolCallStarted
from core.errors import ModelServerError
from core.agent.repair import INTERRUPTED_RESULT
from core.agent.tools import TOOL_SPECS, Workspace

MODEL = "gpt-4o-mini"


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("remember the milk\n")
    return Workspace(root)


def start(text="hi"):
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


class TestSeedLoop:
    """Guards against the loop losing messages, skipping tools, or sending an invalid next request."""

    def test_tool_round_then_answer(self, fake_openai, ws):
        fake_openai.push(
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}},
                            {"name": "write_file", "arguments": {"path": "todo.txt", "content": "milk"}}]},
            {"text": "You need milk; I wrote todo.txt."})
        messages = start("what do I need?")
        out = agent_loop(messages, client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS, workspace=ws)
        assert len(messages) == 2  # the caller's list is not modified
        assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "tool", "assistant"]
        calls = out[2]["tool_calls"]
        assert [out[3]["tool_call_id"], out[4]["tool_call_id"]] == [c["id"] for c in calls]
        assert out[3]["content"] == "remember the milk\n"
        assert open(os.path.join(ws.root, "todo.txt")).read() == "milk"
        assert out[-1] == {"role": "assistant", "content": "You need milk; I wrote todo.txt."}
        second = fake_openai.chat_requests()[1]
        assert second["messages"] == out[:5]  # the model saw the tool results
        assert second["tools"] == TOOL_SPECS and second["stream"] is True

    def test_events_in_order(self, fake_openai, ws):
        fake_openai.push({"text": "Checking", "chunk": 3,
                          "tool_calls": [{"name": "list_files", "arguments": {}, "id": "call_L"}]},
                         {"text": "There is notes.txt.", "chunk": 2})
        events = list(agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS,
                                        workspace=ws))
        kinds = [type(e).__name__ for e in events]
        first_round = kinds.index("RoundCompleted")
        assert kinds[first_round - 2:first_round] == ["ToolCallStarted", "ToolCallFinished"]
        assert all(k == "TextDelta" for k in kinds[:first_round - 2])
        assert kinds[-1] == "RoundCompleted" and kinds.count("RoundCompleted") == 2
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert len(deltas) > 4 and "".join(deltas) == "CheckingThere is notes.txt."
        started = next(e for e in events if isinstance(e, ToolCallStarted))
        finished = next(e for e in events if isinstance(e, ToolCallFinished))
        assert (started.call_id, started.name, started.arguments) == ("call_L", "list_files", "{}")
        assert (finished.result, finished.is_error) == ("notes.txt", False)
        round1 = events[first_round].messages
        assert round1[0] == {"role": "assistant", "content": "Checking", "tool_calls": [
            {"id": "call_L", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]}
        assert round1[1] == {"role": "tool", "tool_call_id": "call_L", "content": "notes.txt"}

    def test_arguments_split_into_one_character_deltas(self, fake_openai, ws):
        content = 'line "one"\nline two — ünïcode'
        fake_openai.push({"chunk": 1, "tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": content}}]},
                         {"text": "ok"})
        agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS, workspace=ws)
        assert open(os.path.join(ws.root, "x.txt"), encoding="utf-8").read() == content

    def test_model_mistakes_become_tool_results_and_loop_goes_on(self, fake_openai, ws):
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": '{"path": '},
                                         {"name": "rm_rf", "arguments": {}},
                                         {"name": "read_file", "arguments": {"path": "missing.txt"}},
                                         {"name": "read_file", "arguments": {"path": "../../etc/passwd"}}]},
                         {"text": "Sorry about that."})
        out = agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS, workspace=ws)
        results = [m["content"] for m in out if m["role"] == "tool"]
        assert "not valid JSON" in results[0] and "Unknown tool" in results[1]
        assert "No such file" in results[2] and "outside the workspace" in results[3]
        assert out[-1]["content"] == "Sorry about that."

    def test_max_iterations(self, fake_openai, ws):
        fake_openai.push(*[{"tool_calls": [{"name": "list_files", "arguments": {}}]}] * 5)
        out = agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS, workspace=ws,
                         max_iterations=3)
        assert len(fake_openai.chat_requests()) == 3
        assert [m["role"] for m in out[2:]] == ["assistant", "tool"] * 3

    def test_no_tools_sends_no_tools_key(self, fake_openai):
        out = agent_loop(start("plain chat"), client=fake_openai.client(), model=MODEL, tools=None)
        assert out[-1] == {"role": "assistant", "content": "You said: plain chat"}
        assert "tools" not in fake_openai.chat_requests()[0]

    def test_undecodable_file_name_does_not_break_the_next_request(self, fake_openai, ws):
        # os.listdir returns lone surrogates for bytes that are not UTF-8; the JSON body must not.
        with open(os.path.join(os.fsencode(ws.root), b"bad-\xff-name.txt"), "w"):
            pass
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]}, {"text": "done"})
        out = agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS, workspace=ws)
        assert "bad-\ufffd-name.txt" in out[3]["content"]
        assert out[-1]["content"] == "done"


class TestCancelAndFailures:
    """Guards against Stop losing the text already shown, or a failure surfacing as a raw library error."""

    def test_cancel_mid_stream_keeps_partial_text(self, fake_openai):
        fake_openai.push({"text": "word " * 200, "chunk": 5, "delay": 0.01})
        cancel = threading.Event()
        seen = []
        for event in agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=None,
                                       cancel=cancel):
            if isinstance(event, TextDelta):
                seen.append(event.text)
                if len(seen) == 3:
                    cancel.set()
            last = event
        assert isinstance(last, RoundCompleted)
        assert last.messages == [{"role": "assistant", "content": "".join(seen)}]
        assert 3 <= len(seen) < 10

    def test_cancel_during_tools_closes_remaining_calls(self, fake_openai, ws):
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}, "id": "c1"},
                                         {"name": "write_file", "arguments": {"path": "n.txt", "content": "x"},
                                          "id": "c2"}]})
        cancel = threading.Event()
        events = []
        for event in agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=TOOL_SPECS,
                                       workspace=ws, cancel=cancel):
            events.append(event)
            if isinstance(event, ToolCallFinished):
                cancel.set()  # Stop pressed after the first tool returned
        final = events[-1]
        assert isinstance(final, RoundCompleted)
        assert [m.get("tool_call_id") for m in final.messages] == [None, "c1", "c2"]
        assert final.messages[2]["content"] == INTERRUPTED_RESULT
        assert not os.path.exists(os.path.join(ws.root, "n.txt"))
        assert len(fake_openai.chat_requests()) == 1

    def test_server_error_is_typed(self, fake_openai):
        fake_openai.push({"error": 500})
        with pytest.raises(ModelServerError, match="HTTP 500"):
            agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=None)

    def test_connection_dropped_mid_stream_is_typed(self, fake_openai):
        fake_openai.push({"text": "partial answer that never ends", "drop_after": 3})
        with pytest.raises(ModelServerError, match="broke in the middle of the reply"):
            list(agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=None))

    def test_stop_while_model_is_silent(self, fake_openai):
        """Stop must work before the first token (a local model still loading), not after the timeout."""
        fake_openai.push({"wait": 3, "text": "too late"})
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        began = time.monotonic()
        events = list(agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=None,
                                        cancel=cancel))
        assert time.monotonic() - began < 1.5
        assert events == []
