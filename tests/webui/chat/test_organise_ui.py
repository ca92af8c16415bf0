"""Pins and tags on the page (issue 31, items 13-14) through the plain functions: the sidebar
list (Pinned first, chips, the row menu), its tag filter, the tag bar and the actions the page's
script sends (webui.chat.organise), without a browser."""
from __future__ import annotations

import html
import json
import re

import pytest

from core import LocalSessionStore, SessionManager
from webui import i18n
from webui.chat import handlers, organise
from webui.chat.context import WebContext
from webui.render import rows as render
from tests.support.storage import storage_of


@pytest.fixture
def ctx(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                      model_overrides=dict(api_key="sk-test", base_url="http://127.0.0.1:9/v1", max_retries=0),
                      export_dir=tmp_path / "exports")


def chat(ctx, title):
    s = ctx.manager.create(ctx.project_path, title=title)
    ctx.manager.add_messages(s.key, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    return s


def titles_in_order(markup):
    return [html.unescape(t) for t in re.findall(r'class="ac-session-title">([^<]*)<', markup)]


def state_of(ctx, s=None):
    return {"project": ctx.project_key, "session": s.id if s else None}


class TestSidebar:
    """Guards against a pinned chat not at the top, a tag filter that also drops matching chats
    (or keeps others), and tag text reaching the page as markup."""

    def test_pinned_group_first_and_chips(self, ctx):
        old = chat(ctx, "Old one")
        chat(ctx, "Newer")
        assert organise.apply(ctx, state_of(ctx), {"action": "pin", "sid": old.id}) is None
        organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": old.id, "tags": "work, R&D"})
        markup = handlers.session_list_html(ctx, ctx.project_key)
        assert titles_in_order(markup) == ["Old one", "Newer"]
        assert ">Pinned<" in markup and 'data-pinned="1"' in markup
        assert 'data-tag="work"' in markup and 'data-tag="r&amp;d"' in markup and "#r&amp;d<" in markup
        assert "R&D" not in markup and "r&d" not in markup
        organise.apply(ctx, state_of(ctx), {"action": "unpin", "sid": old.id})
        assert titles_in_order(handlers.session_list_html(ctx, ctx.project_key)) == ["Newer", "Old one"]

    def test_bad_tag_is_refused_with_a_sentence(self, ctx):
        s = chat(ctx, "Chat")
        notice = organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": s.id, "tags": "a:b"})
        assert notice and "letters, digits" in notice
        assert ctx.manager.pin_and_tags(s.key)[1] == ()

    def test_filter_by_tag_and_words(self, ctx):
        a, b, c = chat(ctx, "Deploy prod"), chat(ctx, "Deploy staging"), chat(ctx, "Lunch")
        for s, tags in ((a, "ops, urgent"), (b, "ops"), (c, "urgent")):
            organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": s.id, "tags": tags})
        assert set(titles_in_order(handlers.session_list_html(ctx, ctx.project_key, query="tag:ops"))) == \
            {"Deploy prod", "Deploy staging"}
        assert titles_in_order(handlers.session_list_html(ctx, ctx.project_key, query="TAG:ops tag:urgent")) == \
            ["Deploy prod"]
        assert titles_in_order(handlers.session_list_html(ctx, ctx.project_key, query="staging tag:ops")) == \
            ["Deploy staging"]
        assert titles_in_order(handlers.session_list_html(ctx, ctx.project_key, query="tag:none")) == []

    def test_a_tag_search_that_finds_nothing_speaks_of_tags(self, ctx):
        """Guards against trial 11's "No conversation title matches this search" for `tag:NAME`."""
        organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": chat(ctx, "Deploy").id, "tags": "ops"})
        empty = handlers.session_list_html(ctx, ctx.project_key, query="tag:none")
        assert "No conversation has the tag #none." in empty and "title" not in empty
        both = handlers.session_list_html(ctx, ctx.project_key, query="lunch tag:ops")
        assert "No conversation with the tag #ops has a title matching this search." in both
        assert "No conversation title matches" in handlers.session_list_html(ctx, ctx.project_key, query="zzz")
        with i18n.using("zh-CN", "Asia/Shanghai"):
            assert "没有带有标签 #none 的对话。" in handlers.session_list_html(ctx, ctx.project_key, query="tag:none")

    def test_menu_labels_in_chinese(self, ctx):
        chat(ctx, "聊天")
        with i18n.using("zh-CN", "Asia/Shanghai"):
            markup = handlers.session_list_html(ctx, ctx.project_key)
        labels = json.loads(html.unescape(re.search(r'data-menu-labels="([^"]*)"', markup).group(1)))
        assert labels == {"pin": "置顶", "unpin": "取消置顶", "tags": "编辑标签…",
                          "prompt": "此对话的标签，用逗号分隔（留空：无标签）"}


class TestTagBar:
    """Guards against the title bar showing another chat's tags, or a tag edit undoing a tag
    another tab added meanwhile."""

    def test_bar_follows_the_open_chat_and_its_versions(self, ctx):
        s = chat(ctx, "Chat")
        assert organise.tag_bar_html(ctx, state_of(ctx)) == ""
        organise.apply(ctx, state_of(ctx, s), {"action": "add_tags", "sid": s.id, "tags": "one，two"})
        v = ctx.manager.fork(s.key, 0, version=True)
        bar = organise.tag_bar_html(ctx, {"project": ctx.project_key, "session": v.id})
        assert 'data-untag="one"' in bar and 'data-untag="two"' in bar and "data-add-tag" in bar
        organise.apply(ctx, state_of(ctx, s), {"action": "untag", "sid": v.id, "tag": "one"})
        assert ctx.manager.pin_and_tags(s.key)[1] == ("two",)

    def test_edit_keeps_what_another_tab_added_meanwhile(self, ctx):
        s = chat(ctx, "Chat")
        organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": s.id, "tags": "a"})
        ctx.manager.tag(s.key, add=["from-b"])  # tab B, while A's prompt showed "a"
        organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": s.id, "tags": "a, from-b, c"})
        assert ctx.manager.pin_and_tags(s.key)[1] == ("a", "from-b", "c")

    def test_malformed_actions_are_ignored(self, ctx):
        s = chat(ctx, "Chat")
        for bad in ("not json", {"action": "explode", "sid": s.id}, {"sid": s.id}, '{"action": "pin"}'):
            assert organise.apply(ctx, state_of(ctx), bad) is None
        assert ctx.manager.pin_and_tags(s.key) == (None, ())
        assert organise.apply(ctx, state_of(ctx), {"action": "pin", "sid": "0" * 32}) is not None

    def test_a_bad_part_keeps_the_others_and_is_named(self, ctx):
        """Trial 12: "work, <b>x</b>, urgent" saved no tag at all, and the typed list was gone."""
        s = chat(ctx, "Chat")
        ctx.manager.tag(s.key, add=["old"])
        notice = organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": s.id, "tags": "old, work, <b>x</b>, urgent"})
        assert ctx.manager.pin_and_tags(s.key)[1] == ("old", "work", "urgent")
        assert "“<b>x</b>”" in notice and "the other tags were saved" in notice
        notice = organise.apply(ctx, state_of(ctx), {"action": "tags", "sid": s.id, "tags": "<i>"})
        assert notice and ctx.manager.pin_and_tags(s.key)[1] == ("old", "work", "urgent"), "nothing valid: nothing removed"
        notice = organise.apply(ctx, state_of(ctx), {"action": "add_tags", "sid": s.id, "tags": "x:y, home"})
        assert "“x:y”" in notice and "home" in ctx.manager.pin_and_tags(s.key)[1]

    def test_parse_tags(self):
        assert organise.parse_tags(" #Work, to do ；x、y\n") == ["work", "to-do", "x", "y"]
        assert organise.parse_tags("a, A , b") == ["a", "b"]
        assert organise.parse_tags("") == []


class TestMessageSearchByTag:
    """Guards against `tag:NAME` in the search box being looked for as text in messages (no hit
    ever), or hits of untagged chats staying listed."""

    def test_hits_only_from_tagged_conversations(self, ctx):
        from webui.chat.search import results_html

        a, b = chat(ctx, "One"), chat(ctx, "Two")
        ctx.manager.add_messages(a.key, [{"role": "user", "content": "the kettle is broken"}])
        ctx.manager.add_messages(b.key, [{"role": "user", "content": "a kettle for tea"}])
        ctx.manager.tag(a.key, add=["home"])
        both = results_html(ctx, ctx.project_key, "kettle")
        assert "One" in both and "Two" in both
        tagged = results_html(ctx, ctx.project_key, "kettle tag:home")
        assert "One" in tagged and "Two" not in tagged
        assert results_html(ctx, ctx.project_key, "tag:home") == ""  # the list shows them


class TestMeterUsage:
    """Guards against the meter's tooltip hiding the chat's usage, or showing a cost nobody priced."""

    def test_tooltip_totals_and_cost(self, ctx, monkeypatch):
        from core.session.usage import usage_entry
        from webui.chat.compaction import meter_html

        s = chat(ctx, "Chat")
        ctx.storage.sessions.append(s.key, [usage_entry(2, "gpt-4o-mini", 1200, 300, estimated=False)])
        monkeypatch.delenv("ANYCODE_PRICES", raising=False)
        tip = html.unescape(meter_html(ctx, state_of(ctx, s), "gpt-4o-mini", probe=False))
        assert "This chat so far: 1,500 tokens (1,200 in, 300 out) over 1 replies." in tip and "cost" not in tip
        monkeypatch.setenv("ANYCODE_PRICES", "gpt-4o-mini=1/2")
        tip = html.unescape(meter_html(ctx, state_of(ctx, s), "gpt-4o-mini", probe=False))
        assert ", cost 0.0018." in tip
        with i18n.using("zh-CN", "Asia/Shanghai"):
            tip = html.unescape(meter_html(ctx, state_of(ctx, s), "gpt-4o-mini", probe=False))
        assert "此对话至今" in tip
