"""The sidebar's "Import…" button (issue 19): handler tests without a browser (the flow in
Chromium: ``tests/browser/test_browser_import.py``)."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionManager
from core.storage import Storage
from core.session.keys import project_key
from tests.core.importers.test_import import chatgpt_conversation, write_chatgpt, write_claude_code, write_codex
from webui.chat.imports import UNKNOWN_FORMAT, detect_format, import_upload

pytest.importorskip("gradio")


class _Ctx:
    def __init__(self, store):
        self.storage = Storage(store)
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
