"""Rewind to here and Undo rewind through the web UI's plain operations (webui/chat/rewind.py; no
browser), on a chat whose agent wrote files over real HTTP (the fake OpenAI server) (issue 29)."""
from __future__ import annotations

import os

import pytest

from core import LocalSessionStore, SessionManager
from core.session.keys import SessionKey
from webui import i18n
from webui.chat import handlers
from webui.chat import rewind
from webui.chat.context import WebContext
from webui.render import rows as render
from tests.support.storage import storage_of

OLD = b"old = True\n"


@pytest.fixture(autouse=True)
def auto_approval(monkeypatch):
    monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
    monkeypatch.setenv("ANYCODE_MEMORY", "off")


@pytest.fixture
def ctx(tmp_path, fake_openai):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "keep.py").write_bytes(OLD)
    os.chmod(project / "keep.py", 0o640)
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                      model_overrides=dict(api_key="sk-test", base_url=fake_openai.base_url, max_retries=0),
                      export_dir=tmp_path / "exports")


def agent_wrote(ctx, fake_openai):
    fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "one.txt", "content": "1\n"}}]},
                     {"tool_calls": [{"name": "write_file", "arguments": {"path": "two.txt", "content": "2\n"}},
                                     {"name": "write_file", "arguments": {"path": "keep.py", "content": "old = False\n"}}]},
                     {"text": "Done."})
    state = handlers.new_chat(ctx, ctx.project_key).state
    ups = list(handlers.send(ctx, state, "write them", None, "t1"))
    assert ups[-1].done
    return ups[-1].state


def row_of(ctx, state, stored_index):
    session = ctx.manager.get(SessionKey(state["project"], state["session"]))
    return render.chat_window(session.messages, handlers.shown_from(session, state)).source.index(stored_index)


def test_card_then_rewind_conversation_and_files_then_undo(ctx, fake_openai):
    project = ctx.project_path
    state = agent_wrote(ctx, fake_openai)
    user_row = row_of(ctx, state, 1)
    index = rewind.message_of_row(ctx, state, user_row)
    card = rewind.card(ctx, state, index)
    assert card.lines == ["one.txt: removed (created after this message)",
                          "two.txt: removed (created after this message)", "keep.py: old contents back"]
    assert "-old = False\n+old = True" in card.diff and not card.outside
    view = rewind.apply(ctx, state, index, "both")
    assert view.session_id != state["session"] and "3 files went back" in view.notice
    assert not os.path.exists(os.path.join(project, "one.txt"))
    assert open(os.path.join(project, "keep.py"), "rb").read() == OLD
    assert os.stat(os.path.join(project, "keep.py")).st_mode & 0o777 == 0o640
    assert rewind.can_undo(ctx, view.state)
    back = rewind.undo(ctx, view.state)
    assert back.session_id == state["session"] and i18n.t("rewind_undone") in back.notice
    assert open(os.path.join(project, "two.txt")).read() == "2\n"
    assert open(os.path.join(project, "keep.py")).read() == "old = False\n"


def test_a_file_edited_by_hand_is_ticked_to_be_restored(ctx, fake_openai):
    state = agent_wrote(ctx, fake_openai)
    path = os.path.join(ctx.project_path, "keep.py")
    with open(path, "w") as fh:
        fh.write("mine\n")
    card = rewind.card(ctx, state, 1)
    assert card.outside == ["keep.py"] and any("changed outside anycode" in line for line in card.lines)
    view = rewind.apply(ctx, state, 1, "files")
    assert view.session_id == state["session"] and "1 file was left" in view.notice
    assert open(path).read() == "mine\n"
    rewind.undo(ctx, view.state)
    rewind.apply(ctx, state, 1, "files", chosen=["keep.py"])
    assert open(path, "rb").read() == OLD


