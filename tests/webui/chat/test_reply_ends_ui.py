"""How a reply ended, as the chat pane shows it (handlers over the fake server, no browser)."""
from __future__ import annotations

import pytest

from core.agent.stream import forget_compat
from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from webui.chat import handlers
from webui.render import rows as render
from webui.chat.context import WebContext
from tests.support.storage import storage_of


@pytest.fixture
def ctx(tmp_path, fake_openai):
    forget_compat()
    (tmp_path / "proj").mkdir()
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(tmp_path / "proj"),
                      model_overrides={"api_key": "sk-test", "base_url": fake_openai.base_url, "max_retries": 0},
                      export_dir=tmp_path / "exports")


def send(ctx, state, text, tab="t1"):
    run_id, notice = handlers.take(ctx, tab, text) if text is not None else (handlers.take_retry(ctx, tab), None)
    assert notice is None
    return list(handlers.send_taken(ctx, state, tab, run_id, None))[-1]


def stored(ctx, state):
    return ctx.manager.get(SessionKey(state["project"], state["session"]))


class TestCutOffReplies:
    """Guards against a cut-off reply looking like a finished answer in the chat."""

    def test_cut_off_reply_is_marked_with_continue(self, ctx, fake_openai):
        fake_openai.quirk = "length"
        fake_openai.push({"text": "The first half of"})
        final = send(ctx, handlers.new_chat(ctx).state, "explain")
        assert final.rows[-2] == {"role": "assistant", "content": "The first half of"}
        marker = final.rows[-1]
        assert "cut off" in marker["content"] and "output limit" in marker["content"]
        assert marker["options"] == [{"label": "Continue", "value": "Continue"}]
        # reopening the chat shows the same
        again = handlers.reload(ctx, final.state)
        assert again.rows[-1] == marker and not again.needs_reply

    def test_continue_sends_continue_and_the_marker_loses_its_button(self, ctx, fake_openai):
        fake_openai.quirk = "no_end"
        fake_openai.push({"text": "Half"})
        first = send(ctx, handlers.new_chat(ctx).state, "explain")
        fake_openai.quirk = None
        final = send(ctx, first.state, render.CONTINUE)
        assert final.rows[-1] == {"role": "assistant", "content": "You said: Continue"}
        markers = [r for r in final.rows if "cut off" in str(r["content"])]
        assert len(markers) == 1 and "options" not in markers[0]  # still marked, no longer offered
        assert stored(ctx, final.state).reply_ends == {2: "no_end"}

    def test_branch_from_a_row_after_a_marker_keeps_row_indexes(self, ctx, fake_openai):
        fake_openai.quirk = "length"
        fake_openai.push({"text": "Half"})
        first = send(ctx, handlers.new_chat(ctx).state, "one")
        fake_openai.quirk = None
        final = send(ctx, first.state, "two")
        row = len(final.rows) - 1  # the last reply, after the marker row
        fork = handlers.branch(ctx, final.state, row)
        assert [m.get("content") for m in stored(ctx, fork.state).messages][-1] == "You said: two"


class TestEmptyReplies:
    """Guards against an empty reply saved as a blank answer, with nothing telling the user why."""

    def test_empty_reply_shows_why_and_offers_retry(self, ctx, fake_openai):
        fake_openai.quirk = "reasoning_only"
        final = send(ctx, handlers.new_chat(ctx).state, "think hard")
        assert final.error and "reasoning" in final.rows[-1]["content"]
        assert [m["role"] for m in stored(ctx, final.state).messages] == ["system", "user"]
        view = handlers.reload(ctx, final.state)
        assert view.needs_reply  # the Retry bar
        fake_openai.quirk = None
        retried = send(ctx, view.state, None)
        assert retried.rows[-1] == {"role": "assistant", "content": "You said: think hard"}

    def test_empty_reply_after_tool_results_offers_retry(self, ctx, fake_openai):
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]})
        fake_openai.quirk = "empty"  # the tool call itself still arrives; the answer after it is empty
        final = send(ctx, handlers.new_chat(ctx).state, "list")
        roles = [m["role"] for m in stored(ctx, final.state).messages]
        assert roles == ["system", "user", "assistant", "tool"] and final.error
        assert handlers.reload(ctx, final.state).needs_reply
