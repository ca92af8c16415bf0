"""Why a turn that failed at the model has no reply, after a reload (handlers over the fake server
and a closed port, no browser): the session keeps the reason, the "no reply" bar says it."""
from __future__ import annotations

import json

import pytest

from core.agent import context as windows
from core.agent.stream import forget_compat
from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from webui import i18n
from webui.chat import handlers
from webui.chat.context import WebContext
from tests.support.storage import storage_of

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12345678"


def make(tmp_path, base_url):
    forget_compat()
    (tmp_path / "proj").mkdir(exist_ok=True)
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(tmp_path / "proj"),
                      model_overrides={"api_key": "sk-test", "base_url": base_url, "max_retries": 0},
                      export_dir=tmp_path / "exports")


@pytest.fixture(autouse=True)
def fresh_windows():
    """A context-length error teaches the process the model's window: never to the next test."""
    windows.forget_windows()
    windows.TRACKER.__init__()
    yield
    windows.forget_windows()
    windows.TRACKER.__init__()


@pytest.fixture
def ctx(tmp_path, fake_openai):
    return make(tmp_path, fake_openai.base_url)


def send(ctx, state, text, tab="t1"):
    run_id, notice = handlers.take(ctx, tab, text) if text is not None else (handlers.take_retry(ctx, tab), None)
    assert notice is None
    return list(handlers.send_taken(ctx, state, tab, run_id, None))[-1]


def raw(ctx, state) -> str:
    return json.dumps(ctx.storage.sessions.load(SessionKey(state["project"], state["session"])), ensure_ascii=False)


def live_reason(final) -> str:
    return final.rows[-1]["content"]


class TestReasonSurvivesAReload:
    """Guards against a reload turning a model failure (401, a 400 with the server's reason, a
    server that is not running) into the bare "No reply was saved for the last message", and
    against the kept reason leaking an API key the server echoed."""

    def test_http_401_reason_after_reload_without_the_key(self, ctx, fake_openai):
        fake_openai.push({"error": 401, "message": f"Incorrect API key provided: {KEY}."})
        final = send(ctx, handlers.new_chat(ctx).state, "hello?")
        assert final.error and "HTTP 401" in live_reason(final)
        view = handlers.open_session(ctx, ctx.project_key, final.state["session"])
        assert view.needs_reply
        assert view.no_reply == ("No reply was saved: The model server refused the API key (HTTP 401); "
                                 "check OPENAI_API_KEY.")
        assert KEY not in raw(ctx, final.state) and "AbCdEfGh" not in raw(ctx, final.state)

    def test_http_400_detail_is_kept_with_secrets_hidden(self, ctx, fake_openai):
        fake_openai.allow_rejections = True
        message = f"Unknown model 'gpt-x' (see https://api.example/v1/models?key={KEY[3:]}; Bearer {KEY})"
        fake_openai.push({"error": 400, "message": message})
        final = send(ctx, handlers.new_chat(ctx).state, "hello?")
        assert KEY[8:] not in live_reason(final)  # not on the page while live either
        view = handlers.reload(ctx, final.state)
        assert view.no_reply.startswith("No reply was saved: ") and "HTTP 400" in view.no_reply
        assert "Unknown model 'gpt-x'" in view.no_reply and "[hidden]" in view.no_reply
        assert KEY[8:] not in view.no_reply and KEY[8:] not in raw(ctx, final.state)

    def test_context_length_400_reason_after_reload(self, ctx, fake_openai):
        fake_openai.allow_rejections = True
        fake_openai.context_limit, fake_openai.context_style = 60, "openai"
        final = send(ctx, handlers.new_chat(ctx).state, "a long question " * 40)
        assert final.error
        view = handlers.reload(ctx, final.state)
        assert view.needs_reply and view.no_reply.startswith("No reply was saved: ")
        assert "context" in view.no_reply.lower() and view.no_reply != handlers.NO_REPLY_NOTICE

    def test_connection_refused_reason_after_reload(self, tmp_path):
        ctx = make(tmp_path, "http://127.0.0.1:9/v1")  # nothing listens on port 9
        final = send(ctx, handlers.new_chat(ctx).state, "anyone?")
        assert final.error
        view = handlers.open_session(ctx, ctx.project_key, final.state["session"])
        assert view.no_reply == ("No reply was saved: Could not reach the model server at http://127.0.0.1:9; "
                                 "check that it is running and that OPENAI_BASE_URL is right.")
        with i18n.using("zh-CN"):  # the reason is the tab's language, not the one it was stored in
            zh = handlers.reload(ctx, final.state).no_reply
        assert zh.startswith(i18n.t("no_reply_reason", "zh-CN", reason="")) and "127.0.0.1:9" in zh

    def test_the_reason_goes_once_the_message_is_answered(self, ctx, fake_openai):
        fake_openai.push({"error": 500, "message": "boom"})
        final = send(ctx, handlers.new_chat(ctx).state, "hello?")
        assert "HTTP 500" in handlers.reload(ctx, final.state).no_reply
        fixed = send(ctx, handlers.reload(ctx, final.state).state, None)  # Retry, answered now
        assert not fixed.error
        view = handlers.reload(ctx, fixed.state)
        assert not view.needs_reply and view.no_reply is None
        ctx.manager.add_messages(SessionKey(view.state["project"], view.state["session"]),
                                 [{"role": "user", "content": "the app was killed after this"}])
        view = handlers.reload(ctx, view.state)  # a later message without an answer: no old reason
        assert view.needs_reply and view.no_reply == handlers.NO_REPLY_NOTICE

    def test_killed_mid_reply_keeps_the_plain_notice(self, ctx):
        s = ctx.manager.create(ctx.project_path)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "no answer came"}])
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        assert view.needs_reply and view.no_reply == handlers.NO_REPLY_NOTICE


class TestTheSameMessageSentAgainAfterAFailure:
    """Guards against trial 9's pile-up: a reply failed (HTTP 401), the user sent the same text
    again, and the chat stored it twice — two identical user messages in a row, both sent to the
    model. Sent again word for word, the unanswered message is answered again; another text is a
    message of its own."""

    def test_answered_again_not_stored_twice(self, ctx, fake_openai):
        fake_openai.push({"error": 401, "message": "Incorrect API key provided."})
        final = send(ctx, handlers.new_chat(ctx).state, "what is in the ledger?")
        assert "401" in handlers.reload(ctx, final.state).no_reply
        fake_openai.push({"text": "Three invoices."})
        again = send(ctx, handlers.reload(ctx, final.state).state, "  what is in the ledger?  ")
        stored = [(m["role"], m["content"]) for m in ctx.manager.get(
            SessionKey(again.state["project"], again.state["session"])).messages if m["role"] != "system"]
        assert stored == [("user", "what is in the ledger?"), ("assistant", "Three invoices.")]
        sent = [m for m in fake_openai.chat_requests()[-1]["messages"] if m["role"] == "user"]
        assert [m["content"] for m in sent] == ["what is in the ledger?"]
        assert handlers.reload(ctx, again.state).no_reply is None

    def test_another_text_after_a_failure_is_its_own_message(self, ctx, fake_openai):
        fake_openai.push({"error": 500, "message": "boom"})
        final = send(ctx, handlers.new_chat(ctx).state, "first try")
        fake_openai.push({"text": "Answered."})
        later = send(ctx, handlers.reload(ctx, final.state).state, "something else")
        users = [m["content"] for m in ctx.manager.get(
            SessionKey(later.state["project"], later.state["session"])).messages if m["role"] == "user"]
        assert users == ["first try", "something else"]
