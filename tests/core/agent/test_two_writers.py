"""Two writers in one conversation (issue 25): a reply racing another writer's is kept as a version
of the conversation, never dropped and never stored after the other writer's messages.

The writers are real runner streams against the fake OpenAI server over HTTP, interleaved step by
step (``next()`` on each generator), in every store of the contract suite.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from core import SessionKey, SessionManager
from core.agent.events import ReplyKeptAsVersion, RoundCompleted, TitleStarted, UserMessageSaved
from core.agent.runner import run_session, run_session_stream
from core.errors import SessionConflict
from tests.core.agent.test_runner import drain
from tests.support.fake_openai import validate_chat_request

MODEL = "gpt-4o-mini"


@pytest.fixture(autouse=True)
def quiet_agent(monkeypatch):
    """Side-effect tools run without asking and no memory job runs: these tests are about where
    rounds are stored."""
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
    monkeypatch.setenv("ANYCODE_MEMORY", "off")


def strict_problem(messages: list[dict]) -> str | None:
    """Why a strict OpenAI server would refuse this history, or a reply that answers no user
    message (an assistant message right after a finished reply or the system prompt); None: valid."""
    try:
        validate_chat_request({"model": MODEL, "messages": messages})
    except Exception as err:  # RequestInvalid
        return str(err)
    before = None
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and (before is None or before["role"] == "system"
                                         or (before["role"] == "assistant" and not before.get("tool_calls"))):
            return f"message {i}: a reply without its user message"
        before = m
    return None


def family_histories(manager: SessionManager, key) -> dict[str, list[dict]]:
    return {m.id: manager.get(m.key).messages for m in manager.family(key)}


def until(stream, kind):
    """Advance ``stream`` up to and including the first event of type ``kind``; return the events."""
    events = []
    for event in stream:
        events.append(event)
        if isinstance(event, kind):
            return events
    raise AssertionError(f"the stream ended before a {kind.__name__}")


class TestRacingReply:
    def test_reply_racing_another_writer_is_kept_as_version_2_of_2(self, fake_openai, store, session):
        """Issue 25's first scenario through the core API: tab A's reply is still coming when tab B
        sends and gets its answer; A's reply lands as version 2 of 2, B's turn stays in the root."""
        client = fake_openai.client()
        manager = SessionManager(store)
        a = run_session_stream(session.key, store, "question A", client=client, model=MODEL, expected_count=0)
        saved = until(a, UserMessageSaved)[-1]
        assert saved.message_count == 2
        # Tab B loaded the chat with A's question in it and sends while A's reply is in flight.
        run_session(session.key, store, "question B", client=client, model=MODEL, expected_count=2,
                    wait_for_title=10)
        events = drain(a)
        kept = [e for e in events if isinstance(e, ReplyKeptAsVersion)]
        assert len(kept) == 1 and (kept[0].number, kept[0].count) == (2, 2)
        assert kept[0].of == session.key
        assert not any(isinstance(e, SessionConflict) for e in events)
        root = manager.get(session.key).messages
        assert [(m["role"], m["content"]) for m in root[1:]] == [
            ("user", "question A"), ("user", "question B"), ("assistant", "You said: question B")]
        version = manager.get(kept[0].key)
        assert [(m["role"], m["content"]) for m in version.messages[1:]] == [
            ("user", "question A"), ("assistant", "You said: question A")]
        assert version.version_of == {"session_id": session.id, "message_index": 1}
        # The tab that sent A opens its reply; the arrows lead to B's at the message after A's question.
        assert manager.current_version(session.key) == kept[0].key
        assert manager.version_points(kept[0].key)[0]["index"] == 2
        for history in family_histories(manager, session.key).values():
            assert strict_problem(history) is None

    def test_later_round_racing_goes_to_the_version_with_the_earlier_rounds(self, fake_openai, store, session,
                                                                           tmp_path):
        """A's first tool round landed; B then writes; A's next rounds are a version holding A's
        question and every round of A's turn, and nothing of A lands after B's reply."""
        (tmp_path / "ws" / "notes.txt").write_text("hello\n")
        client = fake_openai.client()
        manager = SessionManager(store)
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]})
        a = run_session_stream(session.key, store, "look around", client=client, model=MODEL, expected_count=0)
        first = until(a, RoundCompleted)[-1]
        assert first.messages[0]["tool_calls"]
        count = len(manager.get(session.key).messages)
        run_session(session.key, store, "meanwhile", client=client, model=MODEL, expected_count=count,
                    wait_for_title=10)
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]})
        events = drain(a)
        rounds = [first] + [e for e in events if isinstance(e, RoundCompleted)]
        kept = [e for e in events if isinstance(e, ReplyKeptAsVersion)]
        assert len(kept) == 1
        version = manager.get(kept[0].key).messages
        assert version[1] == {"role": "user", "content": "look around"}
        assert version[2:] == [m for r in rounds for m in r.messages]
        root = manager.get(session.key).messages
        assert root[-2:] == [{"role": "user", "content": "meanwhile"},
                             {"role": "assistant", "content": "You said: meanwhile"}]
        for history in family_histories(manager, session.key).values():
            assert strict_problem(history) is None

    def test_a_stopped_reply_racing_is_kept_as_a_version_too(self, fake_openai, store, session):
        client = fake_openai.client()
        manager = SessionManager(store)
        fake_openai.push({"text": "a long answer that is being streamed slowly", "delay": 0.02, "chunk": 2})
        a = run_session_stream(session.key, store, "slow one", client=client, model=MODEL, expected_count=0)
        until(a, UserMessageSaved)
        next(a)  # the first piece of text is on screen
        run_session(session.key, store, "other tab", client=client, model=MODEL, expected_count=2,
                    wait_for_title=10)
        a.close()  # Stop
        family = family_histories(manager, session.key)
        assert len(family) == 2
        version = next(h for sid, h in family.items() if sid != session.id)
        assert version[1] == {"role": "user", "content": "slow one"}
        assert version[2]["role"] == "assistant" and version[2]["content"].startswith("a ")
        for history in family.values():
            assert strict_problem(history) is None


# --- any interleaving of two writers ---------------------------------------------------------

REPLY = st.sampled_from(["text", "tool"])


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedule=st.lists(st.sampled_from([0, 1]), min_size=4, max_size=40),
       replies=st.lists(REPLY, max_size=12), turns=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_any_interleaving_loses_no_acknowledged_round(kind, fake_openai, tmp_path_factory, schedule, replies,
                                                     turns):
    """Two writers (tabs) take turns in one chat, each sending from the state it last saw, their
    steps interleaved in any order: every round either acknowledged (RoundCompleted) is stored in
    the root or a version, each turn whole in the session its writer ended in, and every stored
    history is one a strict OpenAI server accepts with each reply after its user message."""
    from tests.conftest import STORE_FACTORIES

    fake_openai.reset()
    fake_openai.push(*[{"tool_calls": [{"name": "list_files", "arguments": {}}]} if r == "tool" else
                       {"text": f"reply {i}"} for i, r in enumerate(replies)])
    base = tmp_path_factory.mktemp("interleave")
    (base / "ws").mkdir()
    store = STORE_FACTORIES[kind](base)
    try:
        manager = SessionManager(store)
        root = manager.create(base / "ws").key
        client = fake_openai.client()
        writers = [{"key": root, "seen": 0, "turns": n, "stream": None, "turn": None, "done": []}
                   for n in turns]
        titles = []

        def start(w, i):
            text = f"writer {i} turn {len(w['done'])}"
            w["stream"] = run_session_stream(w["key"], store, text, client=client, model=MODEL,
                                             expected_count=w["seen"], max_iterations=4)
            w["turn"] = {"user": text, "rounds": [], "acked_user": False}

        def step(w, i):
            if w["stream"] is None:
                if len(w["done"]) >= w["turns"]:
                    return False
                start(w, i)
            try:
                event = next(w["stream"])
            except StopIteration:
                w["done"].append(w["turn"])
                w["stream"] = None
                w["seen"] = len(manager.get(w["key"]).messages)  # the tab re-renders what is stored
                return True
            except SessionConflict:  # the user message itself was refused: the tab reloads
                assert not w["turn"]["acked_user"]
                w["stream"] = None
                w["seen"] = len(manager.get(w["key"]).messages)
                return True
            except Exception as err:  # noqa: BLE001 -- only a model running out of iterations is fine
                assert "iteration" in str(err).lower() or "steps" in str(err).lower(), err
                w["done"].append(w["turn"])
                w["stream"] = None
                w["seen"] = len(manager.get(w["key"]).messages)
                return True
            if isinstance(event, UserMessageSaved):
                w["turn"]["acked_user"] = True
            elif isinstance(event, ReplyKeptAsVersion):
                assert event.of == w["key"]
                w["key"] = event.key
            elif isinstance(event, RoundCompleted):
                w["turn"]["rounds"].append(event.messages)
            elif isinstance(event, TitleStarted):
                titles.append(event.thread)
            return True

        for who in schedule:
            step(writers[who], who)
        for i, w in enumerate(writers):  # let both finish what they started
            while step(w, i) and w["stream"] is not None:
                pass
        for t in titles:
            t.join(10)

        histories = family_histories(manager, root)
        for sid, history in histories.items():
            assert strict_problem(history) is None, (sid, history)
        for w in writers:
            final = manager.get(w["key"]).messages
            for turn in w["done"]:
                if not turn["acked_user"]:
                    continue
                whole = [{"role": "user", "content": turn["user"]}] + [m for r in turn["rounds"] for m in r]
                # Every acknowledged round is stored, in order, right after its turn's question, in
                # a session of the family; the writer's last turn in the session it ended in.
                assert any(_contains(h, whole) for h in histories.values()), (turn, histories)
            last = w["done"][-1] if w["done"] else None
            if last and last["acked_user"] and last["rounds"]:
                assert _contains(final, [{"role": "user", "content": last["user"]}]
                                 + [m for r in last["rounds"] for m in r])
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def _contains(history: list[dict], part: list[dict]) -> bool:
    n = len(part)
    return any(history[i:i + n] == part for i in range(len(history) - n + 1))


# --- two processes on one database -------------------------------------------------------------

WRITER_A = """
import os, sys, time
from core import SessionKey
from core.agent.runner import ReplyKeptAsVersion, UserMessageSaved, run_session_stream
from core.stores.factory import store_from_spec
import openai
spec, pk, sid, base_url, go = sys.argv[1:6]
store = store_from_spec(spec)
client = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
stream = run_session_stream(SessionKey(pk, sid), store, "question A", client=client, model="gpt-4o-mini",
                            expected_count=0)
