"""The web UI's handlers as plain functions over a temporary ANYCODE_HOME and the fake OpenAI
server (real HTTP): what a user of the chat pane and the sidebar would notice, without a browser."""
from __future__ import annotations

import json
import time

import pytest

from core.stores.jsonl_store import LocalSessionStore
from core.session.keys import SessionKey, project_key
from webui import i18n
from webui.chat import handlers
from webui.render import rows as render
from webui.text.timefmt import group_label, relative_time
from tests.support.chat_ctx import ctx, make_ctx, project, run_send, store  # noqa: F401  (fixtures)

DAY = 86400.0


@pytest.fixture
def offline_ctx(store, project, monkeypatch):
    """No API key, no base URL and no local server: the "not configured" case."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr("core.agent.config.probe_server", lambda *a, **k: None)
    return make_ctx(store, project)


def seeded(ctx, title="Seeded", messages=None):
    s = ctx.manager.create(ctx.project_path, title=title)
    ctx.manager.add_messages(s.key, messages or [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
    ])
    return ctx.manager.get(s.key)


class TestChatRows:
    """Guards against the chat showing the system prompt, losing tool steps, or branching from the
    wrong stored message."""

    def test_system_hidden_and_tool_step_collapsible(self):
        msgs = [
            {"role": "system", "content": "secret instructions"},
            {"role": "user", "content": "what is here?"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "list_files", "arguments": "{\"path\": \".\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "notes.txt"},
            {"role": "assistant", "content": "There is notes.txt."},
        ]
        view = render.chat_rows(msgs)
        texts = [r["content"] for r in view.rows]
        assert not any("secret instructions" in t for t in texts)
        step = view.rows[2]
        assert step["metadata"]["title"].endswith("list_files")
        assert step["metadata"]["status"] == "done"
        assert '"path": "."' in step["content"] and "notes.txt" in step["content"]
        # the step ends at the tool result, so branching there keeps the result
        assert view.source == [1, 2, 3, 4]

    def test_dangling_call_is_pending_and_list_content_is_text(self):
        msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c9", "type": "function",
                     "function": {"name": "read_file", "arguments": "not json"}}]}]
        view = render.chat_rows(msgs)
        assert view.rows[0]["content"] == "hi"
        assert view.rows[1]["metadata"]["status"] == "pending"
        assert "not json" in view.rows[1]["content"]


class TestSidebar:
    """Guards against a wrong date grouping, a search that does not filter, and titles injected
    as markup into the page."""

    def test_groups_and_relative_times(self):
        now = time.mktime((2026, 11, 30, 15, 0, 0, 0, 0, -1))
        assert group_label(now - 60, now) == "Today"
        assert group_label(now - DAY, now) == "Yesterday"
        assert group_label(now - 5 * DAY, now) == "Previous 7 days"
        assert group_label(now - 40 * DAY, now) == "Older"
        assert relative_time(now - 5, now) == "just now"
        assert relative_time(now - 300, now) == "5 min. ago"  # CLDR's short units, via Babel
        assert relative_time(now - 3 * 3600, now) == "3 hr. ago"
        assert relative_time(now - 2 * DAY, now) == "2 days ago"

    def test_list_most_recent_first_filtered_and_escaped(self, ctx):
        old = seeded(ctx, title="Older talk")
        new = seeded(ctx, title="<img src=x onerror=alert(1)> newest")
        html = handlers.session_list_html(ctx, ctx.project_key, active=new.id)
        assert html.index("newest") < html.index("Older talk")
        assert "<img" not in html and "&lt;img" in html
        assert f'data-sid="{old.id}"' in html and "Today" in html
        assert 'class="ac-session active"' in html
        filtered = handlers.session_list_html(ctx, ctx.project_key, query="older")
        assert "Older talk" in filtered and "newest" not in filtered
        none = handlers.session_list_html(ctx, ctx.project_key, query="zzz")
        assert "No conversation title matches" in none

    def test_project_switcher_lists_real_paths(self, ctx, tmp_path):
        other = tmp_path / "other project"
        other.mkdir()
        ctx.manager.create(str(other))
        labels = [label for label, _ in handlers.project_choices(ctx)]
        assert any(label.endswith(str(other)) and label.startswith("other project")
                   for label in labels)
        assert any(label.endswith(ctx.project_path) for label in labels)


class TestSend:
    """Guards against replies not streaming, messages not being saved, tool steps missing from the
    chat, and titles never reaching the sidebar."""

    def test_new_chat_streams_and_saves(self, ctx, fake_openai):
        fake_openai.push({"text": "Hello from the fake model, streamed in pieces.", "chunk": 5,
                          "delay": 0.06})
        updates = run_send(ctx, handlers.new_chat(ctx).state, "hi there")
        assert len(updates) > 3, "the reply should arrive in several streamed updates"
        partial = [u.rows[-1]["content"] for u in updates[1:-1] if u.rows[-1]["role"] == "assistant"]
        assert any(p != partial[-1] for p in partial)
        final = updates[-1]
        assert final.rows[-1]["content"] == "Hello from the fake model, streamed in pieces."
        key = SessionKey(final.state["project"], final.state["session"])
        stored = ctx.manager.get(key)
        assert [m["role"] for m in stored.messages] == ["system", "user", "assistant"]
        assert final.state["count"] == 3
        # The title is awaited, unless the title thread already stored it before the reply ended
        # (the fake titles at once; seen once in a full run): then the final view carries it.
        assert final.title or final.state["title_wait"] > time.time()

    def test_generated_title_is_picked_up(self, ctx, fake_openai):
        # auto mode: the fake titles a chat "Chat: <first words>" (a queued title could be taken
        # by a title thread left running by an earlier test)
        final = run_send(ctx, handlers.new_chat(ctx).state, "help me plan a trip")[-1]
        deadline = time.time() + 10
        # A fast title may already be stored when the reply ends: then the final view carries it.
        title, waiting = final.title or None, bool(final.state.get("title_wait"))
        while time.time() < deadline and not title:
            title, waiting = handlers.title_status(ctx, final.state)
            time.sleep(0.1)
        assert title and title.startswith("Chat: help me plan") and not waiting
        assert title in handlers.session_list_html(ctx, ctx.project_key)

    def test_tool_call_shown_as_step(self, ctx, fake_openai):
        fake_openai.push(
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "call_a"}]},
            {"text": "The note says to remember the milk."},
        )
        final = run_send(ctx, handlers.new_chat(ctx).state, "read my notes")[-1]
        steps = [r for r in final.rows if r.get("metadata")]
        assert len(steps) == 1
        assert "read_file" in steps[0]["metadata"]["title"]
        assert steps[0]["metadata"]["status"] == "done"
        assert "notes.txt" in steps[0]["content"] and "remember the milk" in steps[0]["content"]
        assert final.rows[-1]["content"] == "The note says to remember the milk."

    def test_a_message_sent_behind_another_tabs_whole_turns_goes_after_them(self, ctx, fake_openai):
        """Guards against the fresh-user trial's "tabA third", stored nowhere: tab A's view was
        behind only because tab B had added a question and its reply at the end, yet A's send
        was refused and its text only put back in the box. It now goes after B's turn, A shows
        B's turn first, and one sentence says so."""
        s = seeded(ctx)
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "from tab B"},
                                         {"role": "assistant", "content": "B's answer"}])
        final = run_send(ctx, view.state, "tabA third")[-1]
        assert final.notice == "This chat had new messages from another tab or window; yours was sent after them."
        assert final.notice_level == "info" and final.restore_text is None
        stored = [m["content"] for m in ctx.manager.get(s.key).messages]
        assert stored[-4:] == ["from tab B", "B's answer", "tabA third", "You said: tabA third"]
        shown = [r["content"] for r in final.rows]
        assert shown[-4:] == ["from tab B", "B's answer", "tabA third", "You said: tabA third"]
        assert final.state["count"] == len(stored)
        assert len(ctx.manager.family(s.key)) == 1, "no version: nothing raced"

    def test_behind_a_turn_that_is_not_finished_the_send_is_still_refused(self, ctx, fake_openai):
        """Another tab's reply waiting for its tool's approval: a message sent after it would deny
        that approval, so the send is refused as before and its text goes back to the box."""
        s = seeded(ctx)
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "from tab B"}, {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call_b", "type": "function",
                            "function": {"name": "write_file", "arguments": "{}"}}]}])
        final = run_send(ctx, view.state, "tabA third")[-1]
        assert final.notice and "changed elsewhere" in final.notice
        assert final.restore_text == "tabA third"
        assert not any(m.get("content") == "tabA third" for m in ctx.manager.get(s.key).messages)

    def test_conflict_reloads_instead_of_interleaving(self, ctx, fake_openai):
        s = seeded(ctx)
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "from another tab"}])
        final = run_send(ctx, view.state, "my message")[-1]
        assert final.notice and "changed elsewhere" in final.notice
        # Words a user understands, never internal counts ("expected 5 messages, found 6").
        assert "reloaded" in final.notice and "another tab" in final.notice
        assert "expected" not in final.notice and not any(ch.isdigit() for ch in final.notice)
        assert final.restore_text == "my message"
        assert final.rows[-1]["content"] == "from another tab"
        assert final.state["count"] == 6
        stored = ctx.manager.get(s.key).messages
        assert not any(m.get("content") == "my message" for m in stored)
        assert fake_openai.chat_requests() == []

    def test_model_error_is_a_readable_row(self, ctx, fake_openai):
        fake_openai.push({"error": 500, "message": "boom"})
        final = run_send(ctx, handlers.new_chat(ctx).state, "hello?")[-1]
        last = final.rows[-1]
        assert last["role"] == "assistant" and last["content"].startswith("\u26a0")
        assert "Traceback" not in last["content"]
        stored = ctx.manager.get(SessionKey(final.state["project"], final.state["session"]))
        assert stored.messages[-1] == {"role": "user", "content": "hello?"}
        # One notice for the event: the error row itself offers Retry (the page hides its
        # separate "No reply was saved… Retry" bar when the reply failed).
        assert final.error and last.get("options") == [{"label": "Retry", "value": "Retry"}]

    def test_stop_keeps_partial_reply(self, ctx, fake_openai):
        fake_openai.push({"text": "word " * 200, "chunk": 5, "delay": 0.02})
        gen = handlers.send(ctx, handlers.new_chat(ctx).state, "talk a lot", None, "tab-stop")
        updates = []
        for upd in gen:
            updates.append(upd)
            if len(updates) == 3:
                assert handlers.stop(ctx, "tab-stop")
        final = updates[-1]
        assert final.done
        text = final.rows[-1]["content"]
        assert text.startswith("word") and len(text) < len("word " * 200)
        stored = ctx.manager.get(SessionKey(final.state["project"], final.state["session"]))
        assert stored.messages[-1]["role"] == "assistant"
        assert not handlers.stop(ctx, "tab-stop"), "the flag is released when the run ends"


