"""The Markdown export read back by a CommonMark parser (issue 28, item 12).

Guards against one message's text swallowing the rest of the export: an unclosed or typed code
fence (```` ```python ```` with no end, ``~~~``), an unclosed ``<!--`` or ``<pre>`` block — after
which the next message's heading lands inside a code block and the file reads as one message.
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
