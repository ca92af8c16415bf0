"""The chat page's state, as plain handler functions over a temporary store and the fake OpenAI
server (issue 18, items 4-6): the generated title pushed when stored, archived chats, a chat whose
project folder moved. The browser side is ``tests/browser/test_browser_chat_state.py``."""
from __future__ import annotations

import threading
import time

import pytest

from core.session.keys import SessionKey
from webui.chat import approvals
from webui.chat import archived as archived_chat
from webui.chat import handlers
from webui.chat import project_move
from webui.chat import titles as title_push
from tests.support.chat_ctx import ctx, make_ctx, project, run_send, store  # noqa: F401 (fixtures)


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


def _archived_chat(ctx):
    """A chat with one exchange, archived; the view a tab opening it shows."""
    session = ctx.manager.create(ctx.project_path, title="Old plan")
    ctx.manager.add_messages(session.key, [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"},
                                           {"role": "assistant", "content": "a"}])
    ctx.manager.archive(session.key)
    return session.key, handlers.open_session(ctx, ctx.project_key, session.id)


class TestSendingInAnArchivedChat:
    """Guards against a message sent in an archived chat leaving it archived and hidden from the
    list, against a tab undoing another tab's archive by sending, and against two notices."""

    def test_send_unarchives_and_says_so_once(self, ctx):
        key, view = _archived_chat(ctx)
        assert view.archived and view.state["archived"] is True
        updates = run_send(ctx, view.state, "picking this up again")
        final = updates[-1]
        assert final.rows[-1]["content"] == "You said: picking this up again"
        assert not ctx.manager.get(key).archived
        assert key.session_id in handlers.session_list_html(ctx, ctx.project_key)
        assert final.notice == archived_chat.UNARCHIVED_BY_SEND and final.notice_level == "info"
        assert [u.notice for u in updates if u.notice] == [archived_chat.UNARCHIVED_BY_SEND]
        assert final.state["archived"] is False and final.state["unarchived"]

    def test_send_in_a_chat_archived_elsewhere_is_refused(self, ctx):
        session = ctx.manager.create(ctx.project_path, title="Shared")
        ctx.manager.add_messages(session.key, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
        tab = handlers.open_session(ctx, ctx.project_key, session.id).state  # shown unarchived
        handlers.set_archived(ctx, dict(tab), True)  # another tab archives it
        final = run_send(ctx, tab, "one more thing")[-1]
        assert final.notice == archived_chat.ARCHIVED_ELSEWHERE and final.restore_text == "one more thing"
        stored = ctx.manager.get(session.key)
        assert stored.archived and len(stored.messages) == 2, "nothing sent, the other tab's archive kept"
        assert final.state["archived"] is True  # the reloaded tab shows the bar; sending again unarchives
        again = run_send(ctx, final.state, "one more thing")[-1]
        assert again.notice == archived_chat.UNARCHIVED_BY_SEND and not ctx.manager.get(session.key).archived

    def test_retry_in_an_archived_chat_unarchives(self, ctx):
        session = ctx.manager.create(ctx.project_path, title="Lost reply")
        ctx.manager.add_messages(session.key, [{"role": "user", "content": "still there?"}])
        ctx.manager.archive(session.key)
        view = handlers.open_session(ctx, ctx.project_key, session.id)
        final = run_send(ctx, view.state, None)[-1]
        assert final.rows[-1]["content"] == "You said: still there?"
        assert final.notice == archived_chat.UNARCHIVED_BY_SEND and not ctx.manager.get(session.key).archived

    def test_unarchive_from_another_tab_needs_no_notice(self, ctx):
        key, view = _archived_chat(ctx)
        ctx.manager.unarchive(key)  # another tab brought it back first
        final = run_send(ctx, view.state, "hello again")[-1]
        assert final.notice is None and not ctx.manager.get(key).archived

    def test_archive_clicked_after_a_reply_then_send(self, ctx):
        """The tab's last run state (newer message count) must not hide the page's later Archive."""
        run_id, _ = handlers.take(ctx, "t1", "first")
        first = list(handlers.send_taken(ctx, handlers.new_chat(ctx).state, "t1", run_id, None))[-1]
        page = handlers.set_archived(ctx, first.state, True).state  # the top bar's Archive
        run_id, _ = handlers.take(ctx, "t1", "second")
        final = list(handlers.send_taken(ctx, page, "t1", run_id, None))[-1]
        assert final.notice == archived_chat.UNARCHIVED_BY_SEND
        assert final.rows[-1]["content"] == "You said: second"


class TestProjectFolderMoved:
    """Guards against a chat whose project folder was renamed or moved resuming with its tools
    confined to a folder that is gone, with no way to move it to the project open now."""

    def _orphan(self, ctx, tmp_path):
        old = tmp_path / "shop-old"
        old.mkdir()
        session = ctx.manager.create(str(old), title="Orders API")
        ctx.manager.add_messages(session.key, [{"role": "system", "content": "sys"},
                                               {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
        old.rmdir()  # the user renamed the folder: it is the project open now
        return session

    def test_offer_move_and_tools_work_in_the_new_folder(self, ctx, tmp_path, fake_openai):
        session = self._orphan(ctx, tmp_path)
        view = handlers.open_session(ctx, session.project_key, session.id)
        found = project_move.offer(ctx, view.state)
        assert found.missing == str(tmp_path / "shop-old") and found.target == ctx.project_path
        assert found.button == "Move this chat to proj"
        problem = approvals.view(ctx, view.state).workspace_problem
        assert "does not exist any more" in problem  # the notice the button sits in

        moved = project_move.move_to_current(ctx, view.state)
        assert moved.state["project"] == ctx.project_key and moved.session_id == session.id
        assert moved.notice.startswith("Moved this chat to proj — ") and moved.notice_level == "info"
        assert [r["content"] for r in moved.rows] == ["q", "a"] and moved.title == "Orders API"
        assert project_move.offer(ctx, moved.state) is None
        assert approvals.view(ctx, moved.state).workspace_problem is None
        assert session.id in handlers.session_list_html(ctx, ctx.project_key)
        assert ctx.manager.list(session.project_key) == []

        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "c1"}]},
                         {"text": "It says milk."})
        final = run_send(ctx, moved.state, "read my notes")[-1]
        step = [r for r in final.rows if r.get("metadata")][-1]
        assert "remember the milk" in step["content"]

    def test_no_offer_for_a_healthy_chat_or_a_new_one(self, ctx):
        session = ctx.manager.create(ctx.project_path)
        assert project_move.offer(ctx, handlers.tab_state(ctx.project_key, session.id)) is None
        assert project_move.offer(ctx, handlers.new_chat(ctx).state) is None

    def test_moved_by_another_tab_meanwhile(self, ctx, tmp_path):
        session = self._orphan(ctx, tmp_path)
        view = handlers.open_session(ctx, session.project_key, session.id)
        project_move.move_to_current(ctx, dict(view.state))  # the other tab
        again = project_move.move_to_current(ctx, view.state)
        assert again.session_id == session.id and again.state["project"] == ctx.project_key
        assert again.notice.startswith("Moved this chat to proj") and [r["content"] for r in again.rows] == ["q", "a"]


