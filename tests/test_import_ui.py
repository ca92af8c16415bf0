"""The sidebar's "Import…" button (issue 19): handler tests without a browser, then one flow in a
real Chromium."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager
from core.session.keys import project_key
from tests.test_import import chatgpt_conversation, write_chatgpt, write_claude_code, write_codex
from webui.import_panel import UNKNOWN_FORMAT, detect_format, import_upload

pytest.importorskip("gradio")
from tests.test_browser_e2e import page, world  # noqa: E402,F401  (browser fixtures)


class _Ctx:
    def __init__(self, store):
        self.store = store
        self.manager = SessionManager(store)


class TestImportUpload:
    """An uploaded file of the wrong kind crashes the handler, is imported twice, or leaves the
    uploaded copy (conversation text) behind in a temp folder."""

    def test_each_format_is_recognised_and_imported(self, tmp_path):
        proj = tmp_path / "proj"
        proj.mkdir()
        store = LocalSessionStore(tmp_path / "home")
        ctx = _Ctx(store)
        cc = next((write_claude_code(tmp_path / "cc", proj) / "-tmp-project").glob("1111*.jsonl"))
        cx = next((write_codex(tmp_path / "cx", proj)).rglob("rollout-2025*.jsonl"))
        gpt = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation()])
        assert [detect_format(p) for p in (gpt, cc, cx)] == ["chatgpt", "claude-code", "codex"]
        summary, report = import_upload(ctx, gpt, str(proj))
        assert summary.startswith("Imported 3 conversations") and report.ok
        assert not gpt.exists(), "the uploaded copy must not be left behind"
        for path in (cc, cx):
            summary, report = import_upload(ctx, path, str(proj))
            assert summary.startswith("Imported 1 conversation ("), summary  # singular (issue 20)
        assert len(SessionManager(store).list(project_key(proj))) == 5

    def test_unknown_file_is_one_sentence(self, tmp_path):
        junk = tmp_path / "notes.jsonl"
        junk.write_text('{"hello": 1}\n')
        summary, report = import_upload(_Ctx(LocalSessionStore(tmp_path / "h")), junk, str(tmp_path))
        assert summary == UNKNOWN_FORMAT and report is None
        bad_json = tmp_path / "conversations.json"
        bad_json.write_text("{ not json")
        summary, _ = import_upload(_Ctx(LocalSessionStore(tmp_path / "h")), bad_json, str(tmp_path))
        assert summary.startswith("Nothing was imported: not a ChatGPT export")


@pytest.mark.browser
class TestImportButtonInBrowser:
    """The Import button does nothing visible, or the imported chats do not appear in the sidebar."""

    def test_upload_chatgpt_export_flow(self, world, page, tmp_path):
        url = world["start_app"]()
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation(title="Parser tabs question")])
        page.goto(url)
        from tests.test_browser_e2e import expect

        expect(page.locator("#ac-list")).to_contain_text("No conversations yet")
        with page.expect_file_chooser() as chooser:
            page.locator("#ac-import").click()
        chooser.value.set_files(str(src))
        expect(page.get_by_text("Imported 3 conversations")).to_be_visible()
        expect(page.locator("#ac-list")).to_contain_text("Parser tabs question")
        page.locator("#ac-list .ac-session", has_text="Parser tabs question", has_not_text="(branch)").first.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Use str.split() without arguments.")
