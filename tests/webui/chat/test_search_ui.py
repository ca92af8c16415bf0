"""The sidebar's message search as plain functions, without a browser (the Chromium half, typing a word
said in a conversation and clicking the result: ``tests/browser/test_browser_search.py``)."""
from __future__ import annotations

import json
import time

import pytest

from core import LocalSessionStore, SessionManager
from core.storage import Storage
from core.search import SearchHit
from webui.chat import search as search_panel


class _Ctx:
    """The parts of ``WebContext`` the search uses: a project without aliases elsewhere."""

    def __init__(self, store):
        self.storage = Storage(store)
        self.manager = SessionManager(store)

    def alias_keys(self, project):
        return []


@pytest.fixture
def ctx(tmp_path):
    return _Ctx(LocalSessionStore(tmp_path / "data", fsync=False))


class TestResultsPanel:
    """Chat text injected into the page as HTML, a match not highlighted, a click landing on the wrong row."""

    def test_chat_text_is_escaped_and_the_match_marked(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path, title="<b>bold</b> title")
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "<img src=x onerror=alert(1)> find the needle"}])
        out = search_panel.results_html(ctx, s.key.project_key, "needle")
        assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
        assert "<mark>needle</mark>" in out and "&lt;b&gt;bold&lt;/b&gt; title" in out
        assert json.loads(out.split('data-hit="')[1].split('"')[0].replace("&quot;", '"'))["sid"] == s.id

    def test_blank_query_shows_nothing_and_no_match_says_so(self, ctx, tmp_path):
        assert search_panel.results_html(ctx, "p", "   ") == ""
        s = ctx.manager.create(tmp_path)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "hello"}])
        assert "No message matches." in search_panel.results_html(ctx, s.key.project_key, "zzz")

    def test_archived_marked(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "archived needle"}])
        ctx.manager.archive(s.key)
        assert "No message matches." in search_panel.results_html(ctx, s.key.project_key, "needle")
        assert 'class="ac-badge">archived' in search_panel.results_html(ctx, s.key.project_key, "needle",
                                                                        archived=True)

    def test_all_projects_widens_the_search(self, ctx, tmp_path):
        (tmp_path / "one").mkdir()
        (tmp_path / "two").mkdir()
        a = ctx.manager.create(tmp_path / "one", title="Here")
        ctx.manager.add_messages(a.key, [{"role": "user", "content": "shared needle"}])
        b = ctx.manager.create(tmp_path / "two", title="Elsewhere")
        ctx.manager.add_messages(b.key, [{"role": "user", "content": "shared needle too"}])
        here = search_panel.results_html(ctx, a.key.project_key, "needle")
        assert "Here" in here and "Elsewhere" not in here
        both = search_panel.results_html(ctx, a.key.project_key, "needle", all_projects=True)
        assert "Here" in both and "Elsewhere" in both

    def test_highlight_overlapping_marks(self):
        assert search_panel.highlighted("a<b>c", [(1, 4), (2, 3)]) == "a<mark>&lt;b&gt;</mark>c"

    def test_hit_row_skips_system_and_folds_tool_results(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        ctx.manager.add_messages(s.key, [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "read it"},                                         # row 0
            {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "read_file", "arguments": "{}"}}]},                      # rows 1, 2
            {"role": "tool", "tool_call_id": "c1", "content": "file body"},                 # row 2
            {"role": "assistant", "content": "done"},                                       # row 3
        ])
        rows = [search_panel.hit_row(ctx, s.key.project_key, s.id, i) for i in range(1, 5)]
        assert rows == [0, 1, 2, 3]
        assert search_panel.hit_row(ctx, s.key.project_key, "nope", 1) is None

    def test_hit_row_is_the_reply_not_the_memory_note_or_thinking_above_it(self, ctx, tmp_path):
        # issue 31, item 2: the "Used N memories" row carries the first reply's index, and the
        # hit highlighted it (the row above the match).
        from core.memory.context import MEMORY_HEADING

        s = ctx.manager.create(tmp_path)
        ctx.manager.add_messages(s.key, [
            {"role": "system", "content": f"sys\n\n{MEMORY_HEADING}\nintro\n- [project] uses pytest\n"},
            {"role": "user", "content": "q1"},                                    # row 0
            {"role": "assistant", "content": "the wombat answer"},                # rows 1 (note), 2
            {"role": "user", "content": "q2"},                                    # row 3
            {"role": "assistant", "content": "second", "reasoning_content": "hm"},  # rows 4 (thinking), 5
        ])
        rows = [search_panel.hit_row(ctx, s.key.project_key, s.id, i) for i in range(1, 5)]
        assert rows == [0, 2, 3, 5]

    def test_a_summary_hit_lands_on_its_divider_and_says_summary_once(self, ctx, tmp_path):
        """Guards against a match inside a compaction summary highlighting the row after the
        compaction was written (not its divider) and reading "Summary: Summary: …"."""
        from core.session.compaction import compaction_entry

        s = ctx.manager.create(tmp_path)
        messages = [{"role": "system", "content": "sys"}]
        for i in range(6):
            messages += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        ctx.manager.add_messages(s.key, messages)                        # 13 messages
        ctx.manager.add_compaction(s.key, compaction_entry(
            "Summary: the user wants the zeppelin parser fixed.", 9, tokens_before=900, tokens_after=300,
            model="m", trigger="manual"), len(messages))
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "later"}, {"role": "assistant", "content": "ok"}])
        out = search_panel.results_html(ctx, s.key.project_key, "zeppelin")
        assert "<b>Summary:</b> the user wants the <mark>zeppelin</mark>" in out and "Summary: Summary" not in out
        data = json.loads(out.split('data-hit="')[1].split('"')[0].replace("&quot;", '"'))
        assert data["role"] == "compaction"
        session = ctx.manager.get(s.key)
        include = search_panel.hit_include(ctx, s.key.project_key, s.id, data["idx"], data["role"])
        assert include == 8  # the last summarised message: the divider follows it
        from webui.render import rows as render
        for start in (0, render.window_start(session.messages, size=4, include=include)):
            row = search_panel.hit_row(ctx, s.key.project_key, s.id, data["idx"], start, data["role"])
            rows = render.chat_window(session.messages, start, session.compactions).rows
            assert rows[row]["metadata"]["title"].endswith(render.SUMMARY_DIVIDER), start

    def test_render_hits_leaves_title_matches_to_the_list(self):
        hit = SearchHit("sid", "pk", "T", False, None, "title", time.time(), "T", [(0, 1)])
        out = search_panel.render_hits([hit], query="t")
        assert "No message matches." in out


