"""The fake OpenAI server: it must reject what the real API rejects, or the product tests prove nothing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

from tests.support.fake_openai import validate_chat_request, RequestInvalid

REPO = Path(__file__).resolve().parents[2]

CALL = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def post(url: str, body, headers=None) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json",
                                                          "Authorization": "Bearer sk-test", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


class TestRejectsWhatTheRealApiRejects:
    """Guards against a lenient fake letting through requests the real API answers with HTTP 400."""

    @pytest.mark.parametrize("body,fragment", [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi", "ts": 1.0}]}, "ts"),
        ({"model": "m", "messages": [{"role": "bot", "content": "hi"}]}, "Supported values"),
        ({"model": "m", "messages": [{"role": "function", "content": "hi", "name": "x"}]}, "Supported values"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"},
                                     {"role": "assistant", "content": None, "tool_calls": [CALL]}]},
         "did not have response messages: call_1"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"},
                                     {"role": "assistant", "content": None, "tool_calls": [CALL]},
                                     {"role": "user", "content": "again"}]}, "call_1"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"},
                                     {"role": "tool", "tool_call_id": "call_9", "content": "x"}]},
         "must be a response to a preceeding message with 'tool_calls'"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"},
                                     {"role": "assistant", "content": None, "tool_calls": [CALL]},
                                     {"role": "tool", "tool_call_id": "call_2", "content": "x"}]},
         "preceeding"),
        ({"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": []}]}, "empty array"),
        ({"model": "m", "messages": [{"role": "user", "content": None}]}, "content"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        ({"model": "m", "messages": [{"role": "user", "content": "bad \ud800 text"}]}, "surrogate"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temprature": 1}, "temprature"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 3}, "temperature"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "x"}]}, "tools[0]"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [
            {"type": "function", "function": {"name": "mcp__my.server__get issue"}}]}, "does not match pattern"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [
            {"type": "function", "function": {"name": "t" * 65}}]}, "string too long"),
    ])
    def test_rejected_over_http(self, fake_openai, body, fragment):
        fake_openai.allow_rejections = True
        status, data = post(fake_openai.base_url + "/chat/completions", body)
        assert status == 400
        assert set(data["error"]) == {"message", "type", "param", "code"}
        assert data["error"]["type"] == "invalid_request_error"
        assert fragment in data["error"]["message"] or fragment == data["error"]["param"]
        assert fake_openai.rejected()

    def test_openai_client_sees_bad_request(self, fake_openai):
        fake_openai.allow_rejections = True
        with pytest.raises(openai.BadRequestError) as info:
            fake_openai.client().chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"},
                                     {"role": "assistant", "content": None, "tool_calls": [CALL]}])
        assert "call_1" in str(info.value)

    def test_valid_tool_history_accepted(self):
        validate_chat_request({"model": "m", "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
            {"role": "tool", "tool_call_id": "call_2", "content": "b"},
            {"role": "tool", "tool_call_id": "call_1", "content": "a"},
            {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}]})
        with pytest.raises(RequestInvalid):
            validate_chat_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                                   "foo": 1})


class TestReplies:
    """Guards against the fake not speaking the real wire format (streaming chunks, tool-call deltas, errors)."""

    def test_streamed_text_and_split_tool_call_deltas(self, fake_openai):
        fake_openai.push({"text": "Let me look.", "chunk": 2,
                          "tool_calls": [{"name": "read_file", "arguments": {"path": "a/b.txt"}, "id": "call_A"},
                                         {"name": "list_files", "arguments": "{}"}]})
        chunks = list(fake_openai.client().chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Let me look."
        arg_pieces = [tc.function.arguments for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []
                      if tc.index == 0 and tc.function and tc.function.arguments]
        assert len(arg_pieces) > 3 and json.loads("".join(arg_pieces)) == {"path": "a/b.txt"}
        indexes = {tc.index for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []}
        assert indexes == {0, 1}
        assert chunks[-1].choices[0].finish_reason == "tool_calls"

    def test_non_streaming(self, fake_openai):
        fake_openai.push({"text": "plain"})
        resp = fake_openai.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert resp.choices[0].message.content == "plain" and resp.choices[0].finish_reason == "stop"

    @pytest.mark.parametrize("status,exc", [(401, openai.AuthenticationError), (429, openai.RateLimitError),
                                            (500, openai.InternalServerError), (503, openai.InternalServerError)])
    def test_error_codes(self, fake_openai, status, exc):
        fake_openai.push({"error": status})
        with pytest.raises(exc) as info:
            fake_openai.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert info.value.status_code == status
        assert isinstance(info.value.body, dict) and info.value.body["message"]

    def test_api_key_enforced(self, fake_openai):
        fake_openai.api_key = "sk-right"
        with pytest.raises(openai.AuthenticationError):
            fake_openai.client(api_key="sk-wrong").models.list()
        assert [m.id for m in fake_openai.client(api_key="sk-right").models.list()] == fake_openai.models

    def test_auto_mode_and_title_queue(self, fake_openai):
        client = fake_openai.client()
        fake_openai.push({"text": "Scripted title"}, kind="title")
        title = client.chat.completions.create(model="m", messages=[
            {"role": "system", "content": "Generate a concise title (max 10 words) for this conversation."},
            {"role": "user", "content": "how do I sort a list"}])
        assert title.choices[0].message.content == "Scripted title"
        auto = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping pong"}])
        assert auto.choices[0].message.content == "You said: ping pong"
        auto_title = client.chat.completions.create(model="m", messages=[
            {"role": "system", "content": "Generate a concise title please"},
            {"role": "user", "content": "how do I sort a list in python quickly"}])
        assert auto_title.choices[0].message.content == "Chat: how do I sort a"
        assert len(fake_openai.chat_requests("chat")) == 1 and len(fake_openai.chat_requests("title")) == 2


class TestSubprocessControlApi:
    """Guards against the browser test being unable to run and script the fake as its own process."""

    def test_cli_script_and_control_endpoints(self, tmp_path):
        script = tmp_path / "replies.json"
        script.write_text(json.dumps([{"text": "from the script file"}]))
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", "--port", "0", "--script", str(script)],
                                cwd=REPO, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            line = proc.stdout.readline()
            assert line.startswith("READY http://127.0.0.1:")
            base = line.split()[1]
            root = base.removesuffix("/v1")
            assert get(root + "/_health") == {"ok": True}
            client = openai.OpenAI(api_key="k", base_url=base, max_retries=0, timeout=10)
            first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
            assert first.choices[0].message.content == "from the script file"
            status, data = post(root + "/_script", {"replies": [{"text": "pushed"}]})
            assert status == 200 and data == {"queued": 1}
            stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}],
                                                    stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "pushed"
            logged = get(root + "/_requests")
            assert [r["status"] for r in logged] == [200, 200]
            assert post(root + "/_reset", {})[0] == 200 and get(root + "/_requests") == []
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
