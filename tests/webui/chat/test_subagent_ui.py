"""Sub-agents in the web UI, without a browser: the live nested steps, the transcript, the sidebar."""
from __future__ import annotations

from core.session.keys import SessionKey
from webui.chat import handlers
from webui.render import rows as render
from webui.chat import subagents as subagent_panel
from tests.support.chat_ctx import ctx, project, store  # noqa: F401  (fixtures)


def script_two_tasks(fake_openai):
    fake_openai.push({"tool_calls": [
        {"name": "task", "id": "call_a", "arguments": {"description": "Read the notes", "prompt": "alpha: read notes.txt"}},
        {"name": "task", "id": "call_b", "arguments": {"description": "List the folder", "prompt": "beta: list"}}]},
        {"text": "Both are done."})
    fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
                     {"text": "The notes say: remember the milk."}, kind="subagent", task="alpha")
    fake_openai.push({"tool_calls": [{"name": "list_files", "arguments": {}}]},
                     {"text": "One file: notes.txt."}, kind="subagent", task="beta")


class TestLiveAndStored:
    """Guards against a task step hiding its sub-agent's progress, or a sub-agent leaking into the list."""

    def test_live_rows_nest_the_sub_agents_steps_under_their_task(self, ctx, fake_openai):
        script_two_tasks(fake_openai)
        updates = list(handlers.send(ctx, handlers.new_chat(ctx).state, "check both", None, "t1"))
        assert updates[-1].done and not updates[-1].error
        seen: dict[str, dict] = {}
        for upd in updates[:-1]:
            for row in upd.rows or []:
                meta = row.get("metadata") or {}
                if meta.get("id"):
                    seen[meta["id"]] = row
        titles = [r["metadata"]["title"] for upd in updates[:-1] for r in upd.rows or []
                  if (r.get("metadata") or {}).get("id") == "call_a"]
        # the running step says how far its sub-agent got, so a collapsed step still shows progress
        assert "\u2699 task: Read the notes \u00b7 1 step, running read_file" in titles
        assert "\u2699 task: Read the notes \u00b7 1 step" in titles
        task_a, task_b = seen["call_a"], seen["call_b"]
        assert task_b["metadata"]["title"].endswith("task: List the folder")
        assert task_a["metadata"]["title"].endswith("task: Read the notes")
        assert subagent_panel.LINK_TEXT in task_a["content"]
        read = seen["call_a/" + next(k.split("/", 1)[1] for k in seen if k.startswith("call_a/"))]
        assert read["metadata"]["parent_id"] == "call_a" and "read_file" in read["metadata"]["title"]
        assert read["metadata"]["status"] == "done" and "remember the milk" in read["content"]
        listing = [r for k, r in seen.items() if k.startswith("call_b/")]
        assert listing and all(r["metadata"]["parent_id"] == "call_b" for r in listing)
        # one row per task step: the step its sub-agent's start showed is the one the call fills
        last_live = updates[-2].rows
        assert sum(1 for r in last_live if (r.get("metadata") or {}).get("id") == "call_b") == 1

        final = updates[-1].rows  # the stored view: the calls and results, no sub-agent steps
        assert not any((r.get("metadata") or {}).get("parent_id") for r in final)
        steps = [r for r in final if (r.get("metadata") or {}).get("id") in ("call_a", "call_b")]
        assert len(steps) == 2 and all(r["metadata"]["status"] == "done" for r in steps)
        assert "The notes say: remember the milk." in steps[0]["content"]
        assert subagent_panel.LINK_TEXT in steps[1]["content"]

        state = updates[-1].state
        listed = handlers.session_list_html(ctx, state["project"], active=state["session"])
        assert listed.count("data-sid=") == 1  # the sub-agent records are never listed

    def test_transcript_of_a_task(self, ctx, fake_openai):
        script_two_tasks(fake_openai)
        state = list(handlers.send(ctx, handlers.new_chat(ctx).state, "check both", None, "t1"))[-1].state
        shown = subagent_panel.transcript(ctx, state, "call_a")
        assert shown.notice is None and "Read the notes" in shown.heading and "1 tool step" in shown.heading
        assert shown.rows[0] == {"role": "user", "content": "**Task**\n\nalpha: read notes.txt"}
        assert shown.rows[-1] == {"role": "assistant", "content": "The notes say: remember the milk."}
        assert any("read_file" in (r.get("metadata") or {}).get("title", "") for r in shown.rows)
        assert subagent_panel.transcript(ctx, state, "call_nope").notice
        assert subagent_panel.transcript(ctx, {"project": state["project"], "session": None}, "call_a").notice

    def test_both_downloads_carry_the_runs(self, ctx, fake_openai):
        script_two_tasks(fake_openai)
        state = list(handlers.send(ctx, handlers.new_chat(ctx).state, "check both", None, "t1"))[-1].state
        md, jl = handlers.exports(ctx, state)
        assert "## Sub-agent: Read the notes" in md.read_text() and "One file: notes.txt." in md.read_text()
        assert jl.read_text().count('"type":"subagent_record"') == 2
        handlers.delete(ctx, state)
        key = SessionKey(state["project"], state["session"])
        assert ctx.storage.sessions.list_subpaths(key) == []


def test_task_step_link_survives_any_call_id():
    row = render.tool_step("functions.task:0 /x", "task", '{"description": "Look", "prompt": "p"}')
    assert "#ac-subagent=functions.task%3A0%20%2Fx" in row["content"]
    assert row["metadata"]["title"].endswith("task: Look")
    assert render.tool_step("c1", "read_file", "{}")["content"].startswith("**Arguments**")
