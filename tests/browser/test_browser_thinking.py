"""A thinking-mode model's reasoning in a real browser: a collapsed "Thinking" step above the
answer, opened with a click, never the answer itself (issue 27)."""
from __future__ import annotations

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, send

pytestmark = pytest.mark.browser


class TestThinkingStep:
    """Guards against the reasoning being shown as the answer, or open and in the way."""

    def test_reasoning_is_a_collapsed_thinking_step(self, world, page):
        page.goto(world["start_app"]())
        _post(world["fake"] + "/_script", {"replies": [
            {"text": "The answer is forty-two.", "reasoning": "Weighing the question before answering it.",
             "quirk": "reasoning_content"}]})
        send(page, "What is the answer?")
        bot = page.locator("[data-testid=bot]").last
        expect(bot).to_contain_text("The answer is forty-two.", timeout=TIMEOUT_MS)
        expect(bot).not_to_contain_text("Weighing the question")
        step = page.locator("#ac-chat").get_by_text("Thinking")
        expect(step.first).to_be_visible()
        thought = page.locator("#ac-chat").get_by_text("Weighing the question before answering it.")
        expect(thought).to_be_hidden()  # collapsed
        step.first.click()
        expect(thought).to_be_visible()
