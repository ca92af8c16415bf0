"""Compaction where people see it: the chat divider, /compact, the meter, the CLI, the export (issue 9).

Handlers are called directly (no browser) against the fake OpenAI server; the CLI runs in-process.
"""
from __future__ import annotations

import json

import pytest

from core.session.compaction import compaction_entry
from core.session.export import session_to_markdown
from core.session.manager import SessionManager
from core.stores.jsonl_store import LocalSessionStore
from webui.chat import compaction as compaction_ui
from webui.chat import handlers
from webui.render import rows as render
from webui.cli import sessions as sessions_cli
from webui.chat.context import WebContext
from tests.core.agent.test_compaction import fresh_accounting  # noqa: F401  (autouse: fresh window caches per test)
from tests.support.storage import storage_of


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "proj"
    path.mkdir()
    return path


@pytest.fixture
def ctx(tmp_path, project, fake_openai):
    store = LocalSessionStore(tmp_path / "data")
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(project),
                      model_overrides={"api_key": "sk-test", "base_url": fake_openai.base_url, "max_retries": 0},
                      export_dir=tmp_path / "exports")


def long_session(ctx, turns=6):
    s = ctx.manager.create(ctx.project_path, title="Long")
    msgs = [{"role": "system", "content": "sys"}]
    for n in range(turns):
        msgs += [{"role": "user", "content": f"question {n} " + "detail " * 300},
                 {"role": "assistant", "content": f"answer {n}"}]
    ctx.manager.add_messages(s.key, msgs)
    return ctx.manager.get(s.key)


def state_of(session):
    return handlers.tab_state(session.project_key, session.id, len(session.messages))


class TestDivider:
    """The summary must be visible where it applies, and no message may disappear from the history."""

    def test_every_message_stays_and_the_divider_expands_to_the_summary(self, ctx):
        s = long_session(ctx)
        ctx.manager.add_compaction(s.key, compaction_entry("GOALS: ship it", 5, tokens_before=9000, tokens_after=2000,
                                                           model="m", trigger="manual"), expected_count=13)
        view = handlers.reload(ctx, state_of(s))
        texts = [r["content"] for r in view.rows]
        assert sum(1 for r in view.rows if r["role"] == "user") == 6
        divider = [i for i, r in enumerate(view.rows) if render.SUMMARY_DIVIDER in (r.get("metadata") or {}).get("title", "")]
        assert len(divider) == 1
        row = view.rows[divider[0]]
        assert "GOALS: ship it" in row["content"] and row["metadata"]["status"] == "done"
        assert texts[divider[0] - 1] == "answer 1" and texts[divider[0] + 1].startswith("question 2")

    def test_branch_rows_still_map_to_messages(self, ctx):
        s = long_session(ctx)
        ctx.manager.add_compaction(s.key, compaction_entry("S", 5, tokens_before=1, tokens_after=1, model="m",
                                                           trigger="auto"), expected_count=13)
        st = state_of(s)
        view = handlers.reload(ctx, st)
        last_user = max(i for i, r in enumerate(view.rows) if r["role"] == "user")
        fork = handlers.branch(ctx, view.state, last_user)
        got = ctx.manager.get(handlers._key(fork.state))
        assert got.messages[-1]["content"].startswith("question 5") and len(got.compactions) == 1


