"""Chat text shown as written (issue 18, defect 1), without a browser: what the Chatbot is given
for a user's message, a reply, a title, and the way back to the text written (Copy, Edit).
tests/browser/test_browser_chat_text.py checks what Chromium then shows and copies."""
from __future__ import annotations

import random

from hypothesis import example, given, settings, strategies as st
from markdown_it import MarkdownIt

from webui.text import chat_text
from webui.chat import handlers
from webui.render import rows as render
from webui.text.chat_text import StreamedReply, highlight_name, inline, literal, reply, source

O = "http://evil.example"
TYPED = "see <b>x</b> and <script>alert(1)</script> here"

# Pieces a coding assistant's conversation is made of: HTML, Markdown, code, entities, indentation.
PIECES = ["<b>", "</b>", "<script>", "</script>", "<!-- c -->", "<div>", "</div>", "<br>", "<x-y a='1'>",
          "<?php ?>", "<!DOCTYPE html>", "```", "```html", "```py", "~~~ Sh x", "~~~", "`", "\n", "\n\n", "    ", "  ", "- ", "> ",
          "1. ", "*", "_", "&", "&amp;", "&lt;", "<", ">", "\\", "|", "#", "text", "x", " ", "$$", "é",
          '<img src="http://h.example/i.png" alt="i">', '<p style="background:url(http://h.example/b.png)">',
          "[a](http://h.example/a)", "https://h.example/p?q=1&r=2"]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)
MARKERS = ('<span class="ac-lit">', "</span>", '<small class="ac-links">', "</small>", "</a>",
           '<pre class="ac-lit">', '<pre class="ac-lit ac-block">')


def _raw_html(content: str) -> list[str]:
    """The raw HTML a CommonMark renderer passes to the page for ``content`` (not code)."""
    md = MarkdownIt("commonmark").enable("table")
    out = []
    for tok in md.parse(content):
        if tok.type == "html_block":
            out.append(tok.content)
        for child in tok.children or ():
            if child.type == "html_inline":
                out.append(child.content)
    return out


def _ours(piece: str) -> bool:
    piece = piece.strip()
    return (piece.startswith(MARKERS) or piece.startswith('<a href="') and 'class="ac-' in piece
            or piece.startswith('<span class="ac-remote">'))


class TestUserMessageShownAsTyped:
    """A user's message losing its <script>…</script> part, a tag, a space or a line break when shown."""

    def test_html_markdown_and_spacing_are_kept_as_text(self):
        text = TYPED + "\n\n  two  spaces\n*not italic*"
        content = literal(text)
        assert content.startswith('<pre class="ac-lit">\n') and "<b>" not in content and "<script" not in content
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in content
        assert source(content) == text

    def test_plain_text_is_passed_as_is(self):
        for text in ("hi", "question 550", "What is 2 + 2? (quickly, please)", "line one\nline two"):
            assert literal(text) == text
        for text in ("a  b", "1. first", "- item", "# title", "x_y_", "a\n\nb", "    code", "=", "a & b"):
            assert literal(text) != text and source(literal(text)) == text

    def test_urls_are_links_that_open_only_when_clicked(self):
        content = literal(f"see ![u]({O}/u.png) and <img src=\"{O}/v.png\">, (also {O}/w).")
        assert f'<a href="{O}/u.png" class="ac-url" target="_blank" rel="noopener noreferrer nofollow">' in content
        assert f'href="{O}/v.png"' in content and f'href="{O}/w"' in content
        assert "<img" not in content

    @given(st.text())
    def test_every_text_comes_back_exactly(self, text):
        assert source(literal(text)) == text

    def test_stored_and_just_sent_messages_render_alike(self, tmp_path):
        rows = render.chat_rows([{"role": "user", "content": TYPED}]).rows
        assert rows == [{"role": "user", "content": literal(TYPED)}]


