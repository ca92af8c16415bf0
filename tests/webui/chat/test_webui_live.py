"""Other writers seen live in the web UI's handlers (issue 25): a Send in a chat whose reply is
being written in another tab waits for it and then goes after it (Stop ends the wait), the other
tab's page is told "A reply is being written in another tab or window", and the list's change
check notices chats another process created."""
from __future__ import annotations

import threading
import time

from core.session.keys import SessionKey
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from tests.core.agent.test_two_writers import strict_problem
from tests.support.chat_ctx import make_ctx, project  # noqa: F401 (fixtures)
from tests.webui.chat.test_webui_handlers import seeded
from webui.chat import handlers, live


def _ctx(tmp_path, project, fake_openai):
    store = LocalSessionStore(tmp_path / "data")
    return make_ctx(store, project, api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)


def _stream_a(ctx, state, fake_openai):
    """Tab A's send, its reply streaming slowly; returns the generator once text is on screen."""
    fake_openai.push({"text": "slow " * 60, "chunk": 5, "delay": 0.02})
    gen = handlers.send(ctx, state, "question A", None, "tab-a")
    for upd in gen:
        if any("slow" in str(r.get("content")) for r in upd.rows or []):
            return gen
    raise AssertionError("tab A's reply never started")


def test_send_waits_for_the_other_tabs_reply_then_goes_after_it(tmp_path, project, fake_openai):
    ctx = _ctx(tmp_path, project, fake_openai)
    s = seeded(ctx)
    view_a = handlers.open_session(ctx, ctx.project_key, s.id)
    view_b = handlers.open_session(ctx, ctx.project_key, s.id)
    gen_a = _stream_a(ctx, view_a.state, fake_openai)
    # Tab B's page learns that a reply is being written (tab A's page does not).
    assert live.check(ctx, view_b.state, "tab-b", None).other_writing
    assert not live.check(ctx, view_a.state, "tab-a", None).other_writing
    updates_b: list = []
    b = threading.Thread(target=lambda: updates_b.extend(handlers.send(ctx, view_b.state, "question B", None,
                                                                       "tab-b")))
    b.start()
    deadline = time.monotonic() + 10
    while not any("another tab or window" in str(r.get("content")) for u in updates_b for r in u.rows or []):
        assert time.monotonic() < deadline, "tab B shows why its message waits"
        time.sleep(0.02)
    stored = ctx.manager.get(s.key).messages
    assert stored[-1] == {"role": "user", "content": "question A"}, "B has not raced A"
    final_a = list(gen_a)[-1]
    b.join(30)
    final_b = updates_b[-1]
    assert final_a.notice is None and final_b.notice is None, "nobody lost a race"
    stored = ctx.manager.get(s.key).messages
    assert [m["content"] for m in stored[-4:]] == ["question A", "slow " * 60, "question B", "You said: question B"]
    assert strict_problem(stored) is None
    assert len(ctx.manager.family(s.key)) == 1, "no version needed: B waited"
    assert not live.check(ctx, view_b.state, "tab-b", None).other_writing


def test_stop_ends_the_wait_and_gives_the_text_back(tmp_path, project, fake_openai):
    ctx = _ctx(tmp_path, project, fake_openai)
    s = seeded(ctx)
    view_a = handlers.open_session(ctx, ctx.project_key, s.id)
    view_b = handlers.open_session(ctx, ctx.project_key, s.id)
    gen_a = _stream_a(ctx, view_a.state, fake_openai)
    updates_b: list = []
    b = threading.Thread(target=lambda: updates_b.extend(handlers.send(ctx, view_b.state, "never sent", None,
                                                                       "tab-b")))
    b.start()
    deadline = time.monotonic() + 10
    while len(updates_b) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert handlers.stop(ctx, "tab-b")
    b.join(10)
    assert not b.is_alive(), "Stop ended the wait at once"
    final_b = updates_b[-1]
    assert final_b.done and final_b.restore_text == "never sent"
    assert "stopped waiting" in final_b.notice
    list(gen_a)
    stored = ctx.manager.get(s.key).messages
    assert not any(m.get("content") == "never sent" for m in stored)


def test_list_check_sees_a_chat_another_process_made(tmp_path, project, fake_openai):
    ctx = _ctx(tmp_path, project, fake_openai)
    view = handlers.new_chat(ctx)
    first = live.check(ctx, view.state, "tab-a", None)
    assert not first.list_changed
    assert not live.check(ctx, view.state, "tab-a", first.token).list_changed
    other = SessionManager(LocalSessionStore(tmp_path / "data"))  # another process's store object
    made = other.create(project, title="Made elsewhere")
    changed = live.check(ctx, view.state, "tab-a", first.token)
    assert changed.list_changed and changed.token != first.token
    assert "Made elsewhere" in handlers.session_list_html(ctx, ctx.project_key)
    other.rename(made.key, "Renamed elsewhere")
    assert live.check(ctx, view.state, "tab-a", changed.token).list_changed


