"""webui.gui.assets: the page's scripts, run from one load event (issue 32)."""
from __future__ import annotations

from tests.support.chromium import browser  # noqa: F401  (fixture)
from webui.gui.assets import page_scripts_js


class TestPageScripts:
    """Guards against one page script's error stopping the others: when each ran from its own load
    event a failing one left the rest working; run from one event they must still."""

    def test_a_failing_script_leaves_the_next_ones_running_in_order(self, browser):  # noqa: F811
        scripts = ["() => { window.ran = ['first']; }",
                   "() => { throw new Error('broken'); }",
                   "() => {\n  window.ran.push('third');\n  return [];\n}\n"]
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        try:
            page.set_content("<p>page</p>")
            assert page.evaluate(f"({page_scripts_js(scripts)})()") == []
            assert page.evaluate("window.ran") == ["first", "third"]
            assert any("broken" in e for e in errors)
        finally:
            page.close()
