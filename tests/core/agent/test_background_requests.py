"""The user's reply first on a server that serves one request at a time (issue 27, kind 7).

The fake server in ``one_at_a_time`` mode aborts a streaming reply when another chat request
arrives, as llama-cpp-python's server does. The bad interleaving is forced, not hoped for: the
first turn's generator is held after its last round until the second turn's reply streams, then
resumed, so its title and memory jobs start while that reply streams.
"""
from __future__ import annotations

import threading
import time

import pytest

from core import LocalSessionStore, SessionManager
from core.agent import context as ctx
from core.agent import slots
from core.agent.events import MemoryStarted, ReplyRestarted, RoundCompleted, TitleStarted
from core.agent.runner import run_session_stream
from core.agent.stream import forget_compat
from core.errors import ModelError

MODEL = "gpt-4o-mini"
LONG = "This answer streams slowly, piece by piece, while the background jobs want the server. " * 3


@pytest.fixture(scope="module", autouse=True)
def warm_language_detection():
    """The jobs detect the conversation's language first; its model loads once per process (a
    second or more on a loaded machine), which would delay the jobs' first requests past the
    reply they are meant to race."""
    from core.agent.language import conversation_language

    conversation_language([{"role": "user", "content": "Convention: use tabs. First question?"}])


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    # An earlier test's title or memory job still asking the (shared) fake would be "another
    # request" to the one-at-a-time server here.
    for thread in threading.enumerate():
        if thread.name.startswith(("title-", "memory-")):
            thread.join(10)
    monkeypatch.setenv("ANYCODE_MEMORY", "auto")
    monkeypatch.delenv(slots.ENV, raising=False)
    slots.forget()
    ctx.forget_windows()
    forget_compat()
    yield
    slots.forget()


@pytest.fixture
def chat(tmp_path):
    store = LocalSessionStore(tmp_path / "data")
    (tmp_path / "ws").mkdir()
    return store, SessionManager(store).create(tmp_path / "ws")


def _second_turn_while_first_jobs_start(fake, store, key, copies=1):
    """Turn 1 to its last round; turn 2 (slow reply) in a thread; once it streams, turn 1's
    background jobs start. Returns (turn 2 events, turn 2 error, background threads)."""
    client = fake.client(timeout=20)
    fake.push({"text": "Short first answer."})
    first = run_session_stream(key, store, "Convention: use tabs. First question?", client=client, model=MODEL,
                               tools=[])
    for event in first:
        if isinstance(event, RoundCompleted):
            break
    for _ in range(copies):  # a second copy answers the retry of a broken reply
        fake.push({"text": LONG, "delay": 0.02, "chunk": 3})
    events, errors = [], []

    during = set()  # kinds of the background requests the server got before the second reply ended

    def second():
        try:
            for event in run_session_stream(key, store, "Second question, sent right away.", client=client,
                                            model=MODEL, tools=[]):
                events.append(event)
                if isinstance(event, RoundCompleted):
                    during.update({fake._kind(b) for b in fake.chat_requests(None)} - {"chat"})
        except ModelError as err:
            errors.append(err)

    worker = threading.Thread(target=second)
    worker.start()
    deadline = time.monotonic() + 10
    while not any(b["messages"][-1].get("content") == "Second question, sent right away."
                  for b in fake.chat_requests()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the second reply is streaming now
    threads = [e.thread for e in first if isinstance(e, (MemoryStarted, TitleStarted))]
    worker.join(30)
    fake.during = during
    for t in threads:
        t.join(30)
    return events, errors, threads


def _answered(store, key):
    return SessionManager(store).get(key).messages[-1]


class TestOneRequestAtATime:
    @pytest.mark.parametrize("how", ["props", "env"])
    def test_known_server_background_waits_for_the_reply(self, fake_openai, chat, monkeypatch, how):
        """Detected from llama.cpp's /props slot count, or set with ANYCODE_MAX_PARALLEL_REQUESTS:
        the title and memory requests wait until the reply is over; nothing is cut."""
        store, session = chat
        fake_openai.one_at_a_time = True
        if how == "props":
            fake_openai.slots = 1
        else:
            monkeypatch.setenv(slots.ENV, "1")
        events, errors, threads = _second_turn_while_first_jobs_start(fake_openai, store, session.key)
        assert not errors, str(errors[0])
        assert fake_openai.interrupted == 0
        assert not any(isinstance(e, ReplyRestarted) for e in events)
        assert _answered(store, session.key) == {"role": "assistant", "content": LONG}
        assert len(threads) == 2 and not any(t.is_alive() for t in threads)
        assert fake_openai.during == set()
        stored = SessionManager(store).get(session.key)
        assert stored.title_source == "llm"
        # The background requests reached the server after the second reply ended.
        order = [fake_openai._kind(r["body"]) for r in fake_openai.requests if r["path"] == "/v1/chat/completions"]
        assert order[:2] == ["chat", "chat"] and set(order[2:]) == {"memory", "title"}

    def test_learnt_from_a_broken_reply_and_retried_once(self, fake_openai, chat):
        """No /props: the reply breaks once while a background request runs; it is asked again
        at once (the user sees no error), and from then on background requests wait."""
        store, session = chat
        fake_openai.one_at_a_time = True
        events, errors, _ = _second_turn_while_first_jobs_start(fake_openai, store, session.key, copies=2)
        assert not errors, str(errors[0])
        assert fake_openai.interrupted == 1
        assert sum(isinstance(e, ReplyRestarted) for e in events) == 1
        assert _answered(store, session.key) == {"role": "assistant", "content": LONG}
        assert slots.slots_for(fake_openai.client()).serial()
        # Learnt: the next exchange's jobs wait for the reply after it.
        events, errors, _ = _second_turn_while_first_jobs_start(fake_openai, store, session.key)
        assert not errors and fake_openai.interrupted == 1
        assert not any(isinstance(e, ReplyRestarted) for e in events)

    def test_parallel_server_is_not_held_back(self, fake_openai, chat):
        """A server that serves several requests (unknown, or /props says so): background requests
        go at once, as before."""
        store, session = chat
        fake_openai.slots = 4
        events, errors, _ = _second_turn_while_first_jobs_start(fake_openai, store, session.key)
        assert not errors
        assert fake_openai.during == {"memory", "title"}  # the jobs went while the second reply streamed