class TestNoModel:
    """Guards against a missing API key breaking the app or losing what the user typed."""

    def test_banner_and_message_saved(self, offline_ctx):
        banner = handlers.banner_markdown(offline_ctx)
        assert "OPENAI_API_KEY" in banner and "OPENAI_BASE_URL" in banner
        final = run_send(offline_ctx, handlers.new_chat(offline_ctx).state, "are you there?")[-1]
        assert final.rows[0] == {"role": "user", "content": "are you there?"}
        assert "OPENAI_API_KEY" in final.rows[-1]["content"]
        stored = offline_ctx.manager.get(SessionKey(final.state["project"], final.state["session"]))
        assert stored.messages[-1]["content"] == "are you there?"
        assert final.state["title_wait"] == 0.0
        names, default = handlers.model_choices(offline_ctx)
        assert names == [default]

    def test_model_picker_lists_server_models(self, ctx):
        names, default = handlers.model_choices(ctx)
        assert "fake-large" in names and default in names


class TestSessionActions:
    """Guards against renames accepting blank titles, branches touching the original, and
    archive/delete/export doing something other than what the button says."""

    def test_rename(self, ctx):
        s = seeded(ctx, title="Original")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        refused = handlers.rename(ctx, state, "   ")
        assert refused.notice == handlers.EMPTY_TITLE_NOTICE and refused.title == "Original"
        assert handlers.rename(ctx, state, "").title == "Original"
        renamed = handlers.rename(ctx, state, "  Better name ")
        assert renamed.title == "Better name" and renamed.notice is None
        assert ctx.manager.get(s.key).title_source == "user"

    def test_rename_new_chat_creates_it(self, ctx):
        view = handlers.rename(ctx, handlers.new_chat(ctx).state, "Plans")
        assert view.session_id and ctx.manager.get(SessionKey(ctx.project_key, view.session_id)).title == "Plans"
        assert handlers.rename(ctx, handlers.new_chat(ctx).state, "").notice is None

    def test_branch_from_first_message(self, ctx):
        s = seeded(ctx, title="Trunk")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        fork = handlers.branch(ctx, state, 0)
        assert fork.session_id != s.id
        assert [r["content"] for r in fork.rows] == ["first question"]
        assert fork.title == "Trunk (branch)"
        assert len(ctx.manager.get(s.key).messages) == 5
        html = handlers.session_list_html(ctx, ctx.project_key)
        assert s.id in html and fork.session_id in html
        with pytest.raises(IndexError):
            handlers.branch(ctx, state, 99)

    def test_double_fired_branch_makes_one_fork(self, ctx):
        s = seeded(ctx, title="Trunk")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        fork = handlers.branch(ctx, state, 2, now=1000.0)
        again = handlers.branch(ctx, fork.state, 2, now=1000.5)
        assert again.session_id == fork.session_id
        assert len(ctx.manager.list(ctx.project_key)) == 2
        later = handlers.branch(ctx, again.state, 0, now=1000.6)
        assert later.session_id not in (s.id, fork.session_id)

    def test_archive_unarchive_delete(self, ctx):
        s = seeded(ctx, title="Keep me")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        archived = handlers.set_archived(ctx, state, True)
        assert archived.archived
        assert s.id not in handlers.session_list_html(ctx, ctx.project_key)
        assert s.id in handlers.session_list_html(ctx, ctx.project_key, archived=True)
        assert not handlers.set_archived(ctx, archived.state, False).archived  # the tab's new state
        assert s.id in handlers.session_list_html(ctx, ctx.project_key)
        after = handlers.delete(ctx, state)
        assert after.session_id is None and "deleted" in after.notice
        assert s.id not in handlers.session_list_html(ctx, ctx.project_key)
        assert not ctx.storage.sessions.exists(s.key)

    def test_exports(self, ctx):
        s = seeded(ctx, title="Export me")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        md, jl = handlers.exports(ctx, state)
        text = md.read_text()
        assert text.startswith("# Export me") and "second answer" in text
        lines = [json.loads(line) for line in jl.read_text().splitlines()]
        assert lines == ctx.storage.sessions.load(s.key)
        assert handlers.exports(ctx, handlers.new_chat(ctx).state) == (None, None)


