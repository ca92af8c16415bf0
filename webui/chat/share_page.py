"""A page to share (issue 31, item 16): one conversation — the version given, normally the one in
use — as one self-contained HTML file.

What the file is, and why:
- The chat as the page renders it: a reply goes through the page's own rule
  (:func:`webui.text.chat_text.reply`: Markdown, raw HTML outside code shown as text, remote
  images and media as links) and is rendered by markdown-it (CommonMark + tables, the parser
  Gradio's renderer follows); a user message is shown exactly as typed (escaped, line breaks and
  spaces kept); tool calls and compaction summaries are ``<details>`` (they open without a script).
- Code highlighted on the server (Pygments, CSS classes), so nothing runs in the reader's browser.
- No remote assets and no script: every style is inline in the file, and a Content-Security-Policy
  ``<meta>`` (``default-src 'none'``) makes sure the file cannot load or run anything, even from a
  link a reply holds (links stay clickable; images come only from ``data:`` URLs).
- Light and dark by ``prefers-color-scheme``.
- Credentials masked: every message, tool argument, tool result, summary and the title pass
  through :func:`core.memory.secrets.mask_secrets` — the very finder that keeps secrets out of
  memory — before they are rendered, so an API key a tool read is ``[hidden]`` in the page (a page
  is made to be sent to others), and the page says how many values it masked.
The facts at the top (id, times, version n of m, tags) are those of the Markdown export
(:func:`core.session.export.session_to_markdown`). Written ``0600`` like the other exports.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import logging
from functools import lru_cache
from typing import Any, Iterable

from core.memory.secrets import mask_secrets
from core.session.export import UNTITLED, message_text
from webui.text import chat_text

log = logging.getLogger(__name__)

_ROLES = {"user": "You", "assistant": "Assistant"}

_CSS = """
:root { color-scheme: light dark; --bg: #fff; --fg: #18181b; --muted: #6e6e80; --bubble: #f4f4f5; --border: #e4e4e7;
  --code: #f6f8fa; --tag: #e0f2fe; --tag-fg: #075985; --link: #0369a1; }
@media (prefers-color-scheme: dark) { :root { --bg: #18181b; --fg: #f4f4f5; --muted: #a1a1aa; --bubble: #27272a;
  --border: #3f3f46; --code: #0d1117; --tag: #0c4a6e; --tag-fg: #e0f2fe; --link: #7dd3fc; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.6 system-ui, -apple-system, "Segoe UI",
  Roboto, "Noto Sans", "PingFang SC", "Microsoft YaHei", sans-serif; }
main { max-width: 820px; margin: 0 auto; padding: 24px 16px 64px; }
h1 { font-size: 24px; line-height: 1.3; margin: 0 0 8px; overflow-wrap: anywhere; }
.facts { color: var(--muted); font-size: 13px; margin: 0 0 24px; padding: 0; list-style: none; }
.facts li { display: inline; margin-right: 14px; }
.tag { background: var(--tag); color: var(--tag-fg); border-radius: 6px; padding: 0 6px; margin-right: 4px; }
.msg { margin: 18px 0; }
.msg.user { display: flex; justify-content: flex-end; }
.msg.user .body { background: var(--bubble); border-radius: 18px; padding: 8px 14px; max-width: 80%;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.who { font-size: 12px; color: var(--muted); margin-bottom: 2px; }
.msg.assistant .body { overflow-wrap: anywhere; }
a { color: var(--link); }
pre { background: var(--code); border: 1px solid var(--border); border-radius: 8px; padding: 10px 12px;
  overflow-x: auto; font-size: 13px; line-height: 1.45; white-space: pre; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: .92em; }
:not(pre) > code { background: var(--code); border-radius: 4px; padding: 1px 4px; }
table { border-collapse: collapse; } th, td { border: 1px solid var(--border); padding: 4px 8px; }
blockquote { margin: 0; padding-left: 12px; border-left: 3px solid var(--border); color: var(--muted); }
details { border: 1px solid var(--border); border-radius: 8px; padding: 6px 10px; margin: 8px 0; }
summary { cursor: pointer; color: var(--muted); font-size: 13px; }
.ac-lit { white-space: pre-wrap; }
.ac-bidi { border: 1px solid var(--border); border-radius: 3px; font-size: 11px; padding: 0 2px; color: var(--muted); }
.masked { color: var(--muted); font-size: 13px; border-left: 3px solid var(--border); padding-left: 10px; }
footer { color: var(--muted); font-size: 12px; margin-top: 40px; border-top: 1px solid var(--border); padding-top: 8px; }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


@lru_cache(maxsize=1)
def _pygments_css() -> str:
    """Pygments' CSS for ``.hl`` blocks: a light style, and a dark one under prefers-color-scheme."""
    from pygments.formatters import HtmlFormatter

    light = HtmlFormatter(style="default").get_style_defs(".hl")
    dark = HtmlFormatter(style="monokai").get_style_defs(".hl")
    return (light + "\n.hl { background: var(--code); }\n@media (prefers-color-scheme: dark) {\n" + dark
            + "\n.hl, .hl pre { background: var(--code); }\n}\n")


def _highlight(code: str, lang: str, _attrs: Any = None) -> str:
    """A fenced block as highlighted HTML (``<pre class="hl">``); plain (escaped) for a language
    Pygments does not know."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    name = (lang or "").split()[0] if lang else ""
    try:
        lexer = get_lexer_by_name(name) if name else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return f'<pre class="hl"><code>{html.escape(code)}</code></pre>'
    return highlight(code, lexer, HtmlFormatter(cssclass="hl", nowrap=False))


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # html: True because chat_text.reply already turned every raw HTML of the reply into text
    # (its own spans only), exactly what the page's renderer is given.
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "highlight": _highlight}).enable("table")
    md.enable("strikethrough")
    return md


def reply_html(text: str) -> str:
    """A reply's Markdown as the page shows it, rendered to HTML (see the module docstring)."""
    return _markdown().render(chat_text.reply(text))


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M %z")


class _Masker:
    """:func:`core.memory.secrets.mask_secrets` over every text of one page, counting the values."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, text: str) -> str:
        masked, n = mask_secrets(text)
        self.count += n
        return masked


def _masked_note(count: int) -> str:
    if not count:
        return ""
    values = "1 value" if count == 1 else f"{count} values"
    return (f'<p class="masked">{values} that looked like a password, key or token '
            f'{"was" if count == 1 else "were"} replaced by <code>[hidden]</code> in this page.</p>')


def _tool_details(name: str, arguments: str, result: str | None, mask: _Masker,
                  source: dict[str, str] | None = None) -> str:
    """One tool call as ``<details>``, its texts masked; ``source``: the MCP server and tool it
    went to (``Session.mcp_calls``), named in its summary."""
    try:
        arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        pass
    # Pretty-printed first, masked after: a masked value never breaks the JSON being read.
    arguments, result = mask(arguments or ""), (mask(result) if result is not None else None)
    via = (f" — MCP server <code>{html.escape(source['server'])}</code>, tool <code>{html.escape(source['tool'])}</code>"
           if source else "")
    out = [f"<details><summary>Tool call <code>{html.escape(name)}</code>{via}</summary>",
           f"<pre><code>{html.escape(arguments or '')}</code></pre>"]
    if result is not None:
        out.append(f"<div class=\"who\">Result</div><pre><code>{html.escape(result)}</code></pre>")
    out.append("</details>")
    return "".join(out)


def session_to_html(session: Any, *, version: tuple[int, int, bool] | None = None,
                    tags: Iterable[str] | None = None) -> str:
    """The whole page for ``session`` (a :class:`core.session.models.Session`): ``version`` ``(n,
    m, in use)`` and ``tags`` as for the Markdown export. Returns the HTML text (UTF-8 when saved)."""
    mask = _Masker()
    title = mask(session.title) if session.title else UNTITLED
    facts = [f"<li>{len(session.messages)} messages</li>", f"<li>Created {html.escape(_when(session.created_at))}</li>",
             f"<li>Updated {html.escape(_when(session.updated_at))}</li>"]
    if version and version[1] > 1:
        facts.append(f"<li>Version {version[0]} of {version[1]}</li>")
    tags = list(session.tags if tags is None else tags)
    if tags:
        facts.append("<li>" + "".join(f'<span class="tag">#{html.escape(t)}</span>' for t in tags) + "</li>")
    results = {str(m.get("tool_call_id", "")): message_text(m.get("content"))
               for m in session.messages if m.get("role") == "tool"}
    cuts: dict[int, list[dict[str, Any]]] = {}
    for c in session.compactions or ():
        cuts.setdefault(int(c.get("first_kept_index", 0)), []).append(c)
    body: list[str] = []
    for i, msg in enumerate(session.messages):
        for c in cuts.pop(i, ()):
            body.append("<details><summary>Earlier messages were summarised</summary>"
                        f"{reply_html(mask(str(c.get('summary', ''))))}</details>")
        role = msg.get("role")
        text = mask(message_text(msg.get("content"))) if role in ("user", "assistant") else ""
        if role == "user":
            body.append(f'<section class="msg user"><div class="body">{html.escape(text)}</div></section>')
        elif role == "assistant":
            parts = [reply_html(text)] if text.strip() else []
            for call in msg.get("tool_calls") or []:
                fn = (call or {}).get("function") or {}
                call_id = str((call or {}).get("id", ""))
                parts.append(_tool_details(str(fn.get("name", "tool")), str(fn.get("arguments", "")),
                                           results.get(call_id), mask, session.mcp_calls.get(call_id)))
            if parts:
                body.append(f'<section class="msg assistant"><div class="who">{_ROLES["assistant"]}</div>'
                            f'<div class="body">{"".join(parts)}</div></section>')
    for rest in cuts.values():
        for c in rest:
            body.append("<details><summary>Earlier messages were summarised</summary>"
                        f"{reply_html(mask(str(c.get('summary', ''))))}</details>")
    # The conversation's language (screen readers, hyphenation, fonts); "und" when it cannot be
    # told (too little prose, mixed): the export of an English chat said "und" (trial 7).
    from core.agent.language import conversation_language

    found = conversation_language(session.messages)
    lang = html.escape(found.code if found else "und", quote=True)
    return (f"<!DOCTYPE html>\n<html lang=\"{lang}\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<meta name=\"generator\" content=\"anycode\"><title>{html.escape(title)}</title>"
            f"<style>{_CSS}{_pygments_css()}</style></head><body><main>"
            f"<h1>{html.escape(title)}</h1><ul class=\"facts\">{''.join(facts)}</ul>{_masked_note(mask.count)}"
            + "".join(body)
            + f"<footer>Exported from anycode · session {html.escape(session.id)}</footer></main></body></html>\n")
