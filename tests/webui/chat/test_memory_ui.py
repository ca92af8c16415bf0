"""The Memory panel, the "Memory updated" toast and the "Used N memories" note: plain functions
without a browser (the Chromium half: ``tests/browser/test_browser_memory.py``)."""
from __future__ import annotations

from tests.webui.chat.test_search_ui import ctx  # noqa: F401  (a storage and manager in tmp_path, as the app's ctx)
from webui.chat import memory as memory_panel
from webui.render import rows as render


class TestPanelFunctions:
    """Chat-derived text injected as HTML, a memory losing its conversation link, Undo removing the wrong one."""

    def test_list_is_escaped_grouped_and_links_its_conversation(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path, title="Indentation talk")
        mem = ctx.storage.memories
        mem.add("<img src=x onerror=alert(1)> uses tabs", project_key=s.project_key, source="model",
                session_id=s.id, message_index=1)
        mem.add("Prefers short answers", scope="user")
        out = memory_panel.panel_html(ctx, s.project_key)
        assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt; uses tabs" in out
        assert out.index("This project") < out.index("uses tabs") < out.index("You (every project)")
        assert f'data-sid="{s.id}"' in out and "from Indentation talk" in out and "added by the assistant" in out

    def test_bidi_controls_are_shown_in_the_panel_and_the_toast(self, ctx, tmp_path):
        """A remembered fact with U+202E read reversed ("…secaps revo") in the panel and the toast."""
        s = ctx.manager.create(tmp_path)
        m = ctx.storage.memories.add("I prefer tabs \u202eover spaces", project_key=s.project_key)
        for shown in (memory_panel.panel_html(ctx, s.project_key), memory_panel.toast_markdown([m]),
                      memory_panel.proposal_markdown([m])):
            assert "\u202e" not in shown and "\u27e8U+202E\u27e9over spaces" in shown

    def test_empty_panel_says_how_to_add(self, ctx):
        assert "No memories yet" in memory_panel.panel_html(ctx, "-p-0000000000000000")

    def test_add_edit_delete_and_refusals(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        pk = s.project_key
        assert memory_panel.add_memory(ctx, pk, "Tests run with pytest", "project") == (
            "Remembered: Tests run with pytest", True)
        sentence, ok = memory_panel.add_memory(ctx, pk, "password: Hunter22!", "user")
        assert not ok and "secret" in sentence
        [m] = ctx.storage.memories.list(pk)
        assert memory_panel.edit_memory(ctx, pk, m.id, "Tests run with pytest -q")[1]
        assert ctx.storage.memories.get(m.id, pk).text == "Tests run with pytest -q"
        assert memory_panel.delete_memory(ctx, pk, m.id)[1]
        assert ctx.storage.memories.list(pk) == []
        assert not memory_panel.delete_memory(ctx, pk, m.id)[1]

    def test_toast_finds_only_this_conversations_new_model_memories_and_undo_removes_them(self, ctx, tmp_path):
        s, other = ctx.manager.create(tmp_path), ctx.manager.create(tmp_path)
        mem = ctx.storage.memories
        mine = mem.add("Uses tabs", project_key=s.project_key, source="model", session_id=s.id)
        mem.add("Typed by the user", project_key=s.project_key, session_id=s.id)
        mem.add("From elsewhere", project_key=s.project_key, source="model", session_id=other.id)
        found = memory_panel.new_model_memories(ctx, s.id, s.project_key, 0.0, [])
        assert [m.id for m in found] == [mine.id]
        assert memory_panel.new_model_memories(ctx, s.id, s.project_key, 0.0, [mine.id]) == []
        assert "Memory updated" in memory_panel.toast_markdown(found)
        assert memory_panel.undo(ctx, s.project_key, [mine.id]) == "Removed 1 memory."
        assert mine.id not in [m.id for m in mem.list(s.project_key)]


class TestPanelCounts:
    """issue 31, item 10: the count read glued to its label ("This project 1")."""

    def test_the_count_is_a_badge_of_its_own(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        ctx.storage.memories.add("Uses tabs", project_key=s.project_key)
        out = memory_panel.panel_html(ctx, s.project_key)
        assert '<h4>This project<span class="ac-mem-count">1</span></h4>' in out


class TestToastLeavesByItself:
    """issue 31, item 7: the "Memory updated" toast stayed until closed."""

    def test_the_bar_is_due_to_leave_and_the_watch_lasts_until_then(self):
        w = memory_panel.toast_shown({"session": "s", "until": 105.0}, now=100.0)
        assert w["until"] >= 100.0 + memory_panel.TOAST_SECONDS
        assert not memory_panel.toast_due(w, 100.0 + memory_panel.TOAST_SECONDS - 0.1)
        assert memory_panel.toast_due(w, 100.0 + memory_panel.TOAST_SECONDS)
        assert not memory_panel.toast_due({"session": "s"}, 1e12) and not memory_panel.toast_due(None, 1e12)


class TestToastAndProposals:
    """Issue 28: memory text rendered as Markdown in the toast (a live image or link), and a fact
    from a turn that read files stored without the user's yes."""

    def test_the_toast_shows_memory_text_as_text(self, ctx, tmp_path):
        from markdown_it import MarkdownIt

        s = ctx.manager.create(tmp_path)
        m = ctx.storage.memories.add("See ![x](https://evil.example/p.png) and [docs](https://evil.example)",
                                                 project_key=s.project_key, source="model", session_id=s.id)
        html = MarkdownIt("commonmark").render(memory_panel.toast_markdown([m]))
        assert "<img" not in html and "<a " not in html and "evil.example/p.png" in html

    def test_proposals_wait_for_the_users_answer(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        mem = ctx.storage.memories
        a = mem.propose("Build logs go to ops@example.com", project_key=s.project_key, session_id=s.id)
        b = mem.propose("The CI runs on Fridays", project_key=s.project_key, session_id=s.id)
        mem.propose("Another chat's fact", project_key=s.project_key, session_id="other")
        asked = memory_panel.pending_proposals(ctx, s.id, s.project_key)
        assert [m.id for m in asked] == [a.id, b.id] and mem.list(s.project_key) == []
        assert "ops@example.com" in memory_panel.proposal_markdown(asked)
        assert memory_panel.answer_proposals(ctx, s.project_key, [a.id], keep=True) == "1 memory kept."
        assert memory_panel.answer_proposals(ctx, s.project_key, [b.id], keep=False).startswith("1 proposal declined")
        assert [m.text for m in mem.list(s.project_key)] == ["Build logs go to ops@example.com"]
        assert memory_panel.pending_proposals(ctx, s.id, s.project_key) == []

    def test_the_page_lets_the_runner_ask(self, ctx):
        from webui.chat import send

        kwargs = send._runner_kwargs(ctx, {"count": 0}, None, "m", None, None)
        assert kwargs["confirm_memories"] is True


class TestUsedMemoriesNote:
    """A new chat's first reply not saying which memories it started with (or every reply saying it)."""

    def test_note_sits_above_the_first_reply_only(self):
        from core.memory.context import memory_section
        from core.memory.model import Memory

        memories = [Memory("m1", "We use tabs", "project", "pk", "user", None, None, 1.0, 1.0),
                    Memory("m2", "Short answers", "user", None, "user", None, None, 2.0, 2.0)]
        section, _ = memory_section(memories)
        messages = [{"role": "system", "content": "You are anycode.\n\n" + section},
                    {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "again"}, {"role": "assistant", "content": "sure"}]
        view = render.chat_rows(messages)
        assert [r.get("metadata", {}).get("title") for r in view.rows] == [None, "Used 2 memories", None, None, None]
        assert view.rows[1]["content"] == "- [project] We use tabs\n- [user] Short answers"
        assert len(view.source) == len(view.rows)
        assert render.chat_rows(messages[:1] + messages[1:2]).rows == [{"role": "user", "content": "hi"}]

    def test_no_memories_no_note(self):
        rows = render.chat_rows([{"role": "system", "content": "You are anycode."},
                                 {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]).rows
        assert not any(r.get("metadata") for r in rows)


class TestWatchOnlyAfterAWrite:
    """Guards against every opened chat polling for new memories for 30 s (issue 32: an open or a
    version switch started a 1.5 s poll whose events each made the page copy the data of every
    component ever shown as loading), and against a reply's memories going unseen."""

    def test_a_chat_written_just_now_is_watched_an_old_one_is_not(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        state = {"project": s.project_key, "session": s.id}
        written = ctx.manager.get(s.key).updated_at
        assert memory_panel.written_lately(ctx, state, written + 1)  # a reply just ended: its job may be running
        assert memory_panel.written_lately(ctx, state, written + memory_panel.WATCH_SECONDS - 1)
        assert not memory_panel.written_lately(ctx, state, written + memory_panel.WATCH_SECONDS + 1)  # only opened
        assert not memory_panel.written_lately(ctx, {"project": s.project_key, "session": None}, written)
        gone = {"project": s.project_key, "session": "00000000-0000-4000-8000-000000000000"}
        assert memory_panel.written_lately(ctx, gone, written), "cannot tell: watched as before"
