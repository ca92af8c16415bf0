"""The chat page at the sizes people use it, in a real Chromium (issue 18): a phone (360 px), a narrow
window (700 px), a laptop (1280×850). One app and one browser for the module (fixtures like
``test_browser_e2e``: the app and the fake OpenAI server run as subprocesses)."""
from __future__ import annotations

import re
import sys

import pytest

from tests.test_browser_e2e import (BROWSER_ARGS, CHROMIUM, REPO, TIMEOUT_MS, Proc, _env, _free_port, _post,
                                    _seed, expect, send, sync_api)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The fake OpenAI server and the app on a project with a few older conversations."""
    tmp = tmp_path_factory.mktemp("layout")
    proj, data = tmp / "shop-api", tmp / "data"
    proj.mkdir()
    (proj / "README.md").write_text("# shop-api\nA small REST API for the shop.\n")
    env = _env(tmp / "home")
    fake = Proc([sys.executable, "-m", "tests.fake_openai", "--port", "0"], env, REPO)
    base_url = fake.wait_for("READY").split()[-1]
    _seed(data, proj)
    port = _free_port()
    app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project", str(proj),
                "--data-dir", str(data)], _env(tmp / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url), tmp)
    try:
        app.wait_for("anycode is running at")
        yield {"url": f"http://127.0.0.1:{port}/", "fake": base_url.removesuffix("/v1"), "proj": proj, "data": data}
    finally:
        app.stop()
        fake.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            yield b
        finally:
            b.close()


def open_page(browser, world, width: int, height: int, **options):
    """A new page of ``width``×``height`` CSS pixels showing the app, its list loaded."""
    pg = browser.new_page(viewport={"width": width, "height": height}, **options)
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(world["url"])
    expect(pg.locator("#ac-list .ac-session").first).to_be_attached()
    pg.wait_for_timeout(400)  # the page script has run (it closes a narrow window's sidebar)
    return pg


def sidebar_open(pg) -> bool:
    return "open" in (pg.locator("#ac-sidebar").get_attribute("class") or "").split()


def reachable(pg, selector: str) -> bool:
    """True when the element is inside the window and a tap on its centre reaches it (nothing
    covers it, no part of it needs scrolling to)."""
    return pg.evaluate("""(sel) => {
      const el = document.querySelector(sel);
      if (!el) return false;
      const r = el.getBoundingClientRect();
      if (r.width < 1 || r.height < 1 || r.left < 0 || r.top < 0 || r.right > innerWidth + 0.5
          || r.bottom > innerHeight + 0.5) return false;
      const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      return !!hit && (el === hit || el.contains(hit));
    }""", selector)


def no_horizontal_scroll(pg) -> bool:
    return pg.evaluate("() => document.documentElement.scrollWidth <= innerWidth "
                       "&& document.body.scrollWidth <= innerWidth")


TOP_BAR = ["#ac-title input", "#ac-model input", "#ac-compact", "#ac-archive", "#ac-export-md",
           "#ac-export-jsonl", "#ac-delete"]


class TestNarrowWindow:
    """Guards against the sidebar covering a narrow window: open on every load, still over the chat
    after a conversation was picked, the message box under it; and against a phone-sized window
    where a top bar button, the box or Stop is out of reach, or the page scrolls sideways."""

    def test_700px_sidebar_is_a_drawer(self, browser, world):
        pg = open_page(browser, world, 700, 800)
        try:
            assert not sidebar_open(pg), "a narrow window starts with the sidebar closed"
            assert reachable(pg, "#ac-input textarea")
            menu = pg.locator("#ac-sidebar > .toggle-button")
            assert reachable(pg, "#ac-sidebar > .toggle-button")
            menu.click()
            expect(pg.locator("#ac-sidebar")).to_have_class(re.compile(r"\bopen\b"))
            pg.wait_for_timeout(400)  # slides in
            assert reachable(pg, "#ac-list .ac-session")
            pg.locator("#ac-list .ac-session-title", has_text="Why is CI flaky on Mondays?").click()
            expect(pg.locator("#ac-title input")).to_have_value("Why is CI flaky on Mondays?")
            pg.wait_for_timeout(400)
            assert not sidebar_open(pg), "picking a conversation closes the drawer"
            assert reachable(pg, "#ac-input textarea")

            menu.click()
            pg.wait_for_timeout(400)
            pg.locator("#ac-new").click()
            expect(pg.locator("#ac-title input")).to_have_value("")
            pg.wait_for_timeout(400)
            assert not sidebar_open(pg), "New chat closes the drawer"

            menu.click()
            pg.wait_for_timeout(400)
            pg.mouse.click(690, 400)  # the dimmed chat beside the drawer
            pg.wait_for_timeout(400)
            assert not sidebar_open(pg), "a tap beside the drawer closes it"

            pg.reload()
            expect(pg.locator("#ac-list .ac-session").first).to_be_attached()
            pg.wait_for_timeout(400)
            assert not sidebar_open(pg), "closed again after a reload"
        finally:
            pg.close()

    def test_360px_phone_chat_is_usable(self, browser, world):
        pg = open_page(browser, world, 360, 740, is_mobile=True, has_touch=True)
        try:
            assert not sidebar_open(pg)
            assert no_horizontal_scroll(pg)
            for sel in TOP_BAR:
                assert reachable(pg, sel), f"{sel} is out of reach at 360 px"
            assert reachable(pg, "#ac-input textarea")
            assert reachable(pg, "#ac-input button.submit-button")

            _post(world["fake"] + "/_script", {"replies": [
                {"text": "Here is a long line: " + "x" * 300 + " and a table-free answer. " * 30,
                 "chunk": 8, "delay": 0.03}]})
            send(pg, "Tell me about this project in detail")
            stop = pg.locator("#ac-input button.stop-button")
            expect(stop).to_be_visible()
            assert reachable(pg, "#ac-input button.stop-button"), "Stop is out of reach while a reply streams"
            assert no_horizontal_scroll(pg), "a long line made the page scroll sideways"
            stop.click()
            expect(pg.locator("#ac-input button.submit-button")).to_be_visible()
            assert no_horizontal_scroll(pg)
            assert reachable(pg, "#ac-input textarea")

            # The drawer: reachable from the menu button, wide enough for the list, closing on New chat.
            pg.locator("#ac-sidebar > .toggle-button").click()
            pg.wait_for_timeout(400)
            assert reachable(pg, "#ac-new") and reachable(pg, "#ac-search :is(input, textarea)")
            box = pg.locator("#ac-sidebar").bounding_box()
            assert 0 <= box["x"] and box["x"] + box["width"] <= 360
            pg.locator("#ac-new").click()
            pg.wait_for_timeout(400)
            assert not sidebar_open(pg)
            assert no_horizontal_scroll(pg)
        finally:
            pg.close()


class TestLaptopWindow:
    """Guards against the chat's fixed height squashing what shows above it: the Memory panel
    opened at 1280×850 was cut to a sliver (its buttons clipped) and the message box with it."""

    def test_memory_panel_and_box_keep_their_height_at_1280x850(self, browser, world):
        pg = open_page(browser, world, 1280, 850)
        try:
            pg.locator("#ac-list .ac-session").first.click()
            expect(pg.locator("[data-testid=bot]").first).to_be_visible()
            pg.locator("#ac-memory-open").click()
            expect(pg.locator("#ac-memory-close")).to_be_visible()
            pg.wait_for_timeout(500)
            panel = pg.evaluate("""() => { const m = document.getElementById('ac-memory');
                return {client: m.clientHeight, scroll: m.scrollHeight}; }""")
            assert panel["scroll"] <= panel["client"] + 2, f"the Memory panel is squashed: {panel}"
            for sel in ("#ac-memory-close", "#ac-memory-add", "#ac-input textarea", "#ac-input button.submit-button"):
                assert reachable(pg, sel), f"{sel} is cut off with the Memory panel open"
            assert pg.locator("#ac-input").bounding_box()["height"] >= 40
            assert pg.locator("#ac-chat").bounding_box()["height"] >= 120, "the chat keeps some room"
            footnote = pg.locator(".ac-footnote").bounding_box()
            assert footnote["y"] + footnote["height"] <= 850, "the page is taller than the window"
        finally:
            pg.close()
