"""Long conversations and long session lists in Chromium (issue 17): a 4,000-round conversation opens
on its latest messages with earlier ones on request, and the sidebar pages a long session list.
The plain-function half is ``tests/webui/chat/test_long_history.py``."""
from __future__ import annotations

import time

import pytest

from core import LocalSessionStore
from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from tests.webui.chat.test_long_history import _long_session


@pytest.mark.browser
class TestLongHistoryInBrowser:
    """In Chromium: a 10,000-message conversation takes seconds to show (or crashes the tab), the
    earlier messages cannot be reached, or a long session list stops at its first page."""

    def test_latest_messages_then_earlier_and_list_pages(self, world, page):
        from tests.support.chromium import expect

        store = LocalSessionStore(world["data"])
        key = _long_session(store, world["proj"], 4000)
        pk = project_key(str(world["proj"]))
        now = time.time()
        for i in range(130):
            k = SessionKey(pk, new_session_id())
            store.append(k, [header_entry(k.session_id, pk, str(world["proj"]), created_at=now - 86400 - i),
                             message_entry({"role": "user", "content": "x"}, ts=now - 86400 - i),
                             title_entry(f"Filler {i:03d}", "llm", ts=now - 86400 - i)])
        page.goto(world["start_app"]() + f"?session={key.session_id}")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("answer 3999", timeout=10_000)
        rows = page.locator("[data-testid=bot], [data-testid=user]").count()
        assert rows < 400, rows  # a window, not 10,000 rows
        earlier = page.locator("#ac-earlier")
        expect(earlier).to_be_visible()
        earlier.click()
        expect(page.locator("[data-testid=user]", has_text="question 3850")).to_have_count(1)
        assert page.locator("[data-testid=bot], [data-testid=user]").count() > rows
        # the sidebar: one page, then the next as it scrolls into view
        sessions = page.locator("#ac-list .ac-session")
        expect(sessions).to_have_count(100)
        page.locator("#ac-list .ac-more").scroll_into_view_if_needed()
        expect(sessions).to_have_count(131)
        expect(page.locator("#ac-list .ac-more")).to_have_count(0)

