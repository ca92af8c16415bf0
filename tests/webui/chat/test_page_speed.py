"""The page's work per action (issue 32): the user's message and the reply's first token reach the
page together (:func:`webui.chat.send.with_first_token`); no chat is a progress target
(:mod:`webui.gui.progress`); the page load is one event for the sidebar foot too."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from webui.chat.send import with_first_token


@dataclass
class Upd:
    name: str
    done: bool = False


def _updates(*steps, ended=None):
    """Yield each ``(delay, update)`` after its delay; ``ended`` is set when the generator ends
    (closed or not)."""
    try:
        for delay, upd in steps:
            if delay:
                time.sleep(delay)  # the model's time to its next token
            yield upd
    finally:
        if ended is not None:
            ended.set()


class TestWithFirstToken:
    """Guards the one render instead of two: a first token that comes soon replaces the user's
    message update; a slow one does not hold the message back longer than the hold, and nothing
    is lost, raised late or left running."""

    def test_a_quick_first_token_replaces_the_message_update(self):
        got = list(with_first_token(_updates((0, Upd("message")), (0.01, Upd("token")), (0, Upd("end", True))),
                                    hold=5))
        assert [u.name for u in got] == ["token", "end"]

    def test_a_slow_first_token_lets_the_message_through_at_the_hold(self):
        t = time.monotonic()
        stream = with_first_token(_updates((0, Upd("message")), (0.6, Upd("token"))), hold=0.1)
        assert next(stream).name == "message"
        assert time.monotonic() - t < 0.5  # not held until the token
        assert [u.name for u in stream] == ["token"]

    def test_a_send_that_ends_after_its_first_update_still_shows_it(self):
        assert [u.name for u in with_first_token(_updates((0, Upd("message"))), hold=1)] == ["message"]

    def test_a_finished_first_update_is_not_held(self):
        t = time.monotonic()
        got = list(with_first_token(_updates((0, Upd("refused", True))), hold=5))
        assert [u.name for u in got] == ["refused"] and time.monotonic() - t < 1

    def test_an_error_of_the_send_is_raised_to_the_page(self):
        def failing():
            yield Upd("message")
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            list(with_first_token(failing(), hold=5))

    def test_closed_while_waiting_the_send_still_ends(self):
        ended = threading.Event()
        stream = with_first_token(_updates((0, Upd("message")), (0.3, Upd("token")), ended=ended), hold=0.05)
        assert next(stream).name == "message"
        stream.close()  # the page went away while the token was awaited
        assert ended.wait(5)  # the send's finally ran (the run ends, its text is stored)

    def test_the_language_of_the_request_reaches_the_send(self):
        import contextvars

        lang = contextvars.ContextVar("lang", default="en")
        lang.set("de")

        def seen():
            yield Upd("message")
            yield Upd(lang.get())

        assert [u.name for u in with_first_token(seen(), hold=5)] == ["de"]


def _config(tmp_path):
    import json

    from core.stores.jsonl_store import LocalSessionStore
    from tests.support.chat_ctx import make_ctx
    from webui.gui.app import build_app

    (tmp_path / "proj").mkdir()
    ctx = make_ctx(LocalSessionStore(tmp_path / "data"), tmp_path / "proj")
    return json.loads(json.dumps(build_app(ctx).get_config_file(), default=str))


class TestPageEvents:
    """Guards the browser's work per event: a chat among an event's progress targets made the page
    copy its 200 messages on every status change of every event (the once-a-second live check
    included), and the sidebar foot's two load events were two more round trips per page load."""

    def test_no_chat_is_a_progress_target(self, tmp_path):
        cfg = _config(tmp_path)
        chats = {c["id"] for c in cfg["components"] if c["type"] == "chatbot"}
        filling = [d for d in cfg["dependencies"] if chats & set(d["outputs"])]
        assert len(filling) > 10  # opening, sending, versions, rewind ... all fill the chat
        for dep in filling:
            targets = dep["show_progress_on"]
            assert targets is not None and not chats & set(targets), dep["id"]
            assert set(targets) == set(dep["outputs"]) - chats  # the others keep their progress

    def test_the_live_check_does_not_fill_the_chat(self, tmp_path):
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        check = [d for d in cfg["dependencies"] if [ids["ac-live-check"], "click"] in [list(t) for t in d["targets"]]]
        assert len(check) == 1 and ids["ac-chat"] not in check[0]["outputs"]

    def test_the_sidebar_foot_comes_with_the_page_load(self, tmp_path):
        cfg = _config(tmp_path)
        ids = {c["props"].get("elem_id"): c["id"] for c in cfg["components"]}
        loads = [d for d in cfg["dependencies"] if d["backend_fn"] and any(t[1] == "load" for t in d["targets"])]
        with_foot = [d for d in loads if {ids["ac-lang"], ids["ac-prefs"]} <= set(d["outputs"])]
        assert len(with_foot) == 1 and ids["ac-list"] in with_foot[0]["outputs"]
        assert [d for d in loads if ids["ac-prefs"] in d["outputs"]] == with_foot  # no load event of its own
