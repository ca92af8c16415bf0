"""An MCP tool result as the text stored in the tool message (what the model and the page read).

- text content: as sent, one block after another;
- an image or audio block: a placeholder with its type and size (``[image: image/png, 12.3 KB]``),
  never the bytes (a session would carry megabytes of base64 into every later request);
- an embedded resource: its text, or a placeholder for a binary one; a resource link: its URI;
- structured content: as JSON, when the server sent no text (the spec asks servers to send the
  same data as text too, and the text is kept then);
- an error result (``isError``): the text after ``Error:`` (the page marks the step failed);
- anything longer than :data:`MAX_RESULT_CHARS` is cut there, with a note saying how long it was;
- the values of the server's ``env`` and ``headers`` are replaced by ``[hidden]`` wherever the
  server echoes them (its configuration's secrets never reach a session).
"""
from __future__ import annotations

import base64
import json
from typing import Any, Iterable

MAX_RESULT_CHARS = 100_000
HIDDEN = "[hidden]"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _b64_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    text = data.strip()
    pad = text.count("=", max(0, len(text) - 2))
    return max(0, len(text) * 3 // 4 - pad)


def _field(block: Any, *names: str) -> Any:
    for name in names:
        if isinstance(block, dict) and name in block:
            return block[name]
        if hasattr(block, name):
            return getattr(block, name)
    return None


def block_text(block: Any) -> str:
    """One content block as text (see the module docstring)."""
    kind = _field(block, "type")
    if kind == "text":
        return str(_field(block, "text") or "")
    if kind in ("image", "audio"):
        mime = _field(block, "mime_type", "mimeType") or "unknown type"
        return f"[{kind}: {mime}, {_size(_b64_size(_field(block, 'data')))}]"
    if kind == "resource":
        res = _field(block, "resource")
        uri = _field(res, "uri") or ""
        text = _field(res, "text")
        if isinstance(text, str):
            return f"[resource {uri}]\n{text}" if uri else text
        mime = _field(res, "mime_type", "mimeType") or "unknown type"
        return f"[resource: {uri}, {mime}, {_size(_b64_size(_field(res, 'blob')))}]"
    if kind == "resource_link":
        uri, name = _field(block, "uri") or "", _field(block, "name") or ""
        return f"[resource link: {uri}{f' ({name})' if name and name != uri else ''}]"
    return f"[{kind or 'unknown'} content]"


def hide(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (longest first) replaced by ``[hidden]``, also as it
    appears base64-encoded (a server may echo an ``Authorization: Basic`` pair)."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, HIDDEN)
        encoded = base64.b64encode(secret.encode("utf-8", "surrogatepass")).decode().rstrip("=")
        if len(encoded) >= 8 and encoded in text:
            text = text.replace(encoded, HIDDEN)
    return text


def cut(text: str, limit: int = MAX_RESULT_CHARS, total: int | None = None) -> str:
    """``text`` cut to ``limit`` characters with a note giving its whole length (``total``, default
    ``len(text)``); as is when it fits."""
    total = len(text) if total is None else total
    if total <= limit and len(text) <= limit:
        return text
    return (text[:limit] + f"\n\n[The result was cut here: it was {total:,} characters long; the first "
            f"{limit:,} are kept.]")


def result_text(result: Any, secrets: Iterable[str] = (), limit: int = MAX_RESULT_CHARS) -> tuple[str, bool]:
    """``(text, is_error)`` of an MCP ``CallToolResult`` (or its dict form), see the module
    docstring. Never raises for a malformed result: what can be read is kept."""
    content = _field(result, "content") or []
    parts = [block_text(b) for b in content] if isinstance(content, (list, tuple)) else []
    has_text = any(_field(b, "type") == "text" for b in content) if isinstance(content, (list, tuple)) else False
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None and not has_text:
        try:
            parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
        except (TypeError, ValueError):
            parts.append(str(structured))
    text = "\n\n".join(p for p in parts if p) or "(the tool returned no content)"
    is_error = bool(_field(result, "is_error", "isError"))
    if is_error and not text.startswith("Error"):
        text = f"Error: {text}"
    secrets = list(secrets)
    total = len(text)
    # Hidden before the cut (a secret astride the cut is hidden whole), on the part that is kept:
    # a 10 MB result is not searched through for each secret.
    margin = max((len(s) for s in secrets), default=0) * 2
    return cut(hide(text[: limit + margin], secrets), limit, total), is_error
