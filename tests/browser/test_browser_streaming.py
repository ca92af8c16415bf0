"""Streaming replies against what a user does meanwhile, in a real Chromium (same set-up as
``test_browser_e2e``: the app and the fake OpenAI server run as subprocesses).

Asserts on what the page shows: the address bar, the chat pane, the title field, the sidebar,
the input box.
"""
from __future__ import annotations

import re

import pytest

from core.stores.jsonl_store import LocalSessionStore
from core.session.keys import SessionKey, project_key
from tests.support.chromium import TIMEOUT_MS, _post, _seed, expect, hold_next, send, wait_held, wait_loaded

pytestmark = pytest.mark.browser

SLOW = {"text": "streaming " * 300, "chunk": 10, "delay": 0.05}  # ~15 s if nobody stops it


def _session_param(url: str) -> str | None:
    found = re.search(r"[?&]session=([0-9a-f-]+)", url)
    return found.group(1) if found else None


def _wait_streaming(page) -> None:
    expect(page.locator("[data-testid=bot]").last).to_contain_text("streaming streaming")
    page.wait_for_timeout(1500)  # well into the reply


def _stored(world, sid: str) -> list[dict]:
    entries = LocalSessionStore(world["data"]).load(SessionKey(project_key(str(world["proj"])), sid))
    return [e["message"] for e in entries or [] if e.get("type") == "message"]


class TestSwitchWhileStreaming:
    """Guards against a reply that keeps the tab on its conversation when the user opens another
    one (URL, pane and title left behind, the next message appended to the old chat), against a
    draft typed during a reply being erased, and against a message sent right after Stop being
    dropped."""

    def test_new_chat_and_sidebar_switch_while_streaming(self, world, page):
        page.goto(world["start_app"]())
        box = page.locator("#ac-input textarea")
        title = page.locator("#ac-title input")

        # 1. New chat while a slow reply streams; a draft typed meanwhile survives the stream
        _post(world["fake"] + "/_script", {"replies": [SLOW]})
        send(page, "first question")
        _wait_streaming(page)
        first = _session_param(page.url)
        assert first
        box.fill("my draft")
        bot = page.locator("[data-testid=bot]").last
        before = len(bot.inner_text())
        page.wait_for_timeout(800)
        assert len(bot.inner_text()) > before, "the reply should still be streaming"
        expect(box).to_have_value("my draft")

        page.locator("#ac-new").click()
        expect(page.locator("[data-testid=user]")).to_have_count(0)
        expect(page.locator("[data-testid=bot]")).to_have_count(0)
        expect(title).to_have_value("")
        expect(title).to_have_attribute("placeholder", "New chat")
        expect(page).not_to_have_url(re.compile("session="))
        page.wait_for_timeout(500)  # a late update of the stopped reply must not come back
        expect(page.locator("[data-testid=user]")).to_have_count(0)
        expect(box).to_have_value("")  # the new chat's own draft: "my draft" stays with the first

        send(page, "second question")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: second question")
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        second = _session_param(page.url)
        assert second and second != first
        old = _stored(world, first)
        assert [m["role"] for m in old] == ["system", "user", "assistant"]
        assert old[-1]["content"].startswith("streaming") and len(old[-1]["content"]) < len(SLOW["text"])
        assert not any(m.get("content") == "second question" for m in old)

        # 2. another chat from the sidebar while a reply streams; its next message goes there
        _post(world["fake"] + "/_script", {"replies": [SLOW]})
        send(page, "third question")
        _wait_streaming(page)
        page.locator(f"#ac-list [data-sid='{first}']").click()
        expect(page).to_have_url(re.compile(f"session={first}"))
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        expect(page.locator("[data-testid=user]").first).to_have_text("first question")
        expect(title).to_have_value("Chat: first question")
        expect(page.locator("#ac-list .ac-session.active")).to_have_attribute("data-sid", first)
        expect(page.locator("#ac-chat")).not_to_contain_text("Error")
        expect(box).to_have_value("my draft")  # kept with its chat through the stream and two switches
        box.fill("")
        send(page, "back in the first chat")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: back in the first chat")
        expect(page).to_have_url(re.compile(f"session={first}"))
        assert [m["content"] for m in _stored(world, first) if m["role"] == "user"] == [
            "first question", "back in the first chat"]
        left = _stored(world, second)
        assert [m["content"] for m in left if m["role"] == "user"] == ["second question", "third question"]
        assert left[-1]["role"] == "assistant" and left[-1]["content"].startswith("streaming")

    def test_message_sent_right_after_stop_is_sent(self, world, page):
        page.goto(world["start_app"]())
        _post(world["fake"] + "/_script", {"replies": [SLOW]})
        send(page, "one")
        _wait_streaming(page)
        page.get_by_role("button", name="Stop").click()
        send(page, "two")  # at once, while the stopped reply is still being stored
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: two")
        expect(page.locator("[data-testid=user]")).to_have_count(2)
        expect(page.locator("[data-testid=user]").last).to_have_text("two")
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        stored = _stored(world, _session_param(page.url))
        assert [m["role"] for m in stored] == ["system", "user", "assistant", "user", "assistant"]


