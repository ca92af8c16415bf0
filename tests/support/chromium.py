"""What the browser tests share: a real Chromium through Playwright, the app (``python -m webui``) and
the fake OpenAI server as subprocesses, and the fixtures over them.

- ``world`` (per test): the fake server and a project/data dir; ``world["start_app"](*args)`` starts the
  app and returns its URL. ``running_app(...)``: the same pair for a module-scoped fixture.
- ``page`` (per test): a fresh Chromium and one page; ``browser`` (per module): one Chromium to open
  pages from.
- ``send``, ``_post`` (script the fake: ``_post(world["fake"] + "/_script", {...})``), ``_seed``, ``_env``.

Importing this module skips the importing test module when Chromium or Playwright is missing.
``tests/browser/conftest.py`` offers ``world``, ``page`` and ``browser`` to every module in
``tests/browser/``; a browser-marked class elsewhere imports them from here.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.web_server import Proc, free_port as _free_port

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 30_000

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is missing")
expect = sync_api.expect


class PatientExpect:
    """``expect(x)`` whose waits default to TIMEOUT_MS: each goes through the app's queue, which a
    loaded 2-core machine can hold up for more than Playwright's default 5 s."""

    def __init__(self, target):
        self._assertions = expect(target)

    def __getattr__(self, name):
        method = getattr(self._assertions, name)
        return lambda *args, **kwargs: method(*args, **{"timeout": TIMEOUT_MS, **kwargs})


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
    fake = Proc([sys.executable, "-m", "tests.support.fake_openai", "--port", "0"], _env(tmp / "home"), REPO)
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
    fake = Proc([sys.executable, "-m", "tests.support.fake_openai", "--port", "0"], env, REPO)
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


def wait_loaded(page, timeout: int = TIMEOUT_MS) -> None:
    """Until the page's load event has answered (the tab's state, labels in its language, the list
    drawn from its state): the sidebar list alone no longer says so, since the page's HTML carries
    it (``webui/gui/first_paint.py``)."""
    page.wait_for_function("() => window.acPageLoaded === true", timeout=timeout)


def send(page, text: str) -> None:
    box = page.locator("#ac-input textarea")
    box.fill(text)
    box.press("Enter")


def hold_next(page, elem_id: str, event: str, endpoint: str) -> list:
    """Hold the next request of the ``event`` listener ("click", "blur" …) of the component
    ``elem_id`` to Gradio's ``endpoint`` ("run/predict" for an unqueued event, "queue/join" for a
    queued one): sent by the page, not answered until the test calls ``continue_()`` on the route
    the returned list then holds. Later requests pass. For races that a late answer makes."""
    config = page.evaluate("() => window.gradio_config")
    target = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)
    deps = {dep.get("id", i) for i, dep in enumerate(config["dependencies"])
            if [target, event] in [list(t) for t in dep.get("targets", [])] and dep.get("backend_fn", True)}
    assert deps, f"no {event} event with a server function on #{elem_id}"
    held: list = []

    def hold_one(route):
        if not held and json.loads(route.request.post_data or "{}").get("fn_index") in deps:
            held.append(route)
        else:
            route.continue_()

    page.route(f"**/gradio_api/{endpoint}*", hold_one)
    return held


def wait_held(page, held: list, what: str) -> None:
    """Until ``held`` (from :func:`hold_next`) holds a request; AssertionError after 5 s."""
    for _ in range(50):
        if held:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"{what} was not sent")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (its tests open pages of their own)."""
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            yield b
        finally:
            b.close()
