"""The approval card's handlers as plain functions (webui/approvals.py) over a real store and the
fake OpenAI server: what the card shows, what each answer does, Stop, the per-chat switch and the
workspace choice — without a browser."""
from __future__ import annotations

import threading

from core.agent import approval as ap
from core.session.entries import header_entry
from core.session.keys import SessionKey, new_session_id, project_key
from tests.support.chat_ctx import ctx, project, run_send, store  # noqa: F401  (shared fixtures)
from webui.chat import approvals
from webui.chat import handlers

WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "buy bread\n"},
                         "id": "call_w"}]}


def paused(ctx, fake_openai):
    fake_openai.push(WRITE)
    updates = run_send(ctx, handlers.tab_state(ctx.project_key), "change the notes")
    return updates[-1].state


def resume(ctx, state):
    return run_send(ctx, state, None)[-1].state


class TestApprovalHandlers:
    """Guards against an answer being lost, applied to the wrong call, or granted by a file; and
    against Stop leaving a paused turn that the next request would have to repair."""

    def test_card_shows_the_waiting_change(self, ctx, fake_openai, project):
        state = paused(ctx, fake_openai)
        shown = approvals.view(ctx, state)
        assert shown.pending.call_id == "call_w" and "+buy bread" in shown.pending.preview
        assert shown.ask and shown.workspace_problem is None
        assert (project / "notes.txt").read_text() == "remember the milk\n"

    def test_card_shows_a_bidi_override_in_the_arguments(self, ctx, fake_openai, project):
        # issue 31, item 9: applied, U+202E showed the file name reversed on the card.
        fake_openai.push({"tool_calls": [{"name": "write_file", "id": "call_b", "arguments": {
            "path": "notes\u202etxt.sh", "content": "x\n"}}]})
        state = run_send(ctx, handlers.tab_state(ctx.project_key), "write it")[-1].state
        shown = approvals.view(ctx, state)
        assert shown.pending.call_id == "call_b" and "\u202e" in shown.pending.preview
        assert "\u202e" not in shown.preview and "notes\u27e8U+202E\u27e9txt.sh" in shown.preview

    def test_allow_once_resumes_and_writes(self, ctx, fake_openai, project):
        state = paused(ctx, fake_openai)
        assert approvals.decide(ctx, state, "call_w", allow=True) is None
        fake_openai.push({"text": "Changed."})
        state = resume(ctx, state)
        assert (project / "notes.txt").read_text() == "buy bread\n"
        assert approvals.view(ctx, state).pending is None
        assert ctx.manager.get(SessionKey(state["project"], state["session"])).messages[-1]["content"] == "Changed."
        # answering again is refused with a sentence, nothing stored
        assert approvals.decide(ctx, state, "call_w", allow=True) == approvals.ANSWERED_NOTICE

    def test_deny_reason_reaches_the_model(self, ctx, fake_openai, project):
        state = paused(ctx, fake_openai)
        approvals.decide(ctx, state, "call_w", allow=False, reason="  milk first  ")
        fake_openai.push({"text": "Leaving it."})
        resume(ctx, state)
        last = fake_openai.chat_requests()[-1]["messages"][-1]
        assert last["role"] == "tool" and "milk first" in last["content"]
        assert (project / "notes.txt").read_text() == "remember the milk\n"

    def test_allow_for_chat_and_switch(self, ctx, fake_openai, project):
        state = paused(ctx, fake_openai)
        approvals.decide(ctx, state, "call_w", allow=True, scope="chat")
        fake_openai.push({"text": "Changed."})
        state = resume(ctx, state)
        assert not approvals.view(ctx, state).ask
        fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "B"}}]},
                         {"text": "B written."})
        state = run_send(ctx, state, "and b")[-1].state
        assert (project / "b.txt").read_text() == "B"
        approvals.set_ask(ctx, state, True)  # the switch back on: asks again
        fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "c.txt", "content": "C"}}]})
        state = run_send(ctx, state, "and c")[-1].state
        assert approvals.view(ctx, state).pending is not None and not (project / "c.txt").exists()

    def test_stop_denies_without_calling_the_model(self, ctx, fake_openai, project):
        state = paused(ctx, fake_openai)
        asked = len(fake_openai.chat_requests())
        assert approvals.stop_pending(ctx, state)
        assert not approvals.stop_pending(ctx, state)  # nothing left to stop
        assert len(fake_openai.chat_requests()) == asked
        view = handlers.reload(ctx, state)
        fake_openai.push({"text": "ok"})
        run_send(ctx, view.state, "never mind")
        assert fake_openai.rejected() == []  # the stopped turn left a valid history
        assert ap.STOP_REASON in fake_openai.chat_requests()[-1]["messages"][-2]["content"]


class TestWorkspaceNotice:
    """Guards against a chat stored under one project but naming "/" as its folder getting file
    tools there without the user's explicit choice."""

    def test_crafted_root_session_needs_a_choice(self, ctx, fake_openai, tmp_path):
        key = SessionKey(project_key("/"), new_session_id())
        ctx.storage.sessions.append(key, [header_entry(key.session_id, key.project_key, "/")])
        state = handlers.tab_state(key.project_key, key.session_id, 0)
        shown = approvals.view(ctx, state)
        assert "root of the file system" in shown.workspace_problem and shown.choosable
        assert "workspace" not in approvals.runner_kwargs(ctx, state)
        assert approvals.choose_workspace(ctx, state) is None
        assert approvals.view(ctx, state).workspace_problem is None
        assert approvals.runner_kwargs(ctx, state)["workspace"].root == "/"


class TestOneReadPerView:
    """Guards against the approval card reading the session twice per view (its entries for the
    pending calls, then again for the chat's folder): on the SQL stores every read is a full
    query of the session, paid on each page update."""

    def test_a_view_loads_the_session_once(self, ctx, fake_openai, project, monkeypatch):
        state = paused(ctx, fake_openai)
        loads = []
        load = ctx.storage.sessions.load
        viewer = threading.get_ident()

        def counted(key):
            # the turn's title job may still be reading the session on its own thread (CI saw 2)
            if threading.get_ident() == viewer:
                loads.append(key)
            return load(key)

        monkeypatch.setattr(ctx.storage.sessions, "load", counted)  # the manager shares this store object
        shown = approvals.view(ctx, state)
        assert shown.pending.call_id == "call_w" and shown.cwd == str(project)
        assert len(loads) == 1
