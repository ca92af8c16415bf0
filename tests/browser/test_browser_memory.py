"""The Memory panel, the "Memory updated" toast and the "Used N memories" note in Chromium against the
app and the fake server. The plain-function half is ``tests/webui/chat/test_memory_ui.py``."""
from __future__ import annotations

import json

import pytest

from tests.support.chromium import TIMEOUT_MS, expect, send


@pytest.mark.browser
def test_memory_panel_toast_and_used_note_in_a_browser(world, page):
    """The panel, the toast's Undo and the "Used N memories" note as a user sees them."""
    url = world["start_app"]()
    page.goto(url)
    page.locator("#ac-new").click()

    # The model learns a convention: the toast says so; Undo removes it.
    send(page, "Convention: commit messages are in English. Please review app.py.")
    toast = page.locator("#ac-memory-toast")
    expect(toast).to_contain_text("Memory updated", timeout=TIMEOUT_MS)
    expect(toast).to_contain_text("commit messages are in English")
    page.locator("#ac-memory-undo").click()
    expect(toast).to_be_hidden()
    # A second one is kept.
    send(page, "Remember that the API lives in app.py.")
    expect(toast).to_contain_text("the API lives in app.py", timeout=TIMEOUT_MS)
    page.locator("#ac-memory-dismiss").click()

    # The panel: the kept memory with its conversation; add, edit and delete one.
    page.locator("#ac-memory-open").click()
    listing = page.locator("#ac-memory-list")
    expect(listing).to_contain_text("Remember that the API lives in app.py.")
    expect(listing).not_to_contain_text("commit messages are in English")
    expect(listing).to_contain_text("added by the assistant")
    page.locator("#ac-memory-new textarea").fill("Tests run with pytest")
    page.locator("#ac-memory-add").click()
    expect(listing).to_contain_text("Tests run with pytest")
    item = listing.locator(".ac-mem", has_text="Tests run with pytest")
    item.get_by_role("button", name="Edit").click()
    page.locator("#ac-memory-edit textarea").fill("Tests run with pytest -q")
    page.locator("#ac-memory-save").click()
    expect(listing).to_contain_text("Tests run with pytest -q")
    page.once("dialog", lambda d: d.accept())
    listing.locator(".ac-mem", has_text="pytest -q").get_by_role("button", name="Delete").click()
    expect(listing).not_to_contain_text("pytest")
    expect(page.locator("#ac-memory-auto input")).to_be_checked()

    # A new chat starts with the memory: its first reply says "Used 1 memory"; opening it shows which.
    page.locator("#ac-new").click()
    send(page, "hello")
    note = page.locator("#ac-chat", has_text="Used 1 memory")
    expect(note).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_text("Used 1 memory").click()
    expect(page.locator("#ac-chat")).to_contain_text("[project] Remember that the API lives in app.py.")

    # The memory's link opens the conversation it came from.
    page.locator("#ac-memory-open").click()
    listing.locator(".ac-mem-link").first.click()
    expect(page.locator("[data-testid=user]").first).to_contain_text("Convention: commit messages")

    # Stored on disk, in the data dir's memory log, without the undone fact.
    logs = list((world["data"] / "memory" / "projects").glob("*.jsonl"))
    texts = [json.loads(line).get("text") for line in logs[0].read_text().splitlines()]
    assert "Remember that the API lives in app.py." in texts

    # "Memory updated" belongs to the chat whose reply made it: opening another chat takes it
    # away, Undo and all (trial 14: it stayed over an unrelated old chat).
    send(page, "Remember that deploys happen on Fridays.")
    expect(toast).to_contain_text("deploys happen on Fridays", timeout=TIMEOUT_MS)
    page.locator("#ac-new").click()
    expect(toast).to_be_hidden()


@pytest.mark.browser
class TestQuickClicksInTheMemoryList:
    """Guards against a click in the Memory list sent before the one before was answered being
    dropped (Gradio's "once" for a select): a second quick Delete left its memory in place."""

    def test_two_quick_deletes_delete_both(self, world, page):
        page.goto(world["start_app"]())
        page.locator("#ac-memory-open").click()
        listing = page.locator("#ac-memory-list")
        for fact in ("the first fact to go", "the second fact to go", "a fact that stays"):
            page.locator("#ac-memory-new textarea").fill(fact)
            page.locator("#ac-memory-add").click()
            expect(listing).to_contain_text(fact)
        page.on("dialog", lambda d: d.accept())
        # the second Delete on the page's next task: before the first one's answer
        page.evaluate("""() => {
          const button = (text) => [...document.querySelectorAll('#ac-memory-list .ac-mem')]
            .find((m) => m.textContent.includes(text)).querySelector('[data-do=delete]');
          const first = button('the first fact to go'), second = button('the second fact to go');
          first.click();
          setTimeout(() => second.click(), 0);
        }""")
        expect(listing).not_to_contain_text("the first fact to go")
        expect(listing).not_to_contain_text("the second fact to go")
        expect(listing).to_contain_text("a fact that stays")
        page.reload()
        page.locator("#ac-memory-open").click()
        expect(listing).to_contain_text("a fact that stays")
        expect(listing).not_to_contain_text("fact to go")
