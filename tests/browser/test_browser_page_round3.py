"""The chat page, round 3 (issue 31): what a new user tripped on, in a real Chromium (the app and
the fake OpenAI server as subprocesses, as in ``test_browser_e2e``)."""
from __future__ import annotations

import contextlib
import re
import subprocess
import time
from pathlib import Path

import pytest

from core.memory.context import MEMORY_HEADING
from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import TIMEOUT_MS, expect, wait_loaded
from tests.support.storage import storage_of

pytestmark = pytest.mark.browser

SYSTEM_WITH_MEMORY = (f"You are anycode.\n\n{MEMORY_HEADING}\nFacts remembered from the user's earlier "
                      "conversations (most recent first).\n- [project] Tests run with pytest -q\n")


# The look and the language a defect is checked in (issue 31, "done when": light and dark, English and
# Chinese): English in a light system theme on the test's own page, Chinese in a dark one on a page of
# the same Chromium and the same app (a browser context of its own language and colour scheme, as a
# Chinese user with a dark system would come) — a second app per variant would cost ~10 s each.
VARIANTS = (("en", "light"), ("zh-CN", "dark"))


@contextlib.contextmanager
def variant(page, locale: str, scheme: str):
    """A page showing the page in ``locale`` and the system colour ``scheme``: ``page`` itself for
    English and light, else a new context of ``page``'s browser (closed after)."""
    if (locale, scheme) == VARIANTS[0]:
        yield page
        return
    ctx = page.context.browser.new_context(viewport=page.viewport_size, locale=locale, color_scheme=scheme)
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    try:
        yield pg
    finally:
        ctx.close()


def assert_readable(pg, scheme: str, selectors: list[str], label: str) -> None:
    """The page is in ``scheme`` and the text of ``selectors`` meets WCAG AA contrast there."""
    from tests.browser.test_browser_layout import check_contrast

    assert pg.evaluate("() => document.body.classList.contains('dark')") == (scheme == "dark"), label
    bad = check_contrast(pg, selectors, f"{label} ({scheme})")
    assert not bad, "\n".join(bad)


def open_drawer(pg, width: int) -> None:
    """On a narrow window the sidebar is a drawer: open it (and let it arrive) before using it."""
    if width < 800:
        from tests.browser.test_browser_layout import expect_drawer

        pg.evaluate("() => window.acSidebar.open()")
        expect_drawer(pg, True)


def seed(world, title: str, messages: list[dict], *, age: float = 3600.0) -> str:
    """Store one conversation of ``messages`` in the world's project; returns its id."""
    proj = world["proj"]
    key = SessionKey(project_key(str(proj)), new_session_id())
    now = time.time() - age
    entries = [header_entry(key.session_id, key.project_key, str(proj), created_at=now)]
    entries += [message_entry(m, ts=now + i) for i, m in enumerate(messages)]
    entries.append(title_entry(title, "user", ts=now + len(messages)))
    LocalSessionStore(world["data"]).append(key, entries)
    return key.session_id


class TestSearchHitRow:
    """issue 31, item 2: a click on a search hit highlighted the row above the match in a chat
    with a "Used N memories" row (the row index counted a row the page draws differently)."""

    def test_the_matching_message_is_highlighted(self, world, page):
        msgs = [{"role": "system", "content": SYSTEM_WITH_MEMORY}]
        for i in range(8):
            msgs.append({"role": "user", "content": f"Question number {i} about the weather."})
            msgs.append({"role": "assistant", "content": f"Answer number {i}: sunny."})
        msgs[2] = {"role": "assistant", "content": "The quokka answer is here."}  # under "Used 1 memory"
        seed(world, "Memory chat", msgs)
        page.goto(world["start_app"]())
        expect(page.locator("#ac-list")).to_contain_text("Memory chat")
        wait_loaded(page)
        page.locator("#ac-search textarea, #ac-search input").first.press_sequentially("quokka", delay=40)
        hit = page.locator("#ac-search-results .ac-hit-row")
        expect(hit).to_have_count(1)
        hit.click()
        marked = page.locator("#ac-chat .ac-hit")
        expect(marked).to_have_count(1, timeout=TIMEOUT_MS)
        expect(marked).to_contain_text("The quokka answer is here.")


