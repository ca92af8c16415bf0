"""How chat text is shown: a user's message exactly as typed, a reply as Markdown with its HTML
shown as text (issue 18, defect 1).

``gr.Chatbot`` renders every message as Markdown with HTML, then sanitises it: a user's
``see <b>x</b> and <script>alert(1)</script> here`` showed a bold ``x`` and lost the script, and a
reply's inline HTML was rendered or dropped the same way. This module turns stored text into the
content the Chatbot is given:

* :func:`literal` (a user's message, an error sentence): the text inside
  ``<pre class="ac-lit">``, HTML-escaped, so it shows character for character with its line
  breaks and spaces (``white-space: pre-wrap`` in ``assets/chat-text.css``), like ChatGPT shows a
  user's message. ``http(s)`` URLs in it become links that open only when clicked. Text that
  Markdown would show unchanged anyway (no markup characters) is passed as is.
* :func:`reply` (a reply, a summary, memories): Markdown stays Markdown; every piece of raw HTML
  outside code (tags, comments, ``<script>…</script>``) is shown as text — inline as
  ``<span class="ac-lit">`` with the piece entity-encoded, a whole HTML block as a
  ``<pre class="ac-lit ac-block">``. A remote image or medium named in it is offered as a link
  after it (:func:`webui.text.remote_media.loading_links`), so nothing from chat content is fetched.
  Code (fences, indented blocks, code spans) is left exactly as written (found with
  markdown-it-py, the CommonMark parser).
* :func:`inline` (a tool step's or sub-agent's title): one line shown as text.

The Chatbot's Copy button copies, and its Edit box starts from, a message's *content*; the page's
script (``assets/js/chat_text.js``) turns content back into the text written (:func:`source` is the
same function in Python: the server applies it to an edit that arrives encoded). Nothing here
executes: everything the page gets is escaped text, links and the three marker elements, and the
Chatbot's sanitiser and the page's Content-Security-Policy (:mod:`webui.server.security`) stay in place.
Pure functions; no Gradio.
"""
from __future__ import annotations

import html
import logging
import re
from functools import lru_cache

from webui.text.remote_media import _escaped, code_spans, image_links, loading_links

log = logging.getLogger(__name__)

LIT_OPEN = '<pre class="ac-lit">\n'  # the newline after <pre> is dropped by the HTML parser
BLOCK_OPEN = '<pre class="ac-lit ac-block">\n'
SPAN_OPEN = '<span class="ac-lit">'
LINKS_OPEN = '<small class="ac-links">'
LABEL_OPEN = '<small class="ac-label">'  # the agent's name above its reply (issue 30)

# Text Markdown shows exactly as written: none of these characters, no line starting with a list,
# quote, heading or rule marker, no indentation, no doubled spaces, no blank lines.
_MARKUP_CHARS = re.compile(r"[<>&*_`~#\[\]!|\\$]|  |\t|\n\s*\n|^\s")
_BLOCK_START = re.compile(r"^(?:\d{1,9}[.)]|[-+=>])", re.M)
_URL = re.compile("https?://[^\\s<>\"'`\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+", re.I)  # a bidi control ends a URL
_URL_TRAILING = ".,;:!?*_~'\""


def is_plain(text: str) -> bool:
    """True when Markdown with HTML shows ``text`` exactly as written (so it needs no escaping)."""
    return not _MARKUP_CHARS.search(text) and not _BLOCK_START.search(text)


def _linkified(text: str) -> str:
    """``text`` HTML-escaped, with its ``http(s)`` URLs as links opening in a new tab."""
    out, pos = [], 0
    for m in _URL.finditer(text):
        url = m.group(0).rstrip(_URL_TRAILING)
        while url.endswith(")") and url.count(")") > url.count("("):  # "(see https://x/y)"
            url = url[:-1]
        end = m.start() + len(url)
        out.append(html.escape(text[pos:m.start()], quote=False))
        out.append(f'<a href="{html.escape(url)}" class="ac-url" target="_blank" '
                   f'rel="noopener noreferrer nofollow">{html.escape(url, quote=False)}</a>')
        pos = end
    out.append(html.escape(text[pos:], quote=False))
    return BIDI_CONTROLS.sub(lambda m: BIDI_OPEN + bidi_label(m.group(0)) + "</span>", "".join(out))


