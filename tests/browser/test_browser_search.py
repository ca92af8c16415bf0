"""The sidebar's message search in Chromium: typing a word said in a conversation finds it and the click
opens the chat at that message; a second result clicked before the first was answered wins. The
plain-function half is ``tests/webui/chat/test_search_ui.py``."""
from __future__ import annotations

import re
import time

import pytest

from core import LocalSessionStore, SessionManager
from core.session.entries import header_entry, message_entry, tags_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key


@pytest.mark.browser
class TestSearchInBrowser:
    """Typing a word said in a conversation (or part of its tag) does not find it, or the click does not open it
    at that message."""

    def test_type_a_word_and_open_the_result(self, world, page):
        from tests.support.chromium import expect, wait_loaded

        proj, data = world["proj"], world["data"]
        store = LocalSessionStore(data)
        now = time.time()
        target = tagged = None
        for n, (title, word) in enumerate([("Database work", "migration"), ("Frontend polish", "flexbox"),
                                           ("Old stuff", "nothing")]):
            key = SessionKey(project_key(str(proj)), new_session_id())
            entries = [header_entry(key.session_id, key.project_key, str(proj), created_at=now - 3600 * (n + 1))]
            for i in range(30):
                text = f"Filler message number {i} about the weather."
                if word == "flexbox" and i == 24:
                    text = "Let us center it with a flexbox and call it done, 完成了"
                if word == "migration" and i == 4:  # kept in both versions made below
                    text = "Plan the migration of the orders table."
                if word == "migration" and i == 20:  # only in the first version
                    text = "The rollback script is ready."
                entries.append(message_entry({"role": "user" if i % 2 == 0 else "assistant", "content": text},
                                             ts=now - 3600 * (n + 1) + i))
            entries.append(title_entry(title, "user", ts=now - 3600 * (n + 1) + 40))
            if word == "nothing":  # found by its tag alone (issue 31, item 14)
                entries.append(tags_entry(["quarterly-review"], ts=now - 3600 * (n + 1) + 41))
                tagged = key.session_id
            store.append(key, entries)
            if word == "flexbox":
                target = key.session_id
            if word == "migration":
                versioned = key
        # issue 31, item 3: a second version, in use, sharing the first 10 messages
        manager = SessionManager(store)
        second = manager.fork(versioned, 9, version=True)
        manager.add_messages(second.key, [{"role": "user", "content": "Try a smaller batch."},
                                          {"role": "assistant", "content": "Smaller batches it is."}])
        url = world["start_app"]()
        page.goto(url)
        expect(page.locator("#ac-list")).to_contain_text("Database work")
        wait_loaded(page)
        page.locator("#ac-search textarea, #ac-search input").first.press_sequentially("flexb", delay=60)
        results = page.locator("#ac-search-results")
        hit = results.locator(".ac-hit-row")
        expect(hit).to_have_count(1)
        expect(hit).to_contain_text("Frontend polish")
        expect(hit.locator("mark")).to_have_text("flexb")
        hit.click()
        expect(page.locator("#ac-title input, #ac-title textarea").first).to_have_value("Frontend polish")
        expect(page).to_have_url(re.compile(re.escape(target)))  # the address bar follows (replaceState)
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
        # A word of a tag: one "Tag" row with the tags, the match marked; the click opens the chat.
        box.fill("quarterl")
        hit = results.locator(".ac-hit-row")
        expect(hit).to_have_count(1)
        expect(hit).to_contain_text("Old stuff")
        expect(hit.locator(".ac-hit-snippet")).to_contain_text("Tag: #quarterly-review")
        expect(hit.locator("mark")).to_have_text("quarterl")
        hit.click()
        expect(page.locator("#ac-title input, #ac-title textarea").first).to_have_value("Old stuff")
        expect(page).to_have_url(re.compile(re.escape(tagged)))
        # issue 31, item 3: a word in messages both versions share is one hit, not one per version, and it
        # opens the version in use; a word only in the other version says so, and opening it does not
        # change the version in use.
        box.fill("migration")
        hit = results.locator(".ac-hit-row")
        expect(results.locator(".ac-hit-row", has_text="Database work")).to_have_count(1)  # the new results
        expect(hit).to_have_count(1)
        expect(hit.locator(".ac-hit-version")).to_have_count(0)
        hit.click()
        expect(page).to_have_url(re.compile(re.escape(second.id)))
        expect(page.locator("#ac-chat")).to_contain_text("Smaller batches it is.")
        box.fill("rollback")
        expect(results.locator(".ac-hit-row", has_text="The rollback script")).to_have_count(1)
        expect(hit).to_have_count(1)
        expect(hit.locator(".ac-hit-version")).to_have_text("in version 1 of 2")
        hit.click()
        expect(page).to_have_url(re.compile(re.escape(versioned.session_id)))
        expect(page.locator("#ac-chat .ac-hit")).to_contain_text("The rollback script is ready.")
        assert manager.current_version(versioned) == second.key, "opening a hit changed the version in use"