class TestBidiControlsShown:
    """issue 31, item 9: a right-to-left override (U+202E) in a user's message was applied ("evil"
    showed as "live"), and in a tool call's arguments on the approval card it showed a file name
    reversed."""

    def test_in_a_user_message_and_on_the_approval_card(self, world, page):
        from tests.support.chromium import _post, send

        _post(world["fake"] + "/_script", {"replies": [{"tool_calls": [{
            "name": "write_file", "id": "call_b", "arguments": {"path": "notes\u202etxt.sh", "content": "x\n"}}]}]})
        page.goto(world["start_app"]())
        send(page, "say \u202eevil\u202c please")
        expect(page.locator("#ac-approval-diff")).to_contain_text("notes\u27e8U+202E\u27e9txt.sh")
        # Copy and Edit give back what was typed, the override included.
        typed = page.evaluate("() => window.acSourceText('<pre class=\"ac-lit\">\\n' + document.querySelector("
                              "'#ac-chat [data-testid=user] pre.ac-lit').innerHTML + '</pre>')")
        assert typed == "say \u202eevil\u202c please"
        expect(page).to_have_url(re.compile(r"session="))
        # The labels are shown, whole and readable, at every width, in English and light and in Chinese
        # and dark (the chat, its approval card waiting, in a second tab).
        for locale, scheme in VARIANTS:
            with variant(page, locale, scheme) as pg:
                if pg is not page:
                    pg.goto(page.url)
                    expect(pg.locator("#ac-approval-head")).to_contain_text("批准这项更改吗")
                for width in (1360, 700, 390):
                    pg.set_viewport_size({"width": width, "height": 800})
                    user = pg.locator("#ac-chat [data-testid=user]").first
                    expect(user).to_contain_text("\u27e8U+202E\u27e9evil\u27e8U+202C\u27e9 please")
                    assert "\u202e" not in user.inner_text()
                    diff = pg.locator("#ac-approval-diff")
                    expect(diff).to_contain_text("notes\u27e8U+202E\u27e9txt.sh")
                    assert "\u202e" not in diff.inner_text()
                    label = user.locator(".ac-bidi").first
                    label.scroll_into_view_if_needed()
                    assert label.evaluate("e => { const r = e.getBoundingClientRect(), b = e.closest('.message')"
                                          ".getBoundingClientRect(); return r.width > 0 && r.left >= b.left - 1 "
                                          "&& r.right <= b.right + 1 && e.getClientRects().length === 1; }"), (
                        f"the label is cut or broken over lines at {width} px ({locale})")
                    assert_readable(pg, scheme, ["#ac-chat [data-testid=user] .ac-bidi", "#ac-approval-diff .cm-line"],
                                    f"bidi labels at {width} px, {locale}")

    def test_in_a_reply_prose_and_code(self, world, page):
        """issue 31, trial D3: the same override in a model's reply was applied ("evil" read "live")."""
        from tests.support.chromium import _post, send

        _post(world["fake"] + "/_script", {"replies": [{"text": (
            "Type \u202eevil\u202c here.\n\n```sh\necho \u202eevil\n```\n")}]})
        page.goto(world["start_app"]())
        send(page, "show me")
        bot = page.locator("#ac-chat [data-testid=bot]").last
        expect(bot).to_contain_text("Type \u27e8U+202E\u27e9evil\u27e8U+202C\u27e9 here.", timeout=TIMEOUT_MS)
        expect(bot.locator("pre code").first).to_contain_text("echo \u27e8U+202E\u27e9evil")
        assert "\u202e" not in bot.inner_text()


COVERED_JS = """() => {
  const bar = document.querySelector('#ac-memory-toast').getBoundingClientRect();
  const chat = document.querySelector('#ac-chat').getBoundingClientRect();
  const bots = document.querySelectorAll('#ac-chat [data-testid=bot]');
  const last = bots[bots.length - 1].getBoundingClientRect();
  const overlaps = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  return {covers: overlaps(bar, last) || overlaps(bar, chat), seen: last.bottom <= chat.bottom + 1 && last.top >= chat.top - 1,
          bar: [bar.top, bar.bottom, bar.left, bar.right], chat: [chat.top, chat.bottom], last: [last.top, last.bottom]};
}"""


def toast_covers_nothing(pg, width: int, label: str) -> None:
    """The toast shown, the chat makes room for it: it covers no part of the chat and the last
    message is in sight."""
    for _ in range(20):  # the chat gives the bar its room on the next layout (at most 2 s under load)
        where = pg.evaluate(COVERED_JS)
        if not where["covers"] and where["seen"]:
            break
        pg.wait_for_timeout(100)
    assert not where["covers"], f"the bar covers the chat at {width} px ({label}): {where}"
    assert where["seen"], f"the last message is out of sight at {width} px ({label})"


