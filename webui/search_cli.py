"""``anycode sessions search QUERY [--all-projects] [--archived] [--json]``: full-text search from a terminal.

Kept apart from :mod:`webui.sessions_cli` (which only registers it) so the search command grows
without touching the other commands. Output: one block per matching session (id, time, title,
``[archived]``/``[sub-agent]`` marks, the snippet with the match between ``[`` and ``]``), or with
``--json`` an array of :meth:`core.search.SearchHit.to_dict` objects.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import logging
import os
import sys
from typing import Any

from core.search import open_search
from core.session.export import session_label
from core.session.keys import project_key
from core.session.manager import SessionManager
from webui import console

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``search`` subcommand's own arguments."""
    p.add_argument("query", help='words to find (all must occur); "quoted words" must occur together')
    p.add_argument("--all-projects", action="store_true", help="search every project, not only this one")
    p.add_argument("--archived", action="store_true", help="include archived sessions (marked)")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N", help=f"at most N sessions ({DEFAULT_LIMIT})")
    p.add_argument("--json", action="store_true", help="machine-readable output (a JSON array)")


def marked(snippet: str, marks: list[tuple[int, int]], before: str = "[", after: str = "]") -> str:
    """``snippet`` with each ``[start, end)`` range of ``marks`` wrapped in ``before``/``after``."""
    out, pos = [], 0
    for s, e in marks:
        if s < pos:
            continue
        out += [snippet[pos:s], before, snippet[s:e], after]
        pos = e
    out.append(snippet[pos:])
    return "".join(out)


def run(mgr: SessionManager, args: argparse.Namespace) -> int:
    """Print the sessions matching ``args.query``; exit status 0 (also when nothing matched)."""
    projects = None if args.all_projects else [project_key(args.project or os.getcwd())]
    hits = open_search(mgr.store).search(args.query, project_keys=projects, archived=args.archived,
                                         limit=max(1, args.limit))
    if args.json:
        sys.stdout.write(console.json_text([h.to_dict() for h in hits], indent=2) + "\n")
        return 0
    if not hits:
        sys.stdout.write("No matches.\n")
        return 0
    lines: list[str] = []
    for h in hits:
        flags = (" [archived]" if h.archived else "") + (f" [sub-agent {h.subpath}]" if h.subpath else "")
        when = _dt.datetime.fromtimestamp(h.ts).strftime("%Y-%m-%d %H:%M") if h.ts else ""
        where: Any = f"#{h.message_index} {h.role}" if h.message_index is not None else h.role
        lines.append(f"{h.session_id[:8]}  {when:<16}  {session_label(h.title, h.created_at)}{flags}")
        lines.append(f"    {where}: {marked(h.snippet, h.marks)}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
