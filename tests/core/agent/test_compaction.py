"""Sessions never dead-end: context-window accounting and automatic compaction (issue 9).

Against the fake OpenAI server with a strict context limit (HTTP 400 ``context_length_exceeded``
in OpenAI's format, or the way llama.cpp-based servers fail), real HTTP, a real JSONL store.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager
from core.agent import context as ctx
from core.agent.compaction import cut_text, plan_cut
from core.agent.events import CompactionFinished, CompactionStarted
from core.agent.runner import run_session, run_session_stream
from core.errors import CompactionFailed, ModelContextExceeded
from core.session.compaction import compactions_of, model_view
from tests.support.fake_openai import count_tokens

ROOT = Path(__file__).resolve().parents[3]
MODEL = "gpt-4o-mini"


@pytest.fixture(autouse=True)
def fresh_accounting(monkeypatch):
    """Windows and server counts are cached per process; each test starts from nothing."""
    monkeypatch.delenv("ANYCODE_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("ANYCODE_COMPACT_AT", raising=False)
    # These tests count and read the chat requests; the memory job's background requests
    # (issue 14) would land among them at random.
    monkeypatch.setenv("ANYCODE_MEMORY", "off")
    ctx.forget_windows()
    ctx.TRACKER.__init__()
    yield
    ctx.forget_windows()
    ctx.TRACKER.__init__()


@pytest.fixture
def setup(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    store = LocalSessionStore(tmp_path / "data")
    manager = SessionManager(store)
    session = manager.create(ws)
    return store, manager, session, ws


def _round(fake, n: int, path: str = "big.txt"):
    fake.push({"tool_calls": [{"name": "read_file", "arguments": {"path": path}, "id": f"call_r{n}"}]},
              {"text": f"Read it, round {n}."})


def _chat_bodies(fake):
    return [r for r in fake.requests if r["path"] == "/v1/chat/completions"]


class TestWindow:
    """The window comes from the setting, the server, what the server said, or a family table."""

    def test_env_wins(self, fake_openai, monkeypatch):
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "8k")
        fake_openai.context_limit, fake_openai.window_api = 4000, "vllm"
        assert ctx.context_window(fake_openai.client(), MODEL) == ctx.Window(8000, "env")

    @pytest.mark.parametrize("api", ["vllm", "llamacpp", "lmstudio", "ollama"])
    def test_server_says(self, fake_openai, api):
        fake_openai.context_limit, fake_openai.window_api = 6000, api
        window = ctx.context_window(fake_openai.client(), MODEL)
        assert (window.tokens, window.source) == (6000, "server")
        if api == "ollama":  # num_ctx in effect is below what the model takes: the user is told
            assert "num_ctx" in window.note and "OLLAMA_CONTEXT_LENGTH" in window.note

    def test_family_then_default(self, fake_openai):
        assert ctx.context_window(fake_openai.client(), MODEL) == ctx.Window(128_000, "family")
        assert ctx.context_window(fake_openai.client(), "my-own-model").tokens == ctx.DEFAULT_WINDOW

    def test_learnt_window_survives_a_restart(self, fake_openai, anycode_home):
        ctx.remember_window(fake_openai.client().base_url, MODEL, 3000)
        path = anycode_home / ctx.WINDOWS_FILE
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        code = ("from core.agent import context as c; import openai, sys;"
                f"print(c.context_window(openai.OpenAI(api_key='x', base_url='{fake_openai.base_url}'), '{MODEL}'))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
        assert "tokens=3000, source='learnt'" in out.stdout, out.stderr

    def test_overflow_messages_of_real_servers(self):
        openai_style = ctx.overflow_error(400, "This model's maximum context length is 8192 tokens. However, your "
                                               "messages resulted in 9000 tokens.",
                                          {"error": {"code": "context_length_exceeded"}})
        assert (openai_style.window, openai_style.requested) == (8192, 9000)
        llama = ctx.overflow_error(500, "the request exceeds the available context size, try increasing it",
                                   {"error": {"type": "exceed_context_size_error", "n_ctx": 2048,
                                              "n_prompt_tokens": 2300}})
        assert (llama.window, llama.requested) == (2048, 2300)
        assert ctx.overflow_error(None, "Requested tokens (2100) exceed context window of 2048").window == 2048
        assert ctx.overflow_error(400, "model 'x' not found") is None
        assert "check the model name" not in str(openai_style)


class TestEstimate:
    """The estimate must never under-count what a real tokenizer sees, or requests overflow."""

    def test_over_counts_english_code_and_cjk(self):
        english = "The quick brown fox jumps over the lazy dog while reading config.py line 42. " * 50
        assert ctx.estimate_text_tokens(english) >= len(english) / 4
        chinese = "压缩后的消息依然属于会话层，需要在进程退出前持久化。" * 20
        assert ctx.estimate_text_tokens(chinese) >= len(chinese)

    def test_estimate_covers_the_fake_servers_count(self):
        msgs = [{"role": "user", "content": "x" * 3000}, {"role": "assistant", "content": "y" * 500}]
        assert ctx.estimate_tokens(msgs) >= count_tokens({"messages": msgs})

    def test_short_labels(self):
        assert ctx.Usage(42_000, 128_000, True).label() == "42k / 128k"
        assert ctx.Usage(950, 2048, False).label() == "~950 / 2k"


class TestCut:
    """Where the older part ends: never between a tool call and its results."""

    def test_never_splits_a_call_from_its_results(self):
        msgs = [{"role": "system", "content": "s"}]
        for n in range(6):
            msgs += [{"role": "user", "content": f"q{n}"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{n}", "content": "z" * 3000},
                     {"role": "assistant", "content": f"a{n}"}]
        for keep in (10, 500, 1200, 2500, 5000):
            cut = plan_cut(msgs, 0, keep)
            assert cut is not None and msgs[cut]["role"] in ("user", "assistant")
        assert plan_cut(msgs[:2], 0, 10) is None  # only the system prompt and one message: nothing to summarise

    def test_cut_text_marks_the_cut(self):
        text = "a" * 30_000
        cut = cut_text(text, 1000)
        assert "characters cut here by anycode" in cut and ctx.estimate_text_tokens(cut) <= 1100


class TestLongSession:
    """A session carried on past the window: before issue 9 every later send failed forever."""

    def test_forty_rounds_with_long_tool_output(self, fake_openai, setup, tmp_path):
        store, manager, session, ws = setup
        (ws / "big.txt").write_text("line of a long log file with numbers 0123456789\n" * 60)  # ~3 KB
        fake_openai.context_limit, fake_openai.window_api = 4000, "vllm"
        first_compaction = None
        for n in range(40):
            _round(fake_openai, n)
            events = list(run_session_stream(session.key, store, f"Please read big.txt again ({n})",
                                             client=fake_openai.client(), model=MODEL))
            if first_compaction is None and any(isinstance(e, CompactionFinished) for e in events):
                first_compaction = len(_chat_bodies(fake_openai))
        assert first_compaction is not None
        got = manager.get(session.key)
        # Every round completed and the file holds every message: system + 40 × (user, call, result, text).
        assert len(got.messages) == 1 + 40 * 4
        assert [m["content"] for m in got.messages if m["role"] == "assistant" and m["content"]] == \
            [f"Read it, round {n}." for n in range(40)]
        assert len(got.compactions) >= 3
        chats = [r for r in _chat_bodies(fake_openai) if r["status"] == 200]
        assert not fake_openai.rejected()
        assert max(count_tokens(r["body"]) for r in chats) <= 4000
        # Each compaction stands on its own: the later summaries continue the earlier ones.
        assert all(c["first_kept_index"] > p["first_kept_index"] for p, c in zip(got.compactions, got.compactions[1:]))

        # A new process resumes from the summary, not from the whole history.
        last = got.compactions[-1]
        code = f"""