def test_strings_in_chinese(ctx, fake_openai):
    state = agent_wrote(ctx, fake_openai)
    with i18n.using("zh-CN"):
        card = rewind.card(ctx, state, 1)
    assert card.title == "回退到“write them”" and card.lines[0].startswith("one.txt：删除")


def test_the_card_names_the_message_as_shown_and_undo_is_not_a_warning(ctx, fake_openai):
    # The card said "Rewind to message 2" (a count of stored messages, not what the user sees)
    # and a successful undo came as a warning (trial 7).
    state = agent_wrote(ctx, fake_openai)
    assert rewind.card(ctx, state, 1).title == "Rewind to “write them”"
    view = rewind.apply(ctx, state, 1, "both")
    back = rewind.undo(ctx, view.state)
    assert back.notice_level == "info"


class TestEditAndRegenerateOfferTheFiles:
    """Guards against Edit and Regenerate replacing a turn whose file changes stay behind with no
    word (the conversation says one thing, the project another): when the replaced turn changed
    files, the card is offered first (conversation and files / conversation only), and each
    answer does what it says; a turn that changed nothing asks nothing."""

    def test_edit_with_the_files_puts_them_back_and_sends_the_edited_text(self, ctx, fake_openai):
        state = agent_wrote(ctx, fake_openai)
        user_row = row_of(ctx, state, 1)
        card, target = rewind.replaced_turn(ctx, state, "edit", user_row, "write only one")
        assert card.title == "Your edit replaces a part of the conversation that changed files"
        assert "keep.py: old contents back" in card.lines and "-old = False\n+old = True" in card.diff
        assert rewind.replaced_turn(ctx, state, "edit", user_row, "write them") is None, "an unchanged edit asks nothing"
        view, text = rewind.replace_turn(ctx, state, target, "both")
        assert text == "write only one"
        assert view.session_id != state["session"] and view.state["session"] == view.session_id
        assert [m["content"] for m in ctx.manager.get(SessionKey(ctx.project_key, view.session_id)).messages[1:]] == []
        assert not os.path.exists(os.path.join(ctx.project_path, "one.txt"))
        assert open(os.path.join(ctx.project_path, "keep.py"), "rb").read() == OLD
        assert rewind.can_undo(ctx, view.state), "Undo rewind puts the files back"
        fake_openai.push({"text": "Only one then."})
        ups = list(handlers.send(ctx, view.state, text, None, "t1"))
        assert ups[-1].done and ups[-1].state["session"] == view.session_id

    def test_regenerate_conversation_only_leaves_the_files(self, ctx, fake_openai):
        state = agent_wrote(ctx, fake_openai)
        reply_row = len(handlers.reload(ctx, state).rows) - 1
        card, target = rewind.replaced_turn(ctx, state, "regenerate", reply_row)
        assert card.title == "Regenerating replaces a reply that changed files" and target["kind"] == "regenerate"
        view, text = rewind.replace_turn(ctx, state, target, "conversation")
        assert text is None and view.state.get("regen_guard"), "the model is asked again"
        assert open(os.path.join(ctx.project_path, "keep.py")).read() == "old = False\n", "files left as they are"
        assert os.path.exists(os.path.join(ctx.project_path, "one.txt"))

    def test_regenerate_with_the_files_and_a_turn_without_files(self, ctx, fake_openai):
        state = agent_wrote(ctx, fake_openai)
        reply_row = len(handlers.reload(ctx, state).rows) - 1
        _, target = rewind.replaced_turn(ctx, state, "regenerate", reply_row)
        view, _ = rewind.replace_turn(ctx, state, target, "both")
        assert view.state.get("regen_guard") and not os.path.exists(os.path.join(ctx.project_path, "two.txt"))
        fake_openai.push({"text": "Nothing to write."})
        ups = list(handlers.send(ctx, view.state, "and now?", None, "t1"))
        last = len(handlers.reload(ctx, ups[-1].state).rows) - 1
        assert rewind.replaced_turn(ctx, ups[-1].state, "regenerate", last) is None, "no files changed: no card"