class TestInitialView:
    """Guards against bookmarks (?session=) not reopening a session, and bad ids crashing the page."""

    def test_query_param_prefix_and_other_project(self, ctx, tmp_path):
        s = seeded(ctx)
        assert handlers.initial_view(ctx, {"session": s.id[:8]}).session_id == s.id
        other = tmp_path / "elsewhere"
        other.mkdir()
        o = ctx.manager.create(str(other), title="Elsewhere")
        view = handlers.initial_view(ctx, {"session": o.id})
        assert view.session_id == o.id and view.state["project"] == project_key(str(other))

    def test_bad_id_gives_new_chat_with_notice(self, ctx):
        view = handlers.initial_view(ctx, {"session": "does-not-exist"})
        assert view.session_id is None and "No session" in view.notice
        assert handlers.initial_view(ctx, {}).session_id is None

    def test_a_path_like_id_is_not_found_not_deleted(self, ctx):
        # a fresh-user trial's ?session=../../etc/passwd was told "deleted in another tab or window"
        view = handlers.initial_view(ctx, {"session": "../../etc/passwd"})
        assert view.session_id is None and "'../../etc/passwd' was found" in view.notice
        assert "another tab or window" not in view.notice

    def test_launcher_session_used_without_query(self, ctx):
        s = seeded(ctx)
        ctx.initial_session = s.id
        assert handlers.initial_view(ctx, {}).session_id == s.id


