"""Long agentic turns and what peers' users hit with them (issue 27, kinds 1, 2, 5, 6).

Against the fake OpenAI server (real HTTP on 127.0.0.1) in its strict modes: a chat template that
refuses a request without a user message (Qwen3: "No user query found in messages."), a window
that refuses over-long requests, a summary model that ignores the length limit, a model that
refuses ``temperature``. Each test would catch any input of its kind, not one example.
"""
from __future__ import annotations

import threading

import pytest

from core import LocalSessionStore, SessionManager
from core.agent import context as ctx
from core.agent.compaction import summary_cap
from core.agent.events import CompactionFinished, MemoryStarted, TitleStarted
from core.agent.runner import run_session, run_session_stream
from core.agent.stream import forget_compat
from core.session.compaction import compaction_entry, model_view, shown_sizes

MODEL = "gpt-4o-mini"


@pytest.fixture(autouse=True)
def fresh_accounting(monkeypatch):
    monkeypatch.delenv("ANYCODE_COMPACT_AT", raising=False)
    monkeypatch.setenv("ANYCODE_MEMORY", "off")
    ctx.forget_windows()
    ctx.TRACKER.__init__()
    forget_compat()
    yield
    ctx.forget_windows()
    ctx.TRACKER.__init__()
    forget_compat()


