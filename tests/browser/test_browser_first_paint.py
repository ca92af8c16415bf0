"""The shell of the page's first paint (issue 32, :mod:`webui.gui.first_paint`): the sidebar drawn
from the page's HTML before Gradio's scripts have mounted anything, in a real Chromium. Gradio's
main script is held back by the test (a route answered only when the test says so), so what the
shell does is seen on its own: its rows where the real ones will be, a click on it kept until the
page can open the chat, its theme, and no shell on a narrow window or once the page is mounted."""
from __future__ import annotations

import re

import pytest

from tests.support.chromium import (BROWSER_ARGS, CHROMIUM, TIMEOUT_MS, PatientExpect, _seed, running_app, sync_api,
                                    wait_loaded)

pytestmark = pytest.mark.browser
expect = PatientExpect

GRADIO_MAIN = re.compile(r"/assets/index-[^/]*\.js$")  # Gradio's page script (its template's <script src>)
# Each frame from the page's start: the top of the first sidebar row on screen (the shell's while
# it is there, else Gradio's), until the page's load has answered.
FRAMES_JS = """(() => { window.__rows = []; const frame = () => {
  const shell = document.querySelector('#ac-shell .ac-session');
  const row = shell || document.querySelector('#ac-list .ac-session');
  if (row) window.__rows.push([shell ? 'shell' : 'list', Math.round(row.getBoundingClientRect().top)]);
  if (window.acPageLoaded !== true) requestAnimationFrame(frame); };
  requestAnimationFrame(frame); })()"""
ROWS_BOX_JS = """(sel) => [...document.querySelectorAll(sel)].slice(0, 4).map((e) => {
  const r = e.getBoundingClientRect(); return [e.textContent.trim().slice(0, 20), r.x, r.y, r.width, r.height]; })"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("first-paint")
    proj, data = tmp / "shop-api", tmp / "data"
    proj.mkdir()
    _seed(data, proj)
    with running_app(tmp, proj, "--data-dir", str(data)) as served:
        yield served


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        yield chromium
        chromium.close()


def _held_page(browser, url: str, **context):
    """A page loading ``url`` with Gradio's main script held: returns (page, release)."""
    pg = browser.new_page(viewport=context.pop("viewport", {"width": 1360, "height": 860}), **context)
    pg.set_default_timeout(TIMEOUT_MS)
    held = []
    pg.route(GRADIO_MAIN, lambda route: held.append(route))
    pg.goto(url, wait_until="commit")
    expect(pg.locator("body")).to_be_attached()

    def release():
        for _ in range(100):
            if held:
                break
            pg.wait_for_timeout(100)
        assert held, "Gradio's main script was never asked for"
        held[0].continue_()
        pg.unroute(GRADIO_MAIN)

    return pg, release


