"""webui.server.gradio_patch: Gradio's page builder served with two load-time costs taken out
(issue 32) — the attached-events scan as a lookup, no tree walk for events without arguments:
the same answers as Gradio's own code, served only for Gradio's own scripts, and a script
unchanged when it is not the one expected."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.chat_ctx import page_config
from tests.support.chromium import browser  # noqa: F401  (fixture)
from webui.server import gradio_patch


def _served(patch: gradio_patch.Patch) -> tuple[str, gradio_patch.Served]:
    for name, found in gradio_patch.patched_assets().items():
        if patch.name in found.patches:
            return name, found
    pytest.skip(f"this Gradio's scripts do not hold what the {patch.name} patch replaces (logged, served as is)")


def _stock(name: str) -> str:
    """Gradio's own text of one of its scripts."""
    return gradio_patch._assets_folder().joinpath(name).read_text(encoding="utf-8")


class TestSameAttachedEvents:
    """Guards against the replacement binding an event to the wrong block or losing one: every
    block of anycode's page (and blocks named twice by one event, and blocks with no event) gets
    exactly the event names Gradio's own method gives, in the same order."""

    def test_every_block_of_the_page_gets_what_gradio_gives(self, tmp_path, browser):  # noqa: F811
        _served(gradio_patch.ATTACHED_EVENTS)
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
                   }""", [gradio_patch.ATTACHED_EVENTS.original, gradio_patch.ATTACHED_EVENTS.replacement, deps, ids])
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


class TestSameEventArguments:
    """Guards against the shortcut for events without arguments changing what Gradio does with
    arguments: with and without them, found or not, the replacement gives what Gradio's own method
    gives (the state it sets, and what the returned function restores); it skips only the walk."""

    def test_same_answers_as_gradio(self, browser):  # noqa: F811
        name, _ = _served(gradio_patch.EVENT_ARGS)
        text = _stock(name)
        start = text.index(gradio_patch.EVENT_ARGS.original)
        end = text.index("}async ", start) + 1  # the method's end: the next method of the class
        original = text[start:end]
        replaced = original.replace(gradio_patch.EVENT_ARGS.original, gradio_patch.EVENT_ARGS.replacement)
        page = browser.new_page()
        try:
            got = page.evaluate(
                """async ([orig, repl]) => {
                     const run = async (src, args, state) => {
                       const log = [];
                       const m = eval('({' + src + '})');
                       m.get_state_cb = async (id) => { log.push(['get', id]); return state; };
                       m.update_state_cb = async (id, v, f) => { log.push(['set', id, v, f]); };
                       const undo = await m.set_event_args(7, args);
                       await undo();
                       return log;
                     };
                     const out = [];
                     for (const args of [{}, {show: true}])
                       for (const state of [null, {show: false, value: 1}])
                         out.push([await run(orig, args, state), await run(repl, args, state)]);
                     return out;
                   }""", [original, replaced])
        finally:
            page.close()
        no_args_orig, no_args_repl = got[0]
        assert no_args_orig == [["get", 7]] and no_args_repl == []  # the walk is what is saved
        assert got[1][1] == [] and got[1][0] == [["get", 7]]
        for orig_log, repl_log in got[2:]:  # with arguments: the very same calls, in order
            assert repl_log == orig_log
        assert got[3][0] == [["get", 7], ["set", 7, {"show": True}, False], ["set", 7, {"show": False}, False]]


class TestServedScript:
    """Guards against a patched script reaching a request it is not for, or the browser never
    getting Gradio's other files: only the patched scripts are answered, each with every patch
    meant for it and a validator the browser can revalidate; everything else goes to Gradio."""

    async def _gradio(self, scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-from", b"gradio")]})
        await send({"type": "http.response.body", "body": b"gradio's answer"})

    def test_only_the_patched_scripts_are_answered_and_revalidate(self):
        served = gradio_patch.patched_assets()
        if not served:
            pytest.skip("this Gradio's scripts hold none of the patched texts (logged, served as is)")
        app = gradio_patch.PatchedAssets(self._gradio)
        for name, found in served.items():
            status, headers, got = _call(app, "/assets/" + name)
            assert status == 200 and got == found.body, name
            stock = _stock(name)  # the rest of the script is Gradio's, unchanged
            for patch in gradio_patch.PATCHES:
                if patch.name in found.patches:
                    assert patch.replacement.encode() in got and patch.original.encode() not in got
                    stock = stock.replace(patch.original, patch.replacement)
            assert got == stock.encode("utf-8")
            assert headers["content-type"].startswith("text/javascript") and headers["etag"] == found.etag
            assert headers["last-modified"] == found.modified
            status, _, got = _call(app, "/assets/" + name, headers=[(b"if-none-match", found.etag.encode())])
            assert status == 304 and got == b""
            status, headers, got = _call(app, "/assets/" + name, method="HEAD")
            assert status == 200 and got == b"" and headers["content-length"] == str(len(found.body))
        name = next(iter(served))
        for path, method in (("/assets/index.js", "GET"), ("/", "GET"), ("/assets/" + name, "POST")):
            status, headers, got = _call(app, path, method=method)
            assert headers.get("x-from") == "gradio" and got == b"gradio's answer", path
        assert {n for found in served.values() for n in found.patches} == {p.name for p in gradio_patch.PATCHES}

    def test_another_gradio_gets_its_scripts_unchanged(self, monkeypatch, caplog):
        gone = gradio_patch.Patch("gone", "core-", "find_attached_events(not,this){}", "x")
        twice = gradio_patch.Patch("twice", "Blocks-", "function", "x")  # in the script many times
        monkeypatch.setattr(gradio_patch, "PATCHES", (gone, twice))
        gradio_patch.patched_assets.cache_clear()
        try:
            with caplog.at_level("INFO", logger="webui.server.gradio_patch"):
                app = gradio_patch.PatchedAssets(self._gradio)
            assert app.served == {}
            assert "without the gone patch" in caplog.text and "without the twice patch" in caplog.text
            status, headers, got = _call(app, "/assets/core-anything.js")
            assert headers.get("x-from") == "gradio"
        finally:
            gradio_patch.patched_assets.cache_clear()