@pytest.fixture
def setup(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    store = LocalSessionStore(tmp_path / "data")
    manager = SessionManager(store)
    return store, manager, manager.create(ws), ws


def _chat_requests(fake):
    return [r for r in fake.requests if r["path"] == "/v1/chat/completions"]


def _check_every_request(fake, window):
    """Every request the fake received holds a user message and fits ``window`` by anycode's own
    (over-counting) estimate; none was refused. Returns how many there were."""
    requests = _chat_requests(fake)
    assert requests
    for r in requests:
        body = r["body"]
        assert r["status"] == 200, r["error"]
        assert any(m.get("role") == "user" for m in body["messages"]), "a request without a user message"
        assert ctx.estimate_tokens(body["messages"], body.get("tools")) <= window, \
            f"a request past the {window}-token window ({ctx.estimate_tokens(body['messages'], body.get('tools'))})"
    return len(requests)


def _rounds(fake, n, tag, path="big.txt"):
    for i in range(n):
        fake.push({"tool_calls": [{"name": "read_file", "arguments": {"path": path}, "id": f"call_{tag}_{i}"}],
                   "text": f"Step {i} of {tag}.", "chunk": 400})


class TestEveryRequestHoldsTheUserMessage:
    """Kind 1: a compaction in the middle of one long turn never leaves a request without the
    turn's user message."""

    def test_cut_inside_one_turn_restates_its_user_message(self):
        messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix the bug"}]
        for i in range(6):
            messages += [{"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": "x"}]
        for cut in range(2, len(messages)):
            if messages[cut]["role"] == "tool":
                continue
            entry = {**compaction_entry("S", cut, tokens_before=None, tokens_after=None, model=None,
                                        trigger="auto"), "at": len(messages)}
            view = model_view(messages, [entry])
            assert [m for m in view if m["role"] == "user"] == [{"role": "user", "content": "fix the bug"}]
            assert view[1]["role"] == "user"  # right after the summary, before the kept rounds

    @pytest.mark.parametrize("window", [4096, 8192])
    def test_two_hundred_rounds_in_one_turn_and_across_turns(self, fake_openai, setup, monkeypatch, window):
        """≥ 200 tool rounds in one turn, then 20 turns of 10 rounds, on a Qwen3-like server
        with the window known in advance: no request lacks the user message, none passes the
        window, the session takes every message."""
        store, manager, session, ws = setup
        (ws / "big.txt").write_text("A line of the log file with a few words in it.\n" * 40)
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", str(window))
        fake_openai.quirk = "require_user"
        fake_openai.context_limit = window
        _rounds(fake_openai, 210, "long")
        fake_openai.push({"text": "Done with the long task."})
        events = list(run_session_stream(session.key, store, "Read big.txt again and again.",
                                         client=fake_openai.client(), model=MODEL, max_iterations=400))
        assert sum(isinstance(e, CompactionFinished) for e in events) >= 3
        stored = manager.get(session.key)
        assert stored.messages[-1] == {"role": "assistant", "content": "Done with the long task."}
        for turn in range(20):
            _rounds(fake_openai, 10, f"t{turn}")
            fake_openai.push({"text": f"Turn {turn} done."})
            run_session(session.key, store, f"Turn {turn}: read big.txt ten times.",
                        client=fake_openai.client(), model=MODEL, max_iterations=20)
        stored = manager.get(session.key)
        assert stored.messages[-1] == {"role": "assistant", "content": "Turn 19 done."}
        assert sum(m["role"] == "tool" for m in stored.messages) == 410
        assert _check_every_request(fake_openai, window) > 410


class TestNoRequestPastTheWindow:
    """Kind 2: summary, title and memory requests fit the window too; a summary is capped; a
    session never ends up unable to take a message."""

    def test_summary_that_ignores_the_length_limit(self, fake_openai, setup, monkeypatch):
        store, manager, session, ws = setup
        window = 4096
        (ws / "big.txt").write_text("Some log output for the model to read.\n" * 40)
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", str(window))
        fake_openai.context_limit = window
        # A small model writing ten times the words it was allowed, every time.
        for _ in range(40):
            fake_openai.push({"text": "Summary: " + "the user wants the logs read and kept. " * 250}, kind="summary")
        _rounds(fake_openai, 60, "s")
        fake_openai.push({"text": "All read."})
        run_session(session.key, store, "Read big.txt many times.", client=fake_openai.client(), model=MODEL,
                    max_iterations=80)
        stored = manager.get(session.key)
        assert stored.messages[-1]["content"] == "All read."
        assert stored.compactions
        for c in stored.compactions:
            assert ctx.estimate_text_tokens(c["summary"]) <= summary_cap(window) + 8
        _check_every_request(fake_openai, window)
        # The summary requests themselves, which re-send the running summary, fit too.
        summaries = fake_openai.chat_requests("summary")
        assert summaries and all(ctx.estimate_tokens(b["messages"]) <= window for b in summaries)

    def test_huge_imported_summary_does_not_stick_the_session(self, fake_openai, setup, monkeypatch):
        """A summary far bigger than the window (imported from another tool): the next message is
        answered, and the summary request that folds it in fits the window."""
        store, manager, session, ws = setup
        window = 4096
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", str(window))
        fake_openai.context_limit = window
        run_session(session.key, store, "hello", client=fake_openai.client(), model=MODEL, tools=[])
        count = len(manager.get(session.key).messages)
        manager.add_compaction(session.key, compaction_entry("Imported summary. " * 3000, count - 1,
                                                             tokens_before=None, tokens_after=None,
                                                             model=None, trigger="auto"), count)
        for n in range(6):
            run_session(session.key, store, f"message {n}: " + "tell me more about it. " * 60,
                        client=fake_openai.client(), model=MODEL, tools=[])
        stored = manager.get(session.key)
        assert stored.messages[-1]["content"].startswith("You said: message 5")
        _check_every_request(fake_openai, window)

    def test_title_and_memory_requests_fit_a_small_window(self, fake_openai, setup, monkeypatch):
        store, manager, session, ws = setup
        window = 2048
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", str(window))
        monkeypatch.setenv("ANYCODE_MEMORY", "auto")
        fake_openai.context_limit = window
        events = list(run_session_stream(session.key, store, "Convention: tabs. " + "x" * 5000,
                                         client=fake_openai.client(), model=MODEL, tools=[]))
        for e in events:
            if isinstance(e, (TitleStarted, MemoryStarted)):
                e.thread.join(10)
        title = fake_openai.chat_requests("title")
        memory = fake_openai.chat_requests("memory")
        assert title and memory
        for body in [*title, *memory]:
            assert ctx.estimate_tokens(body["messages"]) <= window
        assert manager.get(session.key).title_source == "llm"


class TestQuirkLearntUnderConcurrency:
    """Kind 5: the title and the memory job both hit a model refusing ``temperature`` at once;
    each retries without it (the decision rests on its own failed request)."""

    def test_title_and_memory_at_once_repeated(self, fake_openai, tmp_path, monkeypatch):
        monkeypatch.setenv("ANYCODE_MEMORY", "auto")
        fake_openai.quirk = "no_sampling"
        fake_openai.allow_rejections = True  # the refusals are the point
        fake_openai.refusal_delay = 0.2      # both requests are in flight before either is refused
        store = LocalSessionStore(tmp_path / "data")
        manager = SessionManager(store)
        (tmp_path / "ws").mkdir()
        for n in range(4):
            forget_compat()
            session = manager.create(tmp_path / "ws")
            threads = []
            for e in run_session_stream(session.key, store, f"Convention: run {n} uses tabs.",
                                        client=fake_openai.client(), model=MODEL, tools=[]):
                if isinstance(e, (TitleStarted, MemoryStarted)):
                    threads.append(e.thread)
            for t in threads:
                t.join(10)
            stored = manager.get(session.key)
            assert stored.title_source == "llm" and stored.title.startswith(f"Chat: Convention: run {n}"), n
            answered = [r for r in fake_openai.requests if r["path"] == "/v1/chat/completions"
                        and r["status"] == 200 and fake_openai._kind(r["body"]) == "memory"]
            assert len(answered) == n + 1, n


class TestSubagentsKeepToTheWindow:
    """Kinds 1 and 2 for a sub-agent's own long run: its requests are compacted like the main
    conversation's (its record gets the compaction entries) and each holds its task."""

    def test_sixty_rounds_in_a_sub_agent(self, fake_openai, setup, monkeypatch):
        store, manager, session, ws = setup
        window = 4096
        (ws / "big.txt").write_text("A line of the log file with a few words in it.\n" * 40)
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", str(window))
        monkeypatch.setenv("ANYCODE_SUBAGENT_MAX_ITERATIONS", "80")
        fake_openai.quirk = "require_user"
        fake_openai.context_limit = window
        fake_openai.push({"tool_calls": [{"name": "task", "id": "call_task",
                                          "arguments": {"description": "Read", "prompt": "Read big.txt often."}}]},
                         {"text": "The sub-agent is done."})
        for i in range(60):
            fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"},
                                              "id": f"call_sub_{i}"}], "chunk": 400}, kind="subagent")
        fake_openai.push({"text": "Read it sixty times."}, kind="subagent")
        run_session(session.key, store, "Have a sub-agent read big.txt.", client=fake_openai.client(), model=MODEL)
        stored = manager.get(session.key)
        assert stored.messages[-1] == {"role": "assistant", "content": "The sub-agent is done."}
        assert stored.messages[-2]["content"] == "Read it sixty times."
        from core.session.subagents import find_record
        from core.session.compaction import compactions_of
        assert compactions_of(find_record(store, session.key, "call_task").entries)
        _check_every_request(fake_openai, window)


