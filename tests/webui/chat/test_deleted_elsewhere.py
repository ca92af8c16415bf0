"""A chat deleted in another tab or process while this tab works in it (issue 25, "two writers",
the fresh-user trial's D1): a reply streaming there, a rename, an export, a pin, "Show earlier",
a later send. Each gives a readable sentence (never the store's "No session <project key>/<id>"),
and what the user typed or was shown is not dropped silently."""
from __future__ import annotations

import threading

from tests.support.chat_ctx import make_ctx, project  # noqa: F401 (fixtures)
from tests.webui.chat.test_webui_handlers import seeded
from webui.chat import handlers, live, organise
from webui.text.error_text import describe
from core.errors import SessionNotFound


def _ctx(tmp_path, project, fake_openai):
    from core.stores.jsonl_store import LocalSessionStore

    return make_ctx(LocalSessionStore(tmp_path / "data"), project, api_key="sk-test",
                    base_url=fake_openai.base_url, max_retries=0)


def _no_key(ctx, text):
    assert ctx.project_key not in str(text) and "No session" not in str(text), text


def _streaming(ctx, state, fake_openai, tab="tab-b"):
    """Tab B's send of "question B", its reply streaming slowly; the generator once text shows."""
    fake_openai.push({"text": "x " * 120, "delay": 0.01})
    gen = handlers.send(ctx, state, "question B", None, tab)
    for upd in gen:
        if any("x x" in str(r.get("content")) for r in upd.rows or []):
            return gen
    raise AssertionError("tab B's reply never started")