class TestMemoryToast:
    """issue 31, item 7: the "Memory updated" toast covered the chat's last message until closed —
    at each width, in English and light, and in Chinese (a fact in Chinese) and dark."""

    SAID = {"en": "Convention: rule number {n} is in English.", "zh-CN": "Convention: 第 {n} 条规则用中文写。"}
    SHOWN = {"en": "Memory updated · ", "zh-CN": "记忆已更新 · "}

    def test_it_covers_nothing_and_leaves_by_itself(self, world, page):
        from tests.support.chromium import send
        from webui.chat.memory import TOAST_SECONDS

        url = world["start_app"]()
        for locale, scheme in VARIANTS:
            with variant(page, locale, scheme) as pg:
                pg.goto(url)
                toast = pg.locator("#ac-memory-toast")
                # Each width's reply brings its own toast (its fact) while the last one may still be shown;
                # that it leaves by itself is seen once, after the last.
                for n, width in enumerate((1360, 700, 390)):
                    pg.set_viewport_size({"width": width, "height": 800})
                    said = self.SAID[locale].format(n=n)
                    send(pg, said)
                    expect(toast).to_contain_text(self.SHOWN[locale] + said, timeout=TIMEOUT_MS)
                    toast_covers_nothing(pg, width, locale)
                    assert_readable(pg, scheme, ["#ac-memory-toast p", "#ac-memory-toast button"],
                                    f"memory toast at {width} px, {locale}")
                expect(toast).to_be_hidden(timeout=(TOAST_SECONDS + 5) * 1000)


def _chat_rows(page) -> str:
    """The chat's rows and button rows as the page holds them (a failure's account): each row's
    class, whether it holds an edit box, its buttons (disabled ones marked) and its first words;
    whether Stop is shown."""
    return page.evaluate("""() => 'stop shown: ' + !!document.querySelector('#ac-input button.stop-button') + '\\n'
        + [...document.querySelectorAll('#ac-chat .message-row, #ac-chat .message-buttons')].map((r) =>
          r.className.slice(0, 50) + ' | ' + (r.querySelector('textarea') ? 'EDIT ' : '')
          + [...r.querySelectorAll('button')].map((b) => (b.getAttribute('aria-label') || '?')
          + (b.disabled ? '(disabled)' : '')).join(',') + ' | ' + r.textContent.trim().slice(0, 40)).join('\\n')""")


class TestEditBox:
    """issue 31, item 8: ↑ in the empty box opened a 160 x 64 px edit box, clipping the message,
    that Esc did not close; /compact sent while it was open showed nothing. In English and light,
    and in Chinese and dark (the same chat in a second tab)."""

    LONG = ("This message is long enough to fill most of the bubble's width on a wide window and to "
            "wrap onto a few lines on a phone, so a small edit box would clip it.")

    @staticmethod
    def check_widths(pg, scheme: str, label: str) -> None:
        """At each width ↑ opens the edit as wide and tall as the message, its text whole and readable; Esc
        closes it."""
        box = pg.locator("#ac-input textarea")
        edit = pg.locator("#ac-chat textarea.edit-textarea")
        for width in (1360, 700, 390):
            pg.set_viewport_size({"width": width, "height": 800})
            pg.wait_for_timeout(400)
            bubble = pg.locator("#ac-chat .message-row.user-row .message.user").last.bounding_box()
            box.focus()
            pg.keyboard.press("ArrowUp")
            expect(edit).to_be_visible()
            expect(edit).to_have_value(TestEditBox.LONG)
            shown = pg.locator("#ac-chat .message.user:has(textarea.edit-textarea)").bounding_box()  # editing
            assert abs(shown["width"] - bubble["width"]) <= 4, (label, width, shown, bubble)
            assert edit.bounding_box()["width"] >= bubble["width"] - 40
            assert shown["height"] >= bubble["height"] - 1, (label, width, shown, bubble)
            assert edit.evaluate("t => t.scrollHeight <= t.clientHeight + 1"), f"the text is clipped at {width} px ({label})"
            assert_readable(pg, scheme, ["#ac-chat textarea.edit-textarea"], f"the edit at {width} px ({label})")
            pg.keyboard.press("Escape")
            expect(edit).to_have_count(0)
            expect(pg.locator("#ac-chat [data-testid=user]").last).to_contain_text(TestEditBox.LONG)

    def test_as_wide_as_the_message_and_esc_cancels(self, world, page):
        from tests.support.chromium import send

        page.goto(world["start_app"]())
        send(page, self.LONG)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said", timeout=TIMEOUT_MS)
        expect(page).to_have_url(re.compile(r"session="))
        self.check_widths(page, "light", "en")
        with variant(page, *VARIANTS[1]) as zh:
            zh.goto(page.url)
            expect(zh.locator("#ac-input textarea")).to_have_attribute("placeholder", re.compile("[\u4e00-\u9fff]"))
            expect(zh.locator("#ac-chat [data-testid=user]").last).to_contain_text(self.LONG)
            self.check_widths(zh, VARIANTS[1][1], VARIANTS[1][0])
        box = page.locator("#ac-input textarea")
        edit = page.locator("#ac-chat textarea.edit-textarea")
        box.focus()
        page.keyboard.press("ArrowUp")
        expect(edit).to_be_visible()
        box.focus()
        send(page, "/compact")
        try:
            expect(edit).to_have_count(0)
        except AssertionError as err:  # round 22 saw this twice, unexplained: say what the page held
            raise AssertionError(f"{err}\n{_chat_rows(page)}") from None
        expect(page.locator("#ac-chat")).to_contain_text("Earlier messages were summarised", timeout=TIMEOUT_MS)


