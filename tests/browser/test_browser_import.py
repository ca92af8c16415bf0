"""The sidebar's "Import…" button in Chromium (issue 19): a ChatGPT export uploaded from the page lands
in the sidebar and opens. The plain-function half is ``tests/webui/chat/test_import_ui.py``."""
from __future__ import annotations

import pytest

from tests.core.importers.test_import import chatgpt_conversation, write_chatgpt


@pytest.mark.browser
class TestImportButtonInBrowser:
    """The Import button does nothing visible, or the imported chats do not appear in the sidebar."""

    def test_upload_chatgpt_export_flow(self, world, page, tmp_path):
        url = world["start_app"]()
        src = write_chatgpt(tmp_path / "conversations.json", [chatgpt_conversation(title="Parser tabs question")])
        page.goto(url)
        from tests.support.chromium import expect

        expect(page.locator("#ac-list")).to_contain_text("No conversations yet")
        with page.expect_file_chooser() as chooser:
            page.locator("#ac-import").click()
        chooser.value.set_files(str(src))
        expect(page.get_by_text("Imported 3 conversations")).to_be_visible()
        expect(page.locator("#ac-list")).to_contain_text("Parser tabs question")
        page.locator("#ac-list .ac-session", has_text="Parser tabs question", has_not_text="(branch)").first.click()
        expect(page.locator("[data-testid=bot]").last).to_contain_text("Use str.split() without arguments.")