for event in stream:
    if isinstance(event, UserMessageSaved):
        print("SAVED", flush=True)
        while not os.path.exists(go):
            time.sleep(0.01)
    if isinstance(event, ReplyKeptAsVersion):
        print("KEPT", event.key.session_id, event.number, event.count, flush=True)
print("DONE", flush=True)
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_on_one_database(kind, fake_openai, tmp_path):
    """Two app processes on one SQLite file / one PostgreSQL database: process A's reply is still
    coming when process B sends and gets its answer; A's reply is kept as version 2 of 2."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from core.stores.factory import store_from_spec

    if kind == "sqlite":
        spec = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        from tests.support.pg_server import fresh_database_url

        spec = fresh_database_url()
    store = store_from_spec(spec)
    try:
        (tmp_path / "ws").mkdir()
        manager = SessionManager(store)
        s = manager.create(tmp_path / "ws")
        go = tmp_path / "go"
        root = Path(__file__).resolve().parents[3]
        env = dict(os.environ, PYTHONPATH=str(root), ANYCODE_MEMORY="off", ANYCODE_APPROVAL="auto")
        a = subprocess.Popen([sys.executable, "-c", WRITER_A, spec, s.project_key, s.id, fake_openai.base_url,
                              str(go)], env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert a.stdout.readline().strip() == "SAVED"
            # Process B (this one) answers in the same chat meanwhile.
            run_session(s.key, store, "question B", client=fake_openai.client(), model=MODEL, expected_count=2,
                        wait_for_title=10)
            go.touch()
            out = a.stdout.read().split("\n")
            assert a.wait(60) == 0
        finally:
            a.kill()
        kept = next(line.split() for line in out if line.startswith("KEPT"))
        assert kept[2:] == ["2", "2"]
        root_messages = manager.get(s.key).messages
        assert [m["content"] for m in root_messages[1:]] == ["question A", "question B", "You said: question B"]
        version = manager.get(SessionKey(s.project_key, kept[1])).messages
        assert [m["content"] for m in version[1:]] == ["question A", "You said: question A"]
        for history in family_histories(manager, s.key).values():
            assert strict_problem(history) is None
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()
