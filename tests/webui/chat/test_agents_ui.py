"""``@name`` in the chat (issue 30) through the web UI's plain handlers: the agent's reply labelled
while it streams and once stored, Copy's text without the label, Regenerate keeping the agent, the
exports naming it — against the fake OpenAI server over real HTTP."""
from __future__ import annotations

import json

import pytest

from core import LocalSessionStore, SessionManager
from core.session.keys import SessionKey
from webui.chat import handlers, versions
from webui.chat.context import WebContext
from webui.render import rows as render
from webui.text import chat_text
from tests.support.storage import storage_of

REVIEWER = ("---\nname: reviewer\ndescription: Reviews a change for bugs.\nmodel: fake-review\n---\n"
            "You are a strict code reviewer.\n")


@pytest.fixture
def ctx(tmp_path, fake_openai):
    project = tmp_path / "proj"
    (project / ".anycode" / "agents").mkdir(parents=True)
    (project / ".anycode" / "agents" / "reviewer.md").write_text(REVIEWER)
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                      model_overrides=dict(api_key="sk-test", base_url=fake_openai.base_url, max_retries=0),
                      export_dir=tmp_path / "exports")


def send_all(ctx, state, text):
    ups = list(handlers.send(ctx, state, text, None, "t1"))
    assert ups[-1].done
    return ups


LABEL = render.agent_label("reviewer")


class TestAgentInTheChat:
    """Guards against an agent's reply shown, copied, regenerated or exported as the default
    assistant's."""

    def test_label_stream_store_copy(self, ctx, fake_openai):
        fake_openai.push({"text": "No bug here."})
        ups = send_all(ctx, handlers.tab_state(ctx.project_key), "@reviewer check this")
        streamed = [u for u in ups if not u.done and any(r.get("role") == "assistant" for r in u.rows)]
        assert streamed and all(r["content"].startswith(LABEL) for u in streamed for r in u.rows[1:]
                                if r.get("role") == "assistant" and not r.get("metadata"))
        final = ups[-1]
        reply = [r for r in final.rows if r["role"] == "assistant" and not r.get("metadata")]
        assert reply[-1]["content"] == LABEL + "No bug here."
        assert chat_text.source(reply[-1]["content"]) == "No bug here."  # Copy and Edit: the reply only
        (req,) = fake_openai.chat_requests("chat")
        assert req["model"] == "fake-review" and "strict code reviewer" in req["messages"][0]["content"]
        key = SessionKey(final.state["project"], final.state["session"])
        entries = ctx.storage.sessions.load(key)
        assert [e.get("agent") for e in entries if e.get("type") == "message"
                and e["message"]["role"] == "assistant"] == ["reviewer"]
        reopened = handlers.open_session(ctx, ctx.project_key, key.session_id)
        assert reopened.rows[-1]["content"] == LABEL + "No bug here."

    def test_regenerate_keeps_the_agent_and_exports_name_it(self, ctx, fake_openai):
        final = send_all(ctx, handlers.tab_state(ctx.project_key), "@reviewer check this")[-1]
        state = final.state
        row = len(final.rows) - 1
        view = versions.regenerate(ctx, state, row)
        fake_openai.push({"text": "Second look: still fine."})
        again = send_all(ctx, view.state, None)[-1]
        assert again.rows[-1]["content"] == LABEL + "Second look: still fine."
        assert fake_openai.chat_requests("chat")[-1]["model"] == "fake-review"
        key = SessionKey(again.state["project"], again.state["session"])
        assert ctx.manager.get(key).reply_agents == {2: "reviewer"}
        md, jl = handlers.exports(ctx, again.state)  # the page's two downloads
        assert "## Assistant (reviewer)" in md.read_text(encoding="utf-8")
        lines = [json.loads(line) for line in jl.read_text(encoding="utf-8").splitlines()]
        assert [e.get("agent") for e in lines if e.get("type") == "message"
                and e["message"]["role"] == "assistant"] == ["reviewer"]


