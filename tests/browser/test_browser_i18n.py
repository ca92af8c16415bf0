"""The web UI in the browser's language and time zone (issue 20), in a real Chromium against
``python -m webui`` (server time zone set with ``TZ``), one app for the module."""
from __future__ import annotations

import datetime as dt
import re
import time
from zoneinfo import ZoneInfo

import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import TIMEOUT_MS, _post, expect, running_app, wait_loaded
from tests.webui.i18n.test_i18n import english_left
from webui import i18n

pytestmark = pytest.mark.browser

NIGHT_CHAT = "部署计划回顾"  # stored at 23:00 yesterday, server time
UNTITLED_AT = "2026-03-04 05:06"


def _offset_zone(hours: int) -> str:
    """An IANA name for a fixed UTC offset (``Etc/GMT`` signs are inverted)."""
    if hours == 0:
        return "UTC"
    return f"Etc/GMT{'-' if hours > 0 else '+'}{abs(hours)}"


def pick_zones(now: float) -> tuple[str, str]:
    """``(server zone, browser zone 8 hours ahead)`` such that, at ``now``, the server's day is
    also the browser's day (server local time between 01:00 and 14:59): then a chat from 23:00
    yesterday, server time, is "Yesterday" on the server's calendar and 07:00 "Today" in the
    browser's — whatever the clock says. UTC for the server whenever that holds."""
    for hours in [0, *sorted(range(-12, 7), key=abs)]:
        local = dt.datetime.fromtimestamp(now, ZoneInfo(_offset_zone(hours)))
        if 1 <= local.hour <= 14:
            return _offset_zone(hours), ("Asia/Shanghai" if hours == 0 else _offset_zone(hours + 8))
    raise AssertionError("no zone pair")  # unreachable: the offsets cover every hour


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("i18n")
    proj, data = root / "商店", root / "data"
    proj.mkdir()
    server_zone, browser_zone = pick_zones(time.time())
    store = LocalSessionStore(data)
    pk = project_key(str(proj))
    today = dt.datetime.now(ZoneInfo(server_zone)).date()
    night = dt.datetime.combine(today - dt.timedelta(days=1), dt.time(23, 0), ZoneInfo(server_zone)).timestamp()
    untitled = dt.datetime.fromisoformat(UNTITLED_AT).replace(tzinfo=ZoneInfo(browser_zone)).timestamp()
    for title, ts, archived in [(NIGHT_CHAT, night, False), (None, untitled, False), ("旧的对话", night - 20 * 86400, True)]:
        key = SessionKey(pk, new_session_id())
        entries = [header_entry(key.session_id, pk, str(proj), created_at=ts),
                   message_entry({"role": "user", "content": "你好，请帮我看看部署脚本。"}, ts=ts),
                   message_entry({"role": "assistant", "content": "好的。"}, ts=ts + 5)]
        if title:
            entries.append(title_entry(title, "llm", ts=ts + 6))
        store.append(key, entries)
        if archived:
            store.archive(key)
    # ANYCODE_LANG "auto" (as unset) whatever the caller's environment: the browser's language decides
    with running_app(root, proj, "--data-dir", str(data), TZ=server_zone, ANYCODE_LANG="auto") as served:
        yield {"url": served["url"], "server_zone": server_zone, "browser_zone": browser_zone, "fake": served["fake"]}


