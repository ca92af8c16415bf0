"""Thinking-mode servers get their reasoning back where their rule says (issue 27, kind 3).

DeepSeek (V3.2/V4 thinking, R1), Kimi K2.x and Qwen3 behind vLLM/SGLang reasoning parsers stream
the model's thinking beside the answer, as ``reasoning_content`` (most) or ``reasoning`` (vLLM's
newer parser, OpenRouter). Within one turn's tool rounds they need it back on the assistant
message (HTTP 400 otherwise); deepseek-reasoner refuses it from earlier turns. The fake server
has each shape as a mode; every test runs against all of them.
"""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager
from core.agent.events import ReasoningDelta, TextDelta
from core.agent.runner import run_session_stream
from core.agent.stream import forget_compat

MODEL = "gpt-4o-mini"
MODES = ["reasoning_content", "reasoning", "reasoning_required"]


@pytest.fixture(autouse=True)
def no_memory(monkeypatch):
    monkeypatch.setenv("ANYCODE_MEMORY", "off")
    forget_compat()


@pytest.fixture
def chat(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    store = LocalSessionStore(tmp_path / "data")
    return store, SessionManager(store).create(tmp_path / "ws")


def _field(mode: str) -> str:
    return "reasoning" if mode == "reasoning" else "reasoning_content"


def _turn(fake, store, key, text):
    return list(run_session_stream(key, store, text, client=fake.client(), model=MODEL))


@pytest.mark.parametrize("mode", MODES)
def test_reasoning_is_stored_apart_and_sent_back_within_the_turn_only(fake_openai, chat, mode):
    store, session = chat
    field = _field(mode)
    fake_openai.quirk = mode
    fake_openai.push(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}, "id": "call_a"}],
         "reasoning": "The user wants a.txt; I should read it first."},
        {"tool_calls": [{"name": "list_files", "arguments": {}, "id": "call_b"}],
         "reasoning": "Now let me see what else is there."},
        {"text": "a.txt says alpha.", "reasoning": "I have what I need."},
        {"text": "Yes, alpha.", "reasoning": "A follow-up about the same file."})
    events = _turn(fake_openai, store, session.key, "What is in a.txt?")
    thoughts = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "I should read it first." in thoughts and "I have what I need." in thoughts
    assert answer == "a.txt says alpha."  # the thinking is never part of the answer

    messages = SessionManager(store).get(session.key).messages
    replies = [m for m in messages if m["role"] == "assistant"]
    assert [m[field] for m in replies] == ["The user wants a.txt; I should read it first.",
                                           "Now let me see what else is there.", "I have what I need."]
    assert replies[-1]["content"] == "a.txt says alpha."

    chats = fake_openai.chat_requests()
    # Round 2 and 3 of the turn carry the turn's tool-round reasoning back.
    sent = [[m.get(field) for m in body["messages"] if m["role"] == "assistant"] for body in chats[1:3]]
    assert sent == [["The user wants a.txt; I should read it first."],
                    ["The user wants a.txt; I should read it first.", "Now let me see what else is there."]]

    _turn(fake_openai, store, session.key, "Is that all?")
    later = fake_openai.chat_requests()[-1]
    # The next turn sends none of the earlier turn's reasoning (the fake refuses it anyway).
    assert not any(field in m for m in later["messages"] if m["role"] == "assistant")
    assert fake_openai.rejected() == []


def test_a_server_without_reasoning_gets_no_reasoning_key(fake_openai, chat):
    """The strict (OpenAI) fake refuses unknown keys: a history stored from a thinking server,
    resumed against another server, sends plain messages outside the current turn."""
    store, session = chat
    fake_openai.quirk = "reasoning_content"
    fake_openai.push({"text": "Thought-through answer.", "reasoning": "Hmm."})
    _turn(fake_openai, store, session.key, "Hello?")
    fake_openai.quirk = None
    _turn(fake_openai, store, session.key, "And now?")
    assert fake_openai.rejected() == []
    assert "reasoning_content" in SessionManager(store).get(session.key).messages[2]


def test_the_chat_shows_reasoning_as_a_collapsed_thinking_step(fake_openai, chat):
    """Stored and live: a "Thinking" step (collapsed, done once the reply is) above the answer,
    never the answer itself."""
    from core.agent.events import ReplyRestarted, RoundCompleted
    from webui.chat.send import _LiveRows
    from webui.render.rows import chat_rows

    store, session = chat
    fake_openai.quirk = "reasoning"
    fake_openai.push({"text": "The answer.", "reasoning": "Weighing the question first."})
    _turn(fake_openai, store, session.key, "A question?")
    rows = chat_rows(SessionManager(store).get(session.key).messages).rows
    thinking = [r for r in rows if "Thinking" in str((r.get("metadata") or {}).get("title", ""))]
    assert len(thinking) == 1 and thinking[0]["metadata"]["status"] == "done"
    assert "Weighing the question first." in thinking[0]["content"]
    assert rows.index(thinking[0]) == len(rows) - 2 and "The answer." in rows[-1]["content"]
    assert "Weighing" not in rows[-1]["content"]

    live = _LiveRows()
    for event in (ReasoningDelta("Hmm, "), ReasoningDelta("let me see."), TextDelta("Half an ans")):
        live.apply(event)
    assert [r["metadata"]["status"] for r in live.rows if r.get("metadata")] == ["pending"]
    # The reply broke (a one-at-a-time server) and is asked again: what it showed is void.
    live.apply(ReplyRestarted("broke"))
    assert live.rows == []
    for event in (ReasoningDelta("Again."), TextDelta("Whole answer."),
                  RoundCompleted([{"role": "assistant", "content": "Whole answer."}])):
        live.apply(event)
    assert [r.get("metadata", {}).get("status") for r in live.rows] == ["done", None]
    assert "Again." in live.rows[0]["content"] and "Whole answer." in live.rows[1]["content"]
