"""Tool-call ids unique in every request, whatever the stored history holds.

Guards against a history holding two tool calls with one id (imported before ids were made unique,
a server that repeated ids in earlier versions, a hand-edited file) being sent as is: a strict
server answers HTTP 400 "Duplicate tool_call id" and the whole chat is a dead end. The fake server
refuses such a request like the strict servers do (first test), so the second is real.
"""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager, run_session
from core.agent.repair import prepare_request
from core.session.tool_ids import unique_tool_call_ids
from tests.support.fake_openai import RequestInvalid, validate_chat_request


def _call(cid: str, path: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'}}


HISTORY = [
    {"role": "user", "content": "read a and b"},
    {"role": "assistant", "content": "", "tool_calls": [_call("call_0", "a")]},
    {"role": "tool", "tool_call_id": "call_0", "content": "A"},
    {"role": "assistant", "content": "", "tool_calls": [_call("call_0", "b"), _call("call_0", "c")]},
    {"role": "tool", "tool_call_id": "call_0", "content": "B"},
    {"role": "tool", "tool_call_id": "call_0", "content": "C"},
    {"role": "assistant", "content": "A, B and C."},
]


def test_the_fake_server_refuses_a_repeated_id_like_a_strict_server():
    body = {"model": "m", "messages": [{"role": "system", "content": "s"}, *HISTORY, {"role": "user", "content": "?"}]}
    with pytest.raises(RequestInvalid, match="Duplicate tool_call id"):
        validate_chat_request(body)


def test_each_result_stays_with_its_call():
    out = unique_tool_call_ids(HISTORY)
    assert [c["id"] for m in out for c in m.get("tool_calls") or []] == ["call_0", "call_0~2", "call_0~3"]
    assert [(m["tool_call_id"], m["content"]) for m in out if m["role"] == "tool"] == [
        ("call_0", "A"), ("call_0~2", "B"), ("call_0~3", "C")]
    assert HISTORY[3]["tool_calls"][0]["id"] == "call_0"  # the stored history is not changed
    assert out[0] is HISTORY[0] and out[2] is HISTORY[2]  # untouched messages are not copied
    assert unique_tool_call_ids(HISTORY) == out  # the same every time


def test_a_new_name_never_takes_an_id_the_history_uses():
    history = [{"role": "assistant", "content": "", "tool_calls": [_call("x", "a"), _call("x", "b")]},
               {"role": "tool", "tool_call_id": "x", "content": "A"},
               {"role": "tool", "tool_call_id": "x", "content": "B"},
               {"role": "assistant", "content": "", "tool_calls": [_call("x~2", "c")]},
               {"role": "tool", "tool_call_id": "x~2", "content": "C"}]
    ids = [c["id"] for m in prepare_request(history) for c in m.get("tool_calls") or []]
    assert len(ids) == len(set(ids)) == 3


def test_a_stored_history_with_repeated_ids_is_sent_valid(tmp_path, fake_openai):
    store = LocalSessionStore(tmp_path / "home")
    mgr = SessionManager(store)
    session = mgr.create(str(tmp_path))
    mgr.add_messages(session.key, HISTORY)
    fake_openai.push({"text": "Carrying on."})
    result = run_session(session.key, store, "and d?", client=fake_openai.client(), model="gpt-test",
                         wait_for_title=0, wait_for_memory=10)
    assert result.messages[-1] == {"role": "assistant", "content": "Carrying on."}
    assert fake_openai.rejected() == []
    sent = fake_openai.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["A", "B", "C"]
    assert mgr.get(session.key).messages[:len(HISTORY)] == HISTORY  # the file is never rewritten
