"""The Markdown export read back by a CommonMark parser (issue 28, item 12).

Guards against one message's text swallowing the rest of the export: an unclosed or typed code
fence (```` ```python ```` with no end, ``~~~``), an unclosed ``<!--`` or ``<pre>`` block — after
which the next message's heading lands inside a code block and the file reads as one message —
and against HTML someone typed becoming live HTML in another Markdown viewer.
"""
from __future__ import annotations

import time

from hypothesis import given, settings, strategies as st
from markdown_it import MarkdownIt

from core.session.export import session_to_markdown
from core.session.keys import SessionKey
from core.session.models import Session

_md = MarkdownIt("commonmark")
# What block structure is made of: fences of both kinds and lengths, HTML block openers and closers.
_PIECES = ["```", "````", "~~~", "```py", "`", "\n", "\n\n", "   ", "<!--", "-->", "<pre>", "</pre>",
           "<script>", "text", "> ", "- ", "    "]
# ... and raw HTML of every kind, escaped or in code.
_HTML_PIECES = _PIECES + ["<b>", "</b>", "<img src=x onerror=alert(1)>", "<div>", "<?php", "<!x>", "\\<i>",
                          "\\", "`<u>`", "<https://example.org>", "<javascript:alert(1)>", "<a@b.c>", "&lt;"]


def _session(texts: list[str]) -> Session:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    now = time.time()
    return Session(key=SessionKey("p", "s-1"), title="Export", messages=msgs, created_at=now, updated_at=now)


def _headings(markdown: str) -> list[str]:
    """The export's message headings (a message's own headings, e.g. a setext ``---``, are content)."""
    tokens = _md.parse(markdown)
    return [tokens[i + 1].content for i, t in enumerate(tokens)
            if t.type == "heading_open" and t.tag == "h2" and tokens[i + 1].content in ("User", "Assistant")]


class TestEveryMessageKeepsItsHeading:
    """A message's Markdown leaving a block open, so what follows it is read as part of it."""

    def test_the_shapes_that_swallowed_the_export(self):
        texts = ["```python\nprint('never closed')", "Here:\n~~~\nno end", "````\n```\nthree inside four",
                 "<!-- a comment with no end", "<pre>\nraw", "<script>alert(1)", "   ```\nindented fence",
                 "fine\n\n```\nclosed\n```"]
        md = session_to_markdown(_session(texts + ["last"]))
        assert _headings(md) == ["User", "Assistant"] * 4 + ["User"]

    def test_a_message_that_closes_its_fence_is_left_as_written(self):
        md = session_to_markdown(_session(["```py\nx = 1\n```", "ok"]))
        assert "```py\nx = 1\n```\n\n## Assistant" in md

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), min_size=1, max_size=4))
    def test_any_text_keeps_every_heading(self, texts):
        md = session_to_markdown(_session(texts))
        assert _headings(md) == [("User" if i % 2 == 0 else "Assistant") for i in range(len(texts))]


def _html_tokens(markdown: str) -> list[str]:
    def walk(tokens):
        for t in tokens:
            yield t
            yield from walk(t.children or [])
    return [t.content for t in walk(_md.parse(markdown)) if t.type in ("html_inline", "html_block")]


class TestHtmlStaysText:
    """Trial: ``sessions export --format md`` and the page's Markdown download wrote a typed
    ``<img src=x onerror=…>`` or ``<script>`` as is, live HTML in other Markdown viewers."""

    def test_typed_html_is_inert_and_code_is_verbatim(self):
        user = "see <b>x</b> and <script>alert(1)</script> <img src=x onerror=alert(1)> and `<i>code</i>`"
        reply = "<div onclick=x>hi</div>\n\n<!-- never closed\n\n```html\n<b>raw</b>\n```\n\n    <pre>indented</pre>"
        md = session_to_markdown(_session([user, reply]))
        assert _html_tokens(md) == []
        page = _md.render(md)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
        assert "<code>&lt;i&gt;code&lt;/i&gt;</code>" in page  # the code span as typed
        assert "```html\n<b>raw</b>\n```" in md and "    <pre>indented</pre>" in md  # code blocks verbatim
        assert _headings(md) == ["User", "Assistant"]

    def test_title_and_autolinks(self):
        s = _session(["mail <a@b.c> or see <https://example.org/x>, not <javascript:alert(1)>"])
        s.title = "<img src=x onerror=alert(1)> plan"
        md = session_to_markdown(s)
        assert md.startswith("# &lt;img src=x onerror=alert(1)> plan\n") and _html_tokens(md) == []
        page = _md.render(md)
        assert '<a href="https://example.org/x">' in page and '<a href="mailto:a@b.c">' in page
        assert 'href="javascript' not in page

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(_HTML_PIECES), max_size=12).map("".join), min_size=1, max_size=3))
    def test_no_text_leaves_live_html(self, texts):
        md = session_to_markdown(_session(texts))
        assert _html_tokens(md) == []
        assert _headings(md) == [("User" if i % 2 == 0 else "Assistant") for i in range(len(texts))]
