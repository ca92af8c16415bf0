"""LLM titles: clean one-line titles, the fallback, and a user's title always winning."""
from __future__ import annotations

import re
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from core import SessionManager
from core.agent.prompts import TITLE_PROMPT
from core.agent.runner import run_session_stream
from core.agent.events import TitleStarted
from core.agent.titles import (clean_title, fallback_title, generate_title, start_title_generation,
                         title_request_messages)

MODEL = "gpt-4o-mini"
FALLBACK = re.compile(r"^Session \d{4}-\d{2}-\d{2} \d{2}:\d{2}$")
CONVERSATION = [
    {"role": "system", "content": "You are anycode."},
    {"role": "user", "content": "Please fix the login bug in auth.py"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "auth.py"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "SECRET FILE CONTENT"},
    {"role": "assistant", "content": "Fixed: the password check was inverted."},
]


class TestCleanTitle:
    """Guards against raw model output (quotes, markdown, prefixes, several lines) becoming the title."""

    @pytest.mark.parametrize("raw,clean", [
        ('"Fix the login bug"', "Fix the login bug"),
        ("'Fix the login bug'", "Fix the login bug"),
        ("“Fix the login bug”", "Fix the login bug"),
        ("Title: Fix the login bug", "Fix the login bug"),
        ('**Title:** "Fix the login bug."', "Fix the login bug"),
        ("# Fix the login bug", "Fix the login bug"),
        ("*Fix the `auth.py` login bug*", "Fix the auth.py login bug"),
        ("\n\nTitle:\nFix the login bug\nThis conversation is about...", "Fix the login bug"),
        ("- Fix the login bug\n- Other idea", "Fix the login bug"),
        ("<think>the user wants a title</think>\nFix the login bug", "Fix the login bug"),
        ("Refactor parse_args in cli_main", "Refactor parse_args in cli_main"),
        ("one two three four five six seven eight nine ten eleven twelve",
         "one two three four five six seven eight nine ten"),
        ("", ""), ("   \n  ", ""), ('""', ""), ("Title:", ""), (None, ""),
    ])
    def test_cases(self, raw, clean):
        assert clean_title(raw) == clean

    def test_long_words_capped_to_100_chars(self):
        assert len(clean_title("Supercalifragilistic " * 8)) <= 100
        assert clean_title("x" * 300) == "x" * 100

    @settings(max_examples=300, deadline=None)
    @given(st.text())
    def test_any_answer_gives_one_short_plain_line(self, raw):
        title = clean_title(raw)
        assert "\n" not in title and "\r" not in title
        assert len(title) <= 100 and len(title.split()) <= 10
        assert title == title.strip()


class TestGenerateTitle:
    """Guards against the title request leaking tool data, or a failed request leaving no title."""

    def test_request_shape(self, fake_openai):
        fake_openai.push({"text": "Login bug fix"}, kind="title")
        assert generate_title(CONVERSATION, client=fake_openai.client(), model="title-model") == "Login bug fix"
        body = fake_openai.chat_requests("title")[0]
        assert body["model"] == "title-model" and body["temperature"] == 0.3
        assert "tools" not in body and not body.get("stream")
        assert body["messages"] == [
            {"role": "system", "content": TITLE_PROMPT + "\nWrite the title in English, the language of the conversation."},
            {"role": "user", "content": "Please fix the login bug in auth.py"},
            {"role": "assistant", "content": "Fixed: the password check was inverted."},
        ]
        assert "SECRET FILE CONTENT" not in str(body)

    @pytest.mark.parametrize("reply", [{"error": 500}, {"error": 429}, {"text": ""}, {"text": '"  "'}])
    def test_failure_gives_fallback(self, fake_openai, reply):
        fake_openai.push(reply, kind="title")
        assert FALLBACK.match(generate_title(CONVERSATION, client=fake_openai.client(), model=MODEL))

    def test_unreachable_gives_fallback(self, fake_openai):
        import openai
        client = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2)
        assert FALLBACK.match(generate_title(CONVERSATION, client=client, model=MODEL))

    def test_fallback_is_local_time(self):
        ts = 1_700_000_000.0
        assert fallback_title(ts) == time.strftime("Session %Y-%m-%d %H:%M", time.localtime(ts))

    def test_request_messages_skip_empty_and_parts(self):
        msgs = title_request_messages([{"role": "user", "content": [{"type": "text", "text": "part one"}]},
                                       {"role": "assistant", "content": ""}])
        assert msgs[1:] == [{"role": "user", "content": "part one"}]


def run_turn(store, key, client, text="Please fix the login bug"):
    threads = []
    for event in run_session_stream(key, store, text, client=client, model=MODEL):
        if isinstance(event, TitleStarted):
            threads.append(event.thread)
    for thread in threads:
        thread.join(10)
    return threads


class TestStoredTitle:
    """Guards against an unclean, missing or user-overriding title after the first exchange."""

    @pytest.mark.parametrize("answer,expected", [
        ('"Fixing the Login Bug"', "Fixing the Login Bug"),
        ("**Title:** Login bug fix.\n\nThe user asked about...", "Login bug fix"),
        ("## Login bug\nmore", "Login bug"),
    ])
    def test_llm_title_stored_clean(self, fake_openai, store, session, answer, expected):
        fake_openai.push({"text": answer}, kind="title")
        threads = run_turn(store, session.key, fake_openai.client())
        assert len(threads) == 1
        got = SessionManager(store).get(session.key)
        assert (got.title, got.title_source) == (expected, "llm")

    def test_error_stores_fallback(self, fake_openai, store, session):
        fake_openai.push({"error": 500}, kind="title")
        run_turn(store, session.key, fake_openai.client())
        got = SessionManager(store).get(session.key)
        assert FALLBACK.match(got.title) and got.title_source == "fallback"

    def test_only_after_first_exchange(self, fake_openai, store, session):
        client = fake_openai.client()
        assert len(run_turn(store, session.key, client)) == 1
        assert run_turn(store, session.key, client, "and another thing") == []
        assert len(fake_openai.chat_requests("title")) == 1

    def test_user_rename_beforehand_survives(self, fake_openai, store, session):
        SessionManager(store).rename(session.key, "My own name")
        fake_openai.push({"text": "Model name"}, kind="title")
        run_turn(store, session.key, fake_openai.client())
        got = SessionManager(store).get(session.key)
        assert (got.title, got.title_source) == ("My own name", "user")

    def test_user_rename_while_title_in_flight_wins(self, fake_openai, store, session):
        manager = SessionManager(store)
        manager.add_messages(session.key, CONVERSATION)
        fake_openai.push({"text": "Model name", "wait": 0.5}, kind="title")
        done = threading.Event()
        outcome = {}

        def on_done(title, source, applied):
            outcome.update(title=title, source=source, applied=applied)
            done.set()

        thread = start_title_generation(manager, session.key, CONVERSATION, client=fake_openai.client(),
                                        model=MODEL, on_done=on_done)
        assert thread.daemon and thread.is_alive()  # the caller was not held up
        manager.rename(session.key, "Renamed meanwhile")
        thread.join(10)
        assert done.is_set() and outcome["title"] == "Model name"
        got = manager.get(session.key)
        assert (got.title, got.title_source) == ("Renamed meanwhile", "user")
