"""MCP servers in a real Chromium: the Tools panel (a project's configuration waiting for approval,
Approve, Test, the server's tools) and an MCP call asked for on the approval card, allowed once,
its step row naming the server — with the app, the fake OpenAI server and a stdio MCP server
(tests/support/mcp_server.py) as real processes; the server stops with the app."""
from __future__ import annotations

import os
import sys
import time

import pytest

from tests.support.chromium import REPO, TIMEOUT_MS, Proc, _env, _free_port, _post, expect, send
from tests.support.mcp_server import stdio_entry, write_config

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp")
    proj, data = tmp / "proj", tmp / "data"
    proj.mkdir()
    write_config(proj, {"tests": stdio_entry(MCP_STARTED_FILE=str(tmp / "started"), MCP_LINGER="1")})
    fake = Proc([sys.executable, "-m", "tests.support.fake_openai", "--port", "0"], _env(tmp / "home"), REPO)
    base_url = fake.wait_for("READY").split()[-1]
    port = _free_port()
    app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project", str(proj),
                "--data-dir", str(data)],
               _env(tmp / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url, ANYCODE_APPROVAL="ask",
                    ANYCODE_MEMORY="off", ANYCODE_CONFIG_DIR=str(tmp / "config")), tmp)
    try:
        app.wait_for("anycode is running at")
        yield {"url": f"http://127.0.0.1:{port}/", "fake": base_url.removesuffix("/v1"), "started": tmp / "started",
               "app": app}
    finally:
        app.stop()
        fake.stop()


@pytest.fixture
def page(browser, world):
    pg = browser.new_page(viewport={"width": 1360, "height": 900})
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(world["url"])
    expect(pg.locator("#ac-input textarea")).to_be_visible()
    try:
        yield pg
    finally:
        pg.close()


class TestToolsFromMcpServers:
    """Guards against a cloned project's servers starting unasked, a panel that hides what they
    would run, and an MCP call that runs without the user's yes or does not say which server."""

    def test_approve_test_and_an_approved_call(self, world, page):
        page.locator("#ac-tools-open").click()
        panel = page.locator("#ac-tools")
        expect(panel).to_be_visible()
        expect(page.locator("#ac-tools-approval")).to_contain_text("tests.support.mcp_server")
        expect(page.locator("#ac-tools-list")).to_contain_text("waits for your approval")
        assert not world["started"].exists()

        page.locator("#ac-tools-approve").click()
        expect(page.locator("#ac-tools-list")).to_contain_text("starts with the next message")
        expect(page.locator("#ac-tools-approve")).to_be_hidden()
        page.locator("#ac-tools-test").click()
        expect(page.locator("#ac-tools-list")).to_contain_text("running")
        expect(page.locator("#ac-tools-list")).to_contain_text("Repeat the text back.")
        page.locator("#ac-tools-close").click()
        expect(panel).to_be_hidden()

        _post(world["fake"] + "/_script", {"replies": [
            {"tool_calls": [{"name": "mcp__tests__echo", "arguments": {"text": "from the page"}, "id": "call_p"}]},
            {"text": "The server echoed it."}]})
        send(page, "echo something through the server")
        card = page.locator("#ac-approval")
        expect(card).to_be_visible()
        expect(page.locator("#ac-approval-head")).to_contain_text("tests")
        expect(page.locator("#ac-approval-diff")).to_contain_text("MCP server: tests")
        expect(page.locator("#ac-allow-always")).to_be_visible()
        page.locator("#ac-allow-once").click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("The server echoed it.")
        expect(card).to_be_hidden()
        step = page.get_by_text("echo · tests")
        expect(step.first).to_be_visible()
        step.first.click()
        expect(page.locator("#ac-chat")).to_contain_text("echo: from the page")
        pids = world["started"].read_text().split()
        assert len(pids) == 1  # the Test's server served the turn

        # stopped with the app (SIGTERM, its clean stop), even a server that outlives its closed stdin
        assert world["app"].stop() == 0
        deadline = time.monotonic() + 15
        while _alive(int(pids[0])) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(int(pids[0]))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
