"""run_session: per-round persistence, crash/kill resume, Stop, and repaired histories, over real HTTP."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from core import LocalSessionStore, SessionManager
from core.agent.events import RoundCompleted, TextDelta, TitleStarted, ToolCallStarted, UserMessageSaved
from core.session.entries import message_entry
from core.errors import ModelAuthError, ModelNotConfigured, ModelServerError, SessionConflict
from core.agent.repair import INTERRUPTED_RESULT, closing_results, prepare_request
from core.agent.runner import run_session, run_session_stream
from tests.support.stores import make_project, session  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[3]
MODEL = "gpt-4o-mini"


@pytest.fixture(autouse=True)
def no_approval(monkeypatch):
    """These tests are about persistence: side-effect tools run without asking (approval has
    its own tests in tests/core/agent/test_approval.py)."""
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def store(home):
    return LocalSessionStore(home)


@pytest.fixture
def workspace(tmp_path):
    return make_project(tmp_path / "project", {"app.py": "print('app')\n"})


def drain(stream):
    """Consume a runner stream, waiting for the background title so it cannot leak into another test."""
    events = []
    for event in stream:
        events.append(event)
        if isinstance(event, TitleStarted):
            event.thread.join(10)
    return events


def stored(store, key):
    return SessionManager(store).get(key).messages


class TestPerRoundPersistence:
    """Guards against losing acknowledged work: each round must be on disk before the next begins."""

    def test_each_round_is_stored_when_it_completes(self, fake_openai, store, session, workspace):
        fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}]},
                         {"tool_calls": [{"name": "list_files", "arguments": {}}]},
                         {"text": "Created a.txt."})
        counts = []
        for event in run_session_stream(session.key, store, "make a.txt", client=fake_openai.client(), model=MODEL):
            if isinstance(event, UserMessageSaved):
                assert [m["role"] for m in stored(store, session.key)] == ["system", "user"]
                assert event.message_count == 2
            if isinstance(event, RoundCompleted):
                # the round is already on disk when the caller hears of it
                on_disk = stored(store, session.key)
                assert on_disk[-len(event.messages):] == event.messages
                counts.append(len(on_disk))
            if isinstance(event, TitleStarted):
                event.thread.join(10)
        assert counts == [4, 6, 7]
        messages = stored(store, session.key)
        assert messages[0]["role"] == "system" and str(workspace) in messages[0]["content"]
        assert messages[1] == {"role": "user", "content": "make a.txt"}
        assert (workspace / "a.txt").read_text() == "A"

    def test_system_message_only_once_and_history_resent(self, fake_openai, store, session):
        client = fake_openai.client()
        drain(run_session_stream(session.key, store, "first", client=client, model=MODEL))
        drain(run_session_stream(session.key, store, "second", client=client, model=MODEL))
        messages = stored(store, session.key)
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant"]
        assert fake_openai.chat_requests()[1]["messages"] == messages[:4]
        assert SessionManager(store).create(session.cwd).messages == []  # create adds no messages

    def test_user_message_kept_when_model_fails_then_retry(self, fake_openai, store, session):
        fake_openai.push({"error": 500})
        with pytest.raises(ModelServerError):
            drain(run_session_stream(session.key, store, "important question", client=fake_openai.client(),
                                     model=MODEL))
        assert stored(store, session.key)[-1] == {"role": "user", "content": "important question"}
        result = run_session(session.key, store, None, client=fake_openai.client(), model=MODEL, wait_for_title=10)
        assert result.messages[-1] == {"role": "assistant", "content": "You said: important question"}
        assert [m["role"] for m in result.messages] == ["system", "user", "assistant"]

    def test_no_client_saves_message_then_not_configured(self, store, session):
        stream = run_session_stream(session.key, store, "hello?", client=None, model=MODEL)
        assert isinstance(next(stream), UserMessageSaved)
        with pytest.raises(ModelNotConfigured, match="OPENAI_API_KEY"):
            next(stream)
        assert stored(store, session.key)[-1] == {"role": "user", "content": "hello?"}

    def test_a_failed_turn_keeps_why_with_secrets_hidden(self, fake_openai, store, session):
        # Trial: after a reload only "No reply was saved" remained; the session now keeps the
        # reason (an appended reply_error entry), never the key a server echoed.
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]},
                         {"error": 401, "message": "Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrSt1234."})
        with pytest.raises(ModelAuthError):
            drain(run_session_stream(session.key, store, "list them", client=fake_openai.client(), model=MODEL))
        got = SessionManager(store).get(session.key)
        assert [m["role"] for m in got.messages] == ["system", "user", "assistant", "tool"]
        err = got.reply_error
        assert err["at"] == 4 and err["error"] == "ModelAuthError" and err["status"] == 401
        assert err["detail"] == "Incorrect API key provided: [hidden]." and "HTTP 401" in err["reason"]
        assert "AbCdEfGh" not in str(store.load(session.key))
        result = run_session(session.key, store, None, client=fake_openai.client(), model=MODEL, wait_for_title=10)
        assert result.reply_error is None  # answered now: the reason is history

    def test_no_client_keeps_why_and_a_partial_reply_needs_no_reason(self, fake_openai, store, session):
        with pytest.raises(ModelNotConfigured):
            drain(run_session_stream(session.key, store, "hello?", client=None, model=MODEL))
        assert SessionManager(store).get(session.key).reply_error["error"] == "ModelNotConfigured"
        fake_openai.push({"text": "Half of an ans", "drop_after": 2})
        with pytest.raises(ModelServerError):
            drain(run_session_stream(session.key, store, "again", client=fake_openai.client(), model=MODEL))
        got = SessionManager(store).get(session.key)
        assert got.messages[-1]["role"] == "assistant" and got.reply_error is None

    def test_expected_count_conflict(self, fake_openai, store, session):
        client = fake_openai.client()
        drain(run_session_stream(session.key, store, "one", client=client, model=MODEL, expected_count=0))
        with pytest.raises(SessionConflict):
            drain(run_session_stream(session.key, store, "stale tab", client=client, model=MODEL, expected_count=0))
        assert [m["content"] for m in stored(store, session.key) if m["role"] == "user"] == ["one"]
        drain(run_session_stream(session.key, store, "fresh tab", client=client, model=MODEL, expected_count=3))
        assert stored(store, session.key)[-2] == {"role": "user", "content": "fresh tab"}

    def test_empty_input_refused(self, fake_openai, store, session):
        with pytest.raises(ValueError):
            drain(run_session_stream(session.key, store, "   ", client=fake_openai.client(), model=MODEL))
        assert stored(store, session.key) == []


CHILD = textwrap.dedent("""
    import sys
    from core import LocalSessionStore, SessionKey
    from core.agent.events import RoundCompleted, TextDelta
    from core.agent.runner import run_session_stream
    import openai
    base_url, home, project, sid = sys.argv[1:5]
    client = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0, timeout=30)
    store = LocalSessionStore(home)
    for event in run_session_stream(SessionKey(project, sid), store, "build it", client=client,
                                    model="gpt-4o-mini"):
        if isinstance(event, RoundCompleted):
            print("ROUND", len(event.messages), flush=True)
        elif isinstance(event, TextDelta):
            print("DELTA", flush=True)
