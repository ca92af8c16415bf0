"""Chat text as written, in a real Chromium (issue 18, defect 1 and item 9): a user's message
shown literally, a reply's HTML shown as text, highlighted code, and Copy buttons whose clipboard
holds the text written. One app and one browser for the module (fixtures from
tests/support/chromium.py's helpers)."""
from __future__ import annotations

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, running_app, send

pytestmark = pytest.mark.browser

USER = "see <b>x</b> and <script>alert(1)</script> here\n\n  two  spaces kept\n*not italic* & <br> done, $$a < b$$"
CODE = "def add(a, b):\n    return a + b  # <sum>"
REPLY = ("Use <b>bold</b> here, and <script>alert(2)</script> too.\n\n"
         "<div class=\"box\">\nraw <i>block</i>\n</div>\n\n"
         f"```python\n{CODE}\n```\n\n"
         "```ts\nconst n: number = 1;\n```\n\n"
         "**Markdown** stays Markdown <!-- a note --> END")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The fake OpenAI server and ``python -m webui``, once for the module; yields (url, fake)."""
    tmp = tmp_path_factory.mktemp("chat-text")
    with running_app(tmp, tmp / "proj", "--data-dir", str(tmp / "data")) as served:
        yield served["url"], served["fake"]


@pytest.fixture(scope="module")
def tab(app, browser):
    """One Chromium tab allowed to read the clipboard, with the conversation of this module sent;
    collects the dialogs any script opened."""
    url, fake = app
    context = browser.new_context(viewport={"width": 1360, "height": 900},
                                  permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.dialogs = dialogs
    try:
        page.goto(url)
        _post(fake + "/_script", {"replies": [{"text": REPLY, "chunk": 40, "delay": 0.01}]})
        send(page, USER)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("END", timeout=TIMEOUT_MS)
        yield page
    finally:
        context.close()


def _clipboard(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


def _copy_message(page, index: int) -> str:
    """Click the Copy button of message ``index`` (the buttons sit below each message)."""
    page.locator("#ac-chat .message-row").nth(index).hover()
    page.locator("#ac-chat").get_by_role("button", name="Copy message").nth(index).click()
    page.wait_for_timeout(200)
    return _clipboard(page)


class TestTextShownAsWritten:
    """A message that loses its <script>…</script> part (or any tag) when shown, HTML in a reply
    rendered or silently dropped, or a script in chat text that runs."""

    def _check(self, page):
        user = page.locator("[data-testid=user]").last
        expect(user).to_contain_text("see <b>x</b> and <script>alert(1)</script> here")
        assert user.locator("pre.ac-lit").evaluate("e => e.textContent") == USER  # spaces and breaks kept
        assert user.get_attribute("aria-label") == "user's message: " + USER  # what a screen reader reads
        bot = page.locator("[data-testid=bot]").last
        for shown in ("Use <b>bold</b> here, and <script>alert(2)</script> too.", '<div class="box">',
                      "raw <i>block</i>", "<!-- a note --> END"):
            expect(bot).to_contain_text(shown)
        expect(bot.locator("strong")).to_have_text("Markdown")  # Markdown is still rendered
        # nothing of the chat text became an element, and nothing ran
        assert page.locator("#ac-chat b, #ac-chat i, #ac-chat script, #ac-chat div.box").count() == 0
        assert page.dialogs == []

    def test_user_message_literal_and_reply_html_as_text(self, tab):
        self._check(tab)  # as streamed
        tab.reload()  # as stored
        expect(tab.locator("[data-testid=bot]").last).to_contain_text("END", timeout=TIMEOUT_MS)
        self._check(tab)


class TestCopyAndHighlight:
    """Copy buttons that copy markup instead of the text written (or nothing), and code blocks
    shown without highlighting."""

    def test_code_highlighted_and_copy_buttons_copy_the_text_written(self, tab):
        bot = tab.locator("[data-testid=bot]").last
        keyword = bot.locator("pre code.language-python .token.keyword").first
        expect(keyword).to_have_text("def")
        plain = bot.locator("pre code.language-python")
        assert keyword.evaluate("e => getComputedStyle(e).color") != plain.evaluate("e => getComputedStyle(e).color")
        expect(bot.locator("pre code.language-javascript .token.keyword").first).to_have_text("const")  # ```ts
        bot.locator(".code_wrap .copy_code_button").first.click()
        tab.wait_for_timeout(200)
        assert _clipboard(tab) == CODE
        assert _copy_message(tab, 0) == USER
        assert _copy_message(tab, 1) == REPLY

    def test_edit_starts_from_the_text_written(self, tab):
        tab.locator("[data-testid=user]").last.hover()
        tab.locator("#ac-chat").get_by_role("button", name="Edit").first.click()
        editor = tab.locator("#ac-chat textarea.edit-textarea").first
        expect(editor).to_have_value(USER)
        tab.locator("#ac-chat").get_by_role("button", name="Cancel").first.click()
        expect(tab.locator("#ac-chat textarea.edit-textarea")).to_have_count(0)

    def test_copy_on_a_plain_http_page_gives_the_text_written(self, tab):
        # Over plain http from another machine (--host 0.0.0.0, a phone on the LAN) the page has no
        # navigator.clipboard: Gradio copies through a hidden textarea and execCommand("copy").
        page = tab.context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.add_init_script("""delete Navigator.prototype.clipboard;
            document.addEventListener('copy', (e) => { window.__copied = e.clipboardData.getData('text/plain'); });""")
        try:
            page.goto(tab.url)
            expect(page.locator("[data-testid=bot]").last).to_contain_text("END", timeout=TIMEOUT_MS)
            assert page.evaluate("'clipboard' in navigator") is False
            page.locator("#ac-chat .message-row").first.hover()
            page.locator("#ac-chat").get_by_role("button", name="Copy message").first.click()
            page.wait_for_function("window.__copied !== undefined")
            assert page.evaluate("window.__copied") == USER
        finally:
            page.close()
