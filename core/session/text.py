"""Rules about the text people type, shared by every front end (web UI, command line).

Browsers send more than what shows: a message of only zero-width spaces looks empty and must be
treated as empty (like whitespace), and ``JSON.stringify`` of a cut emoji sends a lone UTF-16
surrogate, which no UTF-8 encoder accepts (the page's event stream dies on it).
"""
from __future__ import annotations

import json
import re
from typing import Any

# Characters that take no room and show nothing: zero-width space/joiners, word joiner and the
# invisible operators, BOM, soft hyphen, Mongolian vowel separator, bidi marks and isolates,
# variation selectors, Hangul fillers, the unassigned specials U+FFF0–U+FFF8, shorthand format
# controls, musical invisible formatting, tag characters and the variation selectors supplement
# (every Unicode "Default_Ignorable_Code_Point"), and the blank Braille cell U+2800 (often used
# as an "invisible" name).
INVISIBLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
             "\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
             "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff")
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_blank(text: str | None) -> bool:
    """True when ``text`` shows nothing: None, empty, whitespace and invisible characters only
    (zero-width space U+200B, joiners, BOM, bidi marks; see :data:`INVISIBLE`)."""
    return not text or not _INVISIBLE.sub("", text).strip()


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (U+D800–U+DFFF, invalid in UTF-8) replaced by U+FFFD,
    the way the stores write it; other text is returned unchanged."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def counted(n: int, one: str, many: str | None = None) -> str:
    """``n`` with the English noun for that count: ``counted(1, "conversation")`` is
    "1 conversation", ``counted(2, "conversation")`` "2 conversations"; ``many`` for irregular
    plurals (``counted(3, "memory", "memories")``). Thousands get separators ("1,204 messages").
    For the command line and core sentences; the web UI's catalogue has its own plural rules."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def parse_json(data: bytes | str) -> Any:
    """``data`` parsed as JSON (invalid UTF-8 replaced, a leading BOM dropped).

    Raises ValueError with a one-sentence reason for invalid JSON and for nesting deeper than the
    parser allows (the standard parser's RecursionError would otherwise end the whole import)."""
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else data
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
    except json.JSONDecodeError as err:
        raise ValueError(err.msg) from None


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string, None, or a list of parts
    (``{"type": "text", "text": ...}`` joined by newlines; other parts shown as ``[type]``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)