class TestMirrorLine:
    """Guards against the sidebar hiding a failing mirror, saying "up to date" while copies are
    pending, leaking markup from an error message, or polling when there is no mirror at all."""

    NOW = 1_764_504_000.0

    def test_states_read_as_a_person_would(self):
        ok = handlers.mirror_status_html({"state": "ok", "mirror": "postgresql://u:***@db/x",
                                          "pending_entries": 0}, self.NOW)
        assert "Mirror: up to date" in ok and "ac-mirror-ok" in ok
        assert "postgresql://u:***@db/x" in ok  # named in the hover text, password masked
        busy = handlers.mirror_status_html({"state": "catching_up", "pending_entries": 12},
                                           self.NOW)
        assert "Mirroring… 12 entries pending" in busy
        one = handlers.mirror_status_html({"state": "catching_up", "pending_entries": 1},
                                          self.NOW)
        assert "1 entry pending" in one

    def test_failing_shows_error_and_last_copy(self):
        text = handlers.mirror_status_html({
            "state": "failing", "pending_entries": 3,
            "last_error": "OperationalError: <connection refused>\n  at host db",
            "last_success_at": self.NOW - 300}, self.NOW)
        assert "Mirror failing" in text and "ac-mirror-failing" in text
        assert "connection refused" in text and "<connection" not in text  # escaped
        assert "last copied 5 min. ago" in text and "3 entries waiting" in text
        never = handlers.mirror_status_html({"state": "failing", "last_error": "down",
                                             "last_success_at": None}, self.NOW)
        assert "nothing copied yet" in never

    def test_no_mirror_no_line(self, store, project):
        ctx = make_ctx(store, project)
        assert not handlers.has_mirror(ctx)
        assert handlers.mirror_status(ctx) == ""
        assert handlers.mirror_status_html(None) == ""

    def test_unreachable_mirror_turns_into_a_warning(self, tmp_path, project):
        from core.stores.mirror import MirroredSessionStore

        def unreachable():
            raise ConnectionError("mirror database is down")

        primary = LocalSessionStore(tmp_path / "data")
        mirrored = MirroredSessionStore(primary, unreachable, outbox_path=tmp_path / "outbox.db",
                                        mirror_name="sqlite:///mirror.db", retry_initial=0.05)
        try:
            ctx = make_ctx(mirrored, project)
            assert handlers.has_mirror(ctx)
            assert "up to date" in handlers.mirror_status(ctx)
            run = handlers.rename(ctx, handlers.tab_state(ctx.project_key), "Saved while down")
            assert run.session_id  # the user's write succeeded although the mirror is down
            deadline = time.monotonic() + 10
            line = handlers.mirror_status(ctx)
            while "failing" not in line and time.monotonic() < deadline:
                time.sleep(0.02)
                line = handlers.mirror_status(ctx)
            assert "Mirror failing" in line and "mirror database is down" in line
            assert "nothing copied yet" in line
        finally:
            mirrored.close(timeout=0.1)

    def test_mirror_line_and_timer_exist_only_with_a_mirror(self, tmp_path, store, project):
        import gradio as gr

        from core.stores.mirror import MirroredSessionStore
        from webui.gui.app import build_app

        def timers_and_lines(ctx):
            blocks = build_app(ctx).blocks.values()
            return (sum(isinstance(b, gr.Timer) for b in blocks),
                    sum(getattr(b, "elem_id", None) == "ac-mirror" for b in blocks))

        plain_timers, plain_lines = timers_and_lines(make_ctx(store, project))
        mirrored = MirroredSessionStore(store, LocalSessionStore(tmp_path / "mirror"),
                                        outbox_path=tmp_path / "outbox.db", start=False)
        try:
            timers, lines = timers_and_lines(make_ctx(mirrored, project))
        finally:
            mirrored.close(timeout=0.1)
        assert plain_lines == 0 and lines == 1
        assert timers == plain_timers + 1  # the only extra polling is the mirror's


