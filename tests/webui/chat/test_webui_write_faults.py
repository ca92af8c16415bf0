"""The web UI's send, rename and input handlers under a full disk and odd browser input
(plain functions, real fake-model HTTP, a real tmpfs for the data dir).

Guards against: "Something went wrong (OSError); the conversation was saved up to this point"
while the typed message was neither saved nor given back; an empty session left in the sidebar
by a send on a full disk; a lone surrogate (a cut emoji) killing the page's event stream; a
message of zero-width spaces being sent as if it said something.
"""
from __future__ import annotations

import json

import orjson
import pytest

from core import LocalSessionStore, SessionManager
from tests.support.tiny_disk import mounted
from webui.chat import handlers
from webui.chat.context import WebContext
from tests.support.storage import storage_of


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    yield from mounted(tmp_path_factory, "ui-tiny")


@pytest.fixture
def ctx(disk, request, tmp_path, fake_openai):
    home = disk.path / request.node.name[:40].replace("[", "_").replace("]", "_")
    home.mkdir()
    project = tmp_path / "proj"
    project.mkdir()
    store = LocalSessionStore(home)
    yield WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                     model_overrides={"api_key": "sk-test", "base_url": fake_openai.base_url,
                                      "max_retries": 0}, export_dir=tmp_path / "exports")
    disk.read_only(False)
    disk.free()


def send(ctx, state, text):
    updates = list(handlers.send(ctx, state, text, None, "tab"))
    assert updates[-1].done
    for u in updates:  # what Gradio would send to the page must encode (orjson, strict UTF-8)
        orjson.dumps({"rows": u.rows, "notice": u.notice, "restore": u.restore_text})
    return updates[-1]


class TestSendOnAFullDisk:
    """Disk full: a plain sentence, the text back in the box, nothing half-saved, and it works
    again once space is freed."""

    def test_first_message_of_a_new_chat(self, ctx, disk):
        disk.fill()
        end = send(ctx, handlers.tab_state(ctx.project_key), "remember this")
        assert end.notice == ("The disk is full: your message was not sent and nothing was saved; "
                              "it is back in the box.")
        assert end.restore_text == "remember this" and not end.state.get("session")
        assert ctx.manager.list(ctx.project_key) == []
        assert disk.files() == []  # no empty session, no temporary file
        disk.free()
        end = send(ctx, end.state, "remember this")
        assert end.notice is None and not end.error
        assert [r["content"] for r in end.rows] == ["remember this", "You said: remember this"]

    def test_message_in_an_existing_session(self, ctx, disk):
        first = send(ctx, handlers.tab_state(ctx.project_key), "hello")
        before = ctx.manager.get(ctx.manager.find(ctx.project_key, first.state["session"])).messages
        disk.fill()
        big = "a long message that cannot fit " * 300
        end = send(ctx, first.state, big)
        assert end.notice.startswith("The disk is full: your message was not sent")
        assert end.restore_text == big.strip()
        assert [r["content"] for r in end.rows] == ["hello", "You said: hello"]  # not the unsent one
        assert ctx.manager.get(ctx.manager.find(ctx.project_key, first.state["session"])).messages == before
        disk.free()
        again = send(ctx, end.state, big)
        assert again.notice is None and not again.error  # no false "changed elsewhere"


class TestActionsTheStoreRefuses:
    """Rename, branch, archive and delete on a disk that refuses writes: a sentence, the session
    unchanged, never an unexplained "Error" on the page."""

    def test_branch_on_a_full_disk(self, ctx, disk):
        first = send(ctx, handlers.tab_state(ctx.project_key), "hello")
        disk.fill()
        view = handlers.branch(ctx, first.state, 0)
        assert view.notice == "The disk is full: the branch was not made."
        assert view.session_id == first.state["session"] and len(ctx.manager.list(ctx.project_key)) == 1

    def test_read_only_data_dir(self, ctx, disk):
        first = send(ctx, handlers.tab_state(ctx.project_key), "hello")
        before = ctx.manager.get(ctx.manager.find(ctx.project_key, first.state["session"]))
        disk.read_only()
        view = handlers.rename(ctx, first.state, "My title")
        assert view.notice.endswith("is read-only: the title was not saved.") and view.title == "My title"
        view = handlers.set_archived(ctx, first.state, True)
        assert view.notice.endswith("the conversation was not archived.") and not view.archived
        view = handlers.delete(ctx, first.state)
        assert view.notice.endswith("the conversation was not deleted.")
        assert view.session_id == first.state["session"]
        view = handlers.branch(ctx, first.state, 0)
        assert view.notice.endswith("the branch was not made.")
        end = send(ctx, first.state, "one more")
        assert "read-only: your message was not sent" in end.notice and end.restore_text == "one more"
        after = ctx.manager.get(before.key)
        assert (after.messages, after.archived) == (before.messages, False)
        assert after.title != "My title"  # (a generated title may have landed before the remount)


class TestBrowserInput:
    """Text a browser can send: lone surrogates and zero-width characters."""

    def test_lone_surrogate_is_cleaned_and_the_stream_survives(self, ctx):
        cut = "emoji cut in half: \ud83d"
        run_id, notice = handlers.take(ctx, "tab", cut)
        assert run_id is not None and notice is None
        updates = list(handlers.send_taken(ctx, handlers.tab_state(ctx.project_key), "tab", run_id, None))
        for u in updates:
            orjson.dumps(u.rows)  # raised "str is not valid UTF-8" before
        stored = ctx.manager.get(ctx.manager.find(ctx.project_key, updates[-1].state["session"])).messages
        assert [m["content"] for m in stored if m["role"] == "user"] == ["emoji cut in half: \ufffd"]
        assert not updates[-1].error

    @pytest.mark.parametrize("ghost", ["\u200b", "\u200b\u200b \u200c\u200d", "\ufeff\u2060\n\u00ad"])
    def test_zero_width_only_is_blank(self, ctx, ghost):
        # Nothing is sent or stored, and (since trial 11) the user is told why instead of nothing.
        assert handlers.take(ctx, "tab", ghost) == (None, handlers.NOTHING_TO_SEND_NOTICE)
        end = send(ctx, handlers.tab_state(ctx.project_key), ghost)
        assert not end.state.get("session") and ctx.manager.list(ctx.project_key) == []

    def test_zero_width_title_is_refused(self, ctx):
        first = send(ctx, handlers.tab_state(ctx.project_key), "hello")
        view = handlers.rename(ctx, first.state, "\u200b\u200b")
        assert view.notice == handlers.INVISIBLE_TITLE_NOTICE
        view = handlers.rename(ctx, first.state, "half an emoji \udc00")
        assert view.title == "half an emoji \ufffd"
        json.dumps(view.title).encode()  # valid text for the page

    def test_lone_surrogate_in_the_search_boxes(self, ctx):
        from webui.chat.search import results_html

        send(ctx, handlers.tab_state(ctx.project_key), "find the half emoji \ud83d here")
        panel = results_html(ctx, ctx.project_key, "emoji \ud83d")  # raised UnicodeEncodeError
        orjson.dumps(panel)
        assert "find the half <mark>emoji</mark>" in panel  # the message found (the title may still be on its way)
        orjson.dumps(handlers.session_list_html(ctx, ctx.project_key, query="x \udfff"))
