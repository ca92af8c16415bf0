"""The context meter, Compact, /compact and the summary divider in a real Chromium (issue 9).

Same set-up as ``test_browser_e2e`` (the app and the fake OpenAI server as subprocesses); the
app runs with a 2,000-token window and long scripted replies, so two exchanges fill it.
"""
from __future__ import annotations

import pytest

from core.session.keys import SessionKey, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import TIMEOUT_MS, _post, expect, send

pytestmark = pytest.mark.browser

REPLY = "The invoice module rounds totals per line item. " * 50  # ~2.4k characters, ~600 tokens


def _stored(world, sid: str):
    entries = LocalSessionStore(world["data"]).load(SessionKey(project_key(str(world["proj"])), sid)) or []
    return ([e["message"] for e in entries if e.get("type") == "message"],
            [e for e in entries if e.get("type") == "compaction"])


class TestCompactionInTheBrowser:
    """Guards against a full context going unnoticed (no meter, no amber), a Compact that hides or
    deletes messages, a `/compact` sent to the model as a message, and a Stop that cannot stop a
    summary being written."""

    def test_meter_compact_stop_divider(self, world, page, monkeypatch):
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "2000")
        page.goto(world["start_app"]())
        meter = page.locator("#ac-meter-box .ac-meter")
        expect(meter).to_contain_text("/ 2k", timeout=TIMEOUT_MS)  # the first paint on a busy machine
        expect(page.locator("#ac-compact")).to_be_disabled()  # an empty new chat has nothing to compact

        for n in range(2):
            _post(world["fake"] + "/_script", {"replies": [{"text": f"{n}: {REPLY}", "chunk": 200}]})
            send(page, f"question {n}")
            expect(page.locator("[data-testid=bot]")).to_have_count(n + 1)
            expect(page.locator("[data-testid=bot]").last).to_contain_text(f"{n}: The invoice module")
            expect(page.get_by_role("button", name="Stop")).to_have_count(0)  # the reply is complete
        expect(meter).to_have_class("ac-meter ac-meter-warn")  # past 80% of the window: amber
        expect(page.locator("#ac-compact")).to_be_enabled()
        sid = page.url.split("session=")[1].split("&")[0]

        # Compact, then Stop while the summary is being written: nothing changes.
        _post(world["fake"] + "/_script", {"kind": "summary",
                                          "replies": [{"text": "slow summary " * 200, "chunk": 5, "delay": 0.05}]})
        page.locator("#ac-compact").click()
        expect(page.locator("#ac-chat")).to_contain_text("Summarising earlier messages")
        page.get_by_role("button", name="Stop").click()
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        expect(page.locator("#ac-chat")).not_to_contain_text("Summarising earlier messages")
        assert _stored(world, sid)[1] == []

        # Compact for real: a divider, every message still shown above it, the meter back to normal.
        page.locator("#ac-compact").click()
        divider = page.locator("#ac-chat").get_by_text("Earlier messages were summarised")
        expect(divider).to_have_count(1)
        expect(page.locator("[data-testid=user]")).to_have_count(2)
        expect(meter).not_to_have_class("ac-meter ac-meter-warn")
        divider.click()
        expect(page.locator("#ac-chat")).to_contain_text("Summary: goals so far")
        messages, compactions = _stored(world, sid)
        assert len(messages) == 5 and [c["trigger"] for c in compactions] == ["manual"]

        # `/compact` typed in the box runs the same action and is never sent as a message.
        send(page, "/compact")
        expect(page.locator("#ac-chat").get_by_text("Earlier messages were summarised")).to_have_count(2)
        expect(page.locator("[data-testid=user]")).to_have_count(2)
        expect(page.locator("#ac-input textarea")).to_have_value("")
        assert len(_stored(world, sid)[0]) == 5


class TestTheMeterAfterAnAutomaticSummary:
    """A fresh-user trial: after a send that summarised the chat first (the window was full), the
    meter still counted the whole chat ("~1.4M / 128k") until a reload showed the summarised one."""

    def test_meter_follows_without_a_reload(self, world, page, monkeypatch):
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "2000")
        page.goto(world["start_app"]())
        meter = page.locator("#ac-meter-box .ac-meter")
        expect(meter).to_contain_text("/ 2k", timeout=TIMEOUT_MS)
        for n in range(3):  # the third send finds the window past 80%: summarised before it is sent
            _post(world["fake"] + "/_script", {"replies": [{"text": f"{n}: {REPLY}", "chunk": 200}]})
            send(page, f"question {n}")
            expect(page.locator("[data-testid=bot]").last).to_contain_text(f"{n}: The invoice module")
            expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        expect(page.locator("#ac-chat").get_by_text("Earlier messages were summarised")).to_have_count(1)
        # What a fresh page of this chat shows is what this page must come to, without a reload
        fresh = page.context.browser.new_page()
        try:
            fresh.goto(page.url)
            expect(fresh.locator("[data-testid=bot]").last).to_contain_text("2: The invoice module")
            true_count = fresh.locator("#ac-meter-box .ac-meter").get_attribute("aria-valuenow", timeout=TIMEOUT_MS)
        finally:
            fresh.close()
        assert int(true_count) < 2000, true_count  # the summary made room
        expect(meter).to_have_attribute("aria-valuenow", true_count, timeout=TIMEOUT_MS)
