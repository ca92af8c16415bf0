"""The Memory panel, the "Memory updated" toast and the "Used N memories" note: plain functions
without a browser, then a real Chromium against the app and the fake server."""
from __future__ import annotations

import json

import pytest

from core.memory.store import MemoryStore
from tests.test_search_ui import ctx  # noqa: F401  (a store and manager in tmp_path, as the app's ctx)
from webui import memory_panel, render

try:
    from tests.test_browser_e2e import TIMEOUT_MS, _post, expect, page, send, world  # noqa: F401
except pytest.skip.Exception:  # pragma: no cover - the module skips itself without Chromium/playwright
    page = world = None


class TestPanelFunctions:
    """Chat-derived text injected as HTML, a memory losing its conversation link, Undo removing the wrong one."""

    def test_list_is_escaped_grouped_and_links_its_conversation(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path, title="Indentation talk")
        mem = MemoryStore.for_store(ctx.store)
        mem.add("<img src=x onerror=alert(1)> uses tabs", project_key=s.project_key, source="model",
                session_id=s.id, message_index=1)
        mem.add("Prefers short answers", scope="user")
        out = memory_panel.panel_html(ctx, s.project_key)
        assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt; uses tabs" in out
        assert out.index("This project") < out.index("uses tabs") < out.index("You (every project)")
        assert f'data-sid="{s.id}"' in out and "from Indentation talk" in out and "added by the assistant" in out

    def test_empty_panel_says_how_to_add(self, ctx):
        assert "No memories yet" in memory_panel.panel_html(ctx, "-p-0000000000000000")

    def test_add_edit_delete_and_refusals(self, ctx, tmp_path):
        s = ctx.manager.create(tmp_path)
        pk = s.project_key
        assert memory_panel.add_memory(ctx, pk, "Tests run with pytest", "project") == (
            "Remembered: Tests run with pytest", True)
        sentence, ok = memory_panel.add_memory(ctx, pk, "password: Hunter22!", "user")
        assert not ok and "secret" in sentence
        [m] = MemoryStore.for_store(ctx.store).list(pk)
        assert memory_panel.edit_memory(ctx, pk, m.id, "Tests run with pytest -q")[1]
        assert MemoryStore.for_store(ctx.store).get(m.id, pk).text == "Tests run with pytest -q"
        assert memory_panel.delete_memory(ctx, pk, m.id)[1]
        assert MemoryStore.for_store(ctx.store).list(pk) == []
        assert not memory_panel.delete_memory(ctx, pk, m.id)[1]

    def test_toast_finds_only_this_conversations_new_model_memories_and_undo_removes_them(self, ctx, tmp_path):
        s, other = ctx.manager.create(tmp_path), ctx.manager.create(tmp_path)
        mem = MemoryStore.for_store(ctx.store)
        mine = mem.add("Uses tabs", project_key=s.project_key, source="model", session_id=s.id)
        mem.add("Typed by the user", project_key=s.project_key, session_id=s.id)
        mem.add("From elsewhere", project_key=s.project_key, source="model", session_id=other.id)
        found = memory_panel.new_model_memories(ctx, s.id, s.project_key, 0.0, [])
        assert [m.id for m in found] == [mine.id]
        assert memory_panel.new_model_memories(ctx, s.id, s.project_key, 0.0, [mine.id]) == []
        assert "Memory updated" in memory_panel.toast_markdown(found)
        assert memory_panel.undo(ctx, s.project_key, [mine.id]) == "Removed 1 memory."
        assert mine.id not in [m.id for m in mem.list(s.project_key)]


