"""The sidebar's message search: plain functions without a browser, then a real Chromium typing a word
said in a conversation and clicking the result."""
from __future__ import annotations

import json
import time

import pytest

from core import LocalSessionStore, SessionManager
from core.search import SearchHit
from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from webui import search_panel

try:
    from tests.test_browser_e2e import page, world  # noqa: F401  (browser fixtures; skip without Chromium)
except pytest.skip.Exception:  # pragma: no cover - the module skips itself without Chromium/playwright
    page = world = None


class _Ctx:
    def __init__(self, store):
        self.store = store
        self.manager = SessionManager(store)


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
        from webui import render
        for start in (0, render.window_start(session.messages, size=4, include=include)):
            row = search_panel.hit_row(ctx, s.key.project_key, s.id, data["idx"], start, data["role"])
            rows = render.chat_window(session.messages, start, session.compactions).rows
            assert rows[row]["metadata"]["title"].endswith(render.SUMMARY_DIVIDER), start

    def test_render_hits_leaves_title_matches_to_the_list(self):
        hit = SearchHit("sid", "pk", "T", False, None, "title", time.time(), "T", [(0, 1)])
        out = search_panel.render_hits([hit], query="t")
        assert "No message matches." in out


@pytest.mark.browser
class TestSearchInBrowser:
    """Typing a word said in a conversation does not find it, or the click does not open it at that message."""

    def test_type_a_word_and_open_the_result(self, world, page):
        from tests.test_browser_e2e import expect

        proj, data = world["proj"], world["data"]
        store = LocalSessionStore(data)
        now = time.time()
        target = None
        for n, (title, word) in enumerate([("Database work", "migration"), ("Frontend polish", "flexbox"),
                                           ("Old stuff", "nothing")]):
            key = SessionKey(project_key(str(proj)), new_session_id())
            entries = [header_entry(key.session_id, key.project_key, str(proj), created_at=now - 3600 * (n + 1))]
            for i in range(30):
                text = f"Filler message number {i} about the weather."
                if word == "flexbox" and i == 24:
                    text = "Let us center it with a flexbox and call it done, 完成了"
                entries.append(message_entry({"role": "user" if i % 2 == 0 else "assistant", "content": text},
                                             ts=now - 3600 * (n + 1) + i))
            entries.append(title_entry(title, "user", ts=now - 3600 * (n + 1) + 40))
            store.append(key, entries)
            if word == "flexbox":
                target = key.session_id
        url = world["start_app"]()
        page.goto(url)
        expect(page.locator("#ac-list")).to_contain_text("Database work")
        page.locator("#ac-search textarea, #ac-search input").first.press_sequentially("flexb", delay=60)
        results = page.locator("#ac-search-results")
        hit = results.locator(".ac-hit-row")
        expect(hit).to_have_count(1)
        expect(hit).to_contain_text("Frontend polish")
        expect(hit.locator("mark")).to_have_text("flexb")
        hit.click()
        expect(page.locator("#ac-title input, #ac-title textarea").first).to_have_value("Frontend polish")
        assert target in page.url
        marked = page.locator("#ac-chat .ac-hit")
        expect(marked).to_have_count(1)
        expect(marked).to_contain_text("center it with a flexbox")
        assert marked.evaluate("el => { const r = el.getBoundingClientRect(); "
                               "return r.bottom > 0 && r.top < window.innerHeight; }")
        # Chinese, two characters, from the search box
        box = page.locator("#ac-search textarea, #ac-search input").first
        box.fill("完成")
        expect(results.locator(".ac-hit-row")).to_have_count(1)
        expect(results.locator("mark")).to_have_text("完成")


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
        index = search_panel.open_search(ctx.store)
        assert index.update() == 0  # nothing left to do
        assert {h.session_id for h in index.search("warm")} == {k.session_id for k in keys}
