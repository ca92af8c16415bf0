"""One writer, one append per round: a turn stores each round — its messages, the usage of the
request it made, the checkpoint of the files it changed, the approval it paused on — in ONE append
(one lock, one fsync, one outbox item on a mirrored store), and counts each model request's
tokens exactly once. Over real HTTP to the fake OpenAI server, on a real JSONL store and a real
SQLite mirror."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager
from core.agent import approval as ap
from core.agent.events import RoundCompleted, TitleStarted, UserMessageSaved
from core.agent.runner import run_session_stream
from core.session.keys import SessionKey
from core.stores.mirror import MirroredSessionStore
from core.stores.sql_store import SqlSessionStore
from tests.support.fake_openai import count_tokens
from tests.support.stores import make_project

MODEL = "gpt-4o-mini"
WRITE = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "new\ntext\n"}, "id": "call_w"}


class CountingStore(LocalSessionStore):
    """A JSONL store that remembers every append made to it: the entry types of each, by key."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.appends: list[tuple[SessionKey, list[str]]] = []

    def append(self, key, entries, **kwargs):
        self.appends.append((key, [e.get("type") for e in entries]))
        return super().append(key, entries, **kwargs)


@pytest.fixture(autouse=True)
def quiet_jobs(monkeypatch):
    # The memory job writes its own log, not the session; off, so nothing else talks to the server.
    monkeypatch.setenv("ANYCODE_MEMORY", "off")


@pytest.fixture
def workspace(tmp_path):
    return make_project(tmp_path / "project", {"notes.txt": "old\ntext\n"})


def turn(sessions, key, text, client, on_event=lambda event: None, **options):
    """Run a turn to its end, calling ``on_event`` for each event; the events."""
    events = []
    for event in run_session_stream(key, sessions, text, client=client, model=MODEL, **options):
        on_event(event)
        events.append(event)
        if isinstance(event, TitleStarted):
            event.thread.join(10)
    return events


def usage_entries(store, key):
    return [e for e in store.load(key) if e.get("type") == "usage"]


