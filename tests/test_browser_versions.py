"""Edit, Regenerate, the ‹ n / m › switcher and two stale tabs in a real Chromium (issue 15),
against ``python -m webui`` and the fake OpenAI server (fixtures of tests/test_browser_e2e.py)."""
from __future__ import annotations

import time

import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from tests.test_browser_e2e import TIMEOUT_MS, _post, expect, page, send, world  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser


def _replies(world, *texts):
    _post(world["fake"] + "/_script", {"replies": [{"text": t} for t in texts]})


def _users(page):
    return [t.strip() for t in page.locator("[data-testid=user]").all_inner_texts()]


class TestVersionsInTheBrowser:
    """Edit and Regenerate that overwrite history, arrows that do not switch, or a reload that
    lands on another version than the one last used."""

    def test_edit_regenerate_arrows_and_reload(self, world, page):
        url = world["start_app"]()
        page.goto(url)
        _replies(world, "Lisbon is nice.", "Add the tile museum.")
        send(page, "Plan a trip")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Lisbon is nice.")
        send(page, "Add a museum")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Add the tile museum.")
        first_url = page.url

        # Edit the first message: a new version continues from the edited text.
        _replies(world, "Porto is cheaper.")
        page.locator("[data-testid=user]").first.hover()
        page.locator("#ac-chat").get_by_role("button", name="Edit").first.click()
        editor = page.locator("#ac-chat textarea").first
        editor.fill("Plan a cheap trip")
        page.locator("#ac-chat").get_by_role("button", name="Submit").first.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Porto is cheaper.")
        expect(page.locator("#ac-version-label")).to_contain_text("Version 2 / 2")
        assert _users(page) == ["Plan a cheap trip"]
        expect(page.locator("#ac-list .ac-session")).to_have_count(1)  # one row per conversation

        # The arrows switch the whole conversation below the edited message.
        page.locator("#ac-version-prev").click()
        expect(page.locator("#ac-version-label")).to_contain_text("Version 1 / 2")
        expect(page.locator("[data-testid=user]")).to_have_count(2)
        assert _users(page) == ["Plan a trip", "Add a museum"]

        # Regenerate the first (not the last) reply of version 1: a third version.
        _replies(world, "Madeira, then.")
        page.locator("[data-testid=bot]").first.hover()
        page.locator("#ac-chat button[aria-label=Feedback]").first.click()
        page.get_by_role("button", name="Regenerate").first.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Madeira, then.")
        expect(page.locator("#ac-version-label")).to_contain_text("Version 2 / 2")
        assert _users(page) == ["Plan a trip"]

        # Reload, and open the first URL: both land on the version last used.
        page.reload()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Madeira, then.")
        page.goto(first_url)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Madeira, then.")
        page.locator("#ac-version-prev").click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Add the tile museum.")


class TestTwoTabsInTheBrowser:
    """A second tab that re-saves its stale title on blur, or a branch inside a parallel tool
    round that copies a call without its result."""

    def test_stale_title_blur_and_branch_inside_a_parallel_round(self, world, page):
        store = LocalSessionStore(world["data"])
        key = SessionKey(project_key(str(world["proj"])), new_session_id())
        calls = [{"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                 for i in range(3)]
        now = time.time()
        msgs = ([{"role": "user", "content": "read three files"},
                 {"role": "assistant", "content": None, "tool_calls": calls}]
                + [{"role": "tool", "tool_call_id": f"c{i}", "content": f"file {i}"} for i in range(3)]
                + [{"role": "assistant", "content": "All three read."}])
        store.append(key, [header_entry(key.session_id, key.project_key, str(world["proj"]), created_at=now)]
                     + [message_entry(m, ts=now + i) for i, m in enumerate(msgs)]
                     + [title_entry("Old name", "user", ts=now)])
        url = world["start_app"]() + f"?session={key.session_id}"
        page.goto(url)
        other = page.context.browser.new_page(viewport={"width": 1360, "height": 860})
        other.set_default_timeout(TIMEOUT_MS)
        other.goto(url)
        expect(other.locator("#ac-title input")).to_have_value("Old name")

        page.locator("#ac-title input").fill("New name")
        page.locator("#ac-title input").press("Enter")
        expect(page.locator("#ac-list .ac-session.active")).to_contain_text("New name")

        # Tab 2: focus the title field and leave it without typing.
        other.locator("#ac-title input").click()
        other.locator("#ac-input textarea").click()
        expect(other.locator("#ac-title input")).to_have_value("New name")
        assert SessionManager(store).get(key).title == "New name"

        # Branch from a row inside the parallel tool round (the tool step's row).
        other.locator("#ac-chat button[aria-label=Feedback]").nth(0).click()
        other.get_by_role("button", name="Branch from here").first.click()
        expect(other.locator("#ac-title input")).to_have_value("New name (branch)")
        manager = SessionManager(store)
        branch = next(m for m in manager.list(key.project_key) if m.forked_from)
        copied = manager.get(branch.key).messages
        asked = {c["id"] for m in copied for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in copied if m["role"] == "tool"}
        assert asked == answered and (asked == {"c0", "c1", "c2"} or not asked)
