"""Write a session's download files: Markdown (for reading) and JSONL (its stored entries, a valid
session file). The formats are core's (``core.session.export``), shared with ``anycode sessions export``;
this module only names and places the files for the UI's download buttons."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from core.session.export import session_to_jsonl, session_to_markdown

log = logging.getLogger(__name__)


def file_stem(title: str | None, session_id: str) -> str:
    """A safe download file name stem: ``anycode-<title slug>-<first 8 id chars>``."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", (title or "chat")).strip("-").lower()[:40] or "chat"
    return f"anycode-{slug}-{session_id[:8]}"


def write_exports(directory: Path, session: Any, entries: list[dict[str, Any]],
                  subagents: list[Any] | None = None) -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.jsonl`` for ``session`` under ``directory/<session id>/``
    (replacing older exports of it) and return both paths. ``subagents``: its sub-agent records
    for the Markdown (the JSONL has them in ``entries``, see ``core.session.subagents.export_entries``)."""
    target = Path(directory) / session.id
    target.mkdir(parents=True, exist_ok=True)
    for old in target.iterdir():
        old.unlink()
    stem = file_stem(session.title, session.id)
    md, jl = target / f"{stem}.md", target / f"{stem}.jsonl"
    md.write_text(session_to_markdown(session, subagents), encoding="utf-8")
    jl.write_bytes(session_to_jsonl(entries))
    return md, jl