# Bidirectional controls: marks, embeddings, overrides and isolates (Unicode UAX #9). Applied,
# they reorder the text around them ("evil" typed after U+202E shows as "live"); shown, a reader
# sees what was typed (issue 31, item 9).
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
BIDI_OPEN = '<span class="ac-bidi">'
_BIDI_MARK = re.compile('<span class="ac-bidi">\u27e8U\\+([0-9A-F]{4})\u27e9</span>')


def bidi_label(ch: str) -> str:
    """How a bidi control is shown as text: ``⟨U+202E⟩``."""
    return f"\u27e8U+{ord(ch):04X}\u27e9"


def visible_bidi(text: str) -> str:
    """Plain ``text`` (a tool call's arguments on the approval card, in a tool step) with every
    bidi control replaced by its label (:func:`bidi_label`), so it shows in the order it was
    written and the reader sees the control was there."""
    return BIDI_CONTROLS.sub(lambda m: bidi_label(m.group(0)), text) if text else text


def literal(text: str) -> str:
    """Chat content showing ``text`` exactly as typed (a user's message): unchanged when it is
    plain, else ``<pre class="ac-lit">`` holding it escaped, URLs as links, each bidi control
    shown as its label in a ``<span class="ac-bidi">`` instead of being applied. Reversed by
    :func:`source`."""
    if is_plain(text) and not BIDI_CONTROLS.search(text):
        return text
    return LIT_OPEN + _linkified(text) + "</pre>"


def _entities(text: str) -> str:
    """``text`` with ``&<>"`` and every other ASCII punctuation character as a character
    reference, so neither HTML nor Markdown gives it a meaning (CommonMark: entity and numeric
    character references are never markup)."""
    out = []
    for ch in text:
        if ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch.isascii() and not ch.isalnum() and ch not in " \n":
            out.append(f"&#{ord(ch)};")
        else:
            out.append(ch)
    return "".join(out)


_MARKUP_INLINE = re.compile(r"[<>&*`\[\]~\\]")


def inline(text: str) -> str:
    """A title (a tool step's, a sub-agent's task) shown as text on one line, whatever characters
    it holds; unchanged when it holds no markup characters. A bidi control is shown as its label
    (:func:`visible_bidi`): a memory in the toast or a task's title must read as it was written."""
    text = visible_bidi(text)
    if not _MARKUP_INLINE.search(text):
        return text
    return SPAN_OPEN + _entities(text) + "</span>"


# --- replies -------------------------------------------------------------------------------------

# Raw HTML as CommonMark defines it (open and closing tags, comments, processing instructions,
# declarations, CDATA), with elements whose content is not HTML taken whole.
_RAW_TEXT_EL = r"<(script|style|textarea|title|xmp|noscript)\b[^>]*>[\s\S]*?</\1\s*>"


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    md.disable(["inline", "text_join"], ignoreInvalid=True)  # blocks are enough: 10x faster
    return md


@lru_cache(maxsize=1)
def _html_re() -> re.Pattern:
    from markdown_it.common.html_re import HTML_TAG_RE

    return re.compile(_RAW_TEXT_EL + "|" + HTML_TAG_RE.pattern, re.I)


def reply(text: str) -> str:
    """Chat content for Markdown ``text`` (a reply): Markdown rendered, raw HTML outside code shown
    as text, remote images and media as links, a code fence's language named the way the page's
    highlighter knows it (:func:`highlight_name`). Unchanged when it holds no ``<`` and no such
    fence (only remote images are rewritten then). Each bidi control, in prose and in code alike,
    is shown as its label (:func:`visible_bidi`): applied, a U+202E in a model's reply made "evil"
    read "live" (issue 31, trial D3); a reply's Copy gives the labels too. Reversed by
    :func:`source` except for those image links and labels."""
    if len(text) <= CACHED_CHARS:  # a conversation is re-rendered after every send
        return _reply_cached(text)
    return _reply(text)


CACHED_CHARS = 32_768


@lru_cache(maxsize=512)
def _reply_cached(text: str) -> str:
    return _reply(text)


def _reply(text: str) -> str:
    text = visible_bidi(text)
    if not text or ("<" not in text and not _renamed_fence(text)):
        return image_links(text)
    lines = text.split("\n")
    kinds = _kinds(text, len(lines), lines)
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and kinds[j] == kinds[i]:
            j += 1
        chunk = "\n".join(lines[i:j])
        if kinds[i] == "code":
            out.append(chunk)
        elif kinds[i] == "block":
            out.append(_block(chunk))
        else:
            out.append(_prose(chunk))
        i = j
    return "\n".join(out)