class TestEscBeforeTheEditIsReady:
    """Stop 42's CI: Esc pressed in an edit whose Cancel button was not usable yet (Gradio
    disables it while the chat is being written to; under load it also comes a moment after the
    text box) was lost, and the edit stayed open. Esc must close the edit once Cancel can be used."""

    def test_esc_closes_the_edit_once_cancel_is_enabled(self, world, page):
        from tests.support.chromium import send

        page.goto(world["start_app"]())
        send(page, "A message to edit, then leave with Esc.")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said", timeout=TIMEOUT_MS)
        page.locator("#ac-input textarea").focus()
        page.keyboard.press("ArrowUp")
        edit = page.locator("#ac-chat textarea.edit-textarea")
        expect(edit).to_be_visible()
        cancel = page.locator("#ac-chat button[aria-label=Cancel]")
        cancel.evaluate("b => { b.disabled = true; }")  # as while a reply or a live update is drawn
        edit.focus()
        page.keyboard.press("Escape")
        page.wait_for_timeout(600)
        expect(edit).to_be_visible()  # nothing to click yet: the edit waits
        cancel.evaluate("b => { b.disabled = false; }")
        expect(edit).to_have_count(0, timeout=5_000)
        expect(page.locator("#ac-chat [data-testid=user]").last).to_contain_text("A message to edit")

    def test_esc_with_the_focus_back_in_the_message_box(self, world, page):
        # a fresh-user trial: the edit opened with ArrowUp, a click back into the box, then Esc did nothing
        from tests.support.chromium import send

        page.goto(world["start_app"]())
        send(page, "A message to edit, then leave from the box.")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said", timeout=TIMEOUT_MS)
        box = page.locator("#ac-input textarea")
        box.focus()
        page.keyboard.press("ArrowUp")
        edit = page.locator("#ac-chat textarea.edit-textarea")
        expect(edit).to_be_visible()
        box.click()
        page.keyboard.press("Escape")
        expect(edit).to_have_count(0)
        expect(page.locator("#ac-chat [data-testid=user]").last).to_contain_text("A message to edit")


class TestEnterSendsTheEdit:
    """A fresh-user trial (round 23): Enter in an open edit added a new line and sent nothing; the
    edit is sent only by its small ✓. Enter sends it, as in the message box and ChatGPT's edit;
    Shift+Enter still starts a new line."""

    def test_enter_sends_a_new_version_and_shift_enter_adds_a_line(self, world, page):
        from tests.support.chromium import send

        page.goto(world["start_app"]())
        send(page, "The first wording.")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: The first wording.",
                                                                       timeout=TIMEOUT_MS)
        page.locator("#ac-input textarea").focus()
        page.keyboard.press("ArrowUp")
        edit = page.locator("#ac-chat textarea.edit-textarea")
        expect(edit).to_be_focused()
        edit.fill("The second wording,")
        edit.press("Shift+Enter")
        edit.press_sequentially("on two lines.")
        expect(edit).to_have_value("The second wording,\non two lines.")
        edit.press("Enter")
        expect(edit).to_have_count(0)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: The second wording,",
                                                                       timeout=TIMEOUT_MS)
        expect(page.locator("#ac-chat .ac-vswitch")).to_contain_text("2 / 2")
        expect(page.locator("[data-testid=user]")).to_have_count(1)


