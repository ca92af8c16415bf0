"""The session database going away mid-reply, with the SQL store as the primary store.

A real PostgreSQL server of this module's own (tests/support/pg_server.py) is killed while the web UI's
send handler streams a reply from the fake model over real HTTP, and started again. Guards
against what an outage used to do: an empty error, the streamed text vanishing, sends failing
the same way while it was down, and a false "changed elsewhere" conflict once it was back.
"""
from __future__ import annotations

import threading

import pytest

from core import SessionKey, SessionManager, StoreUnavailable
from core.agent import persist
from core.stores.sql_store import SqlSessionStore
from tests.support.pg_server import own_server
from webui.chat import handlers
from webui.chat.context import WebContext
from tests.support.storage import storage_of

REPLY = "Here is a long answer, streamed piece by piece so the database can die under it. " * 3


@pytest.fixture(scope="module")
def server():
    s = own_server()
    yield s
    s.stop()


@pytest.fixture
def store(server):
    # A fresh database each test: the server's maintenance database with its own schema.
    from tests.support.pg_server import _admin_exec
    import uuid
    from sqlalchemy.engine import make_url

    name = "outage_" + uuid.uuid4().hex[:12]
    _admin_exec(server.url, f'CREATE SCHEMA "{name}"')
    url = make_url(server.url).update_query_dict({"options": f"-csearch_path={name}"})
    made = SqlSessionStore(url.render_as_string(hide_password=False))
    yield made
    made.close()


@pytest.fixture
def ctx(store, tmp_path, fake_openai, monkeypatch):
    monkeypatch.setattr(persist, "RETRY_SECONDS", 1.0)  # give up on a dead database quickly
    project = tmp_path / "proj"
    project.mkdir()
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                      model_overrides={"api_key": "sk-test", "base_url": fake_openai.base_url,
                                       "max_retries": 0}, export_dir=tmp_path / "exports")


def send(ctx, state, text, *, on_stream=None):
    """Run one send to its end; ``on_stream(n)`` is called at the n-th streamed update."""
    updates = []
    for upd in handlers.send(ctx, state, text, None, "tab"):
        updates.append(upd)
        if on_stream is not None and not upd.done:
            on_stream(len(updates))
    assert updates[-1].done
    return updates


def texts(rows):
    return [r["content"] for r in rows or [] if isinstance(r.get("content"), str)]


@pytest.mark.slow
class TestDatabaseKilledMidReply:
    """PostgreSQL killed while a reply streams: the text stays, the error is a sentence, sends while
    it is down give the text back, and once it is back everything continues without a conflict."""

    def test_outage_then_recovery(self, ctx, server, fake_openai):
        first = send(ctx, handlers.tab_state(ctx.project_key), "hello")[-1]
        assert not first.error and first.notice is None
        fake_openai.push({"text": REPLY, "delay": 0.02, "chunk": 6})
        killed = []

        def kill_once(n):
            if n == 3 and not killed:  # a few pieces of the reply are on screen
                server.kill()
                killed.append(True)

        try:
            end = send(ctx, first.state, "tell me more", on_stream=kill_once)[-1]
            assert killed
            # The reply stays on screen under a readable error, not an empty one.
            shown = texts(end.rows)
            assert REPLY in shown and "tell me more" in shown
            assert end.error and shown[-1].startswith("\u26a0 The session database is unreachable")
            key = SessionKey(first.state["project"], first.state["session"])
            assert key in ctx.unsaved  # kept to be stored when the database is back

            # A send while it is down: refused with the sentence, the text given back, chat kept.
            down = send(ctx, end.state, "are you there?")[-1]
            assert down.notice.startswith("The session database is unreachable")
            assert down.restore_text == "are you there?" and down.rows is None
        finally:
            server.restart()

        # Back: the same store reconnects by itself; the first send is not a false conflict, and
        # the reply that could not be saved is stored before the new message.
        fake_openai.push({"text": "Yes, back."})
        back = send(ctx, end.state, "are you there?")[-1]
        assert back.notice is None and not back.error, back.notice
        stored = [m["content"] for m in ctx.manager.get(key).messages if m["role"] != "system"]
        assert stored == ["hello", "You said: hello", "tell me more", REPLY, "are you there?", "Yes, back."]
        assert key not in ctx.unsaved

    def test_database_back_within_the_retry_window(self, ctx, server, fake_openai, monkeypatch):
        """A short outage: the reply's save is retried (and checked) until the database is back."""
        monkeypatch.setattr(persist, "RETRY_SECONDS", 60.0)
        first = send(ctx, handlers.tab_state(ctx.project_key), "hello")[-1]
        fake_openai.push({"text": REPLY, "delay": 0.02, "chunk": 6})
        restart: list[threading.Timer] = []

        def kill_and_restart(n):
            if n == 3 and not restart:
                server.kill()
                restart.append(threading.Timer(1.0, server.restart))
                restart[0].start()

        end = send(ctx, first.state, "again", on_stream=kill_and_restart)[-1]
        restart[0].join(timeout=120)
        assert not end.error and end.notice is None
        stored = [m["content"] for m in ctx.manager.get(SessionKey(first.state["project"],
                                                                   first.state["session"])).messages]
        assert stored[-2:] == ["again", REPLY]
        assert end.state["count"] == len(stored)


class TestUnknownOutcome:
    """A write whose connection died after the database committed: checked, never written twice
    and never taken for someone else's write."""

    def test_committed_but_reported_failed_is_not_repeated(self, tmp_path):
        store = SqlSessionStore(f"sqlite:///{tmp_path / 's.db'}")
        mgr = SessionManager(store)
        s = mgr.create(tmp_path)
        mgr.add_messages(s.key, [{"role": "user", "content": "q"}])
        real = store.append
        calls = []

        def commit_then_lose_the_answer(key, entries, **kw):
            calls.append(kw)
            count = real(key, entries, **kw)
            if len(calls) == 1:
                raise StoreUnavailable("The session database is unreachable (connection lost).")
            return count

        store.append = commit_then_lose_the_answer
        reply = [{"role": "assistant", "content": "a"}]
        assert persist.store_messages(mgr, s.key, reply, saved_count=1, expected_count=1,
                                      retry_seconds=5) == 2
        assert len(calls) == 1  # checked by reading, not written again
        assert [m["content"] for m in mgr.get(s.key).messages] == ["q", "a"]

    def test_not_committed_is_written_exactly_once(self, tmp_path):
        store = SqlSessionStore(f"sqlite:///{tmp_path / 's.db'}")
        mgr = SessionManager(store)
        s = mgr.create(tmp_path)
        real = store.append
        calls = []

        def fail_first(key, entries, **kw):
            calls.append(kw)
            if len(calls) == 1:
                raise StoreUnavailable("The session database is unreachable (refused).")
            return real(key, entries, **kw)

        store.append = fail_first
        assert persist.store_messages(mgr, s.key, [{"role": "user", "content": "x"}], saved_count=0,
                                      retry_seconds=5) == 1
        assert calls[1] == {"expected_count": 0}  # the repeat is guarded against double writes
        assert [m["content"] for m in mgr.get(s.key).messages] == ["x"]