class TestDeletedWhileReplying:
    """Guards against tab B losing its message and the streamed reply, and showing the internal
    key, when tab A deletes the chat B's reply is being written in."""

    def test_the_message_comes_back_and_the_reply_stays_on_screen_with_a_sentence(self, tmp_path, project,
                                                                                  fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        view_a = handlers.open_session(ctx, ctx.project_key, s.id)
        view_b = handlers.open_session(ctx, ctx.project_key, s.id)
        gen = _streaming(ctx, view_b.state, fake_openai)
        handlers.delete(ctx, view_a.state)
        final = list(gen)[-1]
        assert final.done and final.restore_text == "question B", "the message is back in the box"
        shown = [str(r["content"]) for r in final.rows]
        assert "question B" in shown and any("x x x" in c for c in shown), "the turn stays on screen"
        assert "deleted in another tab or window" in shown[-1] and "was saved" in shown[-1]
        for text in (*shown, final.notice):
            _no_key(ctx, text)
        assert final.state.get("session") is None, "the next send starts a new chat"
        # ... and it does: the message given back, sent again, is answered in a new chat.
        again = list(handlers.send(ctx, final.state, final.restore_text, None, "tab-b"))[-1]
        assert again.notice is None and again.state["session"] not in (None, s.id)
        assert [m["content"] for m in ctx.manager.get(handlers._key(again.state)).messages
                if m["role"] != "system"] == ["question B", "You said: question B"]

    def test_a_delete_by_another_process_stops_the_reply_instead_of_letting_it_run_out(self, tmp_path, project,
                                                                                       fake_openai):
        from core.stores.jsonl_store import LocalSessionStore

        ctx = _ctx(tmp_path, project, fake_openai)
        other = make_ctx(LocalSessionStore(tmp_path / "data"), project)  # another app on the same store
        s = seeded(ctx)
        view_b = handlers.open_session(ctx, ctx.project_key, s.id)
        fake_openai.push({"text": "z " * 2000, "delay": 0.01})  # about 10 s of streaming
        gen = handlers.send(ctx, view_b.state, "question B", None, "tab-b")
        for upd in gen:
            if any("z z" in str(r.get("content")) for r in upd.rows or []):
                break
        handlers.delete(other, handlers.open_session(other, other.project_key, s.id).state)
        final = list(gen)[-1]
        reply = next(str(r["content"]) for r in final.rows if "z z" in str(r.get("content")))
        assert reply.count("z") < 2000, "the reply stopped once its chat was gone"
        assert final.restore_text == "question B" and "deleted in another tab or window" in str(final.rows[-1])

    def test_the_delete_question_warns_while_another_tab_writes(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        view_a = handlers.open_session(ctx, ctx.project_key, s.id)
        view_b = handlers.open_session(ctx, ctx.project_key, s.id)
        assert "another tab" not in handlers.delete_prompt(ctx, view_a.state, "tab-a")
        gen = _streaming(ctx, view_b.state, fake_openai)
        asked = handlers.delete_prompt(ctx, view_a.state, "tab-a")
        assert "Delete this conversation permanently?" in asked
        assert "A reply is being written in this chat in another tab or window" in asked
        assert "another tab" not in handlers.delete_prompt(ctx, view_b.state, "tab-b"), "not its own reply"
        list(gen)
        assert "another tab" not in handlers.delete_prompt(ctx, view_a.state, "tab-a"), "the reply is done"

    def test_the_warning_covers_a_reply_in_another_version(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        version = ctx.manager.fork(s.key, 2, version=True)  # Delete removes every version
        held = live.hold(ctx, version.key, "tab-b")
        try:
            asked = handlers.delete_prompt(ctx, handlers.open_session(ctx, ctx.project_key, s.id).state, "tab-a")
        finally:
            held.release()
        assert "A reply is being written in this chat" in asked

    def test_in_chinese_too(self, tmp_path, project, fake_openai):
        from webui import i18n

        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        held = live.hold(ctx, s.key, "tab-b")
        try:
            with i18n.using("zh-CN"):
                asked = handlers.delete_prompt(ctx, state, "tab-a")
                gone = i18n.t("chat_deleted_while_replying")
        finally:
            held.release()
        assert "要永久删除这个对话吗" in asked and "另一个标签页或窗口正在这个对话中写回复" in asked
        assert "被删除" in gone


class TestOtherActionsOnADeletedChat:
    """Guards against the actions of a tab whose chat another tab deleted raising, or showing the
    store's "No session <key>" sentence: each says the chat was deleted elsewhere."""

    def _gone(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        handlers.delete(ctx, handlers.open_session(ctx, ctx.project_key, s.id).state)
        return ctx, s, state

    def test_rename_is_refused_with_a_sentence(self, tmp_path, project, fake_openai):
        ctx, _s, state = self._gone(tmp_path, project, fake_openai)
        view = handlers.rename(ctx, state, "A new name")
        assert view.session_id is None and "deleted in another tab or window" in str(view.notice)
        assert ctx.manager.conversations(ctx.project_key) == [], "nothing was re-created"

    def test_a_send_gives_the_text_back_with_a_sentence(self, tmp_path, project, fake_openai):
        ctx, _s, state = self._gone(tmp_path, project, fake_openai)
        final = list(handlers.send(ctx, state, "still there?", None, "tab-b"))[-1]
        assert final.restore_text == "still there?"
        assert "deleted in another tab or window" in str(final.notice) and "back in the box" in str(final.notice)
        _no_key(ctx, final.notice)

    def test_archive_branch_and_show_earlier_open_a_new_chat_saying_why(self, tmp_path, project, fake_openai):
        ctx, _s, state = self._gone(tmp_path, project, fake_openai)
        shown = [handlers.reload(ctx, state), handlers.earlier(ctx, state)]
        for act in (lambda: handlers.set_archived(ctx, state, True), lambda: handlers.branch(ctx, state, 0)):
            try:
                act()
                raise AssertionError("an action on a deleted chat raised nothing")
            except SessionNotFound as err:  # the page then shows reload(..., notice=describe(err))
                shown.append(handlers.reload(ctx, state, notice=describe(err)))
        for view in shown:
            assert view.session_id is None and "deleted in another tab or window" in str(view.notice)
            _no_key(ctx, view.notice)

    def test_exports_say_the_chat_was_deleted(self, tmp_path, project, fake_openai):
        ctx, _s, state = self._gone(tmp_path, project, fake_openai)
        assert handlers.exports(ctx, state) == (None, None) and handlers.export_html(ctx, state) is None
        assert "deleted in another tab or window" in handlers.export_notice(ctx, state)

    def test_pin_and_tag_say_the_chat_was_deleted(self, tmp_path, project, fake_openai):
        ctx, s, state = self._gone(tmp_path, project, fake_openai)
        for action in ({"action": "pin", "sid": s.id}, {"action": "add_tags", "sid": s.id, "tags": "work"}):
            notice = organise.apply(ctx, state, action)
            assert "deleted in another tab or window" in str(notice)
            _no_key(ctx, notice)

    def test_a_store_error_naming_the_internal_key_reads_as_a_sentence(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        text = describe(SessionNotFound(f"{ctx.project_key}/0d1e"))
        assert "deleted in another tab or window" in text
        _no_key(ctx, text)


def test_the_reply_racing_a_delete_in_a_thread_never_raises(tmp_path, project, fake_openai):
    """A delete landing at any moment of the send (here from another thread, as a second tab's
    event would) ends the send with a done update, never an exception."""
    ctx = _ctx(tmp_path, project, fake_openai)
    s = seeded(ctx)
    state = handlers.open_session(ctx, ctx.project_key, s.id).state
    fake_openai.push({"text": "y " * 40, "delay": 0.005})
    killer = threading.Timer(0.05, lambda: handlers.delete(ctx, dict(state)))
    killer.start()
    updates = list(handlers.send(ctx, state, "question", None, "tab-b"))
    killer.join()
    assert updates[-1].done
    for upd in updates:
        for row in upd.rows or []:
            _no_key(ctx, row.get("content"))


class TestTheLiveCheckSeesTheDelete:
    """Guards against a tab whose chat was deleted in another tab (no reply running) showing it as
    live until its next send (trial 7, defect 4): the live check tells it after the list changed."""

    def test_gone_only_once_every_version_is_deleted(self, tmp_path, project, fake_openai):
        ctx = _ctx(tmp_path, project, fake_openai)
        s = seeded(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        assert live.deleted_elsewhere(ctx, state, "tab-b") is False
        assert live.deleted_elsewhere(ctx, {"project": ctx.project_key, "session": None}, "tab-b") is False
        handlers.delete(ctx, handlers.open_session(ctx, ctx.project_key, s.id).state)
        assert live.deleted_elsewhere(ctx, state, "tab-b") is True
