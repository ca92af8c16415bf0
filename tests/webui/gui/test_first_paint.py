"""The sidebar list in the page's HTML (issue 32, :mod:`webui.gui.first_paint`), against the real
launcher: what ``window.gradio_config`` carries for a plain address, a ``?session=`` of another
project, and a browser asking for Chinese."""
from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from core.stores.jsonl_store import LocalSessionStore
from tests.support.web_server import launch
from webui.gui import first_paint


def _chat(data: Path, proj: Path, title: str) -> SessionKey:
    key = SessionKey(project_key(str(proj)), new_session_id())
    now = time.time()
    LocalSessionStore(data).append(key, [
        header_entry(key.session_id, key.project_key, str(proj), created_at=now),
        message_entry({"role": "user", "content": title}, ts=now),
        message_entry({"role": "assistant", "content": "Sure."}, ts=now + 1),
        title_entry(title, "llm", ts=now + 2),
    ])
    return key


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("first-paint")
    shop, billing = tmp / "shop-api", tmp / "billing-svc"
    for proj in (shop, billing):
        proj.mkdir()
    _chat(tmp / "data", shop, "Refactor the config loader")
    other = _chat(tmp / "data", billing, "Set up the Postgres store")
    started = launch(tmp, project=shop).wait_ready()
    try:
        yield {"url": started.url.split("?")[0], "other": other}
    finally:
        started.stop()


def _first_list(url: str, **kwargs) -> str:
    page = httpx.get(url, timeout=30, **kwargs)
    page.raise_for_status()
    assert page.headers["cache-control"] == "no-store", "chat titles are kept out of the browser's cache"
    text = page.text
    start = text.index("window.gradio_config = ") + len("window.gradio_config = ")
    config = json.loads(text[start:text.index(";</script>", start)])
    found = [c["props"].get("value") for c in config["components"]
             if c.get("props", {}).get("elem_id") == first_paint.LIST_ELEM_ID]
    assert len(found) == 1
    return found[0] or ""


class TestTheListComesWithThePage:
    """Guards against the sidebar coming only with the page's load event, a round trip after the
    page was mounted (issue 32: page load → sidebar 2.7–3.0× a bare Gradio app's)."""

    def test_the_launchers_project(self, app):
        shown = _first_list(app["url"])
        assert "Refactor the config loader" in shown and "Today" in shown
        assert "Set up the Postgres store" not in shown and "active" not in shown

    def test_a_link_to_another_projects_chat_shows_that_project_with_the_chat_open(self, app):
        shown = _first_list(app["url"], params={"session": app["other"].session_id})
        assert "Set up the Postgres store" in shown and "Refactor the config loader" not in shown
        assert f'class="ac-session active" data-sid="{app["other"].session_id}"' in shown

    def test_in_the_browsers_language_and_the_next_page_in_its_own(self, app):
        assert "今天" in _first_list(app["url"], cookies={"anycode_nav": "zh-CN"})
        assert "Today" in _first_list(app["url"], headers={"Accept-Language": "en-US"})

    def test_an_unknown_link_gives_the_launchers_project(self, app):
        assert "Refactor the config loader" in _first_list(app["url"], params={"session": "no-such-chat"})


def _shell(url: str, **kwargs) -> str:
    text = httpx.get(url, timeout=30, **kwargs).text
    start = text.find(f'<div id="{first_paint.SHELL_ID}"')
    if start < 0:
        return ""
    return text[start:text.index("<gradio-app", start)]


class TestTheShellComesWithThePage:
    """Guards against the sidebar waiting for Gradio's mount (issue 32, round 22): the page's body
    carries the shell, the list of the config drawn before any script of Gradio's has run."""

    def test_the_same_list_before_gradios_mount_point(self, app):
        shell = _shell(app["url"])
        assert shell, "the page carries no shell"
        assert _first_list(app["url"]) in shell  # the very list the config carries, not a second query
        assert "New chat" in shell and "Search chats" in shell
        assert shell.count("<script>") == 1 and shell.count("<style>") == 1

    def test_in_the_browsers_language(self, app):
        shell = _shell(app["url"], cookies={"anycode_nav": "zh-CN"})
        assert "新对话" in shell and "搜索对话" in shell and "今天" in shell

    def test_labels_are_escaped(self):
        labels = first_paint.ShellLabels(new_chat="<b>New</b>", search='"x"', width=290, narrow_px=768,
                                         theme_key="k")
        shell = first_paint.shell_html("<nav></nav>", labels)
        assert "<b>New</b>" not in shell and "&lt;b&gt;New&lt;/b&gt;" in shell and "&quot;x&quot;" in shell


def test_a_failing_list_leaves_the_page_without_it(caplog):
    """The page is served whatever the list does: its load event draws the list then."""
    blocks = object.__new__(type("B", (), {}))

    def broken(_request):
        raise OSError("disk gone")

    first_paint._pages[blocks] = broken
    config = {"components": [{"id": 1, "props": {"elem_id": first_paint.LIST_ELEM_ID, "value": ""}}]}
    request = SimpleNamespace(app=SimpleNamespace(get_blocks=lambda: blocks))
    first_paint._fill(config, request)
    assert config["components"][0]["props"]["value"] == ""
    assert "disk gone" in caplog.text


def test_a_login_page_carries_no_titles(tmp_path):
    """With ``--auth``, the page of a browser not logged in has no components, so no list."""
    proj = tmp_path / "shop-api"
    proj.mkdir()
    _chat(tmp_path / "data", proj, "Refactor the config loader")
    started = launch(tmp_path, "127.0.0.1", "--auth", "ann:s3cret-pass", project=proj).wait_ready()
    try:
        page = httpx.get(started.url.split("?")[0], timeout=30)
        assert "auth_required" in page.text and "Refactor the config loader" not in page.text
        assert first_paint.SHELL_ID not in page.text
    finally:
        started.stop()
