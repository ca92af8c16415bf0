"""In a real Chromium: a full disk gives the typed text back, and text a browser can send (a lone
surrogate from a cut emoji, zero-width spaces) neither kills the page nor sends a ghost message.

One app (``python -m webui`` as a subprocess) for the module, its data dir on a real tmpfs of
2 MiB that the test fills and frees, talking real HTTP to the fake OpenAI server.
"""
from __future__ import annotations

import pytest

from tests.support.chromium import TIMEOUT_MS, expect, running_app
from tests.support.tiny_disk import TinyDisk

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    disk = TinyDisk(tmp / "data", size_kib=2048).mount()
    try:
        with running_app(tmp, tmp / "proj", "--data-dir", str(disk.path)) as running:
            yield {**running, "disk": disk}
    finally:
        disk.unmount()


@pytest.fixture
def page(browser, app):
    pg = browser.new_page(viewport={"width": 1280, "height": 800})
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(app["url"])
    pg.locator("#ac-new").click()
    try:
        yield pg
    finally:
        pg.close()
        app["disk"].free()


def box(page):
    return page.locator("#ac-input textarea")


def type_raw(page, js_string_literal: str) -> None:
    """Put text in the input box the way a browser holds it (JS string, lone surrogates and all)."""
    box(page).evaluate(f"""el => {{ el.value = {js_string_literal};
        el.dispatchEvent(new Event('input', {{bubbles: true}})); }}""")


class TestFullDiskInTheBrowser:
    """Disk full: the page said "Something went wrong (OSError)…" and the message was gone."""

    def test_text_goes_back_in_the_box(self, page, app):
        app["disk"].fill()
        box(page).fill("please keep these words")
        box(page).press("Enter")
        expect(page.locator(".toast-body", has_text="The disk is full")).to_be_visible()
        expect(box(page)).to_have_value("please keep these words")
        expect(page.locator("[data-testid=user]")).to_have_count(0)
        expect(page.locator("#ac-list")).to_contain_text("No conversations yet")
        app["disk"].free()
        box(page).press("Enter")  # the same text, once space is back
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: please keep these words")
        expect(box(page)).to_have_value("")


class TestBrowserText:
    """Text only a browser sends: a lone surrogate killed the event stream; zero-width spaces went
    out as a message."""

    def test_cut_emoji_does_not_kill_the_page(self, page):
        type_raw(page, "'half an emoji \\uD83D'")
        box(page).press("Enter")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: half an emoji \ufffd")
        box(page).fill("still alive?")
        box(page).press("Enter")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: still alive?")
        expect(page.locator("[data-testid=user]")).to_have_count(2)

    def test_zero_width_only_is_not_sent(self, page):
        type_raw(page, "'\\u200B\\u200B\\u200D'")
        box(page).press("Enter")
        page.wait_for_timeout(1500)
        expect(page.locator("[data-testid=user]")).to_have_count(0)
        box(page).fill("a real one")
        box(page).press("Enter")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: a real one")
        expect(page.locator("[data-testid=user]")).to_have_count(1)


REPLY = "Once upon a time a database went away in the middle of a story, and the story stayed. " * 2


@pytest.fixture(scope="module")
def pg_app(tmp_path_factory):
    """The app with a PostgreSQL server of its own as the session store (to kill and restart)."""
    from tests.support.pg_server import own_server

    server = own_server()
    try:
        tmp = tmp_path_factory.mktemp("pg-app")
        with running_app(tmp, tmp / "proj", "--store", server.url) as running:
            yield {**running, "server": server}
    finally:
        server.stop()


@pytest.mark.slow
class TestDatabaseOutageInTheBrowser:
    """PostgreSQL killed while a reply streams: the page showed an empty error, the streamed text
    vanished, and once the database was back the first send was a false "changed elsewhere"."""

    def test_text_stays_and_the_next_send_works(self, browser, pg_app):
        from tests.support.chromium import _post

        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(TIMEOUT_MS)
        server = pg_app["server"]
        try:
            page.goto(pg_app["url"])
            _post(pg_app["fake"] + "/_script", {"replies": [{"text": REPLY, "chunk": 6, "delay": 0.04}]})
            box(page).fill("tell me a story")
            box(page).press("Enter")
            bot = page.locator("[data-testid=bot]")
            expect(bot.first).to_contain_text("Once upon a time")
            server.kill()
            # The whole streamed reply stays, under a readable error (the save is retried first).
            expect(page.locator("#ac-chat")).to_contain_text("The session database is unreachable",
                                                             timeout=60_000)
            expect(bot.first).to_contain_text(REPLY.strip()[-40:])
            # A send while it is down: the sentence, and the text back in the box.
            box(page).fill("are you there?")
            box(page).press("Enter")
            expect(page.locator(".toast-body", has_text="The session database is unreachable").last).to_be_visible()
            expect(box(page)).to_have_value("are you there?")
            expect(page.locator("#ac-chat")).to_contain_text(REPLY.strip()[:30])
            server.restart()
            box(page).press("Enter")
            expect(bot.last).to_contain_text("You said: are you there?", timeout=60_000)
            expect(page.get_by_text("changed elsewhere")).to_have_count(0)
            # Reloading shows what is stored: the story was saved once the database was back.
            page.reload()
            expect(page.locator("#ac-chat")).to_contain_text(REPLY.strip()[-40:])
            expect(page.locator("[data-testid=user]")).to_have_count(2)
        finally:
            page.close()
