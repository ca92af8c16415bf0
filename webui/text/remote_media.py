"""Remote images and media in chat text become links the user can choose to open.

A message (the model's reply, a file it read, a pasted text) is rendered as Markdown with HTML by
the chat. An image there — ``![x](https://…)``, ``<img src>``, ``srcset``, ``<picture>``,
``<audio>``/``<video>``, ``<object>``, a CSS ``url()`` in a ``style`` — would make the browser
fetch that URL as soon as the chat is shown, which is a known way to send conversation data
elsewhere (the data rides in the URL). The page's Content-Security-Policy
(:mod:`webui.server.security`) already stops the fetch; this module makes what the user sees honest: each
such item is replaced by a link (``↗ image: alt (host)``) that opens only when clicked.

``data:`` images stay inline (nothing is fetched). Code — fenced blocks and inline code spans —
is left exactly as written. Pure functions; no Gradio.
"""
from __future__ import annotations

import html
import logging
import re
from urllib.parse import urlsplit

from core.session.markdown import code_spans, is_escaped as _escaped  # noqa: F401 (chat_text uses both)

log = logging.getLogger(__name__)

LINK_MARK = "\u2197"  # ↗ (a text glyph: common fonts have it)

# Tags whose whole point is to load something: replaced by links to what they would load.
LOADING_TAGS = {
    "img": "image", "image": "image", "picture": "image", "input": "image", "feimage": "image",
    "audio": "audio", "video": "video", "source": "media", "track": "subtitles",
    "iframe": "page", "frame": "page", "embed": "embedded content", "object": "embedded content",
    "link": "linked file", "use": "image", "script": "script",
}
# Attributes holding URLs the browser fetches by itself (not ``href`` of ``<a>``: a click).
URL_ATTRS = ("src", "poster", "data", "background", "xlink:href", "lowsrc", "dynsrc")
HREF_TAGS = {"link", "image", "use", "feimage"}