class TestArrowUpWhileTheChatIsWritten:
    """Stop 44's CI: ArrowUp pressed as a reply showed was lost (Gradio keeps Edit disabled while
    the chat is written to) and the edit never opened. It opens once Edit can be used, unless the
    user did something else first."""

    SLOW = {"replies": [{"text": "a slow reply " * 12, "chunk": 12, "delay": 0.15}]}  # ~2 s

    def start_slow_reply(self, world, page, text):
        from tests.support.chromium import _post, send

        page.goto(world["start_app"]())
        expect(page.locator("#ac-input textarea")).to_be_visible()
        _post(world["fake"] + "/_script", self.SLOW)
        send(page, text)
        expect(page.locator("#ac-input button.stop-button")).to_be_visible()
        page.locator("#ac-input textarea").focus()
        page.keyboard.press("ArrowUp")

    def test_opens_once_the_reply_ends(self, world, page):
        self.start_slow_reply(world, page, "Edit me once the reply is done.")
        edit = page.locator("#ac-chat textarea.edit-textarea")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("a slow reply a slow reply")
        expect(edit).to_have_value("Edit me once the reply is done.")
        expect(page.locator("#ac-input button.stop-button")).to_have_count(0)
        expect(edit).to_be_focused()

    def test_text_typed_meanwhile_keeps_it_closed(self, world, page):
        self.start_slow_reply(world, page, "Not to be edited.")
        page.keyboard.type("next question")
        expect(page.locator("#ac-input button.stop-button")).to_have_count(0, timeout=TIMEOUT_MS)
        page.wait_for_timeout(800)  # the edit would open within a few polls of the reply's end
        expect(page.locator("#ac-chat textarea.edit-textarea")).to_have_count(0)
        expect(page.locator("#ac-input textarea")).to_have_value("next question")


class TestCtrlC:
    """issue 31, item 12: Ctrl+C with a page open printed two tracebacks (uvicorn's lifespan
    CancelledError and "Exception in ASGI application") after "open connections did not close"."""

    def test_stops_quietly_in_one_line(self, world, page):
        import signal

        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # an app started now inherits that
            signal.signal(signal.SIGINT, signal.default_int_handler)  # (tests/conftest.py says why)
        page.goto(world["start_app"]())
        expect(page.locator("#ac-input textarea")).to_be_visible()
        from tests.support.chromium import _post, send

        _post(world["fake"] + "/_script", {"replies": [{"text": "a slow reply " * 200, "delay": 0.05}]})
        send(page, "take your time")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("a slow reply", timeout=TIMEOUT_MS)
        app = world["apps"][-1]
        before = len(app.lines)
        app.p.send_signal(signal.SIGINT)
        try:
            code = app.p.wait(timeout=30)
        except subprocess.TimeoutExpired:  # say where the stop hung (stop 36's trial saw it once)
            # Round 22's suite saw the app's main thread still in its wait loop: was SIGINT ignored
            # (inherited from a suite run as a background job)? /proc says, then the stacks.
            status = Path(f"/proc/{app.p.pid}/status").read_text()
            ignored = int(next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16)
            app.p.send_signal(signal.SIGUSR1)  # every thread's stack (webui.cli.launcher)
            time.sleep(2)
            pytest.fail(f"not stopped 30 s after Ctrl+C (SIGINT ignored by the app: "
                        f"{bool(ignored >> (signal.SIGINT - 1) & 1)}); its output since, with its threads' "
                        "stacks:\n" + "".join(app.lines[before:]))
        assert code == 0, "".join(app.lines[before:])
        time.sleep(0.5)  # the output thread has read the last lines
        after = "".join(app.lines[before:])
        assert "Traceback" not in after and "Exception in ASGI application" not in after, after
        assert "ERROR" not in after and after.strip().splitlines()[-1] == "anycode: stopped.", after


PANEL_JS = """() => {
  const r = (el) => el.getBoundingClientRect();
  const h4 = document.querySelector('#ac-memory-list h4');
  const count = h4.querySelector('.ac-mem-count');
  const range = document.createRange(); range.selectNodeContents(h4.firstChild);
  const panel = document.querySelector('#ac-memory');
  const kids = [...panel.children].filter((c) => r(c).height > 0);
  const used = Math.max(...kids.map((c) => r(c).bottom)) - r(panel).top;
  return {gap: r(count).left - range.getBoundingClientRect().right, close: r(document.querySelector('#ac-memory-close')).height,
          empty: r(panel).height - used};
}"""


