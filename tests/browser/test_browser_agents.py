"""``@reviewer`` in a real Chromium (issue 30): the reviewer answers with its prompt and model, its
reply is labelled, the JSONL entry names it, Regenerate keeps it, and the sidebar's Agents section
opens its definition read-only (``python -m webui`` and the fake server as subprocesses)."""
from __future__ import annotations

import json
import urllib.request

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, wait_loaded

pytestmark = pytest.mark.browser

REVIEWER = ("---\nname: reviewer\ndescription: Reviews a change for bugs.\nmodel: fake-review\n---\n"
            "You are a strict code reviewer.\n")


def answer_requests(world) -> list[dict]:
    with urllib.request.urlopen(world["fake"] + "/_requests", timeout=10) as resp:
        logged = json.loads(resp.read())
    return [r["body"] for r in logged if r["path"].endswith("/chat/completions") and r["status"] == 200
            and str(r["body"]["messages"][0].get("content", "")).startswith("You are anycode")]


class TestReviewerInTheBrowser:
    """Guards against ``@reviewer`` answered by the default assistant, an unlabelled agent reply,
    a Regenerate that forgets the agent, or an Agents section that cannot be opened."""

    def test_reviewer_answers_is_labelled_and_regenerate_keeps_it(self, world, page):
        folder = world["proj"] / ".anycode" / "agents"
        folder.mkdir(parents=True)
        (folder / "reviewer.md").write_text(REVIEWER)
        page.goto(world["start_app"]())
        expect(page.locator("#ac-list")).to_contain_text("No conversations yet")
        wait_loaded(page)
        expect(page.locator("#ac-agents")).to_contain_text("@reviewer")  # the sidebar's Agents section

        _post(world["fake"] + "/_script", {"replies": [{"text": "Reviewed: app.py has no bug."}]})
        # "@" offers the agents; Tab completes the name.
        box = page.locator("#ac-input textarea")
        box.fill("@rev")
        popup = page.locator("#ac-agent-popup")
        expect(popup).to_be_visible()
        expect(popup).to_have_text("@reviewer")
        box.press("Tab")
        expect(box).to_have_value("@reviewer ")
        expect(popup).to_be_hidden()
        box.press_sequentially("check this")
        expect(box).to_have_value("@reviewer check this")
        box.press("Enter")
        chat = page.locator("#ac-chat")
        expect(chat).to_contain_text("Reviewed: app.py has no bug.", timeout=TIMEOUT_MS)
        expect(chat.locator("small.ac-label")).to_have_text("reviewer")
        (req,) = answer_requests(world)
        assert req["model"] == "fake-review" and "You are a strict code reviewer." in req["messages"][0]["content"]
        expect(page.locator("#ac-list .ac-session")).to_have_count(1)
        [file] = [p for p in world["data"].rglob("*.jsonl") if "subagents" not in p.parts]
        replies = [json.loads(line) for line in file.read_text().splitlines()]
        assert [e.get("agent") for e in replies if e.get("type") == "message"
                and e["message"]["role"] == "assistant"] == ["reviewer"]

        # Regenerate: the reviewer answers again (its model), and the new reply is labelled too.
        _post(world["fake"] + "/_script", {"replies": [{"text": "Second look: still no bug."}]})
        page.locator("#ac-chat [data-testid=bot]").first.hover()
        page.locator("#ac-chat .message-buttons-left").first.locator(".extra-feedback > button").click()
        page.get_by_role("button", name="Regenerate").first.click()
        expect(chat).to_contain_text("Second look: still no bug.", timeout=TIMEOUT_MS)
        expect(chat.locator("small.ac-label")).to_have_text("reviewer")
        assert [r["model"] for r in answer_requests(world)] == ["fake-review", "fake-review"]

        # The Agents section opens the reviewer's definition, read-only.
        page.locator("#ac-agents [data-agent=reviewer]").click()
        panel = page.locator("#ac-agent-panel")
        expect(panel).to_be_visible()
        expect(panel).to_contain_text("@reviewer")
        expect(panel).to_contain_text("You are a strict code reviewer.")
        expect(panel.locator("textarea")).to_have_count(0)
        # read-only: no Clear (trash) button that would blank the view; Close a button's height
        expect(panel.locator("button[aria-label=Clear], button[title=Clear]").filter(visible=True)).to_have_count(0)
        assert page.locator("#ac-agent-close").bounding_box()["height"] <= 48
        page.locator("#ac-agent-close").click()
        expect(panel).to_be_hidden()


class TestAgentsSectionLeavesTheListItsRoom:
    """Guards against the Agents section taking a share of the sidebar's height (145 px at 800 px
    high, empty or not), which squeezed the chat list to one visible row (trial 6; with two agents
    and a short window, trial 7)."""

    def test_list_gets_the_free_height_with_and_without_agents(self, world, page):
        from tests.support.chromium import _seed

        _seed(world["data"], world["proj"])
        url = world["start_app"]()
        page.set_viewport_size({"width": 1360, "height": 800})
        page.goto(url)
        expect(page.locator("#ac-list .ac-session")).to_have_count(4)
        wait_loaded(page)
        expect(page.locator("#ac-agents-slot")).to_be_hidden()  # no agents: no section
        sizes = page.evaluate("""() => { const l = document.querySelector('#ac-list'); return [
            l.getBoundingClientRect().height, l.scrollHeight]; }""")
        # the list takes what the header and the foot leave (287 px here; 125 px before)
        assert sizes[0] >= min(sizes[1] - 1, 250), f"the list is squeezed: {sizes}"
        folder = world["proj"] / ".anycode" / "agents"
        folder.mkdir(parents=True)
        (folder / "reviewer.md").write_text(REVIEWER)
        (folder / "oracle.md").write_text(REVIEWER.replace("reviewer", "oracle").replace(
            "model: fake-review", "mode: expert"))
        page.set_viewport_size({"width": 1360, "height": 760})
        page.reload()
        expect(page.locator("#ac-agents")).to_contain_text("@reviewer")
        expect(page.locator("#ac-agents")).to_contain_text("@oracle")
        agents = page.locator("#ac-agents-slot").bounding_box()["height"]
        content = page.evaluate("() => document.querySelector('#ac-agents').scrollHeight")
        assert agents <= content + 24, f"the section is as tall as its content: {agents} vs {content}"
        listed = page.evaluate("""() => { const l = document.querySelector('#ac-list'); return [
            l.getBoundingClientRect().height, l.scrollHeight]; }""")
        # Two agents in a 760 px window: the list keeps room for several rows and the sidebar
        # scrolls to its foot instead (129 px, one row, with two agents at 860 px in trial 7).
        assert listed[0] >= min(listed[1] - 1, 250), listed
        page.locator("#ac-memory-foot button").scroll_into_view_if_needed()
        expect(page.locator("#ac-memory-foot button")).to_be_in_viewport()
