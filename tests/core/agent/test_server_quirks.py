"""What real OpenAI-compatible servers send, over real HTTP: the fake server's quirk modes.

Each quirk imitates one popular local server (see tests/support/fake_openai.py); apart from its quirk the
fake stays as strict as the real API, so the requests anycode sends back must still be valid.
"""
from __future__ import annotations

import json
import os
import threading

import pytest

from core import LocalSessionStore, SessionManager
from core.agent.loop import agent_loop, agent_loop_stream
from core.agent.events import RoundCompleted, TextDelta
from core.agent.runner import run_session_stream
from core.agent.stream import forget_compat
from core.agent.titles import generate_title
from core.agent.tools import TOOL_SPECS
from core.errors import ModelEmptyReply, ModelError, ModelServerError
from tests.core.agent.test_agent_loop import start, ws  # noqa: F401  (ws: the workspace fixture)
from tests.core.agent.test_runner import drain

MODEL = "gpt-4o-mini"
TWO_CALLS = {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "call_A"},
                            {"name": "write_file", "arguments": {"path": "todo.txt", "content": "milk"},
                             "id": "call_B"}]}


@pytest.fixture(autouse=True)
def _fresh_compat():
    forget_compat()  # what one test's server refused must not leak into the next
    yield
    forget_compat()


def run(fake, ws=None, text="what do I need?", **kw):
    return agent_loop(start(text), client=fake.client(), model=MODEL, tools=TOOL_SPECS, workspace=ws, **kw)


class TestToolCallShapes:
    """Guards against parallel tool calls being glued into one "Unknown tool" call, or results
    losing their call, when a server numbers or names calls differently from OpenAI."""

    @pytest.mark.parametrize("quirk", ["same_index", "no_index", "missing_ids", "repeated_ids",
                                       "object_arguments", "name_every_delta", "nulls"])
    def test_two_parallel_calls_run_as_two_calls(self, fake_openai, ws, quirk):
        fake_openai.quirk = quirk
        fake_openai.push(TWO_CALLS, {"text": "You need milk; I wrote todo.txt."})
        out = run(fake_openai, ws)
        calls = out[2]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["read_file", "write_file"]
        assert [json.loads(c["function"]["arguments"]) for c in calls] == [
            {"path": "notes.txt"}, {"path": "todo.txt", "content": "milk"}]
        assert len({c["id"] for c in calls}) == 2  # unique ids even when the server gave none or one
        results = {m["tool_call_id"]: m["content"] for m in out if m["role"] == "tool"}
        assert results[calls[0]["id"]] == "remember the milk\n"  # each result paired with its call
        assert open(os.path.join(ws.root, "todo.txt")).read() == "milk"
        assert out[-1] == {"role": "assistant", "content": "You need milk; I wrote todo.txt."}

    def test_ids_repeated_across_rounds_stay_unique_in_the_request(self, fake_openai, ws):
        fake_openai.quirk = "repeated_ids"
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]},
                         {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                         {"text": "done"})
        out = run(fake_openai, ws)
        ids = [c["id"] for m in out for c in m.get("tool_calls") or []]
        assert len(ids) == 2 and len(set(ids)) == 2
        last = fake_openai.chat_requests()[-1]["messages"]
        assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == ids
        assert out[-1]["content"] == "done"

    def test_text_with_null_and_unknown_fields(self, fake_openai):
        fake_openai.quirk = "nulls"
        fake_openai.push({"text": "plain answer", "chunk": 3})
        out = agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=None)
        assert out[-1] == {"role": "assistant", "content": "plain answer"}


class TestHowARepliesEnded:
    """Guards against a cut-off reply looking finished, and an empty reply being saved as an answer."""

    @pytest.mark.parametrize("quirk,end", [("no_end", "no_end"), ("length", "length"),
                                           ("content_filter", "content_filter")])
    def test_cut_off_reply_is_kept_and_marked(self, fake_openai, quirk, end):
        fake_openai.quirk = quirk
        fake_openai.push({"text": "The first half of an answer"})
        events = list(agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=None))
        final = events[-1]
        assert isinstance(final, RoundCompleted) and final.end == end
        assert final.messages == [{"role": "assistant", "content": "The first half of an answer"}]

    def test_finished_reply_is_not_marked(self, fake_openai):
        fake_openai.push({"text": "All of it."})
        assert list(agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=None))[-1].end is None

    def test_json_body_to_a_stream_request_is_the_whole_reply(self, fake_openai, ws):
        fake_openai.quirk = "json_body"
        fake_openai.push(TWO_CALLS, {"text": "Done, from one JSON body."})
        out = run(fake_openai, ws)
        assert [c["function"]["name"] for c in out[2]["tool_calls"]] == ["read_file", "write_file"]
        assert out[-1] == {"role": "assistant", "content": "Done, from one JSON body."}

    @pytest.mark.parametrize("quirk,why", [("reasoning_only", "reasoning"), ("empty", "empty reply")])
    def test_empty_reply_is_an_error_saying_why(self, fake_openai, quirk, why):
        fake_openai.quirk = quirk
        fake_openai.push({"text": "unused"})
        with pytest.raises(ModelEmptyReply, match=why):
            agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=None)

    def test_error_event_in_the_stream_is_typed(self, fake_openai):
        fake_openai.quirk = "error_event"
        fake_openai.push({"text": "partial"})
        with pytest.raises(ModelServerError, match="out of memory"):
            agent_loop(start(), client=fake_openai.client(), model=MODEL, tools=None)