class TestMemoryPanel:
    """issue 31, item 10: "This project 1" (the count glued to the label), a tall grey Close
    block and empty space in the Memory panel — in English and Chinese (other label widths),
    light and dark."""

    def test_count_apart_small_close_no_empty_room(self, world, page):

        storage_of(LocalSessionStore(world["data"])).memories.add(
            "Tests run with pytest -q", project_key=project_key(str(world["proj"])))
        url = world["start_app"]()
        for locale, scheme in VARIANTS:
            with variant(page, locale, scheme) as pg:
                pg.set_viewport_size({"width": 1360, "height": 800})
                pg.goto(url)
                for width in (1360, 700, 390):
                    pg.set_viewport_size({"width": width, "height": 800})
                    open_drawer(pg, width)
                    pg.locator("#ac-memory-open").click()
                    expect(pg.locator("#ac-memory-list")).to_contain_text("Tests run with pytest -q")
                    expect(pg.locator("#ac-memory-list h4").first).to_contain_text(
                        "This project" if locale == "en" else "此项目")
                    pg.wait_for_timeout(300)
                    got = pg.evaluate(PANEL_JS)
                    assert got["gap"] >= 4, (locale, width, got)
                    assert got["close"] <= 40, (locale, width, got)
                    assert got["empty"] <= 24, (locale, width, got)
                    assert_readable(pg, scheme, ["#ac-memory-list h4", "#ac-memory-list .ac-mem-count",
                                                 "#ac-memory-list .ac-mem-text", "#ac-memory-close"],
                                    f"memory panel at {width} px, {locale}")
                    pg.locator("#ac-memory-close").click()
                    expect(pg.locator("#ac-memory-list")).to_be_hidden()


SIDEBAR_JS = """() => {
  const r = (sel) => { const el = document.querySelector(sel); return el ? el.getBoundingClientRect() : null; };
  const slot = document.querySelector('#ac-search-slot');
  const hits = [...document.querySelectorAll('#ac-search-results .ac-hit-row')].map((h) => {
    const b = h.getBoundingClientRect(); return {h: b.height, natural: h.scrollHeight}; });
  return {box: r('#ac-search'), all: r('#ac-search-all'), slot: slot.getBoundingClientRect(),
          scrolls: slot.scrollHeight > slot.clientHeight + 1 ? getComputedStyle(slot).overflowY : 'fits',
          hits, list: r('#ac-list'), group: r('#ac-list .ac-group, #ac-list h3, #ac-list [class*=group]')};
}"""


class TestSearchPanelRoom:
    """issue 31, item 4: the results clipped the "All projects" checkbox and the second hit with no
    scroll; an empty gap sat above "Today" when nothing was searched. At each width (a drawer on a
    narrow window), in English and light and in Chinese and dark."""

    def test_results_scroll_and_no_gap_when_idle(self, world, page):
        for n in range(4):
            seed(world, f"Chat {n}", [{"role": "user", "content": f"the pelican question {n} " + "filler " * 40},
                                      {"role": "assistant", "content": "a pelican answer " + "words " * 40}],
                 age=3600.0 * (n + 1))
        url = world["start_app"]()
        for locale, scheme in VARIANTS:
            with variant(page, locale, scheme) as pg:
                pg.set_viewport_size({"width": 1360, "height": 560})
                pg.goto(url)
                expect(pg.locator("#ac-list")).to_contain_text("Chat 3")
                wait_loaded(pg)
                for width in (1360, 700, 390):
                    pg.set_viewport_size({"width": width, "height": 560})
                    open_drawer(pg, width)
                    idle = pg.evaluate(SIDEBAR_JS)
                    # the sidebar's gap only (was 32 px)
                    assert idle["list"]["top"] - idle["box"]["bottom"] <= 16, (locale, width, idle)
                pg.locator("#ac-search textarea, #ac-search input").first.press_sequentially("pelican", delay=30)
                for width in (390, 700, 1360):
                    pg.set_viewport_size({"width": width, "height": 560})
                    open_drawer(pg, width)
                    expect(pg.locator("#ac-search-results .ac-hit-row")).to_have_count(4)
                    expect(pg.locator("#ac-search-all")).to_contain_text("All projects" if locale == "en" else "所有项目")
                    pg.wait_for_timeout(300)
                    got = pg.evaluate(SIDEBAR_JS)
                    assert got["all"]["height"] >= 16 and got["all"]["bottom"] <= got["slot"]["bottom"] + 1, (
                        locale, width, got)
                    assert all(h["h"] >= h["natural"] - 1 for h in got["hits"]), (locale, width, got)  # none squashed
                    assert got["scrolls"] in ("auto", "scroll", "fits"), (locale, width, got)
                    assert_readable(pg, scheme, ["#ac-search-all label", "#ac-search-results .ac-hits-label",
                                                 "#ac-search-results .ac-hit-title", "#ac-search-results .ac-hit-snippet"],
                                    f"search results at {width} px, {locale}")
                    last = pg.locator("#ac-search-results .ac-hit-row").last
                    last.scroll_into_view_if_needed()
                    expect(last).to_be_in_viewport()


