"""Edit, Regenerate, the ‹ n / m › switcher and two stale tabs in a real Chromium (issue 15),
against ``python -m webui`` and the fake OpenAI server (fixtures of tests/support/chromium.py)."""
from __future__ import annotations

import time

import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import TIMEOUT_MS, _post, expect, send

pytestmark = pytest.mark.browser


def _replies(world, *texts):
    _post(world["fake"] + "/_script", {"replies": [{"text": t} for t in texts]})


def _users(page):
    return [t.strip() for t in page.locator("[data-testid=user]").all_inner_texts()]


def _bots(page):
    return [t.strip() for t in page.locator("#ac-chat [data-testid=bot]").all_inner_texts()]


def _arrows(page):
    """The ‹ n / m › arrows on the page: [(drawn row, "n / m")], top to bottom."""
    return page.evaluate("""() => [...document.querySelectorAll('#ac-chat .message-row')].flatMap((row, i) =>
        [...row.querySelectorAll('.ac-vswitch')].map((el) => [i, el.querySelector('.ac-vswitch-n').textContent]))""")


def _wait_arrows(page, wanted):
    """Wait until the arrows are ``wanted`` (they follow the reply's last state change)."""
    deadline = time.time() + TIMEOUT_MS / 1000
    while _arrows(page) != wanted and time.time() < deadline:
        page.wait_for_timeout(100)
    assert _arrows(page) == wanted


def _click_arrow(page, row, label):
    page.locator("#ac-chat .message-row").nth(row).get_by_role("button", name=label).click()


def _regenerate(page, bot_index):
    page.locator("#ac-chat [data-testid=bot]").nth(bot_index).hover()
    # A reply's buttons follow its row (Gradio draws them beside it, on the left).
    page.locator("#ac-chat .message-buttons-left").nth(bot_index).locator(".extra-feedback > button").click()
    page.get_by_role("button", name="Regenerate").first.click()


