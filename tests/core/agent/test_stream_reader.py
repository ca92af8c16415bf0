"""Property tests of the stream reader (core.agent.stream): any valid reply, streamed the ways real
servers stream it and cut into arbitrary network chunks, reads back as the same text and calls."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from core.agent.stream import CUT_OFF_ENDS, ReplyReader, completion_as_chunk, rejected_param, sse_events
from core.errors import ModelServerError

NAMES = ["read_file", "write_file", "list_files"]
# How servers stream tool calls (see tests/support/fake_openai.py's quirks for who does what).
SERVERS = ["openai", "same_index", "no_index_whole", "missing_ids", "repeated_ids", "per_reply_ids",
           "object_args", "name_every_delta", "nulls", "sglang"]

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
_calls = st.lists(st.tuples(st.sampled_from(NAMES), st.dictionaries(st.text(max_size=8), _json_values, max_size=3)),
                  max_size=3)


def _pieces(draw, text: str) -> list[str]:
    """``text`` cut at arbitrary places (at least one piece when non-empty)."""
    if not text:
        return []
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=6))))
    bounds = [0, *[c for c in cuts if 0 < c < len(text)], len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@st.composite
def streamed(draw):
    """(text, calls, server, SSE body bytes, byte chunk sizes, bytes before the finish event)."""
    text = draw(st.text(max_size=40))
    calls = draw(_calls)
    server = draw(st.sampled_from(SERVERS))
    chunks: list[dict] = [{"role": "assistant", "content": ""}]
    chunks += [{"content": p} for p in _pieces(draw, text)]
    for n, (name, args) in enumerate(calls):
        raw = json.dumps(args, ensure_ascii=False)
        index = 0 if server in ("same_index", "sglang") else n
        cid = {"missing_ids": None, "repeated_ids": "call_0", "per_reply_ids": str(n), "sglang": str(n)}.get(
            server, f"call_{n}_x")
        if server == "no_index_whole":
            chunks.append({"tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": raw}}]})
            continue
        if server == "object_args":
            chunks.append({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                           "function": {"name": name, "arguments": args}}]})
            continue
        head = {"index": index, "type": "function", "function": {"name": name, "arguments": ""}}
        if cid is not None:
            head["id"] = cid
        chunks.append({"tool_calls": [head]})
        for piece in _pieces(draw, raw):
            part: dict = {"index": index, "function": {"arguments": piece}}
            if server == "name_every_delta":
                part["function"]["name"] = name
                part["id"] = cid
            if server == "sglang":
                part["id"] = cid
            if server == "nulls":
                part.update({"id": None, "type": None})
                part["function"]["name"] = None
            chunks.append({"tool_calls": [part]})
    finish = "tool_calls" if calls else "stop"
    events = []
    for delta in chunks:
        if server == "nulls":
            delta = {"content": None, "tool_calls": None, "reasoning_content": None, **delta}
        events.append({"id": "c", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                       **({"usage": None, "timings": {}} if server == "nulls" else {})})
    before_end = "".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events)
    ending = json.dumps({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    body = f"{before_end}data: {ending}\n\ndata: [DONE]\n\n"
    sizes = draw(st.lists(st.integers(1, 64), min_size=1, max_size=30))
    return text, calls, server, body.encode("utf-8"), sizes, len(before_end.encode("utf-8"))


def split(body: bytes, sizes: list[int]) -> list[bytes]:
    out, pos, i = [], 0, 0
    while pos < len(body):
        n = sizes[i % len(sizes)]
        out.append(body[pos:pos + n])
        pos += n
        i += 1
    return out


def read(parts, used=()):
    reader = ReplyReader(used)
    shown = []
    for event in sse_events(parts):
        if event == "[DONE]":
            reader.done()
        else:
            shown += reader.feed(event)
    return reader.reply(), "".join(shown)


class TestAnyValidStream:
    """Guards against chunk boundaries, index/id conventions or null fields changing what was said."""

    @settings(max_examples=300, deadline=None)
    @given(streamed())
    def test_same_text_and_calls_whatever_the_server_and_the_network(self, case):
        text, calls, server, body, sizes, _ = case
        reply, shown = read(split(body, sizes), used={"call_0"})
        assert reply.text == text and shown == text
        got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in reply.tool_calls]
        assert got == [(n, a) for n, a in calls], server
        ids = [c["id"] for c in reply.tool_calls]
        assert len(set(ids)) == len(ids) and "call_0" not in ids  # unique, and never an id already used
        assert reply.end == "complete" and not reply.cut_off

    @settings(max_examples=100, deadline=None)
    @given(streamed(), st.integers(0, 10**6))
    def test_a_stream_cut_anywhere_is_marked_cut_off(self, case, where):
        text, calls, server, body, sizes, before_end = case
        cut = body[: where % (before_end + 1)]  # anywhere before the finish_reason event
        reply, _ = read(split(cut, sizes))
        assert reply.end == "no_end" and reply.cut_off and "no_end" in CUT_OFF_ENDS


class TestServerShapes:
    """Guards against the non-stream and error shapes real servers answer with."""

    def test_plain_json_completion_body(self):
        body = {"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "reasoning_content": "thinking",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "list_files", "arguments": {}}},
                           {"id": "a", "type": "function", "function": {"name": "read_file",
                                                                         "arguments": '{"path": "x"}'}}]}}]}
        events = list(sse_events([json.dumps(body).encode()]))
        assert events == [body]
        reader = ReplyReader()
        reader.feed(completion_as_chunk(body))
        reply = reader.reply()
        assert [c["function"]["name"] for c in reply.tool_calls] == ["list_files", "read_file"]
        assert reply.tool_calls[0]["function"]["arguments"] == "{}"
        assert reply.tool_calls[0]["id"] != reply.tool_calls[1]["id"]
        assert reply.reasoning == "thinking" and reply.end == "complete"

    def test_ndjson_and_events_without_blank_lines(self):
        lines = [json.dumps({"choices": [{"delta": {"content": w}}]}) for w in ("a", "b")]
        assert [e["choices"][0]["delta"]["content"] for e in sse_events([("\n".join(lines) + "\n").encode()])] == ["a", "b"]
        joined = "".join(f"data: {x}\n" for x in lines).encode()
        assert len(list(sse_events([joined]))) == 2

    def test_error_event_raises_with_the_servers_words(self):
        body = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\nevent: error\ndata: {"message":"context full"}\n\n'
        reader = ReplyReader()
        with pytest.raises(ModelServerError, match="context full"):
            for event in sse_events([body]):
                reader.feed(event)

    @pytest.mark.parametrize("body,param", [
        ({"error": {"message": "Unsupported parameter: 'temperature'", "param": "temperature"}}, "temperature"),
        ({"error": {"message": "Unrecognized request argument supplied: stream_options"}}, "stream_options"),
        ({"detail": [{"loc": ["body", "parallel_tool_calls"], "msg": "Extra inputs are not permitted"}]},
         "parallel_tool_calls"),
        ({"error": {"message": "'stream' does not support true with this model", "param": None}}, "stream"),
        ({"error": {"message": "model not found"}}, None),
    ])
    def test_rejected_param(self, body, param):
        import importlib.util

        import openai

        # the HTTP library of the installed openai client (httpx2 in newer releases)
        httpx = importlib.import_module("httpx2" if importlib.util.find_spec("httpx2") else "httpx")

        response = httpx.Response(400, request=httpx.Request("POST", "http://x"), json=body)
        exc = openai.BadRequestError("bad", response=response, body=body)
        sent = {"model": "m", "messages": [], "stream": True, "stream_options": {}, "temperature": 1,
                "parallel_tool_calls": False}
        assert rejected_param(exc, sent) == param


def test_messages_sent_as_given_keep_a_callers_extra_body():
    """Guards against the untransformed request (issue 32: messages and tools skip the client's
    typed-dict walk) dropping server-specific fields a caller put in ``extra_body``."""
    from core.agent.stream import _untransformed

    msgs = [{"role": "user", "content": "hi"}]
    out = _untransformed({"model": "m", "messages": msgs, "stream": True,
                          "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}})
    assert out["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}, "messages": msgs}
    assert out["model"] == "m" and out["stream"] is True and out["messages"] == []
    assert _untransformed({"model": "m"}) == {"model": "m"}
