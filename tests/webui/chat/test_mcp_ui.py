"""The page's side of MCP servers without a browser (webui/chat/mcp.py, the approval card's
answers, the step rows, the share page) over a real stdio MCP server and the fake OpenAI server."""
from __future__ import annotations

import pytest

from core.session.keys import SessionKey
from tests.support.chat_ctx import make_ctx, project, run_send, store  # noqa: F401  (shared fixtures)
from tests.support.mcp_server import stdio_entry, write_config
from webui import i18n
from webui.chat import approvals, handlers, mcp
from webui.chat.share_page import session_to_html

ECHO = {"tool_calls": [{"name": "mcp__tests__echo", "arguments": {"text": "hi"}, "id": "call_e"}]}


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("ANYCODE_MEMORY", "off")


@pytest.fixture
def ctx(store, project, fake_openai):  # noqa: F811
    made = make_ctx(store, project, api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)
    yield made
    made.close()  # the app's stop: its MCP servers end with it


def _approved(ctx, project):  # noqa: F811
    write_config(project, {"tests": stdio_entry()})
    state = handlers.tab_state(ctx.project_key)
    assert mcp.approve(ctx, state) == i18n.t("mcp_approved", n=1)
    return state


def _rows_titles(ctx, state) -> list[str]:
    return [r["metadata"]["title"] for r in handlers.reload(ctx, state).rows if r.get("metadata")]


class TestApprovalCardForMcpCalls:
    """Guards against an MCP call's "Allow for this chat" allowing every change (or every MCP tool),
    and "Always allow this tool" being forgotten by the next app or outliving a changed server."""

    def test_card_names_the_server_and_chat_allows_that_tool_only(self, ctx, fake_openai, project):  # noqa: F811
        state = _approved(ctx, project)
        fake_openai.push(ECHO)
        state = run_send(ctx, state, "echo hi")[-1].state
        shown = approvals.view(ctx, state)
        assert shown.mcp == ("tests", "echo") and "MCP server: tests" in shown.preview
        assert approvals.decide(ctx, state, "call_e", allow=True, scope="chat") is None
        fake_openai.push({"text": "Done."})
        state = run_send(ctx, state, None)[-1].state
        session = ctx.manager.get(SessionKey(state["project"], state["session"]))
        assert session.messages[-2] == {"role": "tool", "tool_call_id": "call_e", "content": "echo: hi"}
        assert shown.ask and approvals.view(ctx, state).ask  # the chat's switch is untouched
        assert "\u2699 echo · tests" in _rows_titles(ctx, state)

        fake_openai.push({"tool_calls": [{"name": "mcp__tests__echo", "arguments": {"text": "again"}, "id": "c2"},
                                         {"name": "mcp__tests__add", "arguments": {"a": 1, "b": 2}, "id": "c3"}]})
        state = run_send(ctx, state, "both")[-1].state
        waiting = approvals.view(ctx, state).pending
        assert waiting.call_id == "c3"  # echo ran (allowed for this chat), add asks
        fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"},
                                          "id": "c4"}]})
        approvals.decide(ctx, state, "c3", allow=True)
        state = run_send(ctx, state, None)[-1].state
        assert approvals.view(ctx, state).pending.call_id == "c4"  # a file change still asks
        assert not (project / "a.txt").exists()

    def test_always_holds_in_the_next_app_until_the_server_changes(self, ctx, store, fake_openai, project):  # noqa: F811
        state = _approved(ctx, project)
        fake_openai.push(ECHO)
        state = run_send(ctx, state, "echo hi")[-1].state
        approvals.decide(ctx, state, "call_e", allow=True, scope="always")
        fake_openai.push({"text": "Done."})
        run_send(ctx, state, None)
        ctx.close()

        again = make_ctx(store, project, api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)
        try:
            fake_openai.push({"tool_calls": [{"name": "mcp__tests__echo", "arguments": {"text": "x"}, "id": "c2"}]},
                             {"text": "ok"})
            fresh = run_send(again, handlers.tab_state(again.project_key), "echo x")[-1].state
            assert approvals.view(again, fresh).pending is None
            write_config(project, {"tests": stdio_entry(CHANGED="1")})  # the same name, another definition
            mcp.approve(again, fresh)
            fake_openai.push({"tool_calls": [{"name": "mcp__tests__echo", "arguments": {"text": "y"}, "id": "c3"}]})
            fresh = run_send(again, fresh, "echo y")[-1].state
            assert approvals.view(again, fresh).pending.call_id == "c3"
        finally:
            again.close()


class TestToolsPanel:
    """Guards against the panel starting what it shows, hiding that a project's servers wait for
    approval (and what they would run), or a Test that says nothing."""

    def test_approve_test_and_list(self, ctx, project, tmp_path):  # noqa: F811
        started = tmp_path / "started"
        write_config(project, {"tests": stdio_entry(MCP_STARTED_FILE=str(started), MCP_SECRET="hidden-value-123")})
        state = handlers.tab_state(ctx.project_key)
        view = mcp.panel(ctx, state)
        assert "tests" in view.approval and "tests.support.mcp_server" in view.approval
        assert i18n.t("mcp_state_needs_approval") in view.html and view.servers == ["tests"]
        assert mcp.test(ctx, state, "tests")[1] is False and not started.exists()
        assert "hidden-value-123" not in view.html + view.approval

        mcp.approve(ctx, state)
        view = mcp.panel(ctx, state)
        assert view.approval == "" and i18n.t("mcp_state_not_started") in view.html and not started.exists()
        sentence, ok = mcp.test(ctx, state, "tests")
        assert ok and "answered" in sentence and started.exists()
        view = mcp.panel(ctx, state)
        assert i18n.t("mcp_state_running") in view.html and "<code>echo</code>" in view.html
        assert "Use echo to repeat text." in view.html

        assert mcp.set_trust_read_only(ctx, True) is None and mcp.panel(ctx, state).trust_read_only
        with i18n.using("zh-CN"):
            assert "运行中" in mcp.panel(ctx, state).html

    def test_nothing_configured_says_where_to_add(self, ctx):
        view = mcp.panel(ctx, handlers.tab_state(ctx.project_key))
        assert view.servers == [] and i18n.t("mcp_none") in __import__("html").unescape(view.html)


class TestShownAndShared:
    """Guards against a step row or the share page hiding which server a call went to."""

    def test_share_page_names_the_server(self, ctx, fake_openai, project):  # noqa: F811
        state = _approved(ctx, project)
        fake_openai.push(ECHO)
        state = run_send(ctx, state, "echo hi")[-1].state
        approvals.decide(ctx, state, "call_e", allow=True)
        fake_openai.push({"text": "Done."})
        state = run_send(ctx, state, None)[-1].state
        page = session_to_html(ctx.manager.get(SessionKey(state["project"], state["session"])))
        assert "MCP server <code>tests</code>, tool <code>echo</code>" in page and "echo: hi" in page