def test_the_other_tabs_reply_shown_by_the_check_is_what_the_next_send_follows(tmp_path, project, fake_openai):
    """Tab A's page shows tab B's reply once it is done (no reload); A's next message then goes
    after it, not refused as "changed elsewhere" because of A's own older run."""
    ctx = _ctx(tmp_path, project, fake_openai)
    s = seeded(ctx)
    a = handlers.open_session(ctx, ctx.project_key, s.id)
    final_a = list(handlers.send(ctx, a.state, "from A", None, "tab-a"))[-1]
    b = handlers.open_session(ctx, ctx.project_key, s.id)
    list(handlers.send(ctx, b.state, "from B", None, "tab-b"))
    view = live.refreshed(ctx, final_a.state, "tab-a")
    assert view.rows[-1]["content"] and "from B" in view.rows[-1]["content"]
    run_id, _ = handlers.take(ctx, "tab-a", "A again")  # as the page sends: the tab's runs count
    again = list(handlers.send_taken(ctx, view.state, "tab-a", run_id, None))[-1]
    assert again.notice is None
    assert [m["content"] for m in ctx.manager.get(s.key).messages][-2:] == ["A again", "You said: A again"]


def test_a_reply_written_elsewhere_between_two_checks_is_seen(tmp_path, project, fake_openai):
    """Guards against the fresh-user trial's tab A that never showed tab B's message: B's fast
    reply held its lease between two of A's checks, so A only saw the list token move (and drew
    the list again), never the chat. The open chat is now behind the store, and says so once."""
    ctx = _ctx(tmp_path, project, fake_openai)
    s = seeded(ctx)
    a = handlers.open_session(ctx, ctx.project_key, s.id)
    b = handlers.open_session(ctx, ctx.project_key, s.id)
    token = live.check(ctx, a.state, "tab-a", None).token
    assert not live.behind(ctx, a.state, "tab-a")
    final_b = list(handlers.send(ctx, b.state, "from B", None, "tab-b"))[-1]
    found = live.check(ctx, a.state, "tab-a", token)
    assert found.list_changed and not found.other_writing  # the lease came and went unseen
    assert live.behind(ctx, a.state, "tab-a"), "A's chat is behind: the page re-reads it"
    assert not live.behind(ctx, final_b.state, "tab-b"), "B shows what it wrote"
    view = live.refreshed(ctx, a.state, "tab-a")
    assert "from B" in str(view.rows[-1]["content"])
    assert not live.behind(ctx, view.state, "tab-a"), "once shown, nothing more to re-read"
    assert not live.behind(ctx, None, "tab-a") and not live.behind(ctx, {"project": ctx.project_key}, "tab-a")