def _stored(ctx, state):
    return ctx.manager.get(SessionKey(state["project"], state["session"])).messages


class TestRunsInATab:
    """Guards against a reply that keeps painting (and taking messages for) a conversation the
    tab has left, a message sent right after Stop being lost or refused as a conflict, a message
    typed while a reply streams being taken from the box, and a lost reply with no way to get it
    again."""

    def test_leaving_stops_the_reply_and_it_paints_nothing_more(self, ctx, fake_openai):
        import threading

        fake_openai.push({"text": "word " * 300, "chunk": 5, "delay": 0.02})
        run_id, notice = handlers.take(ctx, "tab-a", "talk a lot")
        assert run_id is not None and notice is None
        gen = handlers.send_taken(ctx, handlers.new_chat(ctx).state, "tab-a", run_id, None)
        first = [next(gen) for _ in range(3)]
        state = first[-1].state
        leaving = threading.Thread(target=handlers.leave, args=(ctx, "tab-a"))
        leaving.start()
        time.sleep(0.2)  # the switch has stopped the run before the stream resumes
        rest = list(gen)
        leaving.join(10)
        assert not leaving.is_alive(), "leave() waits for the run to end, then returns"
        assert rest == [], "a superseded run must not repaint the newly opened conversation"
        stored = _stored(ctx, state)
        assert stored[-1]["role"] == "assistant" and stored[-1]["content"].startswith("word")
        assert len(stored[-1]["content"]) < len("word " * 300)
        assert not ctx.running("tab-a") and ctx.last_state("tab-a") is None

    def test_switch_before_the_reply_starts_keeps_the_message(self, ctx, fake_openai):
        import threading

        run_id, _ = handlers.take(ctx, "tab-b", "sent just before switching")
        leaving = threading.Thread(target=handlers.leave, args=(ctx, "tab-b"))
        leaving.start()
        time.sleep(0.1)
        assert list(handlers.send_taken(ctx, handlers.new_chat(ctx).state, "tab-b", run_id,
                                        None)) == []
        leaving.join(10)
        metas = ctx.manager.list(ctx.project_key)
        assert len(metas) == 1
        view = handlers.open_session(ctx, ctx.project_key, metas[0].id)
        assert view.rows == [{"role": "user", "content": "sent just before switching"}]
        assert view.needs_reply  # shown with "No reply was saved" and Retry
        assert fake_openai.chat_requests() == []

    def test_busy_box_keeps_text_and_message_after_stop_is_sent(self, ctx, fake_openai):
        import threading

        fake_openai.push({"text": "word " * 300, "chunk": 5, "delay": 0.02})
        page_state = handlers.new_chat(ctx).state  # what the page sent with both messages
        run1, _ = handlers.take(ctx, "tab-c", "one")
        gen1 = handlers.send_taken(ctx, page_state, "tab-c", run1, None)
        [next(gen1) for _ in range(3)]
        assert handlers.take(ctx, "tab-c", "typed meanwhile") == (None, handlers.BUSY_NOTICE)
        assert handlers.stop(ctx, "tab-c")
        run2, notice = handlers.take(ctx, "tab-c", "two")
        assert run2 is not None and notice is None
        second: list = []
        sender = threading.Thread(target=lambda: second.extend(
            handlers.send_taken(ctx, page_state, "tab-c", run2, None)))
        sender.start()
        first = list(gen1)
        sender.join(20)
        assert first[-1].done and second[-1].done
        final = second[-1]
        assert final.notice is None, "the tab's own stopped reply is not a conflict"
        assert final.state["session"] == first[-1].state["session"]
        assert [r["content"] for r in final.rows if r["role"] == "user"] == ["one", "two"]
        assert final.rows[-1]["content"] == "You said: two"
        assert final.state["count"] == 5

    def test_retry_answers_the_last_message(self, ctx, fake_openai):
        s = seeded(ctx, messages=[{"role": "system", "content": "sys"},
                                  {"role": "user", "content": "lost answer"}])
        view = handlers.open_session(ctx, ctx.project_key, s.id)
        assert view.needs_reply
        run_id = handlers.take_retry(ctx, "tab-d")
        final = list(handlers.send_taken(ctx, view.state, "tab-d", run_id, None))[-1]
        assert final.rows[-1] == {"role": "assistant", "content": "You said: lost answer"}
        assert [m["role"] for m in _stored(ctx, final.state)] == ["system", "user", "assistant"]
        assert not handlers.reload(ctx, final.state).needs_reply

    def test_double_submit_is_ignored_and_never_leaves_the_tab_busy(self, ctx, fake_openai):
        page_state = handlers.new_chat(ctx).state
        run_id, notice = handlers.take(ctx, "tab-e", "hello twice")
        assert run_id is not None and notice is None
        # the second click of a double click: ignored, no busy warning, no second run
        assert handlers.take(ctx, "tab-e", "hello twice") == (None, None)
        # a second chain that starts the same run id again sends nothing
        assert list(handlers.send_taken(ctx, page_state, "tab-e", run_id, None)) != []
        assert list(handlers.send_taken(ctx, page_state, "tab-e", run_id, None)) == []
        assert not ctx.busy("tab-e") and not ctx.running("tab-e")
        metas = ctx.manager.list(ctx.project_key)
        assert len(metas) == 1
        assert [m["content"] for m in _stored(ctx, {**page_state, "session": metas[0].id})
                if m["role"] == "user"] == ["hello twice"]
        assert handlers.take(ctx, "tab-e", "next one")[0] is not None

    def test_the_same_text_sent_again_after_its_run_ended_is_a_new_message(self, ctx, fake_openai):
        # The text of a refused send goes back in the box ("changed elsewhere", an archived
        # chat, a failed write) and Enter sends it again at once; and `/compact` typed right
        # after the Compact button is a second compaction. Counting an ended run as a double
        # Enter swallowed all of these (CI, stop 35); a double Enter is told by the page.
        page_state = handlers.new_chat(ctx).state
        run_id, _ = handlers.take(ctx, "tab-again", "same words")
        final = list(handlers.send_taken(ctx, page_state, "tab-again", run_id, None))[-1]
        assert not ctx.running("tab-again")
        again, notice = handlers.take(ctx, "tab-again", "same words")
        assert again is not None and notice is None
        list(handlers.send_taken(ctx, final.state, "tab-again", again, None))
        assert [m["content"] for m in _stored(ctx, final.state)
                if m["role"] == "user"] == ["same words", "same words"]

    def test_double_enter_taken_by_two_workers_at_once_is_one_run(self, ctx):
        # Enter is one queued event (issue 32): a double Enter can be taken by two threads at
        # the same moment; the repeat check and the new run must be one step.
        import threading

        got: list = []
        barrier = threading.Barrier(8)

        def press():
            barrier.wait()
            got.append(handlers.take(ctx, "tab-race", "only once"))

        threads = [threading.Thread(target=press) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len([run_id for run_id, _ in got if run_id is not None]) == 1
        assert all(notice is None for _, notice in got)

    def test_stop_releases_a_message_whose_send_never_started(self, ctx):
        run_id, _ = handlers.take(ctx, "tab-f", "lost in transit")
        assert ctx.busy("tab-f")
        withdrawn: list[str] = []
        assert handlers.stop(ctx, "tab-f", withdrawn)
        assert withdrawn == ["lost in transit"]
        assert not ctx.busy("tab-f") and not ctx.running("tab-f")
        assert list(handlers.send_taken(ctx, handlers.new_chat(ctx).state, "tab-f", run_id,
                                        None)) == []
        assert ctx.manager.list(ctx.project_key) == []

    def test_a_message_taken_before_its_stop_arrived_waits_for_the_stop(self, ctx):
        # A busy server took the message sent right after Stop before the Stop itself: it was
        # refused as "a reply is being written" and stayed in the box.
        import threading

        first, _ = handlers.take(ctx, "tab-k", "a long question")
        ctx.claim_run("tab-k", first)
        late_stop = threading.Timer(0.4, lambda: handlers.stop(ctx, "tab-k", upto=first))
        late_stop.start()
        second, notice = handlers.take(ctx, "tab-k", "right after Stop")
        late_stop.join()
        assert second is not None and notice is None

    def test_stop_reaching_the_server_after_the_next_message_leaves_it_alone(self, ctx, monkeypatch):
        # Stop and the message sent right after it are separate requests; a busy server took the
        # message first, and the click then withdrew it: it was never sent.
        from webui.chat import send as send_mod

        monkeypatch.setattr(send_mod, "STOP_GRACE_SECONDS", 0.1)
        first, _ = handlers.take(ctx, "tab-g", "a long question")
        ctx.claim_run("tab-g", first)  # its reply is streaming
        second, notice = handlers.take(ctx, "tab-g", "the next one")
        assert second is None and notice is not None, "not stopped yet: refused as busy"
        handlers.stop(ctx, "tab-g", upto=first)
        second, _ = handlers.take(ctx, "tab-g", "the next one")
        assert second is not None
        withdrawn: list[str] = []
        handlers.stop(ctx, "tab-g", withdrawn, upto=first)  # a repeated, late Stop click
        assert withdrawn == [] and ctx.busy("tab-g"), "the message sent after the click stays"
        handlers.stop(ctx, "tab-g", withdrawn, upto=second)  # Stop shown for the second one
        assert withdrawn == ["the next one"]

    def test_a_message_sent_before_the_page_loaded_waits_for_the_loaded_state(self, ctx):
        # A send that reached the server before the page's load had answered went out with no
        # tab state (to a new chat, not the ?session= one) and the load's answer then blanked
        # the chat it streamed into.
        import threading

        s = ctx.manager.create(ctx.project_path, title="the linked chat")
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(ctx.wait_page_loaded("tab-h", 10)))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive(), "it waits for the load"
        ctx.page_loaded("tab-h", handlers.open_session(ctx, ctx.project_key, s.id).state)
        waiter.join(5)
        assert got and got[0]["session"] == s.id
        assert ctx.wait_page_loaded("tab-h", 0)["session"] == s.id  # loaded: no wait
        assert ctx.wait_page_loaded("tab-never", 0.05) is None  # a load that never answers

    def test_failed_first_send_leaves_no_empty_session(self, ctx, monkeypatch):
        import core.agent.runner

        def broken(*args, **kwargs):
            raise RuntimeError("boom")
            yield  # pragma: no cover

        monkeypatch.setattr(core.agent.runner, "run_session_stream", broken)
        final = run_send(ctx, handlers.new_chat(ctx).state, "never stored")[-1]
        assert final.error and final.state["session"] is None
        assert final.restore_text == "never stored"
        assert ctx.manager.list(ctx.project_key) == []

    def test_retry_racing_another_tabs_reply_waits_and_never_answers_twice(self, ctx, fake_openai):
        import threading

        s = seeded(ctx, messages=[{"role": "system", "content": "sys"},
                                  {"role": "user", "content": "lost answer"}])
        view_a = handlers.open_session(ctx, ctx.project_key, s.id)
        view_b = handlers.open_session(ctx, ctx.project_key, s.id)
        fake_openai.push({"text": "slow " * 100, "chunk": 5, "delay": 0.02})
        gen_a = handlers.send_taken(ctx, view_a.state, "tab-a", handlers.take_retry(ctx, "tab-a"),
                                    None)
        for upd in gen_a:  # tab A's reply is streaming
            if any(r["role"] == "assistant" for r in upd.rows):
                break
        updates_b: list = []
        b = threading.Thread(target=lambda: updates_b.extend(handlers.send_taken(
            ctx, view_b.state, "tab-b", handlers.take_retry(ctx, "tab-b"), None)))
        b.start()  # issue 25: B's retry waits for A's reply instead of racing it
        final_a = list(gen_a)[-1]
        b.join(30)
        final_b = updates_b[-1]
        roles = [m["role"] for m in _stored(ctx, view_b.state)]
        assert roles == ["system", "user", "assistant"], "never two answers in a row"
        assert final_a.notice is None and final_b.notice is None
        assert [r["role"] for r in final_b.rows] == ["user", "assistant"], "B shows A's answer"

    def test_fresh_branch_at_a_user_message_is_not_a_lost_reply(self, ctx):
        s = seeded(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        assert not handlers.branch(ctx, state, 0).needs_reply

    def test_fresh_branch_at_a_tool_step_is_not_a_lost_reply(self, ctx):
        # issue 31, item 6: a branch at a tool step opened with "No reply was saved — Retry".
        s = ctx.manager.create(ctx.project_path)
        call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "read it"},
                                         {"role": "assistant", "content": None, "tool_calls": [call]},
                                         {"role": "tool", "tool_call_id": "c1", "content": "file body"},
                                         {"role": "assistant", "content": "done"}])
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        fork = handlers.branch(ctx, state, 1)  # row 1: the read_file step
        assert _stored(ctx, fork.state)[-1]["role"] == "tool"
        assert not fork.needs_reply and not handlers.reload(ctx, fork.state).needs_reply


