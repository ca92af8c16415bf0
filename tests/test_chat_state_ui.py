"""The chat page's state, as plain handler functions over a temporary store and the fake OpenAI
server (issue 18, items 4-6): the generated title pushed when stored, archived chats, a chat whose
project folder moved. The browser side is ``tests/test_browser_chat_state.py``."""
from __future__ import annotations

import threading
import time

import pytest

from core.session.keys import SessionKey
from webui import handlers, title_push
from tests.test_webui_handlers import ctx, make_ctx, project, run_send, store  # noqa: F401 (fixtures)


class TestTitlePush:
    """Guards against the generated title waiting for the page's next poll (1.5 s) although it was
    stored right after the reply, and against a slow title model leaving the page without a poll."""

    def test_send_registers_the_title_thread_and_the_push_finds_the_title(self, ctx):
        final = run_send(ctx, handlers.new_chat(ctx).state, "help me plan a trip")[-1]
        assert final.state["title_wait"] > time.time()
        assert ctx.titles.pending(final.state["session"])
        assert not title_push.poll_needed(ctx, final.state), "the push shows it: no poll"
        title, poll = title_push.wait_for_title(ctx, final.state, timeout=10)
        assert title.startswith("Chat: help me plan") and not poll
        assert not ctx.titles.pending(final.state["session"]), "taken once"
        assert title_push.wait_for_title(ctx, final.state) is None  # a later state change: nothing to do

    def test_slow_title_falls_back_to_the_poll(self, ctx):
        session = ctx.manager.create(ctx.project_path)
        ctx.manager.add_messages(session.key, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
        gate = threading.Event()

        def slow_title():
            gate.wait(10)
            ctx.manager.set_generated_title(session.key, "Late title", "llm")

        thread = threading.Thread(target=slow_title, daemon=True)
        thread.start()
        state = dict(handlers.reload(ctx, handlers.tab_state(ctx.project_key, session.id)).state,
                     title_wait=time.time() + 45)
        ctx.titles.started(session.id, thread)
        assert title_push.wait_for_title(ctx, state, timeout=0.2) == (None, True)  # the poll takes over
        gate.set()
        thread.join(10)
        assert title_push.poll_needed(ctx, state)
        assert handlers.title_status(ctx, state) == ("Late title", False)

    def test_no_title_awaited_no_thread(self, ctx):
        state = handlers.new_chat(ctx).state
        assert title_push.wait_for_title(ctx, state) is None and not title_push.poll_needed(ctx, state)

    def test_registrations_nobody_takes_are_dropped(self):
        threads = title_push.TitleThreads()
        threads.started("a", threading.Thread(target=lambda: None), now=0.0)
        threads.started("b", threading.Thread(target=lambda: None), now=title_push.KEEP_SECONDS + 1)
        assert not threads.pending("a") and threads.pending("b")
        assert threads.take("b") is not None and threads.take("b") is None