# The languages the Chatbot's highlighter (Prism, bundled with Gradio's Markdown: its core
# grammars plus the ones it loads on demand) knows by name. Fences naming another common name of
# one of them are given that name, so ```py, ```sh or ```ts are highlighted too.
HIGHLIGHTED = frozenset({"python", "latex", "bash", "c", "cpp", "json", "sql", "java", "go", "rust", "php",
                         "yaml", "markup", "html", "xml", "svg", "css", "clike", "javascript", "js"})
LANGUAGE_NAMES = {
    "py": "python", "py3": "python", "python3": "python", "ipython": "python", "pycon": "python",
    "sh": "bash", "shell": "bash", "zsh": "bash", "console": "bash", "shell-session": "bash",
    "shellsession": "bash", "terminal": "bash",
    "yml": "yaml", "rs": "rust", "golang": "go", "tex": "latex",
    "c++": "cpp", "cc": "cpp", "cxx": "cpp", "hpp": "cpp", "h": "c",
    "jsonc": "json", "json5": "json", "jsonl": "json", "ndjson": "json",
    "mysql": "sql", "postgresql": "sql", "postgres": "sql", "sqlite": "sql", "psql": "sql", "plsql": "sql",
    "ts": "javascript", "typescript": "javascript", "tsx": "javascript", "jsx": "javascript",
    "mjs": "javascript", "cjs": "javascript", "node": "javascript",
    "htm": "html", "xhtml": "html", "vue": "html", "svelte": "html",
    "scss": "css", "less": "css", "sass": "css",
    "kotlin": "clike", "kt": "clike", "csharp": "clike", "cs": "clike", "c#": "clike", "swift": "clike",
    "scala": "clike", "dart": "clike", "groovy": "clike", "objc": "clike", "objective-c": "clike",
}
LANG_MARK = " ac-lang:"  # after the highlighter's name in a fence's info string: the name written
_FENCE_INFO = re.compile(r"^[ \t>]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(`{3,}|~{3,})[ \t]*([^\s`]+)", re.M)


def highlight_name(lang: str) -> str | None:
    """The name the page's highlighter knows for code fence language ``lang`` when it differs
    (``py`` -> ``python``, ``sh`` -> ``bash``, ``Python`` -> ``python``); None when ``lang`` is
    already its name or has no grammar there (shown plain)."""
    low = lang.lower()
    name = LANGUAGE_NAMES.get(low, low if low in HIGHLIGHTED else None)
    return name if name and name != lang else None


def _renamed_fence(text: str) -> bool:
    return ("```" in text or "~~~" in text) and any(
        highlight_name(m.group(2)) for m in _FENCE_INFO.finditer(text))


def _kinds(text: str, count: int, lines: list[str] | None = None) -> list[str]:
    """Per line of ``text`` (``count`` lines): ``"code"`` (a fence or an indented code block, at
    any depth), ``"block"`` (a top-level HTML block) or ``"prose"`` (CommonMark block structure).
    Given ``lines`` (``text`` split), a fence whose language the highlighter knows by another name
    gets that name in its opening line there (the name written kept after :data:`LANG_MARK`)."""
    kinds = ["prose"] * count
    for tok in _parser().parse(text):
        if tok.map is None:
            continue
        kind = ("code" if tok.type in ("fence", "code_block")
                else "block" if tok.type == "html_block" and tok.level == 0 else None)
        if kind:
            for i in range(tok.map[0], min(tok.map[1], count)):
                kinds[i] = kind
        if lines is not None and tok.type == "fence" and tok.info.split():
            lang = tok.info.split()[0]
            name = highlight_name(lang)
            line = lines[tok.map[0]]
            at = line.find(tok.markup) + len(tok.markup)
            start = at + len(line[at:]) - len(line[at:].lstrip(" \t"))
            if name and line.startswith(lang, start):
                lines[tok.map[0]] = line[:start] + name + LANG_MARK + line[start:]
    return kinds


class StreamedReply:
    """:func:`reply` of a reply while it streams in (the text only grows): the part up to the
    last finished top-level paragraph is rendered once and kept, so each update re-renders only
    the paragraph being written, not the whole reply."""

    def __init__(self) -> None:
        self._src = ""  # a prefix of the text ending at a top-level blank line, outside code
        self._out = ""  # reply() of it

    def render(self, text: str) -> str:
        """The content for ``text`` (the whole reply so far); equal to ``reply(text)`` once the
        stored reply is shown (the page gets the stored rows when the reply ends)."""
        if not text.startswith(self._src):
            self._src, self._out = "", ""
        cut = _stable_cut(text, len(self._src))
        if cut > len(self._src):
            self._out += reply(text[len(self._src):cut])
            self._src = text[:cut]
        return self._out + reply(text[len(self._src):])


