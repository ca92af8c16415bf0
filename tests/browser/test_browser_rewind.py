"""Rewind to here and Undo rewind in Chromium (issue 29), against ``python -m webui`` and the fake
OpenAI server (fixtures of tests/support/chromium.py): the agent created two files and changed one."""
from __future__ import annotations

import time

import pytest

from tests.support.chromium import TIMEOUT_MS, _post, expect, send

pytestmark = pytest.mark.browser


def _wait(check, what):
    deadline = time.time() + TIMEOUT_MS / 1000
    while not check() and time.time() < deadline:
        time.sleep(0.1)
    assert check(), what


def test_rewind_conversation_and_files_then_undo(world, page, monkeypatch):
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
    proj = world["proj"]
    _post(world["fake"] + "/_script", {"replies": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "docs/two.md", "content": "2\n"}},
                        {"name": "write_file", "arguments": {"path": "app.py", "content": "print('<b>new</b>')\n"}}]},
        {"text": "Wrote the files."}]})
    page.goto(world["start_app"]())
    send(page, "write the files")
    expect(page.locator("#ac-chat [data-testid=bot]").last).to_contain_text("Wrote the files.", timeout=TIMEOUT_MS)
    assert (proj / "one.txt").exists() and (proj / "docs/two.md").exists()

    # The user's message: its menu has "Rewind to here", which opens the card.
    page.locator("#ac-chat [data-testid=user]").first.hover()
    page.locator("#ac-chat .extra-feedback > button").first.click()
    page.get_by_role("button", name="Rewind to here").first.click()
    card = page.locator("#ac-rewind")
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    expect(card).to_contain_text("one.txt: removed")
    expect(card).to_contain_text("app.py: old contents back")
    expect(page.locator("#ac-rewind-diff")).to_contain_text("+print('hello')")
    assert page.locator("#ac-rewind-diff b").count() == 0  # the diff is text, never markup

    page.locator("#ac-rewind-both").click()
    expect(card).to_be_hidden(timeout=TIMEOUT_MS)
    # The conversation continues from there as a version: only the user's message is shown. The
    # page shows it once the rewind is done, files included: the files are checked after it.
    expect(page.locator("#ac-chat [data-testid=bot]")).to_have_count(0, timeout=TIMEOUT_MS)
    _wait(lambda: not (proj / "one.txt").exists(), "one.txt is removed")
    assert not (proj / "docs/two.md").exists() and (proj / "app.py").read_text() == "print('hello')\n"

    page.locator("#ac-rewind-undo").click()
    # Undo is done when the page shows the conversation from before the rewind; then every file is back.
    expect(page.locator("#ac-chat [data-testid=bot]").last).to_contain_text("Wrote the files.", timeout=TIMEOUT_MS)
    _wait(lambda: (proj / "one.txt").exists(), "Undo puts one.txt back")
    assert (proj / "docs/two.md").read_text() == "2\n" and (proj / "app.py").read_text() == "print('<b>new</b>')\n"


def test_edit_of_a_turn_that_changed_files_offers_the_files_too(world, page, monkeypatch):
    """Guards against an Edit whose replaced turn wrote files leaving them as they are with no
    word: the rewind card opens first, without "Files only"; "Conversation and files" puts the
    files back and sends the edited text in the new version."""
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
    proj = world["proj"]
    _post(world["fake"] + "/_script", {"replies": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}},
                        {"name": "write_file", "arguments": {"path": "app.py", "content": "print('new')\n"}}]},
        {"text": "Wrote the files."},
        {"text": "Only looked, wrote nothing."}]})
    page.goto(world["start_app"]())
    send(page, "write the files")
    expect(page.locator("#ac-chat [data-testid=bot]").last).to_contain_text("Wrote the files.", timeout=TIMEOUT_MS)
    assert (proj / "one.txt").exists()

    page.locator("#ac-chat [data-testid=user]").first.hover()
    page.locator("#ac-chat").get_by_role("button", name="Edit").first.click()
    page.locator("#ac-chat textarea").first.fill("just look at the files")
    page.locator("#ac-chat").get_by_role("button", name="Submit").first.click()
    card = page.locator("#ac-rewind")
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    expect(card).to_contain_text("Your edit replaces a part of the conversation that changed files")
    expect(card).to_contain_text("app.py: old contents back")
    expect(page.locator("#ac-rewind-both")).to_be_visible()
    expect(page.locator("#ac-rewind-conversation")).to_be_visible()
    expect(page.locator("#ac-rewind-files-only")).to_be_hidden()
    assert (proj / "one.txt").exists(), "nothing happens before the answer"

    page.locator("#ac-rewind-both").click()
    expect(card).to_be_hidden(timeout=TIMEOUT_MS)
    expect(page.locator("#ac-chat [data-testid=bot]").last).to_contain_text("Only looked, wrote nothing.",
                                                                            timeout=TIMEOUT_MS)
    expect(page.locator("#ac-chat [data-testid=user]").first).to_have_text("just look at the files")
    assert not (proj / "one.txt").exists() and (proj / "app.py").read_text() == "print('hello')\n"
    expect(page.locator("#ac-rewind-undo")).to_be_visible(timeout=TIMEOUT_MS)