def open_page(browser, url: str, locale: str, zone: str):
    context = browser.new_context(locale=locale, timezone_id=zone, viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    expect(page.locator("#ac-list .ac-session").first).to_be_visible(timeout=TIMEOUT_MS)  # a loaded machine
    wait_loaded(page)  # the list comes with the page; the labels in its language with the load's answer
    return context, page


def group_of(page, title: str) -> str:
    """The date group label above the sidebar row titled ``title``."""
    return page.locator(".ac-group", has=page.locator(".ac-session", has_text=title)).locator(
        ".ac-group-label").inner_text()


def visible_text(page) -> str:
    """What a reader sees of the UI: the page's rendered text (without code blocks: tool arguments
    and results are the conversation's content, not UI words) plus input placeholders and values."""
    return page.evaluate("""() => {
      const code = [...document.querySelectorAll('pre')];
      const before = code.map((el) => el.style.display);
      code.forEach((el) => { el.style.display = 'none'; });
      const parts = [document.body.innerText];
      code.forEach((el, i) => { el.style.display = before[i]; });
      for (const el of document.querySelectorAll('input, textarea')) {
        if (el.offsetParent === null) continue;
        if (el.placeholder) parts.push(el.placeholder);
        if (el.value && el.type !== 'hidden') parts.push(el.value);
      }
      return parts.join('\\n');
    }""")


class TestLanguageFollowsTheBrowser:
    """Guards against a UI that stays English for a Chinese browser (or turns Chinese for an
    English one), and English strings left over in the Chinese UI."""

    def test_chinese_browser_sees_the_chinese_ui(self, app, browser):
        context, page = open_page(browser, app["url"], "zh-CN", app["browser_zone"])
        try:
            expect(page.locator("#ac-new")).to_contain_text("新对话")
            expect(page.locator("#ac-search textarea, #ac-search input").first).to_have_attribute("placeholder", "搜索对话")
            expect(page.locator("#ac-input textarea")).to_have_attribute("placeholder", "给 anycode 发消息")
            expect(page.locator(".ac-footnote")).to_contain_text("对话保存在本机")
            expect(page.locator("#ac-list")).to_contain_text("会话 " + UNTITLED_AT)  # untitled, localised label
            expect(page.locator("#ac-list .ac-when").first).to_contain_text("前")  # Babel: "N小时前"
            expect(page.locator("#ac-chat")).to_contain_text("今天我们要做什么")
            # every field named for screen readers and scripts, not Gradio's "Textbox" (round 23's trial)
            for role, name in (("textbox", "对话标题"), ("combobox", "模型"), ("textbox", "搜索对话"),
                               ("textbox", "给 anycode 发消息")):
                expect(page.get_by_role(role, name=name, exact=True)).to_have_count(1)
        finally:
            context.close()

    def test_english_browser_sees_the_english_ui(self, app, browser):
        context, page = open_page(browser, app["url"], "en-US", app["browser_zone"])
        try:
            expect(page.locator("#ac-new")).to_contain_text("New chat")
            expect(page.locator("#ac-input textarea")).to_have_attribute("placeholder", "Message anycode")
            expect(page.locator("#ac-list")).to_contain_text("Session " + UNTITLED_AT)
            expect(page.locator(".ac-footnote")).to_contain_text("Conversations are saved on this machine")
            assert group_of(page, NIGHT_CHAT) == "Today"
            assert not re.search(r"[\u4e00-\u9fff]", page.locator("#ac-topbar").inner_text())
            for role, name in (("textbox", "Chat title"), ("combobox", "Model"), ("textbox", "Search chats"),
                               ("textbox", "Message anycode")):
                expect(page.get_by_role(role, name=name, exact=True)).to_have_count(1)
        finally:
            context.close()

    def test_no_english_left_in_the_chinese_ui(self, app, browser):
        context, page = open_page(browser, app["url"], "zh-CN", app["browser_zone"])
        seen: dict[str, list] = {}
        try:
            seen["start"] = english_left(visible_text(page))
            # an open conversation, its delete confirmation
            page.locator("#ac-list .ac-session", has_text=NIGHT_CHAT).click()
            expect(page.locator("[data-testid=user]").first).to_contain_text("部署脚本")
            # a message's menu (Branch from here)
            page.locator("[data-testid=user]").first.hover()
            menu = page.locator("#ac-chat .extra-feedback > button").first
            expect(menu).to_have_accessible_name("更多操作")  # trial 11: "Feedback" in every language
            menu.click()
            expect(page.get_by_role("button", name="从这里分支").first).to_be_visible()
            seen["message menu"] = english_left(visible_text(page))
            page.locator("#ac-title input").click()
            page.locator("#ac-delete").click()
            expect(page.locator("#ac-confirm")).to_be_visible()
            seen["open chat, delete bar"] = english_left(visible_text(page))
            page.locator("#ac-cancel-delete").click()
            # the archive list and the message search
            page.locator("#ac-archived input").check()
            expect(page.locator("#ac-list")).to_contain_text("旧的对话")
            seen["archived list"] = english_left(visible_text(page))
            page.locator("#ac-archived input").uncheck()
            page.locator("#ac-search textarea, #ac-search input").first.fill("部署")
            expect(page.locator("#ac-search-results")).to_contain_text("消息中")
            seen["search"] = english_left(visible_text(page))
            page.locator("#ac-search textarea, #ac-search input").first.fill("")
            # the memory panel
            page.locator("#ac-memory-open").click()
            expect(page.locator("#ac-memory")).to_be_visible()
            expect(page.locator("#ac-memory-list")).to_contain_text("还没有记忆")
            seen["memory panel"] = english_left(visible_text(page))
        finally:
            context.close()
        left = {stage: found for stage, found in seen.items() if found}
        assert not left, left

    def test_no_english_left_around_a_tool_call_and_its_approval(self, app, browser):
        _post(app["fake"] + "/_script", {"replies": [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "说明.txt", "content": "内容\n"},
                             "id": "call_zh"}]},
            {"text": "好的，没有写入。"}]})
        context, page = open_page(browser, app["url"], "zh-CN", app["browser_zone"])
        seen: dict[str, list] = {}
        try:
            page.locator("#ac-new").click()
            box = page.locator("#ac-input textarea")
            box.fill("请写一个说明文件")
            box.press("Enter")
            expect(page.locator("#ac-approval")).to_be_visible(timeout=TIMEOUT_MS)
            expect(page.locator("#ac-approval-head")).to_contain_text("批准这项更改吗")
            seen["approval card"] = english_left(visible_text(page))
            page.locator("#ac-deny").click()
            expect(page.locator("[data-testid=bot]").last).to_contain_text("没有写入", timeout=TIMEOUT_MS)
            page.locator("#ac-chat").get_by_text("write_file").first.click()  # open the tool step
            expect(page.locator("#ac-chat")).to_contain_text("参数")  # its "Arguments" heading
            seen["tool step"] = english_left(visible_text(page))
        finally:
            context.close()
        left = {stage: found for stage, found in seen.items() if found}
        assert not left, left

    def test_the_language_setting_overrides_the_browser(self, app, browser):
        context, page = open_page(browser, app["url"], "en-US", app["browser_zone"])
        try:
            expect(page.locator("#ac-new")).to_contain_text("New chat")
            page.locator("#ac-lang input").click()
            with page.expect_navigation():
                page.get_by_role("option", name="简体中文").click()
            expect(page.locator("#ac-new")).to_contain_text("新对话", timeout=TIMEOUT_MS)  # a static label, relabelled
            expect(page.locator("#ac-list")).to_contain_text("会话 " + UNTITLED_AT)  # server-rendered
            expect(page.locator("#ac-lang input")).to_have_value("简体中文")
            page.locator("#ac-lang input").click()
            with page.expect_navigation():
                page.get_by_role("option", name=re.compile("自动")).click()
            expect(page.locator("#ac-new")).to_contain_text("New chat", timeout=TIMEOUT_MS)
        finally:
            context.close()


class TestDateGroupsInTheBrowsersZone:
    """Guards against the sidebar's date groups following the server's time zone: a chat from
    23:00 yesterday (server time) is "Today" for a browser 8 hours ahead, where it is 07:00 today."""

    def test_groups_follow_the_browser_not_the_server(self, app, browser):
        ahead, page = open_page(browser, app["url"], "zh-CN", app["browser_zone"])
        try:
            assert group_of(page, NIGHT_CHAT) == "今天"
        finally:
            ahead.close()
        local, page = open_page(browser, app["url"], "zh-CN", app["server_zone"])
        try:
            assert group_of(page, NIGHT_CHAT) == "昨天"  # where the server's own calendar puts it
        finally:
            local.close()
