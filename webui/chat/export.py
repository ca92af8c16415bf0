"""Write a session's download files: Markdown (for reading) and JSONL (its stored entries, a valid
session file). The formats are core's (``core.session.export``), shared with ``anycode sessions export``;
this module only names and places the files for the UI's download buttons."""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from core.session.export import session_to_jsonl, session_to_markdown
from webui.server.private_files import private_dir, write_private

log = logging.getLogger(__name__)


def file_stem(title: str | None, session_id: str) -> str:
    """A safe download file name stem: ``anycode-<title slug>-<first 8 id chars>``."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", (title or "chat")).strip("-").lower()[:40] or "chat"
    return f"anycode-{slug}-{session_id[:8]}"


def write_html(directory: Path, session: Any, version: tuple[int, int, bool] | None = None,
               tags: Any = None) -> Path:
    """Write ``<stem>.html``, the page to share (:func:`webui.chat.share_page.session_to_html`),
    under ``directory/<session id>/`` (file ``0600``, folders ``0700``, as the other exports) and
    return its path; an earlier title's page is removed."""
    from webui.chat.share_page import session_to_html

    target = private_dir(Path(directory) / session.id)
    os.chmod(directory, 0o700)
    page = target / f"{file_stem(session.title, session.id)}.html"
    write_private(page, session_to_html(session, version=version, tags=tags).encode("utf-8"))
    for old in target.glob("*.html"):
        if old != page and not old.name.startswith("."):
            old.unlink(missing_ok=True)
    return page


def write_exports(directory: Path, session: Any, entries: list[dict[str, Any]],
                  subagents: list[Any] | None = None, version: tuple[int, int, bool] | None = None,
                  tags: Any = None) -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.jsonl`` for ``session`` under ``directory/<session id>/``
    (replacing older exports of it: one copy per session) and return both paths. ``subagents``:
    its sub-agent records for the Markdown (the JSONL has them in ``entries``, see
    ``core.session.subagents.export_entries``); ``version``: which version of its conversation it
    is and ``tags`` the conversation's tags (``core.session.export.session_to_markdown``). They hold the conversation: files ``0600``,
    folders ``0700`` (``webui.server.private_files``)."""
    target = private_dir(Path(directory) / session.id)
    os.chmod(directory, 0o700)
    stem = file_stem(session.title, session.id)
    md, jl = target / f"{stem}.md", target / f"{stem}.jsonl"
    write_private(md, session_to_markdown(session, subagents, version, tags=tags).encode("utf-8"))
    write_private(jl, session_to_jsonl(entries))
    for old in target.iterdir():  # an earlier title's files
        if old not in (md, jl) and not old.name.startswith(".") and old.suffix != ".html":  # not another writer's part
            old.unlink(missing_ok=True)
    return md, jl
