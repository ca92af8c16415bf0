"""webui.server.gradio_patch: Gradio's page builder served with its attached-events scan replaced
by a lookup (issue 32) — the same answer for every block of anycode's page, served only for
Gradio's own script, and Gradio's script unchanged when it is not the one expected."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.chat_ctx import page_config
from tests.support.chromium import browser  # noqa: F401  (fixture)
from webui.server import gradio_patch


def _asset() -> tuple[str, bytes, str, str]:
    found = gradio_patch.patched_asset()
    if found is None:
        pytest.skip("this Gradio's core script does not hold the scan the patch replaces (logged, served as is)")
    return found


class TestSameAttachedEvents:
    """Guards against the replacement binding an event to the wrong block or losing one: every
    block of anycode's page (and blocks named twice by one event, and blocks with no event) gets
    exactly the event names Gradio's own method gives, in the same order."""

    def test_every_block_of_the_page_gets_what_gradio_gives(self, tmp_path, browser):  # noqa: F811
        _asset()
        cfg = page_config(tmp_path)
        deps = [{"targets": d["targets"]} for d in cfg["dependencies"]]
        # an event naming one block twice and one with a target of no block: the original's rules
        deps += [{"targets": [[cfg["components"][0]["id"], "click"], [cfg["components"][0]["id"], "focus"]]},
                 {"targets": [[None, "load"]]}]
        ids = [c["id"] for c in cfg["components"]] + [None, -1]
        page = browser.new_page()
        try:
            got = page.evaluate(
                """([orig, repl, deps, ids]) => {
                     const a = eval('({' + orig + '})'), b = eval('({' + repl + '})');
                     const run = (m, arr) => ids.map((id) => m.find_attached_events(
                       {id, props: {shared_props: {}}}, arr).props.shared_props.attached_events);
                     const first = run(b, deps);
                     deps.push({targets: [[ids[0], 'blur']]});  // the array grows: the lookup follows
                     return [run(a, deps.slice(0, -1)), first, run(a, deps), run(b, deps)];
                   }""", [gradio_patch.ORIGINAL, gradio_patch.REPLACEMENT, deps, ids])
        finally:
            page.close()
        before_orig, before_repl, after_orig, after_repl = got
        assert before_repl == before_orig and after_repl == after_orig
        assert sum(len(x) for x in before_orig) >= len(cfg["dependencies"]) - 10  # the page's events are found
        # one event naming a block twice counts once, by its first target; a grown array is seen
        assert before_orig[0][-1] == "click" and after_orig[0][-2:] == ["click", "blur"]


def _call(app, path: str, method: str = "GET", headers: list | None = None) -> tuple[int, dict, bytes]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers or []}
    # in a thread of its own: the module's Chromium (sync Playwright) runs an event loop here
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, app(scope, receive, send)).result(30)
    start = sent[0]
    return start["status"], {k.decode(): v.decode() for k, v in start.get("headers", [])}, b"".join(
        m.get("body", b"") for m in sent[1:])


class TestServedScript:
    """Guards against the patched script reaching a request it is not for, or the browser never
    getting Gradio's other files: only Gradio's core script is answered, with a validator the
    browser can revalidate; everything else goes to Gradio."""

    async def _gradio(self, scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-from", b"gradio")]})
        await send({"type": "http.response.body", "body": b"gradio's answer"})

    def test_only_the_core_script_is_answered_and_revalidates(self):
        name, body, etag, modified = _asset()
        app = gradio_patch.PatchedAssets(self._gradio)
        status, headers, got = _call(app, "/assets/" + name)
        assert status == 200 and got == body and gradio_patch.REPLACEMENT.encode() in got
        assert gradio_patch.ORIGINAL.encode() not in got
        assert headers["content-type"].startswith("text/javascript") and headers["etag"] == etag
        assert headers["last-modified"] == modified
        status, _, got = _call(app, "/assets/" + name, headers=[(b"if-none-match", etag.encode())])
        assert status == 304 and got == b""
        status, headers, got = _call(app, "/assets/" + name, method="HEAD")
        assert status == 200 and got == b"" and headers["content-length"] == str(len(body))
        for path, method in (("/assets/index.js", "GET"), ("/", "GET"), ("/assets/" + name, "POST")):
            status, headers, got = _call(app, path, method=method)
            assert headers.get("x-from") == "gradio" and got == b"gradio's answer", path

    def test_another_gradio_gets_its_script_unchanged(self, monkeypatch, caplog):
        monkeypatch.setattr(gradio_patch, "ORIGINAL", "find_attached_events(not,this){}")
        gradio_patch.patched_asset.cache_clear()
        try:
            with caplog.at_level("INFO", logger="webui.server.gradio_patch"):
                app = gradio_patch.PatchedAssets(self._gradio)
            assert app.path is None and "served as they are" in caplog.text
            status, headers, got = _call(app, "/assets/core-anything.js")
            assert headers.get("x-from") == "gradio"
        finally:
            gradio_patch.patched_asset.cache_clear()