# CommonMark: a backtick fence's info string holds no backtick ("```<b>```" on a line is a code
# span, not a fence; found by the property test in tests/webui/text/test_chat_text.py)
_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}(?=[^`\n]*$)|~{3,})", re.M)
_ATTR = r"""[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?"""
_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9:-]*)((?:[\s/]+" + _ATTR + r")*)[\s/]*>", re.S)
_ATTR_RE = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?""", re.S)
_STYLE_EL = re.compile(r"<style\b[^>]*>.*?(?:</style\s*>|\Z)", re.S | re.I)
# CSS that fetches: url(...), image-set("…"), @import "…"
_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)""", re.I)
_CSS_SET = re.compile(r"""(?:-webkit-)?image-set\((?:[^()]|\([^()]*\))*\)""", re.I)
_CSS_STRING = re.compile(r"""["']([^"']+)["']""")
_CSS_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)""", re.I)
_TRIGGERS = re.compile(r"!\[|<|url\(|image-set|@import", re.I)
_LOADS = re.compile(r"<style|[\s/](?:" + "|".join(re.escape(a) for a in URL_ATTRS)
                    + r"|href|srcset|imagesrcset|style)\s*=", re.I)


def safe_markdown(text: str) -> str:
    """``text`` (Markdown with HTML) with every remote image, media element and CSS ``url()``
    outside code replaced by a link to the same URL; unchanged when it has none."""
    if not text or not _TRIGGERS.search(text):
        return text
    return "".join(seg if code else _rewrite_prose(seg) for seg, code in _segments(text))


def image_links(text: str) -> str:
    """``text`` (Markdown) with only its Markdown images outside code rewritten to links — for
    text whose HTML is shown as text (:mod:`webui.text.chat_text`), so no tag of it can load anything."""
    if not text or "![" not in text:
        return text
    return "".join(seg if code else _rewrite_md_images(seg) for seg, code in _segments(text))


def _segments(text: str) -> list[tuple[str, bool]]:
    """Split into ``(segment, is_code)``: fenced code blocks and inline code spans are code."""
    out: list[tuple[str, bool]] = []
    for prose, block in _fenced(text):
        if block:
            out.append((prose, True))
            continue
        last = 0
        for start, end in code_spans(prose):
            out.append((prose[last:start], False))
            out.append((prose[start:end], True))
            last = end
        out.append((prose[last:], False))
    return out


def _fenced(text: str) -> list[tuple[str, bool]]:
    """Split ``text`` at fenced code blocks (CommonMark: ``` or ~~~ of 3+, closed by a fence of the
    same character at least as long, or the end of the text)."""
    out: list[tuple[str, bool]] = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if m is None:
            out.append((text[pos:], False))
            return out
        fence = m.group(2)
        closing = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$",
                             re.M)
        line_end = text.find("\n", m.end())
        close = closing.search(text, line_end + 1) if line_end >= 0 else None
        end = len(text) if close is None else close.end()
        out.append((text[pos:m.start()], False))
        out.append((text[m.start():end], True))
        pos = end


# --- rewriting prose -------------------------------------------------------------------------


def _rewrite_prose(text: str) -> str:
    text = _STYLE_EL.sub(lambda m: _links_html(_css_urls(m.group(0)), "image"), text)
    text = _TAG.sub(_rewrite_tag, text)
    return _rewrite_md_images(text)


def loading_links(fragment: str) -> str:
    """Links (``↗ kind: label (host)``) to every remote resource the HTML ``fragment`` would load
    if it were rendered — ``src``/``srcset``/``poster``… of its tags, CSS ``url()`` in ``style``
    attributes and ``<style>`` elements — in order; "" when there is none. For HTML shown as
    text (:mod:`webui.text.chat_text`): the user can still open what it names, by a click."""
    if not _LOADS.search(fragment):  # no attribute or element that can name a URL
        return ""
    out = [_links_html(_css_urls(m.group(0)), "image") for m in _STYLE_EL.finditer(fragment)]
    for m in _TAG.finditer(_STYLE_EL.sub("", fragment)):
        kind, label, remote = _tag_resources(m)
        out.append(_links_html(remote, kind, label))
    return " ".join(x for x in out if x)


def _tag_resources(m: re.Match) -> tuple[str, str, list[str]]:
    """``(kind, label, remote URLs)`` of the tag matched by :data:`_TAG`."""
    tag = m.group(1).lower()
    attrs = _attrs(m.group(2))
    urls: list[str] = []
    for name in URL_ATTRS:
        if attrs.get(name):
            urls.append(attrs[name])
    if tag in HREF_TAGS and attrs.get("href"):
        urls.append(attrs["href"])
    for name in ("srcset", "imagesrcset"):
        if attrs.get(name):
            urls += _srcset_urls(attrs[name])
    remote = [u for u in urls + _css_urls(attrs.get("style", "")) if _is_remote(u)]
    label = attrs.get("alt") or attrs.get("title") or attrs.get("aria-label") or ""
    return LOADING_TAGS.get(tag, "image"), label, remote


def _rewrite_tag(m: re.Match) -> str:
    tag = m.group(1).lower()
    kind, label, remote = _tag_resources(m)
    if tag in LOADING_TAGS and (remote or tag in ("iframe", "frame", "object", "embed", "script")):
        return _links_html(remote, kind, label)
    if not remote:
        return m.group(0)
    # Any other element with a remote background: keep it, without the fetch, link after it.
    cleaned = _neutralise_css_in_tag(m.group(0))
    cleaned = re.sub(r"""\s(?:background|lowsrc|dynsrc)\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+)""",
                     "", cleaned, flags=re.I)
    return cleaned + _links_html(remote, "image")


def _attrs(raw: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in _ATTR_RE.findall(raw):
        name = name.lower()
        if name in out:  # the browser keeps the first of a repeated attribute
            continue
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        out[name] = html.unescape(value).strip()
    return out


def _srcset_urls(srcset: str) -> list[str]:
    """URLs of a ``srcset`` (``url [descriptor], …``; a URL may itself contain commas)."""
    urls = []
    for m in re.finditer(r"\s*([^\s,][^\s]*)(?:\s+[^,]*)?(?:,|$)", srcset):
        url = m.group(1).rstrip(",")
        if url:
            urls.append(url)
    return urls


def _css_urls(css: str) -> list[str]:
    css = html.unescape(css)
    urls = [next(g for g in m.groups() if g is not None) for m in _CSS_URL.finditer(css)]
    for m in _CSS_SET.finditer(css):
        urls += [s.group(1) for s in _CSS_STRING.finditer(_CSS_URL.sub("", m.group(0)))]
    urls += [m.group(1) for m in _CSS_IMPORT.finditer(css)]
    return [u.strip() for u in urls if u and u.strip()]


def _neutralise_css_in_tag(tag: str) -> str:
    tag = re.sub(r"""(?:-webkit-)?image-set\((?:[^()]|\([^()]*\))*\)""", "none", tag, flags=re.I)
    return re.sub(r"""url\(\s*(?:&quot;|"|')?[^)]*\)""", "none", tag, flags=re.I)


def _is_remote(url: str) -> bool:
    """Everything but inline ``data:`` fetches something."""
    return bool(url.strip()) and not url.strip().lower().startswith("data:")


def _describe(url: str) -> str:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url[:60]
    if parts.hostname:
        return parts.hostname
    return (parts.path or url)[:60]


def _openable(url: str) -> bool:
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return False
    return scheme in ("http", "https", "")


def _kind_label(kind: str, what: str) -> str:
    """``↗ image: what`` with the kind in the request's language (webui/locales ``media_*``)."""
    from webui.i18n import t

    return t("media_link", mark=LINK_MARK, kind=t("media_" + kind.replace(" ", "_")), what=what)


def _links_html(urls: list[str], kind: str, label: str = "") -> str:
    """HTML links (``↗ kind: label (host)``) to ``urls``, each once; a URL that is not http(s)
    is shown as text, never as a link."""
    seen: list[str] = []
    for url in urls:
        if url not in seen and _is_remote(url):
            seen.append(url)
    out = []
    for url in seen:
        text = _kind_label(kind, f"{label} ({_describe(url)})" if label else _describe(url))
        if _openable(url):
            out.append(f'<a href="{html.escape(url, quote=True)}" target="_blank" '
                       f'rel="noopener noreferrer nofollow" class="ac-remote" '
                       f'title="{html.escape(url, quote=True)}">{html.escape(text)}</a>')
        else:
            out.append(f'<span class="ac-remote">{html.escape(text)} [{html.escape(url[:200])}]</span>')
    return " ".join(out)


# --- Markdown images ---------------------------------------------------------------------------

_MD_ESCAPE = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def _rewrite_md_images(text: str) -> str:
    out: list[str] = []
    i = 0
    while True:
        j = text.find("![", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        if _escaped(text, j):
            out.append(text[i:j + 2])
            i = j + 2
            continue
        close = _match_bracket(text, j + 1)
        if close < 0:
            out.append(text[i:j + 2])
            i = j + 2
            continue
        alt = text[j + 2:close]
        out.append(text[i:j])
        after = close + 1
        if after < len(text) and text[after] == "(":
            end, dest = _inline_destination(text, after)
            if end > 0:
                if dest.lower().startswith("data:"):
                    out.append(text[j:end])
                else:
                    label = _kind_label("image", f"{_plain(alt)} ({_describe(dest)})" if alt.strip()
                                        else _describe(dest))
                    out.append("[" + _MD_ESCAPE.sub(r"\\\1", label) + "]" + text[after:end])
                i = end
                continue
        # A reference image (``![alt][ref]``, ``![alt][]``, ``![alt]``): the same reference as a link.
        out.append(_kind_label("image", f"[{alt}]"))
        i = after


def _match_bracket(text: str, start: int) -> int:
    """Index of the ``]`` closing the ``[`` at ``start`` (nesting, backslash escapes), or -1."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _inline_destination(text: str, start: int) -> tuple[int, str]:
    """For ``(dest "title")`` at ``start``: ``(index after the ')', dest)``; ``(-1, "")`` if it is
    not a valid inline destination."""
    i = start + 1
    while i < len(text) and text[i] in " \t\n":
        i += 1
    if i < len(text) and text[i] == "<":
        end = text.find(">", i)
        if end < 0 or "\n" in text[i:end]:
            return -1, ""
        dest, i = text[i + 1:end], end + 1
    else:
        depth, begin = 0, i
        while i < len(text) and not text[i].isspace():
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            i += 1
        dest = text[begin:i]
    while i < len(text) and text[i] in " \t\n":
        i += 1
    if i < len(text) and text[i] in "\"'(":
        quote = ")" if text[i] == "(" else text[i]
        end = text.find(quote, i + 1)
        if end < 0:
            return -1, ""
        i = end + 1
        while i < len(text) and text[i] in " \t\n":
            i += 1
    if i < len(text) and text[i] == ")":
        return i + 1, dest
    return -1, ""


def _plain(alt: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[!\[\]]", "", alt)).strip()[:80]