class TestPluralForms:
    """Guards against notices and command output saying "1 conversations" or "1 messages"."""

    def test_counted(self):
        from core.session.text import counted

        assert counted(1, "conversation") == "1 conversation"
        assert counted(0, "conversation") == "0 conversations"
        assert counted(3, "memory", "memories") == "3 memories"
        assert counted(1204, "message") == "1,204 messages"

    def test_import_summary(self):
        from core.importers.base import ImportProblem, ImportReport

        one = ImportReport(imported=["a"], messages=1, subagent_records=1, problems=[ImportProblem("f", 1, "bad")])
        assert one.summary() == ("Imported 1 conversation (1 message, 1 sub-agent record); 0 already imported. "
                                 "1 unreadable record was skipped.")
        many = ImportReport(dry_run=True, imported=["a", "b"], messages=5)
        assert many.summary() == "Would import 2 conversations (5 messages); 0 already imported."


class TestChatGoneOrMovedElsewhere:
    """Guards against a tab whose chat was moved by another tab (or the CLI) losing it to "No
    session <uuid> was found", and against that internal sentence for a chat deleted elsewhere."""

    def test_moved_elsewhere_opens_where_it_is(self, ctx, tmp_path):
        from core.stores.move import move_conversation

        session = ctx.manager.create(str(tmp_path / "gone"), title="Moved away")
        ctx.manager.add_messages(session.key, [{"role": "user", "content": "q"}])
        tab = handlers.open_session(ctx, session.project_key, session.id).state
        move_conversation(ctx.storage.sessions, session.key, ctx.project_path)  # `anycode sessions move`
        view = handlers.reload(ctx, tab)
        assert view.session_id == session.id and view.state["project"] == ctx.project_key
        assert view.notice.startswith("Moved this chat to proj") and view.notice_level == "info"

    def test_deleted_elsewhere_in_plain_words(self, ctx):
        session = ctx.manager.create(ctx.project_path)
        tab = handlers.tab_state(ctx.project_key, session.id)
        ctx.manager.delete(session.key)
        view = handlers.reload(ctx, tab)
        assert view.session_id is None and view.notice == handlers.CHAT_GONE_NOTICE
        assert session.id not in view.notice