class TestARoundIsOneAppend:
    """Guards against a round stored in parts (messages, then its checkpoint, then its usage, then
    its approval): each part took the session lock, an fsync and a mirror copy of its own, and a
    crash between them kept a reply without its checkpoint or the approval it waits for."""

    def test_a_tool_round_with_usage_and_checkpoint_is_one_append(self, fake_openai, tmp_path, workspace,
                                                                  monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
        store = CountingStore(tmp_path / "home")
        manager = SessionManager(store)
        key = manager.create(workspace, title="Notes").key  # titled: no title job writes meanwhile
        fake_openai.push({"tool_calls": [WRITE]}, {"text": "Updated the notes."})
        marks = []
        turn(manager, key, "update the notes", fake_openai.client(),
             lambda e: marks.append(len(store.appends)) if isinstance(e, (UserMessageSaved, RoundCompleted)) else None)

        assert (workspace / "notes.txt").read_text() == "new\ntext\n"
        start = marks[0] - 1  # the append of the user's message
        assert [b - a for a, b in zip([start, *marks], marks)] == [1, 1, 1]  # opening, tool round, answer
        tool_round = store.appends[marks[1] - 1]
        assert tool_round == (key, ["message", "message", "usage", "checkpoint"])
        assert store.appends[marks[2] - 1] == (key, ["message", "usage"])
        assert len(store.appends) == marks[-1]  # nothing written after the last round
        # what the one append holds is what a rewind and the usage totals read
        entries = store.load(key)
        [cp] = [e for e in entries if e.get("type") == "checkpoint"]
        assert cp["at"] == 4 and [f["path"] for f in cp["files"]] == ["notes.txt"]
        assert [u["at"] for u in usage_entries(store, key)] == [4, 5]

    def test_a_round_paused_on_an_approval_is_one_append(self, fake_openai, tmp_path, workspace, monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "ask")
        store = CountingStore(tmp_path / "home")
        manager = SessionManager(store)
        key = manager.create(workspace, title="Notes").key
        fake_openai.push({"tool_calls": [WRITE]})
        before = len(store.appends)
        turn(manager, key, "update the notes", fake_openai.client())
        # the opening (system prompt and message), then the round with its usage and its request
        assert store.appends[before:] == [(key, ["message", "message"]), (key, ["message", "usage", "approval"])]
        assert [p.call_id for p in ap.ApprovalState.from_entries(store.load(key)).pending()] == ["call_w"]

    def test_a_round_on_a_mirrored_store_is_one_outbox_item(self, fake_openai, tmp_path, workspace, monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
        mirror = SqlSessionStore(f"sqlite:///{tmp_path / 'mirror.db'}", fsync=False)
        # start=False: nothing is delivered, so every queued copy stays in the outbox to be counted
        store = MirroredSessionStore(LocalSessionStore(tmp_path / "home"), mirror,
                                     outbox_path=tmp_path / "outbox.sqlite3", start=False)
        try:
            manager = SessionManager(store)
            key = manager.create(workspace, title="Notes").key
            fake_openai.push({"tool_calls": [WRITE]}, {"text": "Updated the notes."})
            items = []
            turn(manager, key, "update the notes", fake_openai.client(),
                 lambda e: items.append(store.outbox.pending()[0]) if isinstance(e, (UserMessageSaved, RoundCompleted))
                 else None)
            assert [b - a for a, b in zip(items, items[1:])] == [1, 1]  # one copy per round
            assert store.outbox.pending()[0] == items[-1]
            kinds = [e.get("type") for e in store.load(key)]
            assert kinds.count("checkpoint") == 1 and kinds.count("usage") == 2
        finally:
            store.close()
            mirror.close()


class TestOneUsageEntryPerRequest:
    """Guards against a chat's token totals that count one request twice (a task round stored in
    two parts) or count a request never made (a round resumed after an approval): each request
    the chat made has exactly one usage entry, with the server's figures for it."""

    def expected(self, fake_openai):
        """The server's prompt_tokens of each chat request, in order (how the fake counts them)."""
        return [max(1, count_tokens(body)) for body in fake_openai.chat_requests("chat")]

    def test_a_task_round_counts_its_request_once(self, fake_openai, tmp_path, workspace, monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
        store = LocalSessionStore(tmp_path / "home")
        key = SessionManager(store).create(workspace, title="Survey").key
        fake_openai.push({"tool_calls": [{"name": "task", "id": "call_t",
                                          "arguments": {"description": "Read notes", "prompt": "Read notes.txt."}}]},
                         {"text": "The notes say old text."})
        fake_openai.push({"text": "notes.txt says: old text"}, kind="subagent")
        turn(store, key, "what do the notes say?", fake_openai.client())

        usage = usage_entries(store, key)
        assert len(fake_openai.chat_requests("chat")) == 2
        assert [u["prompt_tokens"] for u in usage] == self.expected(fake_openai)
        assert not any(u["estimated"] for u in usage)
        assert SessionManager(store).get(key).usage.replies == 2

    def test_a_round_resumed_after_an_approval_records_no_request_it_did_not_make(self, fake_openai, tmp_path,
                                                                                  workspace, monkeypatch):
        monkeypatch.setenv("ANYCODE_APPROVAL", "ask")
        store = LocalSessionStore(tmp_path / "home")
        manager = SessionManager(store)
        key = manager.create(workspace, title="Notes").key
        fake_openai.push({"tool_calls": [WRITE]})
        turn(manager, key, "update the notes", fake_openai.client())
        manager.add_approval(key, ap.decision_entry("call_w", True))
        fake_openai.push({"text": "Notes updated."})
        policy = ap.ApprovalPolicy(decisions={"call_w": ap.Decision(True)})
        turn(manager, key, None, fake_openai.client(), approval=policy)

        assert (workspace / "notes.txt").read_text() == "new\ntext\n"
        usage = usage_entries(store, key)
        assert len(fake_openai.chat_requests("chat")) == 2
        assert [u["prompt_tokens"] for u in usage] == self.expected(fake_openai)
        assert not any(u["estimated"] for u in usage)
        # each entry sits at its reply: the call's round, then the answer after the tool result
        assert [u["at"] for u in usage] == [3, 5]