# Hit A clicked, then hit B on the page's next task: a double-click's gap, so the server cannot have
# answered A yet (as in tests/browser/test_browser_address.py). Returns whether A's answer was already
# on screen when B was clicked (the title of a chat opened).
CLICK_HIT_A_THEN_B_JS = """([a, b]) => new Promise((done) => {
  const hit = (sid) => [...document.querySelectorAll('#ac-search-results [data-hit]')]
    .find((row) => JSON.parse(row.dataset.hit).sid === sid);
  hit(a).click();
  setTimeout(() => { const answered = document.querySelector('#ac-title input').value !== '';
                     hit(b).click(); done(answered); }, 0);
})"""


@pytest.mark.browser
class TestSecondQuickHitOpensItsChat:
    """Guards against a second search result clicked before the first one was answered being dropped:
    the first hit's chat opened and the address (``?session=<A>``) said A, so a reload opened A too,
    although the user clicked B last. Gradio's default ``trigger_mode="once"`` for ``select`` ignored
    B's click while A's was pending."""

    def test_the_last_hit_clicked_is_the_open_chat_and_the_address(self, world, page):
        from tests.support.chromium import TIMEOUT_MS, expect, wait_loaded

        proj, store, now = world["proj"], LocalSessionStore(world["data"]), time.time()
        sids = {}
        for n, title in enumerate(["Kiwi orders", "Kiwi shipping"]):
            key = SessionKey(project_key(str(proj)), new_session_id())
            ts = now - 3600 * (n + 1)
            store.append(key, [header_entry(key.session_id, key.project_key, str(proj), created_at=ts),
                               message_entry({"role": "user", "content": f"{title}: where is the marmalade?"}, ts=ts),
                               message_entry({"role": "assistant", "content": "On the shelf."}, ts=ts + 1),
                               title_entry(title, "user", ts=ts + 2)])
            sids[title] = key.session_id
        page.goto(world["start_app"]())
        expect(page.locator("#ac-list")).to_contain_text("Kiwi shipping")
        wait_loaded(page)
        page.locator("#ac-search textarea, #ac-search input").first.press_sequentially("marmalad", delay=60)
        expect(page.locator("#ac-search-results .ac-hit-row")).to_have_count(2)
        a, b = sids["Kiwi orders"], sids["Kiwi shipping"]
        assert page.evaluate(CLICK_HIT_A_THEN_B_JS, [a, b]) is False  # B clicked before A's answer
        title = page.locator("#ac-title input")
        expect(title).to_have_value("Kiwi shipping")
        expect(page.locator("[data-testid=user]").first).to_have_text("Kiwi shipping: where is the marmalade?")
        page.wait_for_function("(sid) => new URLSearchParams(location.search).get('session') === sid",
                               arg=b, timeout=TIMEOUT_MS)
        expect(title).to_have_value("Kiwi shipping")  # and A's answer was not drawn after it
        page.reload()
        wait_loaded(page)
        expect(title).to_have_value("Kiwi shipping")
        expect(page.locator("[data-testid=user]").first).to_have_text("Kiwi shipping: where is the marmalade?")
        assert re.search(r"[?&]session=([0-9a-f-]+)", page.url).group(1) == b