class TestUsedMemoriesNote:
    """A new chat's first reply not saying which memories it started with (or every reply saying it)."""

    def test_note_sits_above_the_first_reply_only(self):
        from core.memory.context import memory_section
        from core.memory.model import Memory

        memories = [Memory("m1", "We use tabs", "project", "pk", "user", None, None, 1.0, 1.0),
                    Memory("m2", "Short answers", "user", None, "user", None, None, 2.0, 2.0)]
        section, _ = memory_section(memories)
        messages = [{"role": "system", "content": "You are anycode.\n\n" + section},
                    {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "again"}, {"role": "assistant", "content": "sure"}]
        view = render.chat_rows(messages)
        assert [r.get("metadata", {}).get("title") for r in view.rows] == [None, "Used 2 memories", None, None, None]
        assert view.rows[1]["content"] == "- [project] We use tabs\n- [user] Short answers"
        assert len(view.source) == len(view.rows)
        assert render.chat_rows(messages[:1] + messages[1:2]).rows == [{"role": "user", "content": "hi"}]

    def test_no_memories_no_note(self):
        rows = render.chat_rows([{"role": "system", "content": "You are anycode."},
                                 {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]).rows
        assert not any(r.get("metadata") for r in rows)


@pytest.mark.browser
def test_memory_panel_toast_and_used_note_in_a_browser(world, page):
    """The panel, the toast's Undo and the "Used N memories" note as a user sees them."""
    url = world["start_app"]()
    page.goto(url)
    page.locator("#ac-new").click()

    # The model learns a convention: the toast says so; Undo removes it.
    send(page, "Convention: commit messages are in English. Please review app.py.")
    toast = page.locator("#ac-memory-toast")
    expect(toast).to_contain_text("Memory updated", timeout=TIMEOUT_MS)
    expect(toast).to_contain_text("commit messages are in English")
    page.locator("#ac-memory-undo").click()
    expect(toast).to_be_hidden()
    # A second one is kept.
    send(page, "Remember that the API lives in app.py.")
    expect(toast).to_contain_text("the API lives in app.py", timeout=TIMEOUT_MS)
    page.locator("#ac-memory-dismiss").click()

    # The panel: the kept memory with its conversation; add, edit and delete one.
    page.locator("#ac-memory-open").click()
    listing = page.locator("#ac-memory-list")
    expect(listing).to_contain_text("Remember that the API lives in app.py.")
    expect(listing).not_to_contain_text("commit messages are in English")
    expect(listing).to_contain_text("added by the assistant")
    page.locator("#ac-memory-new textarea").fill("Tests run with pytest")
    page.locator("#ac-memory-add").click()
    expect(listing).to_contain_text("Tests run with pytest")
    item = listing.locator(".ac-mem", has_text="Tests run with pytest")
    item.get_by_role("button", name="Edit").click()
    page.locator("#ac-memory-edit textarea").fill("Tests run with pytest -q")
    page.locator("#ac-memory-save").click()
    expect(listing).to_contain_text("Tests run with pytest -q")
    page.once("dialog", lambda d: d.accept())
    listing.locator(".ac-mem", has_text="pytest -q").get_by_role("button", name="Delete").click()
    expect(listing).not_to_contain_text("pytest")
    expect(page.locator("#ac-memory-auto input")).to_be_checked()

    # A new chat starts with the memory: its first reply says "Used 1 memory"; opening it shows which.
    page.locator("#ac-new").click()
    send(page, "hello")
    note = page.locator("#ac-chat", has_text="Used 1 memory")
    expect(note).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_text("Used 1 memory").click()
    expect(page.locator("#ac-chat")).to_contain_text("[project] Remember that the API lives in app.py.")

    # The memory's link opens the conversation it came from.
    page.locator("#ac-memory-open").click()
    listing.locator(".ac-mem-link").first.click()
    expect(page.locator("[data-testid=user]").first).to_contain_text("Convention: commit messages")

    # Stored on disk, in the data dir's memory log, without the undone fact.
    logs = list((world["data"] / "memory" / "projects").glob("*.jsonl"))
    texts = [json.loads(line).get("text") for line in logs[0].read_text().splitlines()]
    assert "Remember that the API lives in app.py." in texts
