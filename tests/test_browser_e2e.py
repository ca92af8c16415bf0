"""End to end in a real Chromium against ``python -m webui`` started as a subprocess, talking real
HTTP to the fake OpenAI server (also a subprocess). Asserts on what the page shows.

Saves ``assets/screenshot.png`` (the README's screenshot) at the end of the flow.
"""
from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.stores.jsonl_store import LocalSessionStore
from core.session.keys import SessionKey, new_session_id, project_key

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = REPO / "assets" / "screenshot.png"
BROWSER_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 30_000

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is missing")
expect = sync_api.expect


class Proc:
    """A subprocess whose output lines are collected by a thread (so reading never blocks)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.p.stdout:
            self.lines.append(line)
            self._q.put(line)

    def wait_for(self, needle: str, timeout: float = 90) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self._q.get(timeout=0.5)
            except queue.Empty:
                if self.p.poll() is not None:
                    break
                continue
            if needle in line:
                return line
        raise AssertionError(f"{needle!r} not printed; output:\n{''.join(self.lines)}")

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.p.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, ANYCODE_HOME=str(home), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
               NO_PROXY="127.0.0.1,localhost", **extra)
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env.pop(var, None)
    return env


def _post(url: str, body: dict) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


def _seed(data: Path, proj: Path) -> None:
    """Older conversations, so the sidebar shows several date groups."""
    store = LocalSessionStore(data)
    now = time.time()
    for title, age_days in [("Refactor the config loader", 1), ("Why is CI flaky on Mondays?", 3),
                            ("Draft release notes for 0.2", 5), ("Set up the Postgres store", 12)]:
        key = SessionKey(project_key(str(proj)), new_session_id())
        ts = now - age_days * 86400
        store.append(key, [
            header_entry(key.session_id, key.project_key, str(proj), created_at=ts),
            message_entry({"role": "user", "content": title}, ts=ts),
            message_entry({"role": "assistant", "content": "Sure."}, ts=ts + 5),
            title_entry(title, "llm", ts=ts + 6),
        ])


@contextlib.contextmanager
def running_app(tmp: Path, proj: Path, *store_args: str, **env: str):
    """The fake OpenAI server and ``python -m webui`` on ``proj`` (created if missing) with its store
    from ``store_args`` (``"--data-dir", DIR`` or ``"--store", SPEC``), both subprocesses, home under
    ``tmp``, ``env`` added to the app's environment; for a module-scoped fixture. Yields ``{"url",
    "fake", "app"}`` (the app's URL, the fake's base URL without ``/v1``, the app's Proc) and stops
    both after."""
    proj.mkdir(parents=True, exist_ok=True)
    fake = Proc([sys.executable, "-m", "tests.fake_openai", "--port", "0"], _env(tmp / "home"), REPO)
    base_url = fake.wait_for("READY").split()[-1]
    port = _free_port()
    app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project", str(proj),
                *store_args], _env(tmp / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url, **env), tmp)
    try:
        app.wait_for("anycode is running at")
        yield {"url": f"http://127.0.0.1:{port}/", "fake": base_url.removesuffix("/v1"), "app": app}
    finally:
        app.stop()
        fake.stop()


@pytest.fixture
def world(tmp_path):
    """The fake OpenAI server and a project/data dir; yields a dict with a start_app function."""
    proj, data = tmp_path / "shop-api", tmp_path / "data"
    proj.mkdir()
    (proj / "README.md").write_text("# shop-api\nA small REST API for the shop.\n")
    (proj / "app.py").write_text("print('hello')\n")
    env = _env(tmp_path / "home")
    fake = Proc([sys.executable, "-m", "tests.fake_openai", "--port", "0"], env, REPO)
    base_url = fake.wait_for("READY").split()[-1]
    apps: list[Proc] = []

    def start_app(*extra: str) -> str:
        port = _free_port()
        app = Proc([sys.executable, "-m", "webui", "--no-browser", "--port", str(port),
                    "--project", str(proj), "--data-dir", str(data), *extra],
                   _env(tmp_path / "home", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base_url),
                   tmp_path)
        apps.append(app)
        app.wait_for("anycode is running at")
        return f"http://127.0.0.1:{port}/"

    try:
        yield {"start_app": start_app, "apps": apps, "fake": base_url.removesuffix("/v1"),
               "proj": proj, "data": data}
    finally:
        for app in apps:
            app.stop()
        fake.stop()


@pytest.fixture
def page():
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        pg = browser.new_page(viewport={"width": 1360, "height": 860})
        pg.set_default_timeout(TIMEOUT_MS)
        try:
            yield pg
        finally:
            browser.close()


def send(page, text: str) -> None:
    box = page.locator("#ac-input textarea")
    box.fill(text)
    box.press("Enter")


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
        page.locator("#ac-chat button[aria-label=Feedback]").first.click()
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

        send(page, "second from tab A")
        expect(page.get_by_text("changed elsewhere")).to_be_visible()
        expect(page.locator("[data-testid=user]").last).to_have_text("hello from tab B")
        expect(page.locator("#ac-input textarea")).to_have_value("second from tab A")
        page.locator("#ac-input textarea").press("Enter")  # now it goes through
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: second from tab A")

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