class TestLostReply:
    """Guards against a conversation whose last message never got an answer (the app was killed
    mid-reply) showing no hint and no way to get the answer, and against Unarchive from the
    archive list leaving the open chat invisible."""

    def test_killed_mid_reply_offers_retry_and_unarchive_returns_to_list(self, world, page):
        page.goto(world["start_app"]())
        _post(world["fake"] + "/_script", {"replies": [SLOW]})
        send(page, "are you still there?")
        _wait_streaming(page)
        url = page.url
        world["apps"][-1].p.kill()  # SIGKILL: no chance to store the reply
        world["apps"][-1].p.wait(10)
        page.goto(world["start_app"]().rstrip("/") + "/?" + url.split("?", 1)[1])
        expect(page.locator("[data-testid=user]")).to_have_text("are you still there?")
        expect(page.locator("[data-testid=bot]")).to_have_count(0)
        # never titled: the sidebar and the title field name it by date, not "New chat"
        label = re.compile(r"^Session \d{4}-\d\d-\d\d \d\d:\d\d$")
        expect(page.locator("#ac-list .ac-session.active .ac-session-title")).to_have_text(label)
        expect(page.locator("#ac-title input")).to_have_attribute("placeholder", label)
        notice = page.locator("#ac-noreply")
        expect(notice).to_contain_text("No reply was saved for the last message")
        page.get_by_role("button", name="Retry").click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: are you still there?")
        expect(notice).to_be_hidden()
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        page.reload()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: are you still there?")
        expect(notice).to_be_hidden()

        # Unarchive from the archive list: back to the main list, the chat visible and selected
        sid = _session_param(page.url)
        expect(page.locator("#ac-list")).to_contain_text("Chat: are you still", timeout=TIMEOUT_MS)
        page.get_by_role("button", name="Archive", exact=True).click()
        expect(page.locator(f"#ac-list [data-sid='{sid}']")).to_have_count(0)
        page.get_by_label("Show archived").check()
        expect(page.locator(f"#ac-list [data-sid='{sid}']")).to_have_count(1)
        page.locator("#ac-archive").click()  # the top bar's (the archived bar has one too)
        expect(page.get_by_label("Show archived")).not_to_be_checked()
        expect(page.locator("#ac-list .ac-session.active")).to_have_attribute("data-sid", sid)
        expect(page.locator("#ac-list")).not_to_contain_text("No archived conversations")
        expect(page.get_by_role("button", name="Archive", exact=True)).to_be_visible()


class TestLiveCheckAnsweredLate:
    """Guards against the once-a-second check drawing the page from what it showed when the check
    was sent. Sent while the archive list was shown and answered after Unarchive had taken the
    page back to the main list, it drew the (now empty) archive under an unchecked "Show
    archived", and no later check drew it again (CI, stop 45)."""

    def test_a_check_sent_before_unarchive_does_not_bring_the_archive_back(self, world, page):
        _seed(world["data"], world["proj"])
        page.goto(world["start_app"]())
        wait_loaded(page)
        page.locator("#ac-list .ac-session", has_text="Set up the Postgres store").click()
        expect(page.locator("[data-testid=user]").last).to_have_text("Set up the Postgres store")
        sid = _session_param(page.url)
        page.get_by_role("button", name="Archive", exact=True).click()
        expect(page.locator(f"#ac-list [data-sid='{sid}']")).to_have_count(0)
        page.get_by_label("Show archived").check()
        expect(page.locator(f"#ac-list [data-sid='{sid}']")).to_have_count(1)

        held = _hold_a_check(page)  # sent with the archive list shown; answered when the test says
        page.locator("#ac-archive").click()  # Unarchive, from the top bar
        expect(page.get_by_label("Show archived")).not_to_be_checked()
        expect(page.locator("#ac-list .ac-session.active")).to_have_attribute("data-sid", sid)
        held[0].continue_()  # the check now finds the list changed, with "Show archived" as it was sent
        page.wait_for_timeout(3000)  # its answer and the checks after it
        expect(page.locator("#ac-list")).not_to_contain_text("No archived conversations")
        expect(page.locator("#ac-list .ac-session.active")).to_have_attribute("data-sid", sid)
        expect(page.locator("#ac-list .ac-session")).to_have_count(4)