class TestLabelsAndNotices:
    """Guards against untitled sessions all reading "New chat", and notices with the wrong tone
    or none at all (a title cut silently, a delete announced as a warning)."""

    def test_untitled_sessions_get_a_dated_label(self, ctx):
        s = ctx.manager.create(ctx.project_path)
        label = time.strftime("Session %Y-%m-%d %H:%M", time.localtime(s.created_at))
        assert render.session_label(None, s.created_at) == label
        assert render.session_label("  Named ", s.created_at) == "Named"
        assert label in handlers.session_list_html(ctx, ctx.project_key)
        assert handlers.open_session(ctx, ctx.project_key, s.id).label == label
        assert handlers.new_chat(ctx).label == "New chat"

    def test_long_title_is_shortened_with_a_notice(self, ctx):
        s = seeded(ctx, title="Short")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view = handlers.rename(ctx, state, "y" * 250)
        assert view.title == "y" * 200
        assert view.notice == handlers.TITLE_SHORTENED_NOTICE and view.notice_level == "info"
        assert handlers.rename(ctx, view.state, "fine").notice is None

    @pytest.mark.parametrize("ghost", ["\u200b\u200b", "\u2800\u2800", "\U000e0041\U000e0042", "\ufff0",
                                       "\U0001d173", "\x01\u200b", "\u3164 \u2060"])
    def test_invisible_title_is_refused_with_a_notice(self, ctx, ghost):
        # Trial: tag characters, U+FFF0, U+1D173 and the blank Braille cell were stored as the
        # title with no notice (the sidebar then showed a dated label instead: a silent change).
        s = seeded(ctx, title="Keep me")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view = handlers.rename(ctx, state, ghost)
        assert view.notice == handlers.INVISIBLE_TITLE_NOTICE and view.notice_level == "warning"
        assert view.title == "Keep me" and ctx.manager.get(s.key).title == "Keep me"
        new = handlers.rename(ctx, handlers.new_chat(ctx).state, ghost)  # a new chat is not saved under it
        assert new.notice == handlers.INVISIBLE_TITLE_NOTICE and not new.session_id
        assert [m.id for m in ctx.manager.list(ctx.project_key)] == [s.id]

    def test_title_notices_are_in_the_tab_language(self, ctx):
        s = seeded(ctx, title="Keep me")
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        with i18n.using("zh-CN"):
            assert handlers.rename(ctx, state, "\x01\x02").notice == i18n.t("empty_title_notice", "zh-CN")
            assert handlers.rename(ctx, state, "\u200b").notice == i18n.t("invisible_title_notice", "zh-CN")
            long = handlers.rename(ctx, state, "\u4e2d" * 201)
            assert long.notice == i18n.t("title_shortened_notice", "zh-CN") and len(long.title) == 200

    def test_delete_is_good_news(self, ctx):
        s = seeded(ctx)
        view = handlers.delete(ctx, handlers.open_session(ctx, ctx.project_key, s.id).state)
        assert view.notice_level == "info"


