"""Approval before side effects in a real Chromium (issue 10, part 9): the card shows the change as
text, Allow once / Allow for this chat / Deny with a reason, Stop, a restart while a change waits,
and the notice for a chat whose recorded folder is not its project's."""
from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from core.session.entries import header_entry, message_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import REPO, TIMEOUT_MS, Proc, _env, _free_port, _post, expect, send

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("approval")
    proj, data = tmp / "proj", tmp / "data"
    proj.mkdir()
    (proj / "notes.txt").write_text("old line\nsame line\n")
    env = _env(tmp / "home")
    fake = Proc([sys.executable, "-m", "tests.support.fake_openai", "--port", "0"], env, REPO)
    base_url = fake.wait_for("READY").split()[-1]
    state = {"app": None, "url": None}

    def start_app() -> str:
        port = _free_port()
        app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project", str(proj),
                    "--data-dir", str(data)],
                   _env(tmp / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url, ANYCODE_APPROVAL="ask"),
                   tmp)
        app.wait_for("anycode is running at")
        state["app"], state["url"] = app, f"http://127.0.0.1:{port}/"
        return state["url"]

    start_app()
    try:
        yield {"start_app": start_app, "state": state, "fake": base_url.removesuffix("/v1"), "proj": proj,
               "data": data}
    finally:
        if state["app"] is not None:
            state["app"].stop()
        fake.stop()


@pytest.fixture
def page(browser, world):
    pg = browser.new_page(viewport={"width": 1360, "height": 900})
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(world["state"]["url"])
    expect(pg.locator("#ac-input textarea")).to_be_visible()
    try:
        yield pg
    finally:
        pg.close()


def script(world, *replies):
    _post(world["fake"] + "/_script", {"replies": list(replies)})


def write(path: str, content: str, call_id: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}, "id": call_id}]}


def chat_requests(world) -> list[dict]:
    with urllib.request.urlopen(world["fake"] + "/_requests", timeout=10) as resp:
        logged = json.loads(resp.read())
    return [r["body"] for r in logged if r["path"].endswith("/chat/completions") and r["status"] == 200]


def card(page):
    return page.locator("#ac-approval")


def diff_text(page) -> str:
    return page.locator("#ac-approval-diff").inner_text()