def _hold_a_check(page) -> list:
    """Hold the page's next once-a-second live check (:func:`hold_next`), once it was sent."""
    held = hold_next(page, "ac-live-check", "click", "run/predict")
    wait_held(page, held, "a live check")
    return held


def _sessions_on_disk(world) -> list[str]:
    store = LocalSessionStore(world["data"])
    from core.session.manager import SessionManager

    return [m.id for m in SessionManager(store).list(project_key(str(world["proj"])))]


class TestDoubleSendAndTitle:
    """Guards against a double-clicked send arrow (or Enter pressed twice) losing the message and
    locking the tab as "still writing", against empty sessions left by a send, against a rename
    typed while a reply streams being overwritten, against the title field and the sidebar
    naming a new chat differently, and against a search box that ignores deletions."""

    def test_double_click_and_double_enter_send_once(self, world, page):
        page.goto(world["start_app"]())
        page.locator("#ac-new").click()
        box = page.locator("#ac-input textarea")
        box.fill("hello once")
        page.locator("#ac-input button.submit-button").dblclick()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: hello once")
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        expect(page.get_by_text("A reply is still being written")).to_have_count(0)
        sid = _session_param(page.url)
        assert sid and _sessions_on_disk(world) == [sid]
        assert [m["role"] for m in _stored(world, sid)] == ["system", "user", "assistant"]

        box.fill("and twice by Enter")
        box.press("Enter")
        box.press("Enter")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: and twice by Enter")
        expect(page.locator("[data-testid=user]")).to_have_count(2)
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)

        send(page, "the next one works")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: the next one works")
        expect(page.locator("[data-testid=user]")).to_have_count(3)
        expect(page.get_by_text("A reply is still being written")).to_have_count(0)
        assert [m["content"] for m in _stored(world, sid) if m["role"] == "user"] == [
            "hello once", "and twice by Enter", "the next one works"]
        assert _sessions_on_disk(world) == [sid], "no empty ghost session"

    def test_rename_while_streaming_survives_and_title_matches_sidebar(self, world, page):
        page.goto(world["start_app"]())
        title = page.locator("#ac-title input")
        _post(world["fake"] + "/_script", {"replies": [SLOW]})
        send(page, "a long answer please")
        _wait_streaming(page)
        sid = _session_param(page.url)
        # the first reply: the field is named like the sidebar's row, not "New chat"
        listed = page.locator(f"#ac-list [data-sid='{sid}'] .ac-session-title")
        expect(listed).to_have_text(re.compile(r"^Session \d{4}-\d\d-\d\d \d\d:\d\d$"))
        expect(title).to_have_attribute("placeholder", listed.inner_text())

        title.click()
        title.type("My own name")
        page.wait_for_timeout(1500)  # many streamed updates arrive meanwhile
        expect(title).to_have_value("My own name")
        title.press("Enter")
        expect(page.locator("#ac-list .ac-session.active")).to_contain_text("My own name")
        page.wait_for_timeout(800)
        expect(title).to_have_value("My own name")
        page.get_by_role("button", name="Stop").click()
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        expect(title).to_have_value("My own name")

    def test_search_filters_on_any_edit(self, world, page):
        _seed(world["data"], world["proj"])
        page.goto(world["start_app"]())
        search = page.locator("#ac-search textarea, #ac-search input").first
        rows = page.locator("#ac-list .ac-session")
        expect(rows).to_have_count(4)
        search.click()
        search.type("zzzz")
        expect(page.locator("#ac-list")).to_contain_text("No conversation title matches")
        search.press("Backspace")
        search.press("Control+a")
        search.press("Delete")
        expect(rows).to_have_count(4)
        search.type("postgres")
        expect(rows).to_have_count(1)
        for _ in range(len("postgres")):
            search.press("Backspace")
        expect(rows).to_have_count(4)
        search.fill("release")  # fill() replaces the text at once, like a paste
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("Draft release notes")


