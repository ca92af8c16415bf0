"""Model-written text follows the conversation's language (issue 20): titles, compaction summaries
and memories are asked for in the language the user writes in, against the fake OpenAI server's
request log; and they read the session as the model sees it (the compacted view), so a long
session never overflows the title or memory request."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from core import LocalSessionStore, SessionManager
from core.agent import context as ctx
from core.agent.compaction import compact_session
from core.agent.language import conversation_language, detect_language
from core.agent.memory_job import extract_memories
from core.agent.runner import run_session, run_session_stream
from core.agent.events import TitleStarted
from core.agent.titles import MAX_REQUEST_CHARS, title_request_messages
from core.session.compaction import compaction_entry
from tests.support.storage import storage_of

MODEL = "gpt-4o-mini"
CHINESE = "请帮我写一个解析 CSV 文件的函数，要处理引号里的逗号。"
JAPANESE = "CSVファイルを読み込む関数を書いてください。引用符の中のカンマも扱ってほしいです。"


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.delenv("ANYCODE_CONTEXT_WINDOW", raising=False)
    monkeypatch.delenv("ANYCODE_MEMORY", raising=False)
    ctx.forget_windows()
    yield
    ctx.forget_windows()


@pytest.fixture
def env(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    store = LocalSessionStore(tmp_path / "home")
    return store, SessionManager(store), ws


def system_text(body: dict) -> str:
    return body["messages"][0]["content"]


class TestDetection:
    """Guards against a Chinese conversation read as English because of the code in it, Japanese
    read as Chinese (they share characters), or a guess made from two words."""

    @pytest.mark.parametrize("text,code", [
        (CHINESE, "zh-Hans"),
        ("請幫我看這個問題，程式一直報錯。", "zh-Hant"),
        (JAPANESE, "ja"),
        ("파이썬에서 CSV 파일을 읽는 방법을 알려주세요", "ko"),
        ("¿Cómo puedo leer un archivo CSV en Python sin perder las comillas?", "es"),
        ("Please fix the login bug in auth.py, the password check is inverted.", "en"),
        ("Привет, помоги мне исправить ошибку в коде, пожалуйста", "ru"),
        ("帮我修复 core.jsonl_io.parse_line 的 bug，报错是 ValueError: bad line in parse_line()", "zh-Hans"),
        ("这个报错是什么意思？\n```\nTraceback (most recent call last):\n  File \"app.py\", line 3, in main\n"
         "ValueError: invalid literal for int() with base 10: 'abc'\n```", "zh-Hans"),
    ])
    def test_languages(self, text, code):
        found = detect_language(text)
        assert found is not None and found.code == code

    @pytest.mark.parametrize("text", ["fix bug", "ok", "```python\nprint('x')\n```", "🚀🚀", ""])
    def test_too_little_says_nothing(self, text):
        assert detect_language(text) is None

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=300))
    def test_any_text_gives_a_language_or_none(self, text):
        found = detect_language(text)
        assert found is None or (found.code and found.name)

    def test_a_huge_paste_does_not_stall_the_request(self):
        """(A pattern that backtracked on one long run of letters once took minutes on 100 kB.)"""
        blob = "x" * 300_000
        assert detect_language(blob) is None
        assert conversation_language([{"role": "user", "content": f"请看这个文件\n{blob}"}]).code.startswith("zh")

    def test_a_question_above_a_pasted_english_log(self):
        log_lines = "\n".join(f"2026-11-30 21:{i:02d}:07 ERROR worker failed to connect to the database server, "
                              "retrying in five seconds because the connection was refused" for i in range(30))
        messages = [{"role": "user", "content": f"这个日志是什么意思？为什么一直连不上？\n{log_lines}"}]
        assert conversation_language(messages).code == "zh-Hans"
        messages = [{"role": "user", "content": f"{log_lines}\nこのログはどういう意味ですか？"}]
        assert conversation_language(messages).code == "ja"

    def test_the_users_messages_decide_not_the_replies(self):
        messages = [{"role": "system", "content": "You are anycode, a helpful assistant."},
                    {"role": "user", "content": JAPANESE},
                    {"role": "assistant", "content": "Sure, here is a function that reads CSV files with quotes."}]
        assert conversation_language(messages).code == "ja"


def _title_request(fake, store, key, text):
    threads = [e.thread for e in run_session_stream(key, store, text, client=fake.client(), model=MODEL)
               if isinstance(e, TitleStarted)]
    for t in threads:
        t.join(10)
    [body] = fake.chat_requests("title")
    return body


class TestTitlesFollowTheConversation:
    """Guards against a conversation held in Chinese or Japanese getting an English title
    (the fake server's chat replies are English: the user's language must decide)."""

    @pytest.mark.parametrize("text,name", [(CHINESE, "Chinese"), (JAPANESE, "Japanese")])
    def test_title_request_names_the_language(self, fake_openai, env, text, name, monkeypatch):
        monkeypatch.setenv("ANYCODE_MEMORY", "off")
        store, manager, ws = env
        session = manager.create(ws)
        body = _title_request(fake_openai, store, session.key, text)
        assert f"Write the title in {name}" in system_text(body)
        assert "English" not in system_text(body)

    def test_english_stays_english(self, fake_openai, env, monkeypatch):
        monkeypatch.setenv("ANYCODE_MEMORY", "off")
        store, manager, ws = env
        session = manager.create(ws)
        body = _title_request(fake_openai, store, session.key, "Please write a function that parses CSV files.")
        assert "Write the title in English" in system_text(body)

    def test_undecided_still_asks_for_the_conversations_language(self):
        [system, *_] = title_request_messages([{"role": "user", "content": "fix bug"}])
        assert "same language as the conversation" in system["content"]


class TestSummaryAndMemoryFollowTheConversation:
    """Guards against a Chinese or Japanese conversation compacted into an English summary, or its
    memories written in English."""

    @pytest.mark.parametrize("text,name", [(CHINESE, "Chinese"), (JAPANESE, "Japanese")])
    def test_compaction_summary_names_the_language(self, fake_openai, env, text, name):
        store, manager, ws = env
        session = manager.create(ws)
        manager.add_messages(session.key, [
            {"role": "system", "content": "You are anycode."},
            {"role": "user", "content": text}, {"role": "assistant", "content": "OK, here it is."},
            {"role": "user", "content": text}, {"role": "assistant", "content": "Done."}])
        list(compact_session(session.key, store, client=fake_openai.client(), model=MODEL))
        [body] = fake_openai.chat_requests("summary")
        assert f"Write the summary in {name}" in system_text(body)
        assert manager.get(session.key).compactions  # it was stored

    @pytest.mark.parametrize("text,name", [(CHINESE, "Chinese"), (JAPANESE, "Japanese")])
    def test_memory_request_names_the_language(self, fake_openai, env, text, name, monkeypatch):
        store, manager, ws = env
        session = manager.create(ws)
        fake_openai.push({"text": '{"add": [], "remove": []}'}, kind="memory")
        run_session(session.key, store, text, client=fake_openai.client(), model=MODEL, wait_for_memory=10)
        [body] = fake_openai.chat_requests("memory")
        assert f"Write each fact in {name}" in system_text(body)


class TestCompactedView:
    """Guards against the title and memory requests sending a long session's whole raw history
    (overflowing the model's window) instead of what compaction sends the model."""

    def _long_session(self, manager, ws, n=120):
        session = manager.create(ws)
        messages = [{"role": "system", "content": "You are anycode."}]
        for i in range(n):
            messages += [{"role": "user", "content": f"OLD-{i} " + "please read the logs " * 60},
                         {"role": "assistant", "content": f"Reply {i}: " + "the logs say nothing " * 60}]
        manager.add_messages(session.key, messages)
        cut = len(messages) - 2
        manager.add_compaction(session.key, compaction_entry(
            "SUMMARY-TEXT: the user is chasing a crash in the log reader.", cut, tokens_before=90_000,
            tokens_after=500, model=MODEL, trigger="auto"), len(messages))
        messages += [{"role": "user", "content": "NEW question about the crash"},
                     {"role": "assistant", "content": "NEW answer"}]
        manager.add_messages(session.key, messages[-2:])
        return manager.get(session.key)

    def test_title_request_reads_the_summary_and_the_kept_messages(self, env):
        store, manager, ws = env
        session = self._long_session(manager, ws)
        request = title_request_messages(session.messages, session.compactions)
        text = "\n".join(m["content"] for m in request)
        assert "SUMMARY-TEXT" in text and "NEW question" in text and "OLD-0 " not in text
        raw = title_request_messages(session.messages)  # without the view: capped all the same
        assert sum(len(m["content"]) for m in raw[1:]) <= MAX_REQUEST_CHARS

    def test_title_thread_of_a_compacted_session_sends_the_view(self, fake_openai, env, monkeypatch):
        monkeypatch.setenv("ANYCODE_MEMORY", "off")
        store, manager, ws = env
        session = self._long_session(manager, ws)
        _title_request(fake_openai, store, session.key, "one more question")
        body = fake_openai.chat_requests("title")[0]
        sent = str(body["messages"])
        assert "SUMMARY-TEXT" in sent and "OLD-3 " not in sent

    def test_memory_request_of_an_exchange_whose_start_was_summarised(self, fake_openai, env):
        store, manager, ws = env
        session = manager.create(ws)
        messages = [{"role": "system", "content": "You are anycode."},
                    {"role": "user", "content": "START-OF-EXCHANGE " + "x" * 100}]
        for i in range(30):
            messages += [{"role": "assistant", "content": f"step {i} " + "working " * 200}]
        manager.add_messages(session.key, messages)
        manager.add_compaction(session.key, compaction_entry("SUMMARY-OF-START", 20, tokens_before=9000,
                                                             tokens_after=900, model=MODEL, trigger="auto"),
                               len(messages))
        session = manager.get(session.key)
        fake_openai.push({"text": '{"add": [], "remove": []}'}, kind="memory")
        extract_memories(storage_of(store).memories, session.project_key, session.id, session.messages,
                         client=fake_openai.client(), model=MODEL, compactions=session.compactions)
        [body] = fake_openai.chat_requests("memory")
        asked = body["messages"][1]["content"]
        assert "SUMMARY-OF-START" in asked and "START-OF-EXCHANGE" not in asked and "step 29" in asked
        assert len(asked) < 20_000