class TestVersionsInTheBrowser:
    """Arrows only at the latest divergence, a switch at an upper point that does not bring back
    the version last used below it, a reload that lands elsewhere, Regenerate of a middle reply
    that rewrites history, and a stale tab whose switch silently undoes another tab's."""

    def test_arrows_at_two_points_reload_regenerate_middle_and_two_tabs(self, world, page):
        url = world["start_app"]()
        page.goto(url)
        _replies(world, "Lisbon is nice.", "Add the tile museum.", "Try the custard tarts.")
        send(page, "Plan a trip")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Lisbon is nice.", timeout=TIMEOUT_MS)
        send(page, "Add a museum")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Add the tile museum.", timeout=TIMEOUT_MS)
        send(page, "And food?")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Try the custard tarts.", timeout=TIMEOUT_MS)

        # Regenerate the middle reply: a new version ends at the new answer; the old one stays.
        _replies(world, "The Gulbenkian, then.")
        _regenerate(page, 1)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("The Gulbenkian, then.", timeout=TIMEOUT_MS)
        assert _users(page) == ["Plan a trip", "Add a museum"]
        _wait_arrows(page, [[3, "2 / 2"]])  # under the regenerated reply

        # Edit the first message, then the chat's own Retry under the last reply.
        _replies(world, "Porto is cheaper.", "Serralves.", "Soares dos Reis.")
        page.locator("[data-testid=user]").first.hover()
        page.locator("#ac-chat").get_by_role("button", name="Edit").first.click()
        page.locator("#ac-chat textarea").first.fill("Plan a cheap trip")
        page.locator("#ac-chat").get_by_role("button", name="Submit").first.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Porto is cheaper.", timeout=TIMEOUT_MS)
        send(page, "Add a museum")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Serralves.", timeout=TIMEOUT_MS)
        page.locator("[data-testid=bot]").last.hover()
        page.locator("#ac-chat").get_by_role("button", name="Retry").last.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Soares dos Reis.", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-list .ac-session")).to_have_count(1, timeout=TIMEOUT_MS)  # one row per conversation
        # Two divergence points, each with its own arrows.
        _wait_arrows(page, [[0, "2 / 2"], [3, "2 / 2"]])

        # ‹ at the first message: the whole conversation below switches, to the version last
        # used there (the regenerated middle reply), not the oldest one.
        _click_arrow(page, 0, "Previous version")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("The Gulbenkian, then.", timeout=TIMEOUT_MS)
        assert _users(page) == ["Plan a trip", "Add a museum"]
        _wait_arrows(page, [[0, "1 / 2"], [3, "2 / 2"]])
        page.reload()  # lands on the version last used
        expect(page.locator("[data-testid=bot]").last).to_contain_text("The Gulbenkian, then.", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-chat .ac-vswitch")).to_have_count(2, timeout=TIMEOUT_MS)

        # Two tabs: the first switches at the first message; the second, still on the old
        # version, switches at the lower point: refused with a notice, never undoing the first.
        other = page.context.browser.new_page(viewport={"width": 1360, "height": 860})
        other.set_default_timeout(TIMEOUT_MS)
        other.goto(page.url)
        expect(other.locator("[data-testid=bot]").last).to_contain_text("The Gulbenkian, then.", timeout=TIMEOUT_MS)
        expect(other.locator("#ac-chat .ac-vswitch")).to_have_count(2, timeout=TIMEOUT_MS)
        _click_arrow(page, 0, "Next version")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Soares dos Reis.", timeout=TIMEOUT_MS)
        _click_arrow(other, 3, "Previous version")
        expect(other.locator(".toast-body")).to_contain_text("changed elsewhere", timeout=TIMEOUT_MS)
        expect(other.locator("[data-testid=bot]").last).to_contain_text("Soares dos Reis.", timeout=TIMEOUT_MS)
        page.reload()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Soares dos Reis.", timeout=TIMEOUT_MS)

        # A regenerated reply that fails: its arrows sit under the error row, so the way back is there.
        _post(world["fake"] + "/_script", {"replies": [{"error": 401, "message": "Incorrect API key provided"}]})
        page.locator("[data-testid=bot]").last.hover()
        page.locator("#ac-chat").get_by_role("button", name="Retry").last.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("API key", timeout=TIMEOUT_MS)
        _wait_arrows(page, [[0, "2 / 2"], [3, "3 / 3"]])
        _click_arrow(page, 3, "Previous version")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Soares dos Reis.", timeout=TIMEOUT_MS)


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
        expect(other.locator("#ac-title input")).to_have_value("Old name", timeout=TIMEOUT_MS)

        page.locator("#ac-title input").fill("New name")
        page.locator("#ac-title input").press("Enter")
        expect(page.locator("#ac-list .ac-session.active")).to_contain_text("New name", timeout=TIMEOUT_MS)

        # Tab 2: focus the title field and leave it without typing.
        other.locator("#ac-title input").click()
        other.locator("#ac-input textarea").click()
        expect(other.locator("#ac-title input")).to_have_value("New name", timeout=TIMEOUT_MS)
        assert SessionManager(store).get(key).title == "New name"

        # Branch from a row inside the parallel tool round (the tool step's row).
        other.locator("#ac-chat .extra-feedback > button").nth(0).click()
        other.get_by_role("button", name="Branch from here").first.click()
        expect(other.locator("#ac-title input")).to_have_value("New name (branch)", timeout=TIMEOUT_MS)
        manager = SessionManager(store)
        branch = next(m for m in manager.list(key.project_key) if m.forked_from)
        copied = manager.get(branch.key).messages
        asked = {c["id"] for m in copied for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in copied if m["role"] == "tool"}
        assert asked == answered and (asked == {"c0", "c1", "c2"} or not asked)
        # Nothing of the branch was lost: no "No reply was saved — Retry" bar (issue 31, defect 6).
        other.wait_for_timeout(500)  # the bar would come with the branch's first paint
        expect(other.locator("#ac-noreply")).to_be_hidden()

    def test_a_title_set_on_a_version_is_the_conversations_on_every_version(self, world, page):
        """Guards against issue 31's defect 1: renamed on an edited version, the sidebar row
        kept the old name and version 1 showed the old title again (the rename was lost)."""
        page.goto(world["start_app"]())
        _replies(world, "Lisbon is nice.", "Porto is cheaper.")
        send(page, "Plan a trip")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Lisbon is nice.", timeout=TIMEOUT_MS)
        page.locator("[data-testid=user]").first.hover()
        page.locator("#ac-chat").get_by_role("button", name="Edit").first.click()
        page.locator("#ac-chat textarea").first.fill("Plan a cheap trip")
        page.locator("#ac-chat").get_by_role("button", name="Submit").first.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Porto is cheaper.", timeout=TIMEOUT_MS)
        _wait_arrows(page, [[0, "2 / 2"]])
        title = page.locator("#ac-title input")
        title.fill("Portugal on a budget")
        title.press("Enter")
        expect(page.locator("#ac-list .ac-session.active")).to_contain_text("Portugal on a budget",
                                                                           timeout=TIMEOUT_MS)
        _click_arrow(page, 0, "Previous version")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Lisbon is nice.", timeout=TIMEOUT_MS)
        expect(title).to_have_value("Portugal on a budget")
        expect(page.locator("#ac-list .ac-session")).to_have_count(1)
        expect(page.locator("#ac-list .ac-session.active")).to_contain_text("Portugal on a budget")
        page.reload()
        expect(page.locator("#ac-title input")).to_have_value("Portugal on a budget", timeout=TIMEOUT_MS)
