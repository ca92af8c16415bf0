"""End to end in a real Chromium against ``python -m webui`` started as a subprocess, talking real
HTTP to the fake OpenAI server (also a subprocess). Asserts on what the page shows.

Saves ``assets/screenshot.png`` (the README's screenshot) at the end of the flow. The shared set-up (the
``world`` and ``page`` fixtures, ``send``, ``running_app`` ...) is in ``tests/support/chromium.py``.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.support.chromium import REPO, TIMEOUT_MS, Proc, _env, _free_port, _post, _seed, expect, send, wait_loaded

pytestmark = pytest.mark.browser

SCREENSHOT = REPO / "assets" / "screenshot.png"


class TestChatFlow:
    """Guards against the product's main path breaking in a real browser: a reply that does not
    stream or show, a title that never reaches the sidebar, a rename or branch that does not stick,
    and a restart that loses the conversation."""

    def test_full_flow(self, world, page):
        url = world["start_app"]()
        requested: list[str] = []
        page.on("request", lambda req: requested.append(req.url))
        page.goto(url)
        expect(page.locator("#ac-list")).to_contain_text("No conversations yet")
        wait_loaded(page)

        # new chat -> send -> streamed reply
        page.locator("#ac-new").click()
        reply = "Sure! Start by reading the README, then run the tests. " * 4
        _post(world["fake"] + "/_script", {"replies": [{"text": reply, "chunk": 6, "delay": 0.05}]})
        send(page, "How do I get started on this repo?")
        bot = page.locator("[data-testid=bot]").last
        expect(bot).to_contain_text("Sure! Start by reading", timeout=TIMEOUT_MS)
        seen_partial = len(bot.inner_text()) < len(reply.strip())
        expect(bot).to_contain_text(reply.strip()[-40:])
        assert seen_partial, "the reply should appear piece by piece, not all at once"
        expect(page.locator("[data-testid=user]").first).to_have_text("How do I get started on this repo?")
        assert "?session=" in page.url

        # the generated title appears in the sidebar without a reload
        expect(page.locator("#ac-list")).to_contain_text("Chat: How do I get", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-title input")).to_have_value(re.compile(r"^Chat: How do I get"))

        # rename (Enter saves; blank is refused with a message)
        title = page.locator("#ac-title input")
        title.fill("Onboarding plan")
        title.press("Enter")
        expect(page.locator("#ac-list .ac-session.active")).to_contain_text("Onboarding plan")
        title.fill("   ")
        title.press("Enter")
        expect(page.get_by_text("A title cannot be empty")).to_be_visible()
        expect(title).to_have_value("Onboarding plan")
        original_url = page.url

        # branch from the first message
        first = page.locator("[data-testid=user]").first
        first.hover()
        page.get_by_role("button", name="More actions").first.click()  # named for what it is (trial 11)
        option = page.get_by_role("button", name="Branch from here").first
        spot = option.bounding_box()
        option.click()
        expect(title).to_have_value("Onboarding plan (branch)")
        # the branch menu closes although the pointer is still where the option was
        page.mouse.move(spot["x"] + spot["width"] / 2 + 1, spot["y"] + spot["height"] / 2 + 1)
        expect(page.get_by_role("button", name="Branch from here")).to_have_count(0)
        expect(page.locator("[data-testid=user]")).to_have_count(1)
        expect(page.locator("[data-testid=bot]")).to_have_count(0)
        assert page.url != original_url and "?session=" in page.url
        listed = page.locator("#ac-list .ac-session-title")
        expect(listed.filter(has_text="Onboarding plan (branch)")).to_have_count(1)
        expect(listed.filter(has_text="Onboarding plan")).to_have_count(2)

        # the original is unchanged: open it from the sidebar
        listed.get_by_text("Onboarding plan", exact=True).click()
        expect(title).to_have_value("Onboarding plan")
        expect(page.locator("[data-testid=bot]")).to_have_count(1)
        # back to the branch, which is the most recently active session
        listed.get_by_text("Onboarding plan (branch)").click()
        expect(title).to_have_value("Onboarding plan (branch)")

        # restart with --continue: the last session is open with its history
        for app in world["apps"]:
            app.stop()
        url2 = world["start_app"]("--continue")
        page.goto(url2)
        expect(title).to_have_value("Onboarding plan (branch)")
        expect(page.locator("[data-testid=user]").first).to_have_text("How do I get started on this repo?")
        expect(page.locator("#ac-list")).to_contain_text("Onboarding plan")

        # a conversation with a tool step, for the README screenshot
        _seed(world["data"], world["proj"])
        page.locator("#ac-new").click()
        expect(title).to_have_value("")
        _post(world["fake"] + "/_script", {"replies": [
            {"text": "Let me look at the project first.",
             "tool_calls": [{"name": "list_files", "arguments": {"path": "."}, "id": "call_ls"}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}, "id": "call_rd"}]},
            {"text": "This is **shop-api**, a small REST API for the shop. It has two files:\n\n"
                     "- `README.md`: the project description\n- `app.py`: the entry point, "
                     "which currently prints a greeting\n\nWant me to add a `/health` endpoint?"},
        ]})
        _post(world["fake"] + "/_script", {"kind": "title", "replies": [{"text": "Tour of the shop-api project"}]})
        send(page, "What is in this project?")
        expect(page.locator("#ac-list")).to_contain_text("Tour of the shop-api project", timeout=TIMEOUT_MS)
        expect(page.locator("[data-testid=bot]").last).to_contain_text("/health")
        expect(title).to_have_value("Tour of the shop-api project")
        expect(page.locator("#ac-list")).to_contain_text("Previous 7 days")
        steps = page.get_by_text("list_files")
        expect(steps.first).to_be_visible()
        steps.first.click()  # open one tool step to show its arguments and result
        expect(page.locator("#ac-chat")).to_contain_text("app.py")
        page.mouse.move(700, 5)
        page.wait_for_timeout(300)
        page.locator("[data-testid=bot]").last.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.wait_for_timeout(500)
        expect(title).to_have_value("Tour of the shop-api project")
        page.screenshot(path=str(SCREENSHOT))
        elsewhere = [u for u in requested
                     if not u.startswith(("http://127.0.0.1:", "data:", "blob:"))]
        assert not elsewhere, f"the page fetched from outside this machine: {elsewhere[:5]}"


class TestTabs:
    """Guards against two tabs on one session interleaving their messages, and a Stop button
    that does not stop (or loses the text already shown)."""

    def test_conflict_reloads_and_stop_keeps_partial(self, world, page):
        url = world["start_app"]()
        page.goto(url)
        send(page, "first from tab A")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: first from tab A")
        shared = page.url
        other = page.context.browser.new_page(viewport={"width": 1360, "height": 860})
        other.goto(shared)
        expect(other.locator("[data-testid=user]")).to_have_count(1)
        send(other, "hello from tab B")
        expect(other.locator("[data-testid=bot]").last).to_contain_text("You said: hello from tab B")

        # B's whole turn came first: A's message goes after it, never between its two messages
        # (docs/writers.md; a send behind an unfinished turn elsewhere is refused, see
        # test_browser_writers.TestSentBehindTheOtherTab).
        send(page, "second from tab A")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: second from tab A")
        assert [u.inner_text().strip() for u in page.locator("[data-testid=user]").all()] == [
            "first from tab A", "hello from tab B", "second from tab A"]
        expect(page.locator("#ac-input textarea")).to_have_value("")

        long = "streaming " * 150
        _post(world["fake"] + "/_script", {"replies": [{"text": long, "chunk": 10, "delay": 0.05}]})
        send(page, "talk for a while")
        bot = page.locator("[data-testid=bot]").last
        expect(bot).to_contain_text("streaming streaming")
        page.get_by_role("button", name="Stop").click()
        page.wait_for_timeout(1500)
        shown = bot.inner_text()
        assert 0 < len(shown) < len(long.strip())
        page.reload()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("streaming streaming")
        assert len(page.locator("[data-testid=bot]").last.inner_text()) < len(long.strip())


@pytest.fixture
def offline_app(tmp_path):
    """The app with no API key and no model server at all."""
    proj, data = tmp_path / "proj", tmp_path / "data"
    proj.mkdir()
    port = _free_port()
    env = _env(tmp_path / "home")
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(var, None)
    app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project",
                str(proj), "--data-dir", str(data)], env, tmp_path)
    try:
        app.wait_for("anycode is running at")
        yield f"http://127.0.0.1:{port}/", data
    finally:
        app.stop()


class TestWithoutModel:
    """Guards against a missing API key breaking the app: the banner must explain the fix, a sent
    message must be kept, the error must read as a sentence, and archive/delete must still work."""

    def test_banner_saved_message_archive_delete(self, offline_app, page):
        url, _data = offline_app
        page.goto(url)
        expect(page.locator("#ac-banner")).to_contain_text("OPENAI_API_KEY")
        send(page, "Is anyone there?")
        bot = page.locator("[data-testid=bot]").last
        expect(bot).to_contain_text("No model is configured")
        expect(bot).not_to_contain_text("Traceback")
        expect(page.locator("[data-testid=user]")).to_have_text("Is anyone there?")
        page.reload()  # the URL names the session: the message survives a reload
        expect(page.locator("[data-testid=user]")).to_have_text("Is anyone there?")

        long_title = "Lonely chat " + "x" * 240
        page.locator("#ac-title input").fill(long_title)
        page.locator("#ac-title input").press("Enter")
        expect(page.get_by_text("Title shortened to 200 characters")).to_be_visible()
        expect(page.locator("#ac-title input")).to_have_value(long_title[:200])
        # toasts stay clear of the top bar's buttons
        toast = page.locator(".toast-wrap").bounding_box()
        bar = page.locator("#ac-topbar").bounding_box()
        assert toast["y"] >= bar["y"] + bar["height"], (toast, bar)
        page.locator("#ac-title input").fill("Lonely chat")
        page.locator("#ac-title input").press("Enter")
        expect(page.locator("#ac-list")).to_contain_text("Lonely chat")
        with page.expect_download() as md:
            page.get_by_role("button", name="Markdown").click()
        text = Path(md.value.path()).read_text()
        assert text.startswith("# Lonely chat") and "Is anyone there?" in text
        with page.expect_download() as jl:
            page.get_by_role("button", name="JSONL").click()
        entries = [json.loads(line) for line in Path(jl.value.path()).read_text().splitlines()]
        assert entries[0]["type"] == "header"
        assert {"role": "user", "content": "Is anyone there?"} in [e.get("message") for e in entries]
        page.get_by_role("button", name="Archive", exact=True).click()
        expect(page.locator("#ac-archive")).to_have_text("Unarchive")
        expect(page.locator("#ac-list")).not_to_contain_text("Lonely chat")
        page.get_by_label("Show archived").check()
        expect(page.locator("#ac-list")).to_contain_text("Lonely chat")

        page.get_by_role("button", name="Delete", exact=True).click()
        expect(page.get_by_text("Delete this conversation permanently?")).to_be_visible()
        page.get_by_role("button", name="Cancel").click()
        expect(page.locator("#ac-list")).to_contain_text("Lonely chat")
        page.get_by_role("button", name="Delete", exact=True).click()
        page.get_by_role("button", name="Delete permanently").click()
        expect(page.locator("#ac-list")).not_to_contain_text("Lonely chat")
        done = page.locator(".toast-body", has_text="The conversation was deleted.")
        expect(done).to_be_visible()
        expect(done).to_have_class(re.compile(r"\binfo\b"))  # good news, not a yellow warning
        expect(page.locator("[data-testid=user]")).to_have_count(0)
        assert "session=" not in page.url