class TestStoredEnds:
    """Guards against a cut-off or empty reply being stored as if it were a finished answer."""

    @pytest.fixture
    def session(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        (tmp_path / "proj").mkdir()
        return store, SessionManager(store).create(tmp_path / "proj")

    def test_cut_off_reply_is_stored_with_its_end(self, fake_openai, session):
        store, s = session
        fake_openai.quirk = "length"
        fake_openai.push({"text": "half an ans"})
        drain(run_session_stream(s.key, store, "explain", client=fake_openai.client(), model=MODEL))
        stored = SessionManager(store).get(s.key)
        assert stored.messages[-1] == {"role": "assistant", "content": "half an ans"}
        assert stored.reply_ends == {len(stored.messages) - 1: "length"}

    def test_empty_reply_is_never_stored(self, fake_openai, session):
        store, s = session
        fake_openai.quirk = "reasoning_only"
        with pytest.raises(ModelEmptyReply):
            drain(run_session_stream(s.key, store, "explain", client=fake_openai.client(), model=MODEL))
        stored = SessionManager(store).get(s.key)
        assert [m["role"] for m in stored.messages] == ["system", "user"]  # the user message, no blank answer
        fake_openai.quirk = None
        drain(run_session_stream(s.key, store, None, client=fake_openai.client(), model=MODEL))  # Retry
        assert SessionManager(store).get(s.key).messages[-1] == {"role": "assistant", "content": "You said: explain"}


class TestRequestsEveryServerAccepts:
    """Guards against a server's refusal of one optional field failing every message."""

    def test_no_null_content_in_tool_rounds(self, fake_openai, ws):
        fake_openai.quirk = "no_null_content"
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]}, {"text": "ok"})
        out = run(fake_openai, ws)
        assert out[-1]["content"] == "ok"
        assert fake_openai.rejected() == []

    def test_history_with_null_content_is_sent_without_it(self, fake_openai):
        fake_openai.quirk = "no_null_content"
        call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        history = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                   {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "hmm"},
                   {"role": "tool", "tool_call_id": "c1", "content": "x"}, {"role": "user", "content": "b"}]
        agent_loop(history, client=fake_openai.client(), model=MODEL, tools=None)
        sent = fake_openai.chat_requests()[0]["messages"][2]
        assert sent["content"] == "" and "reasoning_content" not in sent

    def test_stream_refused_is_retried_without_streaming_and_remembered(self, fake_openai):
        fake_openai.quirk = "no_stream"
        fake_openai.allow_rejections = True
        fake_openai.push({"text": "first"}, {"text": "second"})
        client = fake_openai.client()
        deltas = [e.text for e in agent_loop_stream(start(), client=client, model=MODEL, tools=None)
                  if isinstance(e, TextDelta)]
        assert "".join(deltas) == "first"
        out = agent_loop(start(), client=client, model=MODEL, tools=None)
        assert out[-1]["content"] == "second"
        statuses = [r["status"] for r in fake_openai.requests if r["path"] == "/v1/chat/completions"]
        assert statuses == [400, 200, 200]  # asked with streaming once only

    @pytest.mark.parametrize("quirk,param,value", [
        ("no_stream_options", "stream_options", {"include_usage": True}),
        ("no_parallel_tool_calls", "parallel_tool_calls", False),
        ("no_sampling", "temperature", 0.2),
    ])
    def test_refused_optional_param_is_dropped_and_remembered(self, fake_openai, quirk, param, value):
        from core.agent.stream import read_reply

        fake_openai.quirk = quirk
        fake_openai.allow_rejections = True
        client = fake_openai.client()
        params = {"model": MODEL, "messages": start("x"), param: value}
        assert read_reply(client, params, stream=True).text == "You said: x"
        assert read_reply(client, params, stream=True).text == "You said: x"
        logged = [r for r in fake_openai.requests if r["path"] == "/v1/chat/completions"]
        assert [r["status"] for r in logged] in ([400, 200, 200], [422, 200, 200])
        assert param not in logged[2]["body"]

    def test_title_survives_a_model_refusing_temperature(self, fake_openai):
        fake_openai.quirk = "no_sampling"
        fake_openai.allow_rejections = True
        fake_openai.push({"text": "Milk shopping list"}, kind="title")
        title = generate_title([{"role": "user", "content": "what do I need?"},
                                {"role": "assistant", "content": "milk"}], client=fake_openai.client(), model=MODEL)
        assert title == "Milk shopping list"

    def test_title_from_a_reasoning_model_falls_back_cleanly(self, fake_openai):
        fake_openai.quirk = "json_body"
        fake_openai.push({"text": "<think>hmm</think>Groceries"}, kind="title")
        title = generate_title([{"role": "user", "content": "what do I need?"}], client=fake_openai.client(),
                               model=MODEL)
        assert title == "Groceries"


class TestStopWithQuirks:
    """Guards against Stop hanging or losing text on a server that never ends its stream."""

    def test_stop_mid_reply_on_a_stream_without_end(self, fake_openai):
        fake_openai.quirk = "no_end"
        fake_openai.push({"text": "word " * 100, "chunk": 5, "delay": 0.01})
        cancel = threading.Event()
        seen = []
        events = []
        for event in agent_loop_stream(start(), client=fake_openai.client(), model=MODEL, tools=None, cancel=cancel):
            events.append(event)
            if isinstance(event, TextDelta):
                seen.append(event.text)
                if len(seen) == 3:
                    cancel.set()
        assert events[-1].messages == [{"role": "assistant", "content": "".join(seen)}]
        assert events[-1].end is None  # stopped by the user, not cut off by the server


def test_model_error_base_catches_empty_reply():
    assert issubclass(ModelEmptyReply, ModelError)
