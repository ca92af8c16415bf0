"""Edit, Regenerate, the version switcher and stale tabs, through the web UI's plain handlers
(no browser), against the fake OpenAI server over real HTTP."""
from __future__ import annotations

import time

import pytest

from core import LocalSessionStore, SessionManager
from core.session.keys import SessionKey
from webui.chat import handlers
from webui.render import rows as render
from webui.chat import versions
from webui.chat.context import WebContext
from tests.support.storage import storage_of


@pytest.fixture
def ctx(tmp_path, fake_openai):
    project = tmp_path / "proj"
    project.mkdir()
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                      model_overrides=dict(api_key="sk-test", base_url=fake_openai.base_url, max_retries=0),
                      export_dir=tmp_path / "exports")


def chat(ctx, title="Trip"):
    s = ctx.manager.create(ctx.project_path, title=title)
    ctx.manager.add_messages(s.key, [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "second answer"},
    ])
    return s


def sent(ctx, state, text, model=None):
    ups = list(handlers.send(ctx, state, text, model, "t1"))
    assert ups[-1].done
    return ups[-1].state


def stored(ctx, state):
    return ctx.manager.get(SessionKey(state["project"], state["session"])).messages


def row_of(ctx, state, stored_index):
    session = ctx.manager.get(SessionKey(state["project"], state["session"]))
    return render.chat_window(session.messages, handlers.shown_from(session, state)).source.index(stored_index)