class TestTagHits:
    """Issue 31, item 14: a chat found by a word of its tag must be listed once, saying it was a
    tag (in the page's language), and open its version in use, not the root the tags live on."""

    def test_a_tag_row_in_english_and_chinese_on_the_version_in_use(self, ctx, tmp_path):
        from webui import i18n

        s = ctx.manager.create(tmp_path, title="Backyard <plans>")
        ctx.manager.add_messages(s.key, [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
        ctx.manager.tag(s.key, add=["gazebo-build"])
        v = ctx.manager.fork(s.key, 0, version=True)  # in use now
        out = search_panel.results_html(ctx, s.key.project_key, "gazebo")
        assert out.count('class="ac-hit-row"') == 1
        assert "In messages and tags (1)" in out and "<b>Tag:</b> #<mark>gazebo</mark>-build" in out
        assert "Backyard &lt;plans&gt;" in out and "ac-hit-version" not in out
        data = json.loads(out.split('data-hit="')[1].split('"')[0].replace("&quot;", '"'))
        assert (data["sid"], data["role"], data["idx"]) == (v.id, "tag", -1)
        with i18n.using("zh-CN", "Asia/Shanghai"):
            zh = search_panel.results_html(ctx, s.key.project_key, "gazebo")
        assert "消息和标签中（1）" in zh and "<b>标签:</b>" in zh
        ctx.manager.tag(s.key, remove=["gazebo-build"])
        assert "No message matches." in search_panel.results_html(ctx, s.key.project_key, "gazebo")


class TestWarmUp:
    """The first search after start waiting for a whole first build."""

    def test_warm_up_indexes_every_project_in_the_background(self, ctx, tmp_path):
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        keys = []
        for folder in ("a", "b"):
            s = ctx.manager.create(tmp_path / folder)
            ctx.manager.add_messages(s.key, [{"role": "user", "content": f"warm {folder}"}])
            keys.append(s.key)
        thread = search_panel.warm_up(ctx)
        thread.join(timeout=30)
        index = ctx.storage.search
        assert index.update() == 0  # nothing left to do
        assert {h.session_id for h in index.search("warm")} == {k.session_id for k in keys}