""")


@pytest.mark.slow
class TestKillAndResume:
    """Guards against a killed process losing acknowledged rounds or leaving a history the API rejects."""

    def test_sigkill_between_rounds_then_resume(self, fake_openai, store, session, workspace, home):
        fake_openai.push(
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "A"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "B"}},
                            {"name": "list_files", "arguments": {}}]},
            {"text": "All done, " * 500, "delay": 0.05},  # round 3 streams slowly: killed in flight
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, fake_openai.base_url, str(home), session.key.project_key,
             session.key.session_id],
            cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        acknowledged = 0
        try:
            for line in proc.stdout:
                if line.startswith("ROUND"):
                    acknowledged += 1
                if acknowledged == 2 and line.startswith("DELTA"):
                    break  # round 3 is streaming
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL and acknowledged == 2

        messages = stored(store, session.key)
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
        assert (workspace / "a.txt").read_text() == "A" and (workspace / "b.txt").read_text() == "B"

        fake_openai.push({"text": "Resumed fine."})
        result = run_session(session.key, store, "are you there?", client=fake_openai.client(), model=MODEL,
                             wait_for_title=10)
        assert result.messages[:7] == messages
        assert result.messages[7:] == [{"role": "user", "content": "are you there?"},
                                       {"role": "assistant", "content": "Resumed fine."}]
        assert fake_openai.chat_requests()[-1]["messages"] == result.messages[:8]


class TestStopAndResume:
    """Guards against Stop losing the text the user saw, or leaving the next request invalid."""

    def test_cancel_mid_stream_keeps_partial_then_resume(self, fake_openai, store, session):
        fake_openai.push({"text": "Here is a long story. " * 100, "delay": 0.01})
        cancel = threading.Event()
        seen = ""
        for event in run_session_stream(session.key, store, "tell a story", client=fake_openai.client(),
                                        model=MODEL, cancel=cancel):
            if isinstance(event, TextDelta):
                seen += event.text
                if len(seen) > 20:
                    cancel.set()
            if isinstance(event, TitleStarted):
                event.thread.join(10)
        messages = stored(store, session.key)
        assert messages[-1] == {"role": "assistant", "content": seen}
        assert 20 < len(seen) < 200
        drain(run_session_stream(session.key, store, "go on", client=fake_openai.client(), model=MODEL))
        sent = fake_openai.chat_requests()[-1]["messages"]
        assert sent[-2] == {"role": "assistant", "content": seen} and sent[-1]["content"] == "go on"

    def test_generator_closed_mid_stream_keeps_partial(self, fake_openai, store, session):
        fake_openai.push({"text": "abcdefghij" * 50, "delay": 0.01})
        stream = run_session_stream(session.key, store, "letters", client=fake_openai.client(), model=MODEL)
        seen = ""
        for event in stream:
            if isinstance(event, TextDelta):
                seen += event.text
                if len(seen) >= 12:
                    break
        stream.close()  # what a UI does when the user presses Stop
        assert stored(store, session.key)[-1] == {"role": "assistant", "content": seen}

    def test_stop_while_tool_runs_then_resume(self, fake_openai, store, session, workspace):
        fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}, "id": "call_a"},
                                         {"name": "read_file", "arguments": {"path": "app.py"}, "id": "call_b"}]})
        stream = run_session_stream(session.key, store, "look around", client=fake_openai.client(), model=MODEL)
        for event in stream:
            if isinstance(event, ToolCallStarted):
                break
        stream.close()
        tail = stored(store, session.key)[-3:]
        assert tail[0]["role"] == "assistant" and [c["id"] for c in tail[0]["tool_calls"]] == ["call_a", "call_b"]
        assert tail[1:] == [{"role": "tool", "tool_call_id": "call_a", "content": INTERRUPTED_RESULT},
                            {"role": "tool", "tool_call_id": "call_b", "content": INTERRUPTED_RESULT}]
        result = run_session(session.key, store, "try again", client=fake_openai.client(), model=MODEL,
                             wait_for_title=10)
        assert result.messages[-1] == {"role": "assistant", "content": "You said: try again"}

    def test_server_drop_mid_reply_keeps_partial_text(self, fake_openai, store, session):
        fake_openai.push({"text": "Half an answer and then", "chunk": 4, "drop_after": 4})
        with pytest.raises(ModelServerError):
            drain(run_session_stream(session.key, store, "q", client=fake_openai.client(), model=MODEL))
        last = stored(store, session.key)[-1]
        assert last["role"] == "assistant" and "Half an answer and then".startswith(last["content"])
        assert last["content"]


def write_raw(store, key, messages):
    """Append messages to the store as they are, the way a torn write or a hand edit leaves them."""
    store.append(key, [message_entry(m) for m in messages])


class TestDamagedHistories:
    """Guards against a stored history with unanswered or orphan tool calls making every next request fail."""

    CALL = {"id": "call_x", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}

    def test_dangling_call_at_tail_is_closed_by_appending(self, fake_openai, store, session, home):
        write_raw(store, session.key, [{"role": "system", "content": "s"}, {"role": "user", "content": "list"},
                                       {"role": "assistant", "content": None, "tool_calls": [self.CALL]}])
        path = next(home.rglob(f"{session.key.session_id}.jsonl"))
        before = path.read_bytes()
        result = run_session(session.key, store, "hello again", client=fake_openai.client(), model=MODEL,
                             wait_for_title=10)
        assert path.read_bytes().startswith(before)  # appended, never rewritten
        assert result.messages[3] == {"role": "tool", "tool_call_id": "call_x", "content": INTERRUPTED_RESULT}
        assert result.messages[4] == {"role": "user", "content": "hello again"}
        assert result.messages[-1]["content"] == "You said: hello again"

    def test_dangling_call_in_middle_and_orphan_result_fixed_in_request_only(self, fake_openai, store, session,
                                                                              home):
        history = [
            {"role": "system", "content": "s"}, {"role": "user", "content": "one"},
            {"role": "assistant", "content": None, "tool_calls": [self.CALL]},
            {"role": "user", "content": "two"},                                   # call_x never answered
            {"role": "tool", "tool_call_id": "call_lost", "content": "orphan"},   # its call line was damaged
            {"role": "assistant", "content": "ok", "extra_key": "from a hand edit"},
        ]
        write_raw(store, session.key, history)
        path = next(home.rglob(f"{session.key.session_id}.jsonl"))
        before = path.read_bytes()
        result = run_session(session.key, store, "three", client=fake_openai.client(), model=MODEL,
                             wait_for_title=10)
        assert path.read_bytes().startswith(before)
        assert result.messages[:6] == history  # the file keeps what it had
        sent = fake_openai.chat_requests()[-1]["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user", "assistant", "user"]
        assert sent[3]["tool_call_id"] == "call_x"
        assert "extra_key" not in sent[5]

    def test_lone_surrogate_in_history_is_sent_as_replacement_char(self, fake_openai, store, session):
        write_raw(store, session.key, [{"role": "system", "content": "s"},
                                       {"role": "user", "content": "bytes: \udcff"},
                                       {"role": "assistant", "content": "seen"}])
        drain(run_session_stream(session.key, store, "and \ud800 this", client=fake_openai.client(), model=MODEL))
        sent = fake_openai.chat_requests()[-1]["messages"]
        assert sent[1]["content"] == "bytes: \ufffd" and sent[3]["content"] == "and \ufffd this"


_ids = st.sampled_from(["c1", "c2", "c3"])
_call = st.fixed_dictionaries({"id": _ids, "type": st.just("function"),
                               "function": st.fixed_dictionaries({"name": st.sampled_from(["list_files", "read_file"]),
                                                                  "arguments": st.just("{}")})})
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": st.text(max_size=5)}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.one_of(st.none(), st.text(max_size=5))},
                          optional={"tool_calls": st.lists(_call, max_size=3), "ts": st.floats()}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": _ids, "content": st.text(max_size=5)}),
    st.fixed_dictionaries({"role": st.sampled_from(["function", "bot"]), "content": st.text(max_size=5)}),
    st.just({"content": "no role"}),
)


class TestAnyHistoryGivesValidRequest:
    """Guards against any damaged stored history (torn writes, skipped lines, hand edits) producing a request
    the API rejects: after appending closing_results, prepare_request must always pass the strict validator."""

    @settings(max_examples=400, deadline=None)
    @given(st.lists(_message, max_size=12))
    def test_property(self, history):
        from tests.support.fake_openai import validate_chat_request

        healed = history + closing_results(history)
        request = prepare_request(healed + [{"role": "user", "content": "next"}])
        validate_chat_request({"model": "m", "messages": request})
        # messages that were fine are kept, in order
        users = [m["content"] for m in history if m.get("role") == "user"]
        assert [m["content"] for m in request if m["role"] == "user"][:-1] == users
