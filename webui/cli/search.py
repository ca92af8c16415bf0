"""``anycode sessions search QUERY [--all-projects] [--archived] [--json]``: full-text search from a terminal.

Kept apart from :mod:`webui.cli.sessions` (which only registers it) so the search command grows
without touching the other commands. Output: one block per matching session (id, time, title,
``[archived]``/``[sub-agent]`` marks, ``[in version n of m]`` for a match found only in a
version not in use (one block per conversation, as on the page), the snippet with the match between ``[`` and ``]``;
a conversation found by its title or tags shows ``title: …`` or ``tag: #a #b``), or with
``--json`` an array of :meth:`core.search.SearchHit.to_dict` objects.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import logging
import os
import sys
from typing import Any

import click

from core.search import SearchHit
from core.session.entries import clean_tag
from core.session.lookup import has_tags, split_tags
from core.session.export import session_label
from core.session.keys import project_key
from core.session.manager import SessionManager
from core.storage import Storage
from webui.chat.remote import alias_keys_of_folder
from webui.chat.search import one_per_conversation
from webui.cli import console, options

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 20


# The ``search`` command's own parameters (the shared options come from webui.cli.sessions).
PARAMS = (
    options.argument("query", 'words to find (all must occur); "quoted words" must occur together',
                     type=options.TYPED_TEXT),
    click.option("--all-projects", is_flag=True, help="search every project, not only this one"),
    click.option("--archived", is_flag=True, help="include archived sessions (marked)"),
    click.option("--tag", "tags", metavar="TAG", multiple=True, type=options.TYPED_TEXT,
                 help="only conversations with this tag (repeatable; tag:TAG in the query too)"),
    click.option("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                 help=f"at most N sessions ({DEFAULT_LIMIT})"),
    options.json_option(),
)


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


def _tag_only_hits(mgr: SessionManager, projects: list[str] | None, wanted: list[str], archived: bool,
                   limit: int) -> list[SearchHit]:
    """A query of tags alone: every conversation having them, as title hits, most recent first."""
    rows = []
    for pk in projects or [p.project_key for p in mgr.list_projects()]:
        rows += mgr.conversations(pk) + (mgr.conversations(pk, archived=True) if archived else [])
    rows = sorted((m for m in rows if has_tags(m.tags, wanted)), key=lambda m: m.updated_at, reverse=True)
    return [SearchHit(session_id=m.id, project_key=m.project_key, title=m.title, archived=m.archived,
                      message_index=None, role="title", ts=m.updated_at, snippet=m.title or "", marks=[],
                      created_at=m.created_at) for m in rows[:limit]]


def keys_of_folder(storage: Storage, folder: str) -> list[str]:
    """The project keys whose sessions are the project at ``folder``'s: its own key first, then
    the keys its git identity was recorded under at other paths (another checkout, another
    machine: :func:`webui.chat.remote.alias_keys_of_folder`), as the page lists them."""
    return [project_key(folder), *alias_keys_of_folder(storage, folder)]


def run(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    """Print the sessions of ``storage`` matching ``args.query``; exit status 0 (also when nothing
    matched)."""
    projects = None if args.all_projects else keys_of_folder(storage, args.project or os.getcwd())
    wanted, query = split_tags(args.query)
    wanted += [clean_tag(t) for t in getattr(args, "tags", ()) or ()]
    limit = max(1, args.limit)
    tags: dict[str, tuple[str, ...]] = {}
    for pk in projects or [p.project_key for p in mgr.list_projects()]:
        tags.update(mgr.conversation_tags(pk))
    if not wanted:
        hits = storage.search.search(query, project_keys=projects, archived=args.archived, limit=limit)
    elif not query:  # only tags: the conversations having them
        hits = _tag_only_hits(mgr, projects, wanted, args.archived, limit)
    else:
        # tag:NAME is an exact tag, not a word: search widely, then keep the tagged conversations' hits.
        found = storage.search.search(query, project_keys=projects, archived=args.archived,
                                      limit=max(limit * 20, 500))
        hits = [h for h in found if has_tags(tags.get(h.session_id, ()), wanted)][:limit]
    # One hit per conversation, as on the page (issue 31, item 3): its version in use, or the
    # version the match is in, labelled "version n of m".
    hits, versions = one_per_conversation(mgr, hits)
    if args.json:
        sys.stdout.write(console.json_text([h.to_dict() | {"tags": list(tags.get(h.session_id, ()))}
                                            | ({"version": list(versions[h.session_id])} if h.session_id in versions else {})
                                            for h in hits], indent=2) + "\n")
        return 0
    if not hits:
        sys.stdout.write("No matches.\n")
        return 0
    lines: list[str] = []
    for h in hits:
        flags = (" [archived]" if h.archived else "") + (f" [sub-agent {h.subpath}]" if h.subpath else "")
        flags += "".join(f" #{t}" for t in tags.get(h.session_id, ()))
        if h.session_id in versions:
            flags += " [in version {} of {}]".format(*versions[h.session_id])
        when = _dt.datetime.fromtimestamp(h.ts).strftime("%Y-%m-%d %H:%M") if h.ts else ""
        where: Any = f"#{h.message_index} {h.role}" if h.message_index is not None else h.role
        lines.append(f"{h.session_id[:8]}  {when:<16}  {session_label(h.title, h.created_at)}{flags}")
        lines.append(f"    {where}: {marked(h.snippet, h.marks)}")
    sys.stdout.write(console.terminal_text("\n".join(lines)) + "\n")  # no escapes or bidi from chats
    return 0
