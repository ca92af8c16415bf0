"""What the input box holds once a send has ended (``Page.on_sent``, the page's last step of every
send): a message that could not go is back in the box, whatever else the tab is doing."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from tests.support.chat_ctx import make_ctx, project  # noqa: F401 (fixtures)
from tests.webui.chat.test_webui_handlers import seeded
from webui.chat import handlers, live


def _ctx(tmp_path, project, fake_openai):
    from core.stores.jsonl_store import LocalSessionStore

    return make_ctx(LocalSessionStore(tmp_path / "data"), project, api_key="sk-test",
                    base_url=fake_openai.base_url, max_retries=0)


def _page(ctx):
    from webui.gui.app import Page

    return Page(ctx, None)  # on_sent needs no Blocks: it only reads the context


class TestStoppedWaitThenSentAgain:
    """Guards against trial 11's lost text: a message waiting for another tab's reply was stopped
    (its text is given back) and another message was sent right after Stop; the box's last step
    took the given-back text, saw the second message running and skipped — the text was gone."""

    def test_the_stopped_message_is_back_in_the_box_while_the_next_one_goes(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        held = live.hold(ctx, s.key, "tab-a")  # tab A is writing a reply in this chat
        try:
            first, _ = handlers.take(ctx, "tab-b", "wait for me")
            updates: list = []
            sender = threading.Thread(target=lambda: updates.extend(
                handlers.send_taken(ctx, state, "tab-b", first, None)))
            sender.start()
            deadline = time.monotonic() + 10
            while not any("another tab or window" in str(r.get("content")) for u in updates for r in u.rows or []):
                assert time.monotonic() < deadline, "the message waits for tab A's reply"
                time.sleep(0.02)
            assert handlers.stop(ctx, "tab-b", upto=first)
            second, refused = handlers.take(ctx, "tab-b", "sent after Stop")
            assert second is not None and refused is None, "a message right after Stop is taken"
            sender.join(10)
            assert updates[-1].done and updates[-1].restore_text == "wait for me"
            box = _page(ctx).on_sent("tab-b", first, "", SimpleNamespace(session_hash="tab-b"))
        finally:
            held.release()
        assert getattr(box, "value", None) == "wait for me", "the stopped message is back in the box"
        assert box.stop_btn, "Stop stays for the message on its way"

    def test_text_typed_since_is_not_overwritten(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        page = _page(ctx)
        run = ctx.begin_run("tab-b", "refused one")
        run.restore_text = "refused one"
        ctx.end_run("tab-b", run, None)
        box = page.on_sent("tab-b", run.id, "typed meanwhile", SimpleNamespace(session_hash="tab-b"))
        assert getattr(box, "value", None) in (None, "typed meanwhile")
