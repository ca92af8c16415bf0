"""The page to share (issue 31, item 16; webui.chat.share_page) as plain functions."""
from __future__ import annotations

from core.session.keys import SessionKey
from core.session.models import Session
from webui.chat.share_page import reply_html, session_to_html


def session(messages, **kw):
    return Session(key=SessionKey("p", "s1"), title="T", messages=messages, created_at=1.8e9, updated_at=1.8e9, **kw)


class TestSharePage:
    """Guards against the shared page rendering a reply differently from the chat (raw HTML as
    markup, tables lost), dropping tool steps or summaries, or leaving the system prompt in."""

    def test_reply_as_the_page_renders_it(self):
        out = reply_html("| a | b |\n|---|---|\n| 1 | 2 |\n\n<b>bold?</b> **yes**\n\n```js\nlet x = 1\n```")
        assert "<table>" in out and "<strong>yes</strong>" in out and "<b>" not in out
        assert 'class="hl"' in out

    def test_tools_summaries_and_system(self):
        msgs = [{"role": "system", "content": "SECRET SYSTEM PROMPT"},
                {"role": "user", "content": "list"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": '{"path": "."}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
                {"role": "assistant", "content": "done"}]
        page = session_to_html(session(msgs, compactions=[{"first_kept_index": 1, "summary": "**earlier**"}]),
                               version=(2, 3, True), tags=["x"])
        assert "SECRET" not in page
        assert "<details><summary>Tool call <code>list_files</code>" in page and "a.py" in page
        assert "Earlier messages were summarised" in page and "<strong>earlier</strong>" in page
        assert "Version 2 of 3" in page and "#x" in page
        assert "@media (prefers-color-scheme: dark)" in page


class TestSharedPageEscapesTypedHtml:
    """Guards against the page to share doing what the Markdown export did (trial): a typed
    ``<script>`` or ``<img onerror>`` in a message becoming live HTML in the page."""

    def test_user_and_assistant_html_is_text(self):
        typed = "<script>alert(1)</script> <img src=x onerror=alert(1)> <b>bold?</b>"
        page = session_to_html(session([{"role": "user", "content": typed},
                                        {"role": "assistant", "content": "ok " + typed}]))
        body = page[page.index("<body"):]
        assert "<script>alert" not in body and "<img src=x" not in body and "<b>bold?" not in body
        assert body.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2


class TestSharedPageLanguage:
    """Guards against the page of an English (or Chinese) chat saying ``lang="und"`` (trial 7):
    screen readers read it in the wrong voice."""

    def test_the_conversation_language_or_und(self):
        english = [{"role": "user", "content": "Please explain how the cache invalidation works in this service."},
                   {"role": "assistant", "content": "The cache entries expire after five minutes, and every write clears them."}]
        chinese = [{"role": "user", "content": "请解释一下这个服务里的缓存是怎样失效的，谢谢。"},
                   {"role": "assistant", "content": "缓存条目五分钟后过期，每次写入都会清除它们。"}]
        assert '<html lang="en">' in session_to_html(session(english))
        assert '<html lang="zh-Hans">' in session_to_html(session(chinese))
        assert '<html lang="und">' in session_to_html(session([{"role": "user", "content": "ok"}]))


class TestSharedPageMasksCredentials:
    """Guards against the page made to share carrying credentials a tool read (API keys, cloud
    secrets, passwords), folded out of sight in a tool step: every message, tool argument and tool
    result goes through the memory's secret finder, and the page says how many values it masked."""

    def test_every_text_is_masked_and_counted(self):
        env = ("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w\n"
               "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
               "DATABASE_URL=postgres://app:s3cr3t-pass@db.internal:5432/app\n"
               "DEBUG=true\n")
        msgs = [{"role": "user", "content": "the wifi password is sunflower, please check my .env"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": ".env"}'}},
                    {"id": "c2", "type": "function", "function": {
                        "name": "write_file",
                        "arguments": '{"path": "ci.env", "content": "GITHUB_TOKEN=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": env},
                {"role": "tool", "tool_call_id": "c2", "content": "wrote ci.env"},
                {"role": "assistant", "content": "Your key `sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w` is set; DEBUG is on."}]
        page = session_to_html(session(msgs))
        for secret in ("sunflower", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w", "wJalrXUtnFEMI", "s3cr3t-pass",
                       "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"):
            assert secret not in page, secret
        assert "DEBUG=true" in page and "OPENAI_API_KEY=[hidden]" in page and "wrote ci.env" in page
        assert "6 values that looked like a password, key or token were replaced by <code>[hidden]</code>" in page

    def test_a_clean_chat_says_nothing_about_masking(self):
        page = session_to_html(session([{"role": "user", "content": "use a token bucket"},
                                        {"role": "assistant", "content": "the password policy requires 12 characters"}]))
        assert "[hidden]" not in page and 'class="masked"' not in page
