"""MCP tool names and the record of which server and tool a call went to (core.session.mcp_calls):
names the chat completions API takes, read back for the page; the record kept by every store and
carried by forks, versions, a racing reply kept as a version, and the JSONL export."""
from __future__ import annotations

import re

import pytest

from core.session.rounds import Round

from core.session.export import session_to_jsonl, session_to_markdown
from core.session.manager import SessionManager
from core.session.mcp_calls import mcp_calls_of, mcp_tool_name, split_mcp_name

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # the chat completions API's rule for a function name


class TestNames:
    """Guards against a server or tool name the API refuses (one refused name fails every request
    of the turn) and against two tools offered under one name."""

    @pytest.mark.parametrize("server,tool", [
        ("tracker", "create_issue"), ("my server.v2", "get/issue"), ("a__b", "c__d"), ("数据库", "查询"),
        ("s" * 80, "t" * 80), ("x", "y" * 200), ("", ""), ("---", "_")])
    def test_offered_names_follow_the_api_rule_and_read_back(self, server, tool):
        name = mcp_tool_name(server, tool)
        assert API_NAME.match(name), name
        assert name == mcp_tool_name(server, tool)  # the same every time: a resumed chat finds it
        parts = split_mcp_name(name)
        assert parts is not None and "__" not in parts[0]

    def test_plain_names_keep_claude_codes_scheme(self):
        assert mcp_tool_name("tracker", "create_issue") == "mcp__tracker__create_issue"
        assert split_mcp_name("mcp__tracker__create_issue") == ("tracker", "create_issue")
        assert split_mcp_name("mcp__a_b__c__d") == ("a_b", "c__d")
        assert split_mcp_name("read_file") is None and split_mcp_name("mcp__x") is None

    def test_long_names_stay_apart(self):
        a, b = mcp_tool_name("s" * 70, "tool_a" * 20), mcp_tool_name("s" * 70, "tool_b" * 20)
        assert a != b and len(a) == len(b) == 64


def _round(call_id: str) -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "mcp__tracker__create_issue", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "issue #7"}]


class TestTheRecord:
    """Guards against the server and tool of a call being lost when a conversation is copied —
    forks, versions, a reply kept as a version, exports — in every store (the contract fixture)."""

    def test_kept_by_the_store_forks_versions_and_exports(self, store, tmp_path):
        manager = SessionManager(store)
        (tmp_path / "ws").mkdir(exist_ok=True)
        key = manager.create(tmp_path / "ws").key
        record = {"c1": {"server": "tracker.prod", "tool": "create issue"}}
        manager.add_messages(key, [{"role": "user", "content": "file it"}])
        manager.add_messages(key, _round("c1"), mcp=record)
        manager.add_messages(key, [{"role": "assistant", "content": "Filed."}])
        assert manager.get(key).mcp_calls == record
        held = [e for e in store.load(key) if e.get("type") == "message" and e.get("mcp")]
        assert len(held) == 1 and held[0]["message"]["role"] == "assistant"  # only on the message with the call
        assert "mcp" not in held[0]["message"]  # the message stays what the API takes

        branch = manager.fork(key, 3)
        version = manager.fork(key, 2, version=True)
        assert manager.get(branch.key).mcp_calls == record and manager.get(version.key).mcp_calls == record
        assert manager.fork(key, 0).mcp_calls == {}  # cut before the call: no record of it

        kept = manager.keep_as_version(key, 1, Round(_round("c2"), mcp={"c2": {"server": "tracker", "tool": "t"}}))
        assert manager.get(kept.key).mcp_calls == {"c2": {"server": "tracker", "tool": "t"}}

        entries = store.load(key)
        assert mcp_calls_of(entries) == record
        assert '"mcp":{"c1":{"server":"tracker.prod","tool":"create issue"}}' in session_to_jsonl(entries).decode()
        assert "MCP server `tracker.prod`, tool `create issue`" in session_to_markdown(manager.get(key))

    def test_a_malformed_record_is_skipped(self):
        entries = [{"type": "message", "message": {"role": "assistant", "content": "x"}, "mcp": {"c": "server"}},
                   {"type": "message", "message": {"role": "assistant", "content": "y"}, "mcp": ["c"]},
                   {"type": "message", "message": {"role": "assistant", "content": "z"},
                    "mcp": {"ok": {"server": "s", "tool": "t"}}}]
        assert mcp_calls_of(entries) == {"ok": {"server": "s", "tool": "t"}}
