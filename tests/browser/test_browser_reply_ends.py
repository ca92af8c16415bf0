"""A cut-off reply in a real browser: marked, with a Continue option that sends "Continue"."""
from __future__ import annotations

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, send

pytestmark = pytest.mark.browser


class TestCutOffInTheBrowser:
    """Guards against a reply the server cut off looking finished, and Continue doing nothing."""

    def test_cut_off_reply_shows_continue(self, world, page):
        page.goto(world["start_app"]())
        _post(world["fake"] + "/_script", {"replies": [{"text": "The first half of the answer", "quirk": "length"}]})
        send(page, "Explain the config loader")
        expect(page.locator("#ac-chat")).to_contain_text("The reply was cut off", timeout=TIMEOUT_MS)
        page.get_by_role("button", name="Continue").click()
        expect(page.locator("[data-testid=user]").last).to_have_text("Continue", timeout=TIMEOUT_MS)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: Continue")
        expect(page.get_by_role("button", name="Continue")).to_have_count(0)
