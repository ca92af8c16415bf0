"""Markdown structure shared by every renderer of chat text: where code is, per CommonMark.

Code — fenced and indented code blocks, inline code spans — is shown exactly as written
everywhere; everything else is prose, where raw HTML would be live. :func:`code_spans` finds the
spans (the web page's renderers, :mod:`webui.text.chat_text` and :mod:`webui.text.remote_media`,
use it too); :func:`escape_html` makes prose HTML inert for the Markdown export
(:mod:`core.session.export`), which other Markdown viewers would otherwise render as HTML.
Pure functions; the block structure comes from markdown-it-py, the CommonMark parser.
"""
from __future__ import annotations

import re
from functools import lru_cache

_BACKTICKS = re.compile(r"`+")
# A line that starts a new block and so ends the paragraph before it (CommonMark 5.2, 5.3, 4.2,
# 4.5): a list item, a block quote, an ATX heading or a fence. A code span never crosses one.
_BLOCK_START = re.compile(r"(?m)^ {0,3}(?:[-+*](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$)|>|#{1,6}(?=[ \t]|$)|`{3,}(?=[^`\n]*$)|~~~)")
_LINE_START_LT = re.compile(r"(?m)^ {0,3}<")
# Autolinks kept as links: web addresses and e-mail addresses (no other scheme: ``<javascript:…>``).
_SAFE_AUTOLINK = re.compile(r"<(?:https?://[^\s<>]*|mailto:[^\s<>]+|[^\s@<>\\:/]+@[^\s@<>\\]+)>", re.I)


def is_escaped(text: str, pos: int) -> bool:
    """True when the character at ``pos`` follows an odd number of backslashes (a CommonMark
    backslash escape: shown as text)."""
    n = 0
    while pos - n - 1 >= 0 and text[pos - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def code_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each inline code span in ``text``, per CommonMark: a run of N backticks
    opens one, closed by the next run of exactly N in the same block; a run with no such closer is
    literal text. A backslash before the opening run escapes its first backtick (so ``\\```x``` ``
    opens with two); inside a span backslashes are literal, so they never affect the closer. A line
    starting a list item, quote, heading or fence ends the block: ```<b>`` then ``- `…`` is no span."""
    starts = [m.start() for m in _BLOCK_START.finditer(text) if m.start() > 0]
    if not starts:
        return _spans_in(text, 0)
    spans: list[tuple[int, int]] = []
    for begin, end in zip([0, *starts], [*starts, len(text)]):
        spans += _spans_in(text[begin:end], begin)
    return spans


def _spans_in(text: str, offset: int) -> list[tuple[int, int]]:
    """:func:`code_spans` of one block, shifted by ``offset``."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        if is_escaped(text, start):
            start += 1
        closer = next((j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == end - start),
                      None) if end > start else None
        if closer is None:
            i += 1
            continue
        spans.append((offset + start, offset + runs[closer][1]))
        i = closer + 1
    return spans


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    md.disable(["inline", "text_join"], ignoreInvalid=True)  # the blocks are enough
    return md


def code_block_lines(text: str) -> set[int]:
    """The numbers (from 0) of the lines of ``text`` inside a fenced or indented code block, at
    any depth (in a list item or a quote too), fences included."""
    count = text.count("\n") + 1
    lines: set[int] = set()
    for tok in _parser().parse(text):
        if tok.map is not None and tok.type in ("fence", "code_block"):
            lines.update(range(tok.map[0], min(tok.map[1], count)))
    return lines


def escape_html(text: str) -> str:
    """``text`` (Markdown) with its raw HTML made inert: every ``<`` in prose — outside code
    blocks and code spans, not backslash-escaped, not opening a web or e-mail autolink — written
    as ``&lt;``, so a tag, a comment or an HTML block reads as the text it is in any Markdown
    viewer. Code is left exactly as written; text without ``<`` is returned unchanged."""
    if "<" not in text:
        return text
    lines = text.split("\n")
    # The code blocks as they are once no HTML block holds them (an unclosed "<!--" swallowed a
    # fence after it): found with every "<" read as a plain letter, which leaves all other block
    # structure as it is.
    code = code_block_lines(text.replace("<", "x")) if ("```" in text or "~~~" in text or "    " in text
                                                         or "\t" in text) else set()
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and (j in code) == (i in code):
            j += 1
        chunk = "\n".join(lines[i:j])
        out.append(chunk if i in code else _inert_prose(chunk))
        i = j
    return "\n".join(out)


def _inert_prose(text: str) -> str:
    """:func:`escape_html` of lines outside code blocks, a paragraph at a time (a code span never
    crosses a blank line)."""
    return "".join(_inert_paragraph(part) if k % 2 == 0 else part
                   for k, part in enumerate(re.split(r"(\n[ \t]*\n)", text)))


def _inert_paragraph(text: str) -> str:
    if "<" not in text:
        return text
    spans = code_spans(text) if "`" in text else []
    # A "<" starting a line can start an HTML block, which ends the paragraph before it whatever
    # backticks are open (block structure comes first): never left as is, not even in a span.
    line_start = {m.end() - 1 for m in _LINE_START_LT.finditer(text)}
    out: list[str] = []
    pos = 0
    for m in re.finditer("<", text):
        at = m.start()
        if is_escaped(text, at) or _SAFE_AUTOLINK.match(text, at):
            continue
        if at not in line_start and any(s <= at < e for s, e in spans):
            continue
        out += [text[pos:at], "&lt;"]
        pos = at + 1
    out.append(text[pos:])
    return "".join(out)