class TestApprovalCard:
    """Guards against the agent writing without the user's yes, a denial's reason never reaching
    the model, and a restart losing the turn that waits for an answer."""

    def test_allow_once_shows_the_diff_then_writes(self, world, page):
        script(world, write("notes.txt", "new line\nsame line\n", "call_once"), {"text": "Notes updated."})
        send(page, "update the notes")
        expect(card(page)).to_be_visible()
        expect(page.locator("#ac-approval-head")).to_contain_text("write_file")
        expect(page.locator("#ac-approval-diff")).to_contain_text("-old line")
        text = diff_text(page)
        assert "+new line" in text and "--- a/notes.txt" in text
        assert (world["proj"] / "notes.txt").read_text() == "old line\nsame line\n"
        page.locator("#ac-allow-once").click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Notes updated.")
        expect(card(page)).to_be_hidden()
        assert (world["proj"] / "notes.txt").read_text() == "new line\nsame line\n"

    def test_html_in_the_diff_is_text(self, world, page):
        evil = '<img src="http://evil.example/x.png" onerror="window.__pwned=1"><b>bold</b>\n'
        script(world, write("page.html", evil, "call_html"))
        send(page, "write a page")
        expect(page.locator("#ac-approval-diff")).to_contain_text('<img src="http://evil.example/x.png"')
        assert page.locator("#ac-approval img, #ac-approval b").count() == 0
        assert page.evaluate("window.__pwned === undefined")
        page.locator("#ac-deny").click()
        expect(card(page)).to_be_hidden()

    def test_allow_for_this_chat_stops_asking(self, world, page):
        script(world, write("a.txt", "A", "call_a"), {"text": "Wrote a."})
        send(page, "write a")
        expect(card(page)).to_be_visible()
        page.locator("#ac-allow-chat").click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Wrote a.")
        script(world, write("b.txt", "B", "call_b"), {"text": "Wrote b."})
        send(page, "write b")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Wrote b.")
        expect(card(page)).to_be_hidden()
        assert (world["proj"] / "a.txt").read_text() == "A" and (world["proj"] / "b.txt").read_text() == "B"
        expect(page.locator("#ac-ask input")).not_to_be_checked()

    def test_deny_with_a_reason_reaches_the_model(self, world, page):
        script(world, write("c.txt", "C", "call_c"), {"text": "Understood, I left it."})
        send(page, "write c")
        expect(card(page)).to_be_visible()
        page.locator("#ac-approval-reason textarea, #ac-approval-reason input").first.fill("c.txt is generated")
        page.locator("#ac-deny").click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Understood, I left it.")
        assert not (world["proj"] / "c.txt").exists()
        # the request that answered the denial (title and memory requests are logged too)
        [last] = [b["messages"][-1] for b in chat_requests(world)
                  if b["messages"][-1].get("tool_call_id") == "call_c"]
        assert last["role"] == "tool"
        assert "denied" in last["content"] and "c.txt is generated" in last["content"]

    def test_stop_denies_and_ends_the_turn(self, world, page):
        script(world, write("d.txt", "D", "call_d"))
        send(page, "write d")
        expect(card(page)).to_be_visible()
        page.get_by_role("button", name="Stop").click()
        expect(card(page)).to_be_hidden()
        expect(page.locator("#ac-chat")).to_contain_text("write_file")
        time.sleep(1)
        # no model call after Stop: no request carries the call's (denied) result
        assert not [b for b in chat_requests(world) if any(m.get("tool_call_id") == "call_d" for m in b["messages"])]
        assert not (world["proj"] / "d.txt").exists()
        store = LocalSessionStore(world["data"])
        sid = page.url.split("session=")[1].split("&")[0]
        messages = [e["message"] for e in store.load(SessionKey(project_key(str(world["proj"])), sid))
                    if e.get("type") == "message"]
        assert messages[-1]["role"] == "tool" and "pressed Stop" in messages[-1]["content"]

    def test_restart_while_pending_shows_it_again(self, world, browser):
        pg = browser.new_page(viewport={"width": 1360, "height": 900})
        pg.set_default_timeout(TIMEOUT_MS)
        try:
            pg.goto(world["state"]["url"])
            script(world, write("e.txt", "E after restart", "call_e"), {"text": "Done after restart."})
            send(pg, "write e")
            expect(card(pg)).to_be_visible()
            expect(pg.locator("#ac-approval-diff")).to_contain_text("+E after restart")
            session_url = pg.url
            world["state"]["app"].stop()
            url = world["start_app"]()
            pg.goto(url + "?" + session_url.split("?", 1)[1])
            expect(card(pg)).to_be_visible()
            expect(pg.locator("#ac-approval-diff")).to_contain_text("+E after restart")
            pg.locator("#ac-allow-once").click()
            expect(pg.locator("[data-testid=bot]").last).to_contain_text("Done after restart.")
            assert (world["proj"] / "e.txt").read_text() == "E after restart"
        finally:
            pg.close()


class TestWorkspaceNotice:
    """Guards against a chat whose file says its folder is "/" silently getting tools there (or
    silently losing them: the user is told, and can choose)."""

    def test_crafted_root_session_shows_the_notice(self, world, page):
        key = SessionKey(project_key("/"), new_session_id())
        LocalSessionStore(world["data"]).append(key, [
            header_entry(key.session_id, key.project_key, "/"),
            message_entry({"role": "user", "content": "hello from a shared file"}),
            message_entry({"role": "assistant", "content": "hi"}),
        ])
        page.goto(world["state"]["url"] + f"?session={key.session_id}")
        expect(page.locator("[data-testid=user]").first).to_have_text("hello from a shared file")
        expect(page.locator("#ac-workspace")).to_contain_text("File tools are off")
        expect(page.locator("#ac-workspace")).to_contain_text("root of the file system")
        expect(page.locator("#ac-workspace-use")).to_be_visible()