def _stable_cut(text: str, start: int) -> int:
    """The end of the last blank line after ``start`` that closes everything before it (no fence
    or HTML block open) and is followed by an unindented line; ``start`` when there is none."""
    cut = text.rfind("\n\n", start)
    while cut >= start and cut + 2 < len(text) and text[cut + 2] in " \t\n":
        cut = text.rfind("\n\n", start, cut + 1) if cut > start else -1
    if cut < start or cut + 2 >= len(text):
        return start
    seg = text[start:cut + 2]
    count = seg.count("\n") + 1
    if "<" in seg or "`" in seg or "~" in seg or seg[:1] in " \t":
        if _kinds(seg, count)[-2] != "prose":
            return start
    return cut + 2


def _block(chunk: str) -> str:
    """A top-level HTML block shown as text, its remote resources as links below it."""
    links = loading_links(chunk)
    shown = BLOCK_OPEN + html.escape(chunk, quote=False) + "</pre>"
    return shown + (f"\n\n{LINKS_OPEN}{links}</small>" if links else "")


def _prose(chunk: str) -> str:
    """Markdown lines outside code: each paragraph's raw HTML (not in a code span) as text."""
    return "".join(_paragraph(part) if k % 2 == 0 else part
                   for k, part in enumerate(re.split(r"(\n[ \t]*\n)", chunk)))


_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s@<>\\]+@[^\s@<>\\]+)>")
_STARTS_HTML = re.compile(r"<[A-Za-z/!?]")


def _paragraph(text: str) -> str:
    """One paragraph (or list, quote, table) of Markdown: each raw HTML construct outside code
    spans as text, and any ``<`` that could still open one (``<!--`` never closed, ``<div`` cut
    off while streaming) too; autolinks (``<https://…>``) stay links."""
    if "<" not in text:
        return image_links(text)
    out: list[str] = []
    pos = 0
    spans = code_spans(text)
    at = text.find("<")
    while at >= 0:
        if at >= pos and not any(s <= at < e for s, e in spans) and not _escaped(text, at):
            m = _html_re().match(text, at)
            if m:
                out.append(image_links(text[pos:at]))
                links = loading_links(m.group(0))
                out.append(SPAN_OPEN + _entities(m.group(0)) + "</span>"
                           + (f"{LINKS_OPEN} {links}</small>" if links else ""))
                pos = m.end()
            elif _STARTS_HTML.match(text, at) and not _AUTOLINK.match(text, at):
                out.append(image_links(text[pos:at]) + SPAN_OPEN + "&lt;</span>")
                pos = at + 1
        at = text.find("<", max(at + 1, pos))
    out.append(image_links(text[pos:]))
    return "".join(out)


# --- back to the text written --------------------------------------------------------------------

_LINKS_RE = re.compile(r"(?:\n\n)?<small class=\"ac-links\">[\s\S]*?</small>")
_LABEL_RE = re.compile(r"^<small class=\"ac-label\">[^<]*</small>(?:\n\n)?")
_PRE_RE = re.compile(r"<pre class=\"ac-lit(?: ac-block)?\">\n([\s\S]*?)</pre>")
_SPAN_RE = re.compile(r"<span class=\"ac-lit\">([^<]*)</span>")
_A_TAG = re.compile(r"</?a\b[^>]*>")
_LANG_RE = re.compile(r"(?<=[`~])([ \t]*)[^\s`]+ ac-lang:(?=\S)")


def source(content: str) -> str:
    """The text a chat content was made from by :func:`literal`, :func:`reply` or :func:`inline`
    (markers removed and unescaped); other text is returned unchanged. The page's script does the
    same for Copy and Edit (``assets/js/chat_text.js``)."""
    if "ac-l" not in content:
        return content
    content = _LABEL_RE.sub("", content)
    content = _LINKS_RE.sub("", content)
    content = _PRE_RE.sub(lambda m: html.unescape(_A_TAG.sub("", _BIDI_MARK.sub(
        lambda b: chr(int(b.group(1), 16)), m.group(1)))), content)
    content = _LANG_RE.sub(r"\1", content)
    return _SPAN_RE.sub(lambda m: html.unescape(m.group(1)), content)