class TestMessagesThatCannotBeSent:
    """Guards against a message the model can never take being stored and sent (a 1 MB paste
    against a 128k window: the server rejects it after it was stored), and against a box of
    pasted invisible characters doing nothing without a word (trial 11)."""

    def test_a_message_larger_than_the_window_is_refused_before_anything_is_stored(self, ctx, monkeypatch):
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "128000")
        huge = "lorem ipsum dolor " * 58_000  # ~1 MB, ~348k tokens by the meter's estimate
        run_id, notice = handlers.take(ctx, "tab-huge", huge)
        assert run_id is None
        assert "about 348,000 tokens" in notice and "context window is 128,000" in notice
        assert "Shorten it" in notice
        assert not ctx.busy("tab-huge") and ctx.manager.list(ctx.project_key) == []
        # one that fits is taken as usual
        assert handlers.take(ctx, "tab-huge", "lorem ipsum " * 1000)[0] is not None

    def test_the_refusal_in_chinese(self, ctx, monkeypatch):
        from webui import i18n
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "8000")
        text = handlers.too_long_notice(ctx, "x" * 60_000, None)
        assert text is not None and "8,000" in i18n.t("err_message_too_long", tokens=20000, window=8000)
        assert "上下文窗口" in i18n.t("err_message_too_long", language="zh-CN", tokens=20000, window=8000)

    def test_a_send_to_a_silent_server_is_taken_at_once(self, store, project, tmp_path):
        """Guards against trial 11's hot path: the check asked the model server for its window on
        every send (up to four 2-second probes while it did not answer) before the box emptied."""
        import socket

        from core.agent import context as windows

        silent = socket.socket()  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        windows.forget_windows()
        try:
            ctx = make_ctx(store, project, api_key="sk-test", model="local-model", max_retries=0,
                           base_url=f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
            started = time.monotonic()
            run_id, notice = handlers.take(ctx, "tab-silent", "hello there " * 12_000)  # ~48k tokens
            took = time.monotonic() - started
        finally:
            silent.close()
            windows.forget_windows()
        assert took < 1.0, f"the box waited {took:.1f} s for the model server"
        # the window is not known yet: nothing is refused on a guess (the request says if it is too long)
        assert run_id is not None and notice is None

    def test_a_window_the_meter_learnt_refuses_without_asking_again(self, ctx, fake_openai):
        from core.agent import context as windows
        from webui.chat import compaction as compaction_ui

        windows.forget_windows()
        fake_openai.context_limit, fake_openai.window_api = 8_000, "vllm"
        try:
            assert "/ 8k" in compaction_ui.meter_html(ctx, handlers.tab_state(ctx.project_key), None)
            fake_openai.window_api = None  # the server says no more: the window the meter saw counts
            run_id, notice = handlers.take(ctx, "tab-known", "x" * 60_000)
        finally:
            windows.forget_windows()
        assert run_id is None and "context window is 8,000" in notice

    def test_only_invisible_characters_says_there_is_nothing_to_send(self, ctx):
        assert handlers.take(ctx, "tab-zw", "\u200b\u200b\u200b") == (None, handlers.NOTHING_TO_SEND_NOTICE)
        assert handlers.take(ctx, "tab-zw", "\ufeff \u200d") == (None, handlers.NOTHING_TO_SEND_NOTICE)
        # an empty box or plain spaces look empty: Enter on them says nothing
        assert handlers.take(ctx, "tab-zw", "") == (None, None)
        assert handlers.take(ctx, "tab-zw", "   \n") == (None, None)
        assert ctx.manager.list(ctx.project_key) == []