import sys, json
from core import LocalSessionStore, SessionKey
from core.agent.runner import run_session
import openai
store = LocalSessionStore({str(tmp_path / 'data')!r})
key = SessionKey({session.key.project_key!r}, {session.id!r})
s = run_session(key, store, "And now?", client=openai.OpenAI(api_key='x', base_url={fake_openai.base_url!r}),
                model={MODEL!r})
print(json.dumps(s.messages[-1]))
"""
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout.strip().splitlines()[-1])["content"] == "You said: And now?"
        # The resumed request (background title/memory requests may come after it).
        resumed = next(r["body"]["messages"] for r in reversed(_chat_bodies(fake_openai))
                       if r["status"] == 200 and fake_openai._kind(r["body"]) == "chat"
                       and r["body"]["messages"][-1].get("content") == "And now?")
        after = manager.get(session.key)
        latest = after.compactions[-1]  # `last`, or a newer one if the resumed request compacted first
        assert latest["summary"] in resumed[0]["content"]
        assert resumed[1] == after.messages[latest["first_kept_index"]]
        assert len(resumed) < len(after.messages)

    def test_no_usage_server(self, fake_openai, setup):
        """A server that sends no usage: the estimate alone keeps every request inside the limit."""
        store, manager, session, ws = setup
        (ws / "big.txt").write_text("x = compute(y) + 42  # a line of code\n" * 80)
        fake_openai.context_limit, fake_openai.window_api, fake_openai.quirk = 3000, "llamacpp", "no_usage"
        for n in range(12):
            _round(fake_openai, n)
            run_session(session.key, store, f"read it ({n})", client=fake_openai.client(), model=MODEL)
        assert not fake_openai.rejected()
        assert len(manager.get(session.key).messages) == 1 + 12 * 4
        usage = ctx.context_usage(manager.get(session.key), fake_openai.client(), MODEL)
        assert not usage.exact and usage.used < 3000

    def test_usage_from_the_server_is_used(self, fake_openai, setup):
        store, manager, session, _ = setup
        fake_openai.context_limit, fake_openai.window_api = 50_000, "vllm"
        run_session(session.key, store, "hello", client=fake_openai.client(), model=MODEL)
        body = fake_openai.chat_requests()[-1]  # the chat's request, not a background title/memory one
        assert body["stream_options"] == {"include_usage": True}
        usage = ctx.context_usage(manager.get(session.key), fake_openai.client(), MODEL)
        assert usage.exact and usage.window == 50_000
        assert usage.used >= count_tokens(body)


class TestOverflowRecovery:
    """The server says the request did not fit: compact harder, retry once, never a pile of messages."""

    def _grow(self, fake, store, session, ws, rounds=4):
        (ws / "big.txt").write_text("log entry: worker 7 restarted after timeout\n" * 70)
        for n in range(rounds):
            _round(fake, n)
            run_session(session.key, store, f"read big.txt ({n})", client=fake.client(), model=MODEL)

    @pytest.mark.parametrize("style", ["openai", "http_500", "error_event", "stream_break"])
    def test_recovers_once_and_learns(self, fake_openai, setup, style, anycode_home):
        store, manager, session, ws = setup
        self._grow(fake_openai, store, session, ws)
        fake_openai.allow_rejections = True
        fake_openai.context_limit, fake_openai.context_style = 3500, style
        before = len(manager.get(session.key).messages)
        got = run_session(session.key, store, "What did the log say?", client=fake_openai.client(), model=MODEL)
        assert got.messages[-1] == {"role": "assistant", "content": "You said: What did the log say?"}
        assert [m["content"] for m in got.messages[before:]].count("What did the log say?") == 1
        assert len(got.messages) == before + 2
        assert [c["trigger"] for c in got.compactions] == ["overflow"]
        if style == "openai":  # the server named its window: remembered for next time
            learnt = json.loads((anycode_home / ctx.WINDOWS_FILE).read_text())
            assert list(learnt.values()) == [3500]
        bad = sum(1 for r in _chat_bodies(fake_openai) if r["error"] and "context" in r["error"])
        assert bad == 1  # one failed try, then the retry fitted
        run_session(session.key, store, "Thanks", client=fake_openai.client(), model=MODEL)
        assert sum(1 for r in _chat_bodies(fake_openai) if r["error"] and "context" in r["error"]) == 1

    def test_a_learnt_window_is_kept_in_the_storages_data_folder(self, fake_openai, setup, anycode_home, tmp_path):
        """``anycode --data-dir X``: the window the server named is remembered in X (the storage's
        data folder, handed to the turn), and read from there — never in ``$ANYCODE_HOME``."""
        from core.storage import Storage

        store, manager, session, ws = setup
        data = tmp_path / "given-data-dir"
        self._grow(fake_openai, store, session, ws)
        fake_openai.allow_rejections = True
        fake_openai.context_limit, fake_openai.context_style = 3500, "openai"
        run_session(session.key, store, "What did the log say?", client=fake_openai.client(), model=MODEL,
                    storage=Storage(store, data_dir=data))
        assert list(json.loads((data / ctx.WINDOWS_FILE).read_text()).values()) == [3500]
        assert not (anycode_home / ctx.WINDOWS_FILE).exists()
        ctx.forget_windows()  # as a restart: read back from that folder
        assert ctx.context_window(fake_openai.client(), MODEL, probe=False, data_dir=data).source == "learnt"

    def test_still_too_big_is_one_clear_error_not_a_loop(self, fake_openai, setup):
        store, manager, session, ws = setup
        fake_openai.allow_rejections = True
        fake_openai.context_limit = 60  # nothing useful fits
        with pytest.raises(ModelContextExceeded) as info:
            run_session(session.key, store, "hello there, a normal question", client=fake_openai.client(),
                        model=MODEL)
        assert "check the model name" not in str(info.value) and "context window" in str(info.value)
        assert len(_chat_bodies(fake_openai)) <= 2
        assert [m["role"] for m in manager.get(session.key).messages] == ["system", "user"]

    def test_huge_paste_is_cut_in_the_request_only(self, fake_openai, setup, monkeypatch):
        store, manager, session, _ = setup
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "4000")
        fake_openai.context_limit = 4000
        paste = "0123456789 abcdefghij " * 2000  # ~44 KB, far past the window
        got = run_session(session.key, store, paste, client=fake_openai.client(), model=MODEL)
        assert got.messages[1]["content"] == paste  # stored whole
        sent = fake_openai.chat_requests()[-1]["messages"][1]["content"]  # not the background title request
        assert "characters cut here by anycode" in sent
        assert got.messages[-1]["role"] == "assistant"

    def test_failed_summary_keeps_the_message_and_says_why(self, fake_openai, setup, monkeypatch):
        store, manager, session, ws = setup
        self._grow(fake_openai, store, session, ws)
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "3500")
        fake_openai.push({"error": 500}, kind="summary")
        with pytest.raises(CompactionFailed) as info:
            run_session(session.key, store, "next question", client=fake_openai.client(), model=MODEL)
        assert "Summarising the earlier messages failed" in str(info.value)
        assert "HTTP 500" in str(info.value) and "your message is kept" in str(info.value)
        got = manager.get(session.key)
        assert got.messages[-1] == {"role": "user", "content": "next question"} and got.compactions == []
        # Retrying (no new message) works once the server is back: one user message, answered.
        got = run_session(session.key, store, None, client=fake_openai.client(), model=MODEL)
        assert [m.get("content") for m in got.messages].count("next question") == 1
        assert got.messages[-1]["content"] == "You said: next question" and len(got.compactions) == 1

    def test_stop_during_compaction(self, fake_openai, setup, monkeypatch):
        store, manager, session, ws = setup
        self._grow(fake_openai, store, session, ws)
        monkeypatch.setenv("ANYCODE_CONTEXT_WINDOW", "3500")
        fake_openai.push({"text": "A long summary " * 200, "delay": 0.05}, kind="summary")
        cancel = threading.Event()
        seen = []
        for event in run_session_stream(session.key, store, "go on", client=fake_openai.client(), model=MODEL,
                                        cancel=cancel):
            seen.append(event)
            if isinstance(event, CompactionStarted):
                cancel.set()
        got = manager.get(session.key)
        assert got.compactions == [] and got.messages[-1] == {"role": "user", "content": "go on"}
        assert not any(isinstance(e, CompactionFinished) for e in seen)


class TestModelView:
    """load()/get() return everything; the model view is system + summary + kept messages."""

    def test_view_from_entries(self):
        from core.session.compaction import compaction_entry
        from core.session.entries import message_entry

        msgs = [{"role": "system", "content": "sys"}] + [{"role": "user", "content": f"u{i}"} for i in range(5)]
        entries = [message_entry(m) for m in msgs[:4]]
        entries.append(compaction_entry("S1", 2, tokens_before=1, tokens_after=1, model="m", trigger="auto"))
        entries += [message_entry(m) for m in msgs[4:]]
        entries.append(compaction_entry("S2", 4, tokens_before=1, tokens_after=1, model="m", trigger="manual"))
        comps = compactions_of(entries)
        assert [c["at"] for c in comps] == [4, 6]
        view = model_view(msgs, comps)
        assert view[0]["content"].startswith("sys") and "S2" in view[0]["content"] and "S1" not in view[0]["content"]
        assert view[1:] == msgs[4:]
        assert model_view(msgs[:4], comps[:1])[1:] == msgs[2:4]


class TestCarriedEverywhere:
    """A compaction entry lost on the way to another store would silently give the model the
    whole history again (or, worse, a different view) after a migration or from the mirror."""

    def _compacted(self, store, ws):
        from core.session.compaction import compaction_entry

        manager = SessionManager(store)
        s = manager.create(ws)
        msgs = [{"role": "system", "content": "sys"}] + [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)]
        manager.add_messages(s.key, msgs)
        manager.add_compaction(s.key, compaction_entry("S: m0..m2", 4, tokens_before=10, tokens_after=5,
                                                       model="m", trigger="auto"), expected_count=7)
        return s.key

    def test_migrate_and_mirror(self, tmp_path):
        from core.stores.migrate import migrate_sessions
        from core.stores.mirror import MirroredSessionStore
        from core.stores.sql_store import SqlSessionStore

        ws = tmp_path / "ws"
        ws.mkdir()
        source = LocalSessionStore(tmp_path / "a")
        key = self._compacted(source, ws)
        target = SqlSessionStore(f"sqlite:///{tmp_path / 'b.db'}")
        migrate_sessions(source, target)
        want = SessionManager(source).get(key)
        got = SessionManager(target).get(key)
        assert got.compactions == want.compactions and got.messages == want.messages
        assert model_view(got.messages, got.compactions) == model_view(want.messages, want.compactions)
        target.close()

        mirror = SqlSessionStore(f"sqlite:///{tmp_path / 'mirror.db'}")
        mirrored = MirroredSessionStore(LocalSessionStore(tmp_path / "c"), mirror, outbox_path=tmp_path / "outbox.sqlite3")
        try:
            key2 = self._compacted(mirrored, ws)
            assert mirrored.flush(20)
            assert [c["summary"] for c in SessionManager(mirror).get(key2).compactions] == ["S: m0..m2"]
        finally:
            mirrored.close()
            mirror.close()