class TestLeftChatNotRepainted:
    """Guards against the chat a tab just left coming back over the one it opened (CI, stop 36:
    New chat clicked while a reply streamed, and the once-a-second check, sent by the page with
    its state from before the switch's answer, found the left chat behind the store, since its
    stopped reply had just been stored, and re-read it into the emptied pane)."""

    def test_a_state_sent_before_the_switch_answered_is_not_refreshed(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        gen = _stream_a(ctx, view.state, fake_openai)
        shown = None  # the tab's state as the page last had it, mid-reply
        consumer = threading.Thread(target=lambda: list(gen))
        for upd in gen:
            shown = upd.state
            break
        consumer.start()
        handlers.leave(ctx, "tab-a")  # New chat: the reply stops, its partial text is stored
        consumer.join(10)
        assert ctx.manager.get(s.key).messages[-1]["role"] == "assistant", "the partial reply is stored"
        assert live.behind(ctx, shown, "tab-a") is False
        assert live.refreshed(ctx, shown, "tab-a") is None, "the left chat is not drawn again"
        # Opened again (a click in the sidebar), the chat is followed as usual: another tab's
        # reply there is re-read into this tab.
        again = handlers.open_session(ctx, ctx.project_key, s.id)
        assert not ctx.stale_view("tab-a", again.state)
        b = handlers.open_session(ctx, ctx.project_key, s.id)
        list(handlers.send(ctx, b.state, "from B", None, "tab-b"))
        assert live.behind(ctx, again.state, "tab-a")
        assert "from B" in str(live.refreshed(ctx, again.state, "tab-a").rows[-1]["content"])

    def test_a_stale_state_is_followed_again_after_a_moment(self, tmp_path, project, fake_openai, monkeypatch):
        """A state wrongly taken for stale must not blind the tab for good (CI, stop 37: the
        tab ignored every check of its chat, a deletion elsewhere included)."""
        from webui.chat import context

        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        gen = _stream_a(ctx, view.state, fake_openai)
        shown = next(gen).state
        consumer = threading.Thread(target=lambda: list(gen))
        consumer.start()
        handlers.leave(ctx, "tab-a")
        consumer.join(10)
        assert ctx.stale_view("tab-a", shown)
        monkeypatch.setattr(context, "STALE_SECONDS", 0.0)
        time.sleep(0.01)
        assert not ctx.stale_view("tab-a", shown)
        assert live.behind(ctx, shown, "tab-a"), "followed again: the stored reply is re-read"


class TestDeletedCheckStopsNoNewReply:
    """Guards against CI stop 37: tab B's chat was deleted in tab A; B's once-a-second check,
    sent with B's state from before B sent its message again, found the chat deleted and stopped
    every run of B, the new chat's reply among them, mid-stream. B's page then never learned
    when A deleted that new chat too."""

    def test_a_message_sent_meanwhile_is_answered_and_kept(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        shown = handlers.open_session(ctx, ctx.project_key, s.id).state
        handlers.delete(ctx, dict(shown))  # deleted in tab A
        assert live.deleted_elsewhere(ctx, shown, "tab-b")  # the check, with B's old state
        run_id, _ = handlers.take(ctx, "tab-b", "sent again")  # B's Enter reaches the server
        assert ctx.forget_deleted("tab-b", s.id) is False, "the send owns the pane"
        final = list(handlers.send_taken(ctx, handlers.new_chat(ctx, ctx.project_key).state, "tab-b",
                                         run_id, None))[-1]
        assert final.notice is None
        kept = ctx.manager.get(SessionKey(ctx.project_key, final.state["session"])).messages
        assert [m["content"] for m in kept][-2:] == ["sent again", "You said: sent again"]
        assert not ctx.stale_view("tab-b", final.state)

    def test_with_no_send_the_deleted_chat_is_forgotten(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        shown = handlers.open_session(ctx, ctx.project_key, s.id).state
        final = list(handlers.send(ctx, shown, "from B", None, "tab-b"))[-1]
        assert ctx.last_state("tab-b")["session"] == s.id
        handlers.delete(ctx, dict(final.state))
        assert ctx.forget_deleted("tab-b", s.id) is True
        assert ctx.last_state("tab-b") is None, "the next send starts a new chat"


def test_without_a_lease_a_racing_reply_is_kept_as_a_version_and_said(tmp_path, project, fake_openai, monkeypatch):
    """A writer the lease did not hold back (a lease lapsed, a clock far off): tab A's reply that
    finishes after tab B wrote is kept as version 2 of 2, and tab A says so in one sentence."""
    monkeypatch.setattr(live, "hold", lambda *a: live._NoLease())
    ctx = _ctx(tmp_path, project, fake_openai)
    s = seeded(ctx)
    view_a = handlers.open_session(ctx, ctx.project_key, s.id)
    gen_a = _stream_a(ctx, view_a.state, fake_openai)
    view_b = handlers.open_session(ctx, ctx.project_key, s.id)
    final_b = list(handlers.send(ctx, view_b.state, "question B", None, "tab-b"))[-1]
    final_a = list(gen_a)[-1]
    assert final_b.notice is None
    assert final_a.notice == ("Another tab or window wrote in this chat while this reply was being written; "
                              "your reply was kept as version 2 of 2.")
    assert final_a.state["session"] != s.id
    kept = ctx.manager.get(ctx.manager.current_version(s.key)).messages
    assert [m["content"] for m in kept[-2:]] == ["question A", "slow " * 60]
    for member in ctx.manager.family(s.key):
        assert strict_problem(ctx.manager.get(member.key).messages) is None


class TestTitleRenamedElsewhere:
    """Guards against the fresh-user trial's D6: a rename in another tab reached this tab's list
    but not its title field, which kept the old name (and a rename from it was refused)."""

    def test_the_open_chats_new_title_is_told_once(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        view_b = handlers.open_session(ctx, ctx.project_key, s.id)
        assert live.title_now(ctx, view_b.state, "tab-b") is None, "nothing changed yet"
        view_a = handlers.open_session(ctx, ctx.project_key, s.id)
        handlers.rename(ctx, view_a.state, "Renamed in A")
        found = live.title_now(ctx, view_b.state, "tab-b")
        assert found is not None and (found.title, found.text) == ("Renamed in A", "Renamed in A")
        # once the tab shows it, nothing more to tell; B's own rename from there is saved
        seen = dict(view_b.state, title=found.title)
        assert live.title_now(ctx, seen, "tab-b") is None
        view = handlers.rename(ctx, seen, "Renamed in B")
        assert view.notice is None and ctx.manager.get(s.key).title == "Renamed in B"

    def test_a_version_shows_its_conversations_title_and_a_deleted_chat_tells_nothing(self, tmp_path, project,
                                                                                      fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        version = ctx.manager.fork(s.key, 2, version=True)
        state = handlers.open_session(ctx, ctx.project_key, version.id).state
        ctx.manager.rename(s.key, "The conversation's name")
        assert live.title_now(ctx, state, "tab-b").title == "The conversation's name"
        ctx.manager.delete(s.key)
        assert live.title_now(ctx, state, "tab-b") is None