class TestDividerFigures:
    """Kind 6: the compaction divider never shows "after" larger than "before" and says which
    figures are estimates, whatever the server's usage numbers."""

    @pytest.mark.parametrize("factor", [0.05, 1.0])
    def test_wrong_or_right_usage_never_reads_backwards(self, fake_openai, setup, monkeypatch, factor):
        from webui.render.rows import summary_divider

        store, manager, session, ws = setup
        (ws / "big.txt").write_text("Some log output for the model to read.\n" * 40)
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "4096")
        fake_openai.usage_factor = factor  # 0.05: the server says 181 where the request held ~3,600
        _rounds(fake_openai, 30, "d")
        fake_openai.push({"text": "Done."})
        run_session(session.key, store, "Read big.txt a lot.", client=fake_openai.client(), model=MODEL,
                    max_iterations=40)
        compactions = manager.get(session.key).compactions
        assert compactions
        for c in compactions:
            sizes = shown_sizes(c)
            assert sizes is not None and sizes[1] < sizes[0]
            note = summary_divider(c)["content"].split("\n\n")[0]
            before, after = note.split("(")[1].split(" tokens")[0].split(" → ")
            assert int(before.strip("~").replace(",", "")) > int(after.strip("~").replace(",", ""))
            assert after.startswith("~") and "estimate" in note  # "after" is always anycode's estimate

    def test_stored_figures_that_read_backwards_are_not_shown(self):
        from webui.render.rows import summary_divider

        entry = compaction_entry("S", 3, tokens_before=181, tokens_after=1039, model="m", trigger="auto")
        note = summary_divider(entry)["content"]
        assert "1,039" not in note and "1039" not in note and "→" not in note
        entry = compaction_entry("S", 3, tokens_before=9000, tokens_after=2000, model="m", trigger="auto",
                                 estimated=["after"])
        note = summary_divider(entry)["content"]
        assert "9,000 → ~2,000" in note and "estimate" in note