class TestCompactCommand:
    """`/compact` must never be sent to the model as a message, and Stop must leave nothing behind."""

    def test_slash_compact_summarises_without_a_message(self, ctx, fake_openai):
        s = long_session(ctx)
        updates = list(handlers.send(ctx, state_of(s), "/compact", None, "t1"))
        assert updates[-1].done and not updates[-1].error
        assert any(any((r.get("metadata") or {}).get("title") == compaction_ui.PROGRESS_TITLE for r in u.rows)
                   for u in updates[:-1])
        got = ctx.manager.get(s.key)
        assert len(got.messages) == 13 and [c["trigger"] for c in got.compactions] == ["manual"]
        assert not any("/compact" in json.dumps(b) for b in fake_openai.chat_requests())
        assert any(render.SUMMARY_DIVIDER in (r.get("metadata") or {}).get("title", "") for r in updates[-1].rows)

    def test_nothing_to_compact(self, ctx, fake_openai):
        """Guards against Compact offered (or /compact trying, and failing with an error row) on a
        chat that has nothing to summarise: a plain sentence instead, nothing sent."""
        s = ctx.manager.create(ctx.project_path)
        ctx.manager.add_messages(s.key, [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
        updates = list(handlers.send(ctx, state_of(ctx.manager.get(s.key)), "/compact", None, "t1"))
        assert not updates[-1].error and "Nothing to compact yet" in updates[-1].notice
        assert len(ctx.manager.get(s.key).messages) == 2 and fake_openai.chat_requests(None) == []

    def test_compact_is_offered_only_with_something_to_compact(self, ctx):
        empty = {"project": ctx.manager.create(ctx.project_path).key.project_key, "session": None, "count": 0}
        assert compaction_ui.nothing_to_compact(ctx, empty) == compaction_ui.NO_MESSAGES
        updates = list(handlers.send(ctx, empty, "/compact", None, "t1"))
        assert updates[-1].notice == compaction_ui.NO_MESSAGES and not updates[-1].error
        s = ctx.manager.create(ctx.project_path)
        ctx.manager.add_messages(s.key, [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
        assert "Nothing to compact yet" in compaction_ui.nothing_to_compact(ctx, state_of(ctx.manager.get(s.key)))
        assert compaction_ui.nothing_to_compact(ctx, state_of(long_session(ctx))) is None

    def test_summary_failure_is_a_readable_row(self, ctx, fake_openai):
        s = long_session(ctx)
        fake_openai.push({"error": 500}, kind="summary")
        updates = list(handlers.send(ctx, state_of(s), "/compact", None, "t1"))
        assert updates[-1].error and "Summarising the earlier messages failed" in updates[-1].rows[-1]["content"]
        assert ctx.manager.get(s.key).compactions == []


class TestMeter:
    """The meter must show the window the model really has, and turn amber before it overflows."""

    def test_label_and_amber(self, ctx, fake_openai, monkeypatch):
        s = long_session(ctx)
        fake_openai.context_limit, fake_openai.window_api = 128_000, "vllm"
        html = compaction_ui.meter_html(ctx, state_of(s), None)
        assert "/ 128k" in html and "ac-meter-warn" not in html
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "4000")
        assert "ac-meter-warn" in compaction_ui.meter_html(ctx, state_of(s), None)

    def test_ollama_num_ctx_is_said(self, ctx, fake_openai):
        fake_openai.context_limit, fake_openai.window_api = 2048, "ollama"
        html = compaction_ui.meter_html(ctx, handlers.tab_state(ctx.project_key), None)
        assert "/ 2k" in html and "OLLAMA_CONTEXT_LENGTH" in html


class TestCliAndExport:
    """The summary must be findable outside the web UI too, at its place."""

    def test_sessions_compact_show_and_export(self, ctx, fake_openai, monkeypatch, capsys, tmp_path):
        s = long_session(ctx)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
        monkeypatch.setenv("ANYCODE_MAX_RETRIES", "0")
        common = ["--data-dir", str(tmp_path / "data"), "--store", "jsonl", "--project", ctx.project_path]
        assert sessions_cli.main([*common, "compact", s.id[:8]]) == 0
        assert "every message is still in the session" in capsys.readouterr().out
        assert sessions_cli.main([*common, "show", s.id]) == 0
        shown = capsys.readouterr().out
        got = ctx.manager.get(s.key)
        assert len(got.compactions) == 1
        head = shown.index("Earlier messages were summarised")
        kept = got.messages[got.compactions[0]["first_kept_index"]]["content"]
        assert shown.index("answer 0") < head < shown.index(kept[:20])
        assert got.compactions[0]["summary"].splitlines()[0] in shown
        assert session_to_markdown(got) == shown