class TestTitleField:
    """issue 31, item 5 (part): the title field cut a long title with no ellipsis and no way to
    read the rest."""

    def test_long_title_ends_in_an_ellipsis_and_shows_whole_on_hover(self, world, page):
        title = "A rather long conversation title about migrating the billing service to the new store " * 2
        title = title.strip()[:150]
        sid = seed(world, title, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        for width in (1360, 700, 390):
            page.set_viewport_size({"width": width, "height": 800})
            page.goto(world["start_app"]() + f"?session={sid}" if width == 1360 else page.url)
            field = page.locator("#ac-title input, #ac-title textarea").first
            expect(field).to_have_value(title)
            assert field.evaluate("t => getComputedStyle(t).textOverflow") == "ellipsis"
            assert field.evaluate("t => t.scrollWidth > t.clientWidth")  # it is longer than the field
            field.hover()
            assert field.get_attribute("title") == title


ACTIONS = ["#ac-compact", "#ac-archive", "#ac-export-md", "#ac-export-jsonl", "#ac-export-html", "#ac-delete"]

TOPBAR_JS = """(actions) => {
  const bar = document.querySelector('#ac-topbar').getBoundingClientRect();
  const shown = [...document.querySelectorAll('#ac-topbar > *, #ac-actions > *')].filter((e) => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && !e.matches('#ac-actions'); });
  const boxes = shown.map((e) => { const r = e.getBoundingClientRect();
    return {id: e.id || e.className, top: r.top, bottom: r.bottom, left: r.left, right: r.right}; });
  const inView = (sel) => { const el = document.querySelector(sel); const r = el.getBoundingClientRect();
    if (!r.width || !r.height) return false;
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return r.left >= 0 && r.right <= innerWidth && r.bottom <= innerHeight && !!hit && el.contains(hit)
      && el.scrollWidth <= el.clientWidth + 1; };
  return {oneRow: Math.max(...boxes.map((b) => b.top)) < Math.min(...boxes.map((b) => b.bottom)),
          inside: boxes.every((b) => b.left >= bar.left - 1 && b.right <= bar.right + 1), boxes,
          shown: actions.filter(inView), width: innerWidth};
}"""


class TestTopBarOneRow:
    """issue 31, item 5: at 700 px Delete wrapped onto a row of its own and at 390 px the top bar
    took three rows, while the title was cut with no ellipsis; on a narrow bar the actions now
    fold into a "⋯" menu (a real button: aria-expanded, Esc closes)."""

    # English in light, Chinese (other label widths) in dark (the menu's own colours)
    @pytest.mark.parametrize("locale,scheme", [("en", "light"), ("zh-CN", "dark")])
    def test_one_row_at_three_widths_and_the_menu(self, world, page, locale, scheme):
        from tests.browser.test_browser_layout import check_contrast

        title = "A rather long conversation title about migrating the billing service to the new store"
        sid = seed(world, title, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        url = world["start_app"]() + f"?session={sid}"
        page = page.context.browser.new_context(locale=locale, color_scheme=scheme).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        more = page.locator("#ac-more")
        for width in (1360, 700, 390):
            page.set_viewport_size({"width": width, "height": 800})
            page.goto(url)  # a narrow window starts with the sidebar closed (a drawer)
            field = page.locator("#ac-title input").first
            expect(field).to_have_value(title)
            page.wait_for_timeout(300)  # the bar is measured on the next frame after a resize
            got = page.evaluate(TOPBAR_JS, ACTIONS)
            assert got["oneRow"] and got["inside"], (width, got["boxes"])
            assert field.evaluate("t => getComputedStyle(t).textOverflow") == "ellipsis"
            field.hover()
            assert field.get_attribute("title") == title
            if width == 1360:  # room for every action on the bar itself
                assert got["shown"] == ACTIONS, got
                expect(more).to_be_hidden()
                continue
            assert got["shown"] == [], got  # folded away, not clipped
            expect(more).to_be_visible()
            expect(more).to_have_attribute("aria-expanded", "false")
            assert more.evaluate("b => b.tagName") == "BUTTON"
            more.click()
            expect(more).to_have_attribute("aria-expanded", "true")
            expect(page.locator("#ac-delete")).to_be_visible()
            assert page.evaluate(TOPBAR_JS, ACTIONS)["shown"] == ACTIONS  # every action whole and in reach
            expect(page.locator("#ac-delete")).to_have_text("Delete" if locale == "en" else "删除")
            assert page.evaluate("() => document.body.classList.contains('dark')") == (scheme == "dark")
            page.wait_for_timeout(200)
            assert not check_contrast(page, ["#ac-actions button:not([disabled])", "#ac-more"], f"menu ({scheme})")
            page.keyboard.press("Escape")
            expect(more).to_have_attribute("aria-expanded", "false")
            expect(page.locator("#ac-delete")).to_be_hidden()
            expect(more).to_be_focused()
            # by keyboard: Enter opens it on its first item, ↓ moves on, Esc closes back on "⋯"
            page.keyboard.press("Enter")
            expect(more).to_have_attribute("aria-expanded", "true")
            expect(page.locator("#ac-compact")).to_be_focused()
            page.keyboard.press("ArrowDown")
            expect(page.locator("#ac-archive")).to_be_focused()
            page.keyboard.press("Escape")
            expect(more).to_be_focused()
            # an item picked from the menu does what the bar's button does, and the menu closes
            more.click()
            page.locator("#ac-delete").click()
            expect(page.locator("#ac-confirm")).to_be_visible()
            expect(more).to_have_attribute("aria-expanded", "false")
            page.locator("#ac-cancel-delete").click()
            expect(page.locator("#ac-confirm")).to_be_hidden()
        # back at a wide window the actions are on the bar again
        page.set_viewport_size({"width": 1360, "height": 800})
        page.wait_for_timeout(300)
        assert page.evaluate(TOPBAR_JS, ACTIONS)["shown"] == ACTIONS


ALL_PROJECTS_JS = """() => {
  const r = (s) => document.querySelector(s).getBoundingClientRect();
  const box = r('#ac-search'), all = r('#ac-search-all'), label = r('#ac-search-all label'), slot = r('#ac-search-slot');
  const input = document.querySelector('#ac-search-all input'), ib = input.getBoundingClientRect();
  const hit = document.elementFromPoint(ib.left + ib.width / 2, ib.top + ib.height / 2);
  const lab = document.querySelector('#ac-search-all label');
  return {below: all.top >= box.bottom - 1, whole: label.top >= slot.top - 1 && label.bottom <= slot.bottom + 1
          && label.height >= 16 && lab.scrollWidth <= lab.clientWidth + 1,
          reachable: !!hit && (hit === input || lab.contains(hit)), box: [box.top, box.bottom], all: [all.top, all.bottom],
          label: [label.top, label.bottom, label.height], slot: [slot.top, slot.bottom]};
}"""


class TestAllProjectsCheckbox:
    """issue 31, trial D7: the "All projects" checkbox was clipped under the search box at
    1200×800 (in English and in Chinese, whose label is shorter)."""

    def test_whole_and_below_the_search_box_at_1200(self, world, page):
        seed(world, "Refactor the config loader", [{"role": "user", "content": "the config loader is slow"},
                                                   {"role": "assistant", "content": "Let us profile the config."}])
        url = world["start_app"]()
        for locale in ("en", "zh-CN"):
            ctx = page.context.browser.new_context(viewport={"width": 1200, "height": 800}, locale=locale)
            pg = ctx.new_page()
            try:
                pg.goto(url)
                expect(pg.locator("#ac-list")).to_contain_text("Refactor the config loader", timeout=TIMEOUT_MS)
                wait_loaded(pg)
                pg.locator("#ac-search textarea, #ac-search input").first.press_sequentially("config", delay=30)
                expect(pg.locator("#ac-search-results .ac-hit-row").first).to_be_visible(timeout=TIMEOUT_MS)
                expect(pg.locator("#ac-search-all")).to_contain_text("All projects" if locale == "en" else "所有项目")
                pg.wait_for_timeout(300)
                got = pg.evaluate(ALL_PROJECTS_JS)
                assert got["below"] and got["whole"] and got["reachable"], (locale, got)
                pg.locator("#ac-search-all input").check()
                expect(pg.locator("#ac-search-all input")).to_be_checked()
            finally:
                ctx.close()