class TestTheSidebarBeforeTheMount:
    """Guards against the sidebar waiting for Gradio's mount (issue 32: page load → sidebar 2.0× a
    bare Gradio app's, all of it Gradio building 134 blocks), and against the shell that now stands
    in for it jumping, doubling the list, or losing a click."""

    def test_the_shell_shows_the_list_where_the_real_one_comes(self, browser, world):
        pg, release = _held_page(browser, world["url"])
        try:
            shell_rows = pg.locator("#ac-shell .ac-session")
            expect(shell_rows.filter(has_text="Set up the Postgres store")).to_be_visible()
            expect(pg.locator("#ac-shell")).to_contain_text("New chat")
            expect(pg.locator("#ac-shell .ac-shell-search")).to_have_attribute("placeholder", "Search chats")
            expect(pg.locator("#ac-list")).to_have_count(0)  # nothing of Gradio's yet
            before = pg.evaluate(ROWS_BOX_JS, "#ac-shell .ac-group-label, #ac-shell .ac-session")
            release()
            wait_loaded(pg)
            expect(pg.locator("#ac-shell")).to_have_count(0)
            expect(pg.locator(".ac-session", has_text="Set up the Postgres store")).to_have_count(1)
            after = pg.evaluate(ROWS_BOX_JS, "#ac-list .ac-group-label, #ac-list .ac-session")
            assert len(before) == len(after) == 4
            for shell_box, real_box in zip(before, after):
                assert shell_box[0] == real_box[0]
                assert all(abs(a - b) <= 1 for a, b in zip(shell_box[1:], real_box[1:])), (shell_box, real_box)
        finally:
            pg.close()

    def test_a_row_clicked_on_the_shell_opens_once_the_page_can(self, browser, world):
        pg, release = _held_page(browser, world["url"])
        try:
            row = pg.locator("#ac-shell .ac-session", has_text="Why is CI flaky on Mondays?")
            row.click()
            expect(row).to_have_class(re.compile(r"\bactive\b"))
            release()
            expect(pg.locator("[data-testid=user]").first).to_have_text("Why is CI flaky on Mondays?")
            expect(pg.locator("#ac-list .ac-session.active")).to_contain_text("Why is CI flaky on Mondays?")
            expect(pg).to_have_url(re.compile(r"[?&]session="))
        finally:
            pg.close()

    def test_new_chat_clicked_on_the_shell_leaves_a_linked_chat(self, browser, world):
        probe = browser.new_page()
        probe.goto(world["url"])
        wait_loaded(probe)
        sid = probe.locator("#ac-list .ac-session", has_text="Refactor").get_attribute("data-sid")
        probe.close()
        pg, release = _held_page(browser, f"{world['url']}?session={sid}")
        try:
            expect(pg.locator("#ac-shell .ac-session.active")).to_contain_text("Refactor the config loader")
            pg.locator("#ac-shell [data-shell-new]").click()
            release()
            wait_loaded(pg)
            expect(pg.locator("[data-testid=user]")).to_have_count(0)
            expect(pg.locator("#ac-list .ac-session.active")).to_have_count(0)
            pg.wait_for_function("() => !new URLSearchParams(location.search).has('session')", timeout=TIMEOUT_MS)
        finally:
            pg.close()

    def test_no_frame_moves_the_list_while_gradio_mounts(self, browser, world):
        """A trial saw the shell leave as soon as Gradio's list was there, before New chat and the
        search box above it: the list jumped up by 50-100 px for 20-250 ms, then back down."""
        for _ in range(3):
            pg = browser.new_page(viewport={"width": 1280, "height": 800})
            pg.set_default_timeout(TIMEOUT_MS)
            try:
                pg.add_init_script(FRAMES_JS)
                cdp = pg.context.new_cdp_session(pg)
                cdp.send("Emulation.setCPUThrottlingRate", {"rate": 4})  # a slower machine: longer mount
                pg.goto(world["url"])
                wait_loaded(pg)
                frames = pg.evaluate("() => window.__rows")
                assert frames and frames[0][0] == "shell" and frames[-1][0] == "list", frames
                assert {top for _, top in frames} == {frames[-1][1]}, frames
            finally:
                pg.close()

    def test_what_is_typed_in_the_shells_search_box_is_searched(self, browser, world):
        pg, release = _held_page(browser, world["url"])
        try:
            box = pg.locator("#ac-shell .ac-shell-search")
            box.click()
            pg.keyboard.type("Postgres")
            release()
            wait_loaded(pg)
            real = pg.locator("#ac-search textarea")
            expect(real).to_have_value("Postgres")
            expect(real).to_be_focused()
            expect(pg.locator("#ac-list .ac-session")).to_have_count(1)  # the titles searched
            expect(pg.locator("#ac-list .ac-session")).to_contain_text("Set up the Postgres store")
        finally:
            pg.close()

    def test_dark_when_the_page_will_be_dark(self, browser, world):
        pg, release = _held_page(browser, world["url"], color_scheme="dark")
        try:
            shell = pg.locator("#ac-shell")
            expect(shell.locator(".ac-session").first).to_be_visible()
            assert shell.evaluate("(e) => getComputedStyle(e).backgroundColor") == "rgb(17, 17, 19)"
            title = shell.locator(".ac-session-title").first
            assert title.evaluate("(e) => getComputedStyle(e).color") == "rgb(244, 244, 245)"
            release()
            wait_loaded(pg)
            side = pg.locator("#ac-sidebar")
            assert side.evaluate("(e) => getComputedStyle(e).backgroundColor") == "rgb(17, 17, 19)"
        finally:
            pg.close()
        pg, release = _held_page(browser, world["url"] + "?__theme=light", color_scheme="dark")
        try:  # Gradio's ?__theme= wins for the page, so for its shell too
            shell = pg.locator("#ac-shell")
            expect(shell.locator(".ac-session").first).to_be_visible()
            assert shell.evaluate("(e) => getComputedStyle(e).backgroundColor") == "rgb(247, 247, 248)"
            release()
        finally:
            pg.close()

    def test_no_shell_on_a_narrow_window(self, browser, world):
        # The sidebar starts closed there (webui/gui/narrow.py): a shell would flash over the chat.
        pg, release = _held_page(browser, world["url"], viewport={"width": 600, "height": 800})
        try:
            expect(pg.locator("#ac-shell")).to_be_attached()
            expect(pg.locator("#ac-shell")).to_be_hidden()
            release()
            wait_loaded(pg)
            expect(pg.locator("#ac-shell")).to_have_count(0)
        finally:
            pg.close()