class TestEdit:
    """Editing a sent message must continue from the edited text in a new version and leave the
    old version exactly as it was (the design article's fork rule)."""

    def test_edit_makes_a_version_and_the_model_answers_it(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, text = versions.edit(ctx, state, row_of(ctx, state, 2), "second question, edited")
        assert text == "second question, edited" and view.session_id != s.id
        after = sent(ctx, view.state, text)
        msgs = stored(ctx, after)
        assert [m["content"] for m in msgs[:3]] == ["first question", "first answer", "second question, edited"]
        assert msgs[3]["role"] == "assistant" and len(msgs) == 4
        assert [m["content"] for m in ctx.manager.get(s.key).messages][2] == "second question"  # old untouched
        # One row in the sidebar; reopening the conversation (its root id) lands on the new version.
        rows = ctx.manager.conversations(ctx.project_key)
        assert [m.id for m in rows] == [s.id]
        assert handlers.open_session(ctx, ctx.project_key, s.id).session_id == view.session_id
        assert handlers.initial_view(ctx, {"session": s.id}).session_id == view.session_id

    def test_unchanged_or_blank_edit_changes_nothing(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, text = versions.edit(ctx, state, row_of(ctx, state, 0), "first question")
        assert text is None and view.session_id == s.id
        view, text = versions.edit(ctx, state, row_of(ctx, state, 0), "   ")
        assert text is None and view.notice == versions.EMPTY_EDIT_NOTICE
        assert len(ctx.manager.family(s.key)) == 1

    def test_edit_of_the_first_message_shares_nothing(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, _ = versions.edit(ctx, state, row_of(ctx, state, 0), "another start")
        assert stored(ctx, view.state) == []


class TestRegenerateAndSwitch:
    """Regenerate must work on any reply (not only the last), and the arrows must move between
    versions and be remembered for reloads."""

    def test_regenerate_an_earlier_reply_then_switch_back_and_forth(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view = versions.regenerate(ctx, state, row_of(ctx, state, 1))
        assert [m["content"] for m in stored(ctx, view.state)] == ["first question"]
        after = sent(ctx, view.state, None)  # the retry the UI chains: the model answers again
        assert stored(ctx, after)[-1]["role"] == "assistant" and len(stored(ctx, after)) == 2
        point = versions.switcher(ctx, after)
        assert point["index"] == 1 and (point["n"], point["m"]) == (2, 2)
        back = versions.switch(ctx, after, -1)
        assert back.session_id == s.id and stored(ctx, back.state)[-1]["content"] == "second answer"
        assert handlers.initial_view(ctx, {"session": after["session"]}).session_id == s.id  # remembered
        forward = versions.switch(ctx, back.state, +1)
        assert forward.session_id == after["session"]

    def test_repeated_regenerate_event_is_one_version(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        row = row_of(ctx, state, 3)
        view = versions.regenerate(ctx, state, row, now=100.0)
        assert versions.regenerate(ctx, view.state, row, now=101.0) is None
        assert len(ctx.manager.family(s.key)) == 2

    def test_a_doubled_event_with_the_old_state_is_one_version(self, ctx):
        # Gradio can deliver one click twice, both with the page's state from before the click.
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        row = row_of(ctx, state, 3)
        assert versions.regenerate(ctx, state, row) is not None
        assert versions.repeated(state, row, ctx=ctx)
        assert versions.regenerate(ctx, state, row) is None
        assert len(ctx.manager.family(s.key)) == 2
        assert not versions.repeated(state, row, now=time.time() + versions.REPEAT_SECONDS + 1, ctx=ctx)


class TestAVersionKeepsTheRowsAboveIt:
    """A version of a long conversation (Edit, Regenerate, the arrows) opened on the default
    window of the latest messages, one row off from the window the tab showed when the versions
    differ in length: every drawn row then held its neighbour's message, the chat's top moved,
    and the page re-drew all of it — a switch cost a full open (issue 32)."""

    @staticmethod
    def long_chat(ctx, pairs=render.CHAT_WINDOW):
        s = ctx.manager.create(ctx.project_path, title="Long")
        msgs = []
        for i in range(pairs):
            msgs += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        ctx.manager.add_messages(s.key, msgs)
        return s

    def test_regenerate_then_switch_back_and_forth_keep_the_top_row(self, ctx):
        s = self.long_chat(ctx)
        opened = handlers.open_session(ctx, ctx.project_key, s.id)
        top, earlier = opened.rows[0], opened.state["earlier"]
        regenerated = versions.regenerate(ctx, opened.state, len(opened.rows) - 1)
        assert regenerated.rows[0] == top and regenerated.state["earlier"] == earlier
        after = sent(ctx, regenerated.state, None)  # the new reply; the tab's window is kept
        back = versions.switch(ctx, after, -1)
        assert back.session_id == s.id and back.rows[-1]["content"] == "answer 199"
        assert back.rows[0] == top and back.state["earlier"] == earlier
        # only the reply differs between the two versions' rows
        forward = versions.switch(ctx, back.state, +1)
        assert forward.rows[0] == top and len(forward.rows) == len(back.rows)
        assert forward.rows[:-1] == back.rows[:-1] and forward.rows[-1] != back.rows[-1]

    def test_edit_keeps_the_top_row(self, ctx):
        s = self.long_chat(ctx)
        opened = handlers.open_session(ctx, ctx.project_key, s.id)
        view, text = versions.edit(ctx, opened.state, len(opened.rows) - 2, "question 199, edited")
        assert text == "question 199, edited"
        # the version holds the messages before the edited one (the edited text is sent next)
        assert view.rows[0] == opened.rows[0] and view.rows == opened.rows[:-2]
        after = sent(ctx, view.state, text)
        shown = handlers.reload(ctx, after).rows
        assert shown[0] == opened.rows[0] and shown[-2]["content"] == "question 199, edited"


class TestArrowsAtEveryPoint:
    """Arrows only at the latest divergence (the rest unreachable), or a switch at an upper point
    that lands on another version below it than the one last used there."""

    def _two_points(self, ctx, fake_openai):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, text = versions.edit(ctx, state, row_of(ctx, state, 2), "second question, edited")
        v1 = sent(ctx, view.state, text)  # [q1, a1, q2', a2']
        v1 = sent(ctx, v1, "third question")  # [.., q3, a3]
        regen = versions.regenerate(ctx, v1, row_of(ctx, v1, 5))  # reply 5 of that version
        # Before the new reply is stored, its arrows wait under the row it will take (5 drawn now).
        assert versions.arrows(ctx, regen.state)[-1] == {"index": 5, "n": 2, "m": 2, "row": 5, "after": True}
        v2 = sent(ctx, regen.state, None, model="fake-large")  # with another model from the picker
        return s, v1, v2

    def test_two_points_each_with_arrows_and_last_used_below(self, ctx, fake_openai):
        s, v1, v2 = self._two_points(ctx, fake_openai)
        assert fake_openai.chat_requests()[-1]["model"] == "fake-large"
        found = versions.arrows(ctx, v2)
        assert [(a["index"], a["n"], a["m"]) for a in found] == [(2, 2, 2), (5, 2, 2)]
        rows = handlers.reload(ctx, v2).rows
        assert [rows[a["row"]]["role"] for a in found] == ["user", "assistant"]  # the edited message, the new reply
        assert rows[found[0]["row"]]["content"] == "second question, edited"
        # Back at message 3: the whole conversation below is the first version's.
        first = versions.switch(ctx, v2, -1, index=2)
        assert first.session_id == s.id and [r["content"] for r in first.rows][-1] == "second answer"
        assert [(a["index"], a["n"], a["m"]) for a in versions.arrows(ctx, first.state)] == [(2, 1, 2)]
        # Forward again: the version last used below that point (the regenerated one), not v1.
        again = versions.switch(ctx, first.state, +1, index=2)
        assert again.session_id == v2["session"]
        older = versions.switch(ctx, again.state, -1, index=5)  # the lower point only
        assert older.session_id == v1["session"]
        assert ctx.manager.current_version(s.key).session_id == v1["session"]  # reload lands here
        assert handlers.initial_view(ctx, {"session": s.id}).session_id == v1["session"]

    def test_rows_nested_under_a_step_are_not_drawn_rows(self):
        rows = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "metadata": {"title": "task", "id": "t1"}},
                {"role": "assistant", "content": "", "metadata": {"title": "read", "id": "s1", "parent_id": "t1"}},
                {"role": "assistant", "content": "orphan", "metadata": {"parent_id": "gone"}},
                {"role": "assistant", "content": "done"}]
        assert versions.top_level_rows(rows) == [0, 1, 3, 4]  # as gr.Chatbot draws them

    def test_arrow_labels_follow_the_language(self, ctx):
        from webui import i18n

        with i18n.using("zh-CN"):
            html = versions.arrows_html([{"index": 2, "n": 1, "m": 2, "row": 1}])
        assert "上一个版本" in html and "下一个版本" in html and "&quot;row&quot;:1" in html

    def test_points_above_the_window_have_no_arrows(self, ctx, fake_openai):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, text = versions.edit(ctx, state, row_of(ctx, state, 2), "another question")
        after = sent(ctx, view.state, text)
        assert [a["row"] for a in versions.arrows(ctx, after)] == [2]
        key = SessionKey(after["project"], after["session"])
        ctx.manager.add_messages(key, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
                                       for i in range(render.CHAT_WINDOW)])
        long = handlers.open_session(ctx, ctx.project_key, s.id)  # reopened: its latest messages
        assert long.state["from"] > 2 and versions.arrows(ctx, long.state) == []  # message 2 not shown
        full = handlers.earlier(ctx, long.state)  # "Show earlier messages": the arrows come back
        assert [a["row"] for a in versions.arrows(ctx, full.state)] == [2]

    def test_stale_arrow_click_is_refused_and_shows_the_other_tabs_choice(self, ctx, fake_openai):
        s, v1, v2 = self._two_points(ctx, fake_openai)
        tab2 = dict(v2)
        by_tab1 = versions.switch(ctx, v2, -1, index=5)  # tab 1 goes to v1
        view = versions.switch(ctx, tab2, -1, index=2)  # tab 2 still shows v2
        assert view.notice and "changed elsewhere" in view.notice
        assert view.session_id == by_tab1.session_id == v1["session"]
        assert ctx.manager.current_version(s.key).session_id == v1["session"]  # not undone


class TestTwoTabs:
    """A tab showing stale state must never undo what another tab changed."""

    def test_leaving_the_title_field_untouched_keeps_the_other_tabs_title(self, ctx):
        s = chat(ctx, title="Old name")
        tab1 = handlers.open_session(ctx, ctx.project_key, s.id).state
        tab2 = handlers.open_session(ctx, ctx.project_key, s.id).state
        assert handlers.rename(ctx, tab1, "New name").title == "New name"
        view = handlers.rename(ctx, tab2, "Old name")  # focus + blur: the stale text comes back
        assert view.title == "New name" and ctx.manager.get(s.key).title == "New name"

    def test_a_rename_typed_in_a_stale_tab_is_refused(self, ctx):
        s = chat(ctx, title="Old name")
        tab1 = handlers.open_session(ctx, ctx.project_key, s.id).state
        tab2 = handlers.open_session(ctx, ctx.project_key, s.id).state
        handlers.rename(ctx, tab1, "New name")
        view = handlers.rename(ctx, tab2, "Third name")
        assert view.notice and "changed elsewhere" in view.notice
        assert view.title == "New name" and ctx.manager.get(s.key).title == "New name"

    def test_stale_archive_click_does_not_undo_the_other_tab(self, ctx):
        s = chat(ctx)
        tab1 = handlers.open_session(ctx, ctx.project_key, s.id).state
        tab2 = handlers.open_session(ctx, ctx.project_key, s.id).state
        handlers.set_archived(ctx, tab1, True)
        view = handlers.set_archived(ctx, tab2, False)  # tab 2 still showed "not archived"
        assert view.notice and view.archived
        assert ctx.manager.get(s.key).archived

    def test_stale_version_switch_shows_the_version_in_use(self, ctx):
        s = chat(ctx)
        tab1 = handlers.open_session(ctx, ctx.project_key, s.id).state
        v1 = versions.regenerate(ctx, tab1, row_of(ctx, tab1, 3), now=1.0)
        tab2 = dict(v1.state)
        v2 = versions.regenerate(ctx, v1.state, row_of(ctx, v1.state, 2), now=50.0)  # tab 1 again
        view = versions.switch(ctx, tab2, -1)
        assert view.notice and view.session_id == v2.session_id


class TestSendingInAVersion:
    """A reload after writing in a version another tab had switched away from must land where
    the user last wrote, not on the other tab's older choice."""

    def test_a_message_sent_in_a_version_makes_it_the_one_in_use(self, ctx, fake_openai):
        s = chat(ctx)
        tab1 = handlers.open_session(ctx, ctx.project_key, s.id).state
        v = versions.regenerate(ctx, tab1, row_of(ctx, tab1, 3))
        tab2 = sent(ctx, v.state, None)  # the new reply; both tabs now show it
        versions.switch(ctx, dict(tab2), -1)  # tab 1 goes back to the first version
        assert ctx.manager.current_version(s.key) == s.key
        after = sent(ctx, tab2, "one more question")  # tab 2 still shows the new version
        assert stored(ctx, after)[-2]["content"] == "one more question"
        assert handlers.initial_view(ctx, {"session": s.id}).session_id == v.session_id
        before = len(ctx.storage.sessions.load(s.key))
        sent(ctx, after, "and another")  # already in use: nothing more is written to the root
        assert len(ctx.storage.sessions.load(s.key)) == before


class TestBranchInsideAToolRound:
    """Branch from here on a tool row of a parallel round must not copy a call without its result."""

    def test_branch_on_the_first_of_three_results_keeps_all_three(self, ctx):
        s = ctx.manager.create(ctx.project_path)
        calls = [{"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                 for i in range(3)]
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "read three"},
                                         {"role": "assistant", "content": None, "tool_calls": calls}]
                                 + [{"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"} for i in range(3)]
                                 + [{"role": "assistant", "content": "done"}])
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view = handlers.branch(ctx, state, row_of(ctx, state, 2))
        msgs = stored(ctx, view.state)
        assert len(msgs) == 5 and {m.get("tool_call_id") for m in msgs[2:]} == {"c0", "c1", "c2"}


class TestSearchAcrossVersions:
    """Text only an older version holds must still be found, and opening the hit must show that
    version (not the one in use, where the text is not) without making it the one in use
    (issue 31, item 3: opening a hit silently changed the conversation's version in use)."""

    def test_a_hit_in_another_version_opens_it(self, ctx):
        from webui.chat import search as search_panel

        s = chat(ctx)
        s_state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, text = versions.edit(ctx, s_state, row_of(ctx, s_state, 2), "zanzibar itinerary please")
        ctx.manager.add_messages(SessionKey(view.state["project"], view.state["session"]),
                                 [{"role": "user", "content": text}])
        versions.switch(ctx, handlers.reload(ctx, view.state).state, -1)  # back to the first version
        assert ctx.manager.current_version(s.key) == s.key
        html = search_panel.results_html(ctx, ctx.project_key, "zanzibar")
        assert view.state["session"] in html and "in version 2 of 2" in html
        hit = handlers.open_session(ctx, ctx.project_key, view.state["session"], include=2)
        assert hit.session_id == view.state["session"]
        assert ctx.manager.current_version(s.key) == s.key  # the version in use stays

    def test_one_hit_per_conversation_in_its_version_in_use(self, ctx):
        from webui.chat import search as search_panel

        s = chat(ctx)  # "first question" is in every version
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        v2 = versions.regenerate(ctx, state, row_of(ctx, state, 3))
        v3 = versions.regenerate(ctx, v2.state, row_of(ctx, v2.state, 1))
        handlers.rename(ctx, v3.state, "Zanzibar plans")
        versions.switch(ctx, handlers.reload(ctx, v3.state).state, -1, index=1)  # back to version 2
        in_use = ctx.manager.current_version(s.key).session_id
        assert in_use == v2.session_id
        html = search_panel.results_html(ctx, ctx.project_key, "first question")
        assert html.count('class="ac-hit-row"') == 1 and "In messages (1)" in html
        assert in_use in html and "in version" not in html and "Zanzibar plans" in html
        hit = handlers.open_session(ctx, ctx.project_key, in_use, include=0)
        assert hit.session_id == in_use and ctx.manager.current_version(s.key).session_id == in_use


class TestWholeConversationActions:
    """Archive or Delete pressed while a version is shown must act on the conversation, or its
    sidebar row would stay behind (archive) or its other versions would linger (delete)."""

    def test_archive_and_delete_from_a_version(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view = versions.regenerate(ctx, state, row_of(ctx, state, 3))
        archived = handlers.set_archived(ctx, view.state, True)
        assert archived.archived and s.id not in handlers.session_list_html(ctx, ctx.project_key)
        back = handlers.set_archived(ctx, archived.state, False)
        assert not back.archived and s.id in handlers.session_list_html(ctx, ctx.project_key)
        handlers.delete(ctx, back.state)
        assert not ctx.storage.sessions.exists(s.key) and not ctx.storage.sessions.exists(SessionKey(s.project_key, view.session_id))


class TestOneTitlePerConversation:
    """issue 31, item 1: a rename made on one version was lost on the others (the field showed
    the version's own title, the sidebar the root's; switching versions brought the old title
    back). One conversation has one title, on every version and in the sidebar."""

    def _sidebar_titles(self, ctx):
        return [m.title for m in ctx.manager.conversations(ctx.project_key)]

    def test_rename_on_an_edited_version_shows_on_every_version(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, _ = versions.edit(ctx, state, row_of(ctx, state, 2), "second question, edited")
        renamed = handlers.rename(ctx, view.state, "Trip to Lisbon")
        assert renamed.title == "Trip to Lisbon" and renamed.notice is None
        assert self._sidebar_titles(ctx) == ["Trip to Lisbon"]
        back = versions.switch(ctx, renamed.state, -1)
        assert back.session_id == s.id and back.title == "Trip to Lisbon"
        assert handlers.reload(ctx, back.state).title == "Trip to Lisbon"

    def test_rename_on_version_one_shows_on_a_regenerated_version(self, ctx):
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view = versions.regenerate(ctx, state, row_of(ctx, state, 3))
        first = versions.switch(ctx, view.state, -1)
        assert first.session_id == s.id
        renamed = handlers.rename(ctx, first.state, "Renamed on one")
        again = versions.switch(ctx, renamed.state, +1)
        assert again.session_id == view.session_id and again.title == "Renamed on one"
        assert self._sidebar_titles(ctx) == ["Renamed on one"]
        assert handlers.rename(ctx, again.state, "Renamed on two").notice is None  # not a stale tab
        assert ctx.manager.get(s.key).title == "Renamed on two"

    def test_a_branch_of_an_edited_version_takes_the_renamed_title(self, ctx):
        # Found by the fresh-user trial: the branch copied the version's own (old) title.
        s = chat(ctx)
        state = handlers.open_session(ctx, ctx.project_key, s.id).state
        view, _ = versions.edit(ctx, state, row_of(ctx, state, 2), "second question, edited")
        renamed = handlers.rename(ctx, view.state, "My title")
        branch = handlers.branch(ctx, renamed.state, 1)
        assert branch.session_id not in (s.id, view.session_id)
        assert branch.title == "My title (branch)"

    def test_a_generated_title_on_a_version_is_the_conversations(self, ctx):
        s = ctx.manager.create(ctx.project_path)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
        version = ctx.manager.fork(s.key, 0, version=True)
        assert ctx.manager.set_generated_title(version.key, "Generated")
        assert ctx.manager.get(s.key).title == "Generated" == ctx.manager.get(version.key).title
        ctx.manager.rename(s.key, "Mine")
        assert not ctx.manager.set_generated_title(version.key, "Later generated")
        assert {m.title for m in ctx.manager.family(s.key)} == {"Mine"}