class TestNewChatDraft:
    """Guards against a new chat's first message coming back into the box of the next new chat:
    the send empties the box and gives the chat its id (its address) within one of the page's
    looks at the box, and the draft kept under "new" was never removed (round 16; 3 of 4 sends
    left it), so every page opened on a new chat started with an old message in its box."""

    def test_the_first_message_of_a_new_chat_is_not_kept_as_a_draft(self, world, page):
        url = world["start_app"]()
        box = page.locator("#ac-input textarea")
        for i in range(3):
            page.goto(url)  # a new chat
            wait_loaded(page)
            page.wait_for_timeout(700)  # the box has been looked at (a draft would be back by now)
            expect(box).to_have_value("")
            box.fill(f"first message number {i}")
            page.wait_for_timeout(700)  # kept as a draft while typed
            box.press("Enter")
            expect(page.locator("[data-testid=bot]").last).to_contain_text(f"You said: first message number {i}")
            expect(page).to_have_url(re.compile(r"session="))
            page.wait_for_function("!Object.keys(localStorage).some((k) => k.startsWith('anycode.draft.'))")


class TestEachChatKeepsItsOwnDraft:
    """Guards against text typed in one chat following the user into the next one opened: it was
    kept as a draft of each chat it was shown in, and came back there after a reload, when it had
    been sent from another chat (fresh-user trials 16 and 17, also after being edited before the
    send) or deleted by hand in one of them (trial 17)."""

    @staticmethod
    def _open_a(world, page):
        """The page on the seeded chat A: (the message box, the sidebar rows, A's address)."""
        _seed(world["data"], world["proj"])
        page.goto(world["start_app"]())
        wait_loaded(page)
        rows = page.locator("#ac-list .ac-session")
        rows.filter(has_text="Refactor the config loader").click()
        expect(page).to_have_url(re.compile(r"session="))
        return page.locator("#ac-input textarea"), rows, page.url

    def test_a_draft_stays_with_its_chat_and_goes_when_sent(self, world, page):
        box, rows, url_a = self._open_a(world, page)
        box.fill("a message typed in A")
        page.wait_for_timeout(700)  # kept as A's draft
        rows.filter(has_text="Set up the Postgres store").click()
        page.wait_for_function(f"() => window.location.href !== {url_a!r}")
        url_b = page.url
        expect(box).to_have_value("")  # B's own (none), not A's
        box.fill("a note for B")
        page.wait_for_timeout(700)
        rows.filter(has_text="Refactor the config loader").click()
        page.wait_for_function(f"() => window.location.href === {url_a!r}")
        expect(box).to_have_value("a message typed in A")
        box.fill("a message typed in A, edited")
        box.press("Enter")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: a message typed in A, edited")
        page.wait_for_function("Object.keys(localStorage).filter((k) => k.startsWith('anycode.draft.')).length === 1")
        for url, kept in ((url_a, ""), (url_b, "a note for B")):
            page.goto(url)
            wait_loaded(page)
            page.wait_for_timeout(700)  # the box has been looked at
            expect(box).to_have_value(kept)

    def test_a_draft_deleted_by_hand_stays_deleted(self, world, page):
        box, rows, url_a = self._open_a(world, page)
        box.fill("half-formed idea about pears")
        page.wait_for_timeout(700)
        rows.filter(has_text="Set up the Postgres store").click()
        page.wait_for_function(f"() => window.location.href !== {url_a!r}")
        url_b = page.url
        rows.filter(has_text="Refactor the config loader").click()
        page.wait_for_function(f"() => window.location.href === {url_a!r}")
        expect(box).to_have_value("half-formed idea about pears")
        box.fill("")
        rows.filter(has_text="Set up the Postgres store").click()
        page.wait_for_function(f"() => window.location.href === {url_b!r}")
        page.wait_for_timeout(700)
        page.goto(url_b)
        wait_loaded(page)
        page.wait_for_timeout(700)
        expect(box).to_have_value("")
        assert "half-formed idea about pears" not in page.evaluate("Object.values(localStorage)")