class TestAgentsSection:
    """Guards against the sidebar's Agents section hiding a definition or an expert's session,
    showing a name unescaped, or opening an expert's session as an editable chat."""

    def test_lists_definitions_and_experts_and_opens_them(self, ctx, fake_openai):
        from core.agent.definitions import AgentDefinition
        from core.agent.experts import Consultation
        from webui.chat import agents

        folder = __import__("pathlib").Path(ctx.project_path) / ".claude" / "agents"
        folder.mkdir(parents=True)
        (folder / "arch.md").write_text("---\nname: architect\ndescription: Knows <the> design\nmode: expert\n---\n"
                                        "You are the architect.\n")
        (folder / "bad.md").write_text("no frontmatter")
        arch = AgentDefinition("architect", "Knows <the> design", "You are the architect.", mode="expert")
        with Consultation.open(ctx.storage, ctx.project_key, arch, ctx.project_path, "You are the architect.") as c:
            c.ask("Where does the app start?")
            c.store_round([{"role": "assistant", "content": "In src/app.py."}])

        sec = agents.section(ctx, ctx.project_key)
        assert [(i.name, i.mode, i.source, i.has_session) for i in sec.items] == [
            ("reviewer", "subagent", "project", False), ("architect", "expert", "claude", True)]
        assert len(sec.problems) == 1
        html = agents.section_html(sec)
        assert html.count('data-agent="') == 2 and "@architect" in html and "expert · Claude Code" in html
        assert [m.id for m in ctx.manager.conversations(ctx.project_key)] == []  # not a chat

        shown = agents.open_agent(ctx, handlers.tab_state(ctx.project_key), "architect")
        assert shown.heading.startswith("### @architect") and "1 consultation" in shown.heading
        assert "&lt;the&gt;" in shown.heading  # the description is text, not markup
        assert [r["content"] for r in shown.rows] == ["Where does the app start?", "In src/app.py."]
        definition = agents.open_agent(ctx, None, "reviewer")
        assert "fake-review" in definition.heading and "strict code reviewer" in definition.rows[0]["content"]
        assert agents.open_agent(ctx, None, "ghost").notice
        assert agents.section_html(agents.Section()) == ""


class TestAnExpertSessionIsNoChatToWriteIn:
    """Guards against a link (``?session=expert-architect``, ``--resume``) or an id picked by hand
    opening an expert agent's own session as a chat: a message sent there was stored in the
    expert's session, which only its consultations may write (issue 30)."""

    def test_a_link_opens_a_new_chat_with_a_sentence_and_nothing_is_written(self, ctx):
        from core.agent.definitions import AgentDefinition
        from core.agent.experts import Consultation
        from core.session.experts import expert_key
        from webui.chat import views

        arch = AgentDefinition("architect", "d", "You are the architect.", mode="expert")
        with Consultation.open(ctx.storage, ctx.project_key, arch, ctx.project_path, "sys") as c:
            c.ask("Where does the app start?")
            c.store_round([{"role": "assistant", "content": "In src/app.py."}])
        key = expert_key(ctx.project_key, "architect")
        before = ctx.manager.get(key).messages
        for wanted in (key.session_id, "expert-arch"):  # the whole id and a prefix
            view = views.initial_view(ctx, {"session": wanted})
            assert view.state.get("session") is None, "a new chat, not the expert's session"
            assert "only its consultations write it" in view.notice and "architect" in view.notice
        with pytest.raises(Exception, match="only its consultations write it"):
            handlers.open_session(ctx, ctx.project_key, key.session_id)
        assert ctx.manager.get(key).messages == before


class TestSearchLeavesExpertsOut:
    """Guards against the chat search offering an expert's session as a chat to open (and type into)."""

    def test_expert_words_are_not_a_chat_hit_but_a_reply_of_an_agent_is(self, ctx, fake_openai):
        from core.agent.definitions import AgentDefinition
        from core.agent.experts import Consultation
        from webui.chat import search

        arch = AgentDefinition("architect", "d", "You are the architect.", mode="expert")
        with Consultation.open(ctx.storage, ctx.project_key, arch, ctx.project_path, "sys") as c:
            c.ask("where do the zebrafish live?")
        fake_openai.push({"text": "The okapi module has no bug."})
        send_all(ctx, handlers.tab_state(ctx.project_key), "@reviewer check the okapi module")
        assert "zebrafish" not in search.results_html(ctx, ctx.project_key, "zebrafish")
        assert "okapi" in search.results_html(ctx, ctx.project_key, "okapi")
