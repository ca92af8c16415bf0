"""A task step in a real Chromium: the sub-agent's steps show live under it, and its link opens the
sub-agent's transcript, read-only (``python -m webui`` and the fake server as subprocesses)."""
from __future__ import annotations

import re

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, send, sync_api, wait_loaded

pytestmark = pytest.mark.browser


class TestTaskStepInTheBrowser:
    """Guards against a task step that hides its sub-agent's work or whose transcript cannot be opened."""

    def test_live_steps_then_transcript(self, world, page):  # noqa: F811 -- fixtures imported above
        url = world["start_app"]()
        page.goto(url)
        expect(page.locator("#ac-list")).to_contain_text("No conversations yet")
        wait_loaded(page)  # loaded: a new chat
        _post(world["fake"] + "/_script", {"replies": [
            {"tool_calls": [{"name": "task", "id": "call_survey",
                             "arguments": {"description": "Survey the project", "prompt": "survey: what is here?"}}]},
            {"text": "The survey is back: a README and app.py."}]})
        _post(world["fake"] + "/_script", {"kind": "subagent", "task": "survey", "replies": [
            {"tool_calls": [{"name": "list_files", "arguments": {}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "app.py"}}], "wait": 5},
            {"text": "Found README.md and app.py, which prints hello."}]})
        send(page, "What is in this project? Use a sub-agent.")

        chat = page.locator("#ac-chat")
        # Live: the task step is pending and the sub-agent's first step shows nested under it.
        expect(chat).to_contain_text("task: Survey the project", timeout=TIMEOUT_MS)
        expect(chat).to_contain_text("list_files", timeout=TIMEOUT_MS)
        # its title tells the progress while the step is collapsed (the next reply takes 5 s)
        expect(chat.get_by_text(re.compile(r"task: Survey the project \u00b7 [12] steps?"))).to_be_visible()
        expect(chat).to_contain_text("The survey is back", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-list .ac-session")).to_have_count(1)  # no sub-agent record listed

        expect(page.locator("#ac-list")).to_contain_text("Chat: What is in this project")  # the send ended

        # The stored task step (collapsible once done) holds the link to the transcript.
        step = chat.get_by_text("task: Survey the project").first
        link = chat.get_by_text("Open the sub-agent's transcript").first
        panel = page.locator("#ac-transcript")
        # The chat may still be re-rendering its last update (which collapses steps): open the
        # step if it is closed, then click; try again if the row was replaced under the pointer.
        for _ in range(6):
            if not link.is_visible():
                step.click()
                page.wait_for_timeout(400)
            try:
                link.click(timeout=3000)
            except sync_api.TimeoutError:
                continue
            page.wait_for_timeout(500)
            if panel.is_visible():
                break
        expect(panel).to_be_visible()
        expect(panel).to_contain_text("Sub-agent: Survey the project")
        expect(panel).to_contain_text("survey: what is here?")
        expect(panel).to_contain_text("Found README.md and app.py, which prints hello.")
        expect(panel.locator("textarea")).to_have_count(0)  # read-only: nothing to type into
        assert "?session=" in page.url and "#ac-subagent" not in page.url  # the page did not navigate
        page.locator("#ac-transcript-close").click()
        expect(panel).to_be_hidden()