class TestBidiControlsShown:
    """issue 31, item 9: a right-to-left override (U+202E) in a user's message was applied, not
    shown ("evil" read "live"), and tool arguments hid it the same way."""

    def test_a_user_messages_override_is_shown_as_its_label_and_copied_back(self):
        text = "run \u202eevil\u202c now"
        content = literal(text)
        assert "\u202e" not in content and "\u202c" not in content
        assert '<span class="ac-bidi">\u27e8U+202E\u27e9</span>evil<span class="ac-bidi">\u27e8U+202C\u27e9</span>' in content
        assert source(content) == text
        for ch in "\u061c\u200e\u200f\u202a\u202b\u202d\u2066\u2067\u2068\u2069":
            assert ch not in literal(f"a{ch}b") and source(literal(f"a{ch}b")) == f"a{ch}b"

    def test_a_bidi_control_ends_a_link(self):
        content = literal("see https://example.com/\u202etxt.exe")
        assert 'href="https://example.com/"' in content and "\u202e" not in content

    def test_tool_arguments_show_it_too(self):
        assert chat_text.visible_bidi('{"path": "a\u202etxt.sh"}') == '{"path": "a\u27e8U+202E\u27e9txt.sh"}'
        step = render.chat_rows([{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "x\u202ey"}'}}]}]).rows[0]
        assert "\u202e" not in step["content"] and "U+202E" in step["content"]


class TestBidiControlsInReplies:
    """issue 31, trial D3: a bidi control in a reply (a model's Markdown) was applied, not shown:
    "\u202eevil" read "live", in prose and in code blocks alike."""

    def test_shown_as_labels_in_prose_code_spans_and_fences(self):
        text = "Run \u202eevil\u202c, or `a\u202eb`:\n\n```sh\necho \u202eevil\n```\n\n<b>\u2066x</b>"
        content = reply(text)
        assert not chat_text.BIDI_CONTROLS.search(content)
        assert "Run \u27e8U+202E\u27e9evil\u27e8U+202C\u27e9," in content
        assert "echo \u27e8U+202E\u27e9evil" in content and "`a\u27e8U+202E\u27e9b`" in content
        assert reply("plain reply") == "plain reply"
        streamed = StreamedReply()
        for cut in range(1, len(text) + 1):
            out = streamed.render(text[:cut])
        assert out == content


class TestReplyHtmlAsText:
    """A reply whose inline HTML is rendered or silently dropped (a <script>, a comment, a block)."""

    def test_an_escaped_backtick_opens_no_code_span(self):
        # CommonMark: "\\```" is a literal backtick and then a run of two, which the run of three
        # later does not close, so <b> is raw HTML there (found by the property test below).
        for text in ("\\```<b>bold?</b>```", "\\`<i>x</i>`"):
            content = reply(text)
            assert [p for p in _raw_html(content) if not _ours(p)] == [], content
            assert source(content) == text

    def test_backticks_after_a_fence_run_make_it_no_fence(self):
        # CommonMark: a backtick fence's info string holds no backtick, so "```<b>```" on its own
        # line is a code span continuing the paragraph; the <b> before it is raw HTML (found by
        # the property test below: the second <b> reached the page).
        text = "<b>```\n```<b>```"
        content = reply(text)
        assert [p for p in _raw_html(content) if not _ours(p)] == [], content
        assert source(content) == text

    def test_html_outside_code_is_text_and_markdown_stays(self):
        text = ("**Use** <b>bold</b> and <script>alert(2)</script>.\n\n<div class=\"box\">\nraw\n</div>\n\n"
                "```html\n<b>fence</b>\n```\n\n    <i>indented</i>\n\nand `<u>span</u>` <!-- note -->")
        content = reply(text)
        assert content.startswith("**Use** ")  # Markdown is left for the Chatbot to render
        assert '<span class="ac-lit">&lt;b&gt;</span>bold' in content
        assert '<pre class="ac-lit ac-block">\n&lt;div class="box"&gt;\nraw\n&lt;/div&gt;</pre>' in content
        assert "```html\n<b>fence</b>\n```" in content and "    <i>indented</i>" in content
        assert "`<u>span</u>`" in content
        assert [p for p in _raw_html(content) if not _ours(p)] == []
        assert source(content) == text

    def test_a_script_block_with_blank_lines_and_stars_keeps_every_character(self):
        text = "<script>\nlet a = 1;\n\nx = a * 2 * 3;\n</script>"
        assert reply(text) == '<pre class="ac-lit ac-block">\n' + text.replace("<", "&lt;").replace(">", "&gt;") + "</pre>"

    def test_remote_media_in_html_are_offered_as_links_after_the_text(self):
        content = reply(f'Look <img src="{O}/a.png" alt="chart"> here\n\n<video poster="{O}/b.jpg"></video>')
        assert f'<a href="{O}/a.png"' in content and "\u2197 image: chart (evil.example)" in content
        assert f'<a href="{O}/b.jpg"' in content
        assert [p for p in _raw_html(content) if not _ours(p)] == []
        assert source(content) == f'Look <img src="{O}/a.png" alt="chart"> here\n\n<video poster="{O}/b.jpg"></video>'

    def test_markdown_images_still_become_links(self):
        assert reply(f"![plot]({O}/p.png)") == f"[\u2197 image: plot \\(evil.example\\)]({O}/p.png)"

    def test_text_without_html_is_unchanged(self):
        for text in ("You said: two", "- [project] We use tabs\n- [user] Short answers", "a < b"):
            assert reply(text) == text or "<" in text

    @settings(max_examples=300, deadline=None)
    @given(texts)
    @example("`<b>\n- `")  # a list item ends the paragraph: the backticks are no code span (found by hypothesis)
    def test_no_raw_html_reaches_the_page_and_the_text_comes_back(self, text):
        content = reply(text)
        assert [p for p in _raw_html(content) if not _ours(p)] == [], content
        assert source(content) == text

    @settings(max_examples=100, deadline=None)
    @given(texts, st.randoms(use_true_random=False))
    def test_a_streamed_reply_ends_as_the_stored_one(self, text, rnd):
        streamed, pos = StreamedReply(), 0
        while pos < len(text):
            pos += rnd.randint(1, 12)
            shown = streamed.render(text[:pos])
            assert [p for p in _raw_html(shown) if not _ours(p)] == [], shown
        assert streamed.render(text) == reply(text)


class TestCodeHighlighting:
    """A code block left plain because its fence names the language in a way the page's
    highlighter does not know (```py, ```sh, ```ts), or a copy that does not give that name back."""

    def test_common_names_become_the_highlighters(self):
        assert highlight_name("py") == "python" and highlight_name("Python") == "python"
        assert highlight_name("sh") == "bash" and highlight_name("tsx") == "javascript"
        assert highlight_name("python") is None and highlight_name("diff") is None

    def test_fences_are_renamed_and_copied_back_as_written(self):
        text = "Run:\n\n```sh\nls -l\n```\n\n> ~~~ py title\n> x = 1\n> ~~~\n\n```python\nok\n```"
        content = reply(text)
        assert "```bash ac-lang:sh\nls -l" in content and "> ~~~ python ac-lang:py title" in content
        assert "```python\nok" in content
        assert source(content) == text
        assert reply("not a fence: ```py") == "not a fence: ```py"


class TestTitlesAndOtherRows:
    """Tool-step titles, errors and summaries rendering chat text as HTML."""

    def test_titles_are_text(self):
        assert inline("read_file") == "read_file"
        assert inline("<img src=x onerror=alert(1)> *fix*") == (
            '<span class="ac-lit">&lt;img src&#61;x onerror&#61;alert&#40;1&#41;&gt; &#42;fix&#42;</span>')
        step = render.tool_step("c1", "task", '{"description": "check <b>all</b>"}')
        assert "<b>" not in step["metadata"]["title"] and source(step["metadata"]["title"]) == "\u2699 task: check <b>all</b>"

    def test_error_row_and_summary_show_html_as_text(self):
        row = handlers._error_row("The server said: <html><body>502 Bad Gateway</body></html>")
        assert row["content"].startswith("\u26a0 The server said: ") and "<html>" not in row["content"]
        divider = render.summary_divider({"summary": "We fixed <script> loading.", "trigger": "manual"})
        assert "<script>" not in divider["content"] and "&lt;script&gt;" in divider["content"]

    def test_a_long_streamed_reply_renders_each_paragraph_once(self):
        para = "Some `List<T>` and <b>tag</b> text.\n\n```py\nif a < b:\n    pass\n```\n\n"
        text, rnd, streamed, pos, calls = para * 60, random.Random(3), StreamedReply(), 0, []
        real = chat_text.reply
        try:
            chat_text.reply = lambda t: calls.append(len(t)) or real(t)
            while pos < len(text):
                pos += rnd.randint(1, 20)
                streamed.render(text[:pos])
        finally:
            chat_text.reply = real
        assert max(calls) < 4 * len(para)  # never the whole reply again
        assert streamed.render(text) == reply(text)
