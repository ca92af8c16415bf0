"""Notices on the chat page in a real Chromium (issue 18): one notice per event, in words a user
understands (same set-up as ``test_browser_e2e``: app and fake OpenAI server as subprocesses)."""
from __future__ import annotations

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, send

pytestmark = pytest.mark.browser


class TestOneNoticePerEvent:
    """Guards against an HTTP 500 from the model showing both an error row in the chat and a
    second "No reply was saved… Retry" bar for the same failure, against the row's Retry
    doing nothing, and against the bar losing the failure's reason after a reload."""

    def test_http_500_shows_one_notice_with_retry(self, world, page):
        page.goto(world["start_app"]())
        _post(world["fake"] + "/_script", {"replies": [{"error": 500, "message": "boom"}] * 3})
        send(page, "are you there?")  # 3 errors: the first try and the client's 2 retries
        bot = page.locator("[data-testid=bot]")
        expect(bot.last).to_contain_text("\u26a0", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-noreply")).to_be_hidden()
        page.wait_for_timeout(500)  # the final update has landed: still one notice
        expect(page.locator("#ac-noreply")).to_be_hidden()
        page.locator("#ac-chat button.option", has_text="Retry").click()  # the error row's own Retry
        expect(bot.last).to_contain_text("You said: are you there?", timeout=TIMEOUT_MS)
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        expect(page.locator("#ac-noreply")).to_be_hidden()

        # After a reload the bar still says why (trial: only "No reply was saved for the last
        # message" was left of the model's error).
        _post(world["fake"] + "/_script", {"replies": [{"error": 500, "message": "boom"}] * 3})
        send(page, "and now?")
        expect(bot.last).to_contain_text("\u26a0", timeout=TIMEOUT_MS)
        page.reload()
        expect(page.locator("#ac-noreply")).to_contain_text(
            "No reply was saved: The model server had an internal error (HTTP 500)", timeout=TIMEOUT_MS)