class TestTypedRightAfterNewChat:
    """Guards against text typed right after New chat, before the new chat was shown (a round trip;
    seconds on a busy machine), going to the chat being left: kept as that chat's draft and taken
    out of the box when the new chat came, or sent into it by an Enter pressed meanwhile (CI: the
    memory test's "hello" never reached its new chat)."""

    @staticmethod
    def _hold_new_chat(page):
        """Hold the New chat event's request until the test continues it."""
        return hold_next(page, "ac-new", "click", "queue/join")

    def _a_chat_then_new(self, world, page):
        url = world["start_app"]()
        page.goto(url)
        wait_loaded(page)
        send(page, "the first chat's message")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: the first chat's message")
        expect(page).to_have_url(re.compile(r"session="))
        url_a = page.url
        held = self._hold_new_chat(page)
        page.locator("#ac-new").click()
        wait_held(page, held, "the New chat event")
        return url_a, held

    def test_an_enter_before_the_new_chat_shows_sends_there(self, world, page):
        url_a, held = self._a_chat_then_new(world, page)
        box = page.locator("#ac-input textarea")
        box.fill("meant for the new chat")
        box.press("Enter")
        page.wait_for_timeout(700)
        held[0].continue_()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: meant for the new chat")
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        expect(page).to_have_url(re.compile(r"session="))
        assert page.url != url_a
        assert [m["content"] for m in _stored(world, _session_param(url_a)) if m["role"] == "user"] == [
            "the first chat's message"]
        page.goto(url_a)
        wait_loaded(page)
        page.wait_for_timeout(700)
        expect(box).to_have_value("")  # no draft left in the first chat

    def test_text_typed_before_the_new_chat_shows_stays_in_its_box(self, world, page):
        url_a, held = self._a_chat_then_new(world, page)
        box = page.locator("#ac-input textarea")
        box.fill("a thought for the new chat")
        page.wait_for_timeout(700)  # looked at while the new chat is on its way
        held[0].continue_()
        page.wait_for_function(f"() => window.location.href !== {url_a!r}")
        page.wait_for_timeout(700)
        expect(box).to_have_value("a thought for the new chat")
        page.goto(url_a)
        wait_loaded(page)
        page.wait_for_timeout(700)
        expect(box).to_have_value("")  # the first chat's box held nothing at the click

    def test_typing_at_once_after_new_chat_goes_into_its_box(self, world, page):
        url_a, held = self._a_chat_then_new(world, page)
        page.keyboard.type("typed without clicking the box")
        held[0].continue_()
        page.wait_for_function(f"() => window.location.href !== {url_a!r}")
        expect(page.locator("#ac-input textarea")).to_have_value("typed without clicking the box")


class TestTypedBeforeTheNewChatHasItsAddress:
    """Stop 44's CI (1 run in 10): text typed into a new chat's box after its first send, before the
    chat had its address (it comes with the send's next update, a moment after the box is emptied
    and Stop shown; longer on a busy machine), was kept as the draft of "new" and taken out of the
    box when the address came, as if another chat had been opened."""

    # The page's address changes (url_sync.js) are held until released, as a late update would be.
    HOLD = """() => {
        const real = history.replaceState.bind(history);
        window.acHeldAddress = [];
        history.replaceState = (...args) => { window.acHeldAddress.push(args); };
        window.acReleaseAddress = () => {
            history.replaceState = real;
            window.acHeldAddress.forEach((args) => real(...args));
            window.dispatchEvent(new Event('ac-chat-shown'));
        };
    }"""

    def test_the_text_stays_in_the_box_and_with_its_chat(self, world, page):
        url = world["start_app"]()
        page.goto(url)
        wait_loaded(page)
        box = page.locator("#ac-input textarea")
        page.evaluate(self.HOLD)
        send(page, "the first message")
        expect(page.locator("#ac-input button.stop-button")).to_be_visible()
        expect(box).to_have_value("")  # handed over
        box.fill("the next question")
        page.wait_for_timeout(700)  # looked at meanwhile (kept as a draft)
        page.wait_for_function("window.acHeldAddress.length > 0")
        assert _session_param(page.url) is None
        page.evaluate("window.acReleaseAddress()")
        expect(page).to_have_url(re.compile(r"session="))
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: the first message")
        page.wait_for_timeout(700)
        expect(box).to_have_value("the next question")
        chat_url = page.url
        page.goto(url)  # a new chat: nothing in its box
        wait_loaded(page)
        page.wait_for_timeout(700)
        expect(box).to_have_value("")
        page.goto(chat_url)  # the chat it was typed in keeps it
        wait_loaded(page)
        expect(box).to_have_value("the next question")
