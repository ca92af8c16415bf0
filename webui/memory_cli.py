"""``anycode memory list|add|edit|rm|export [--project PATH | --global]``: memories from a terminal.

Scope: ``--global`` means the user's memories (every project); otherwise the project of
``--project PATH`` (default: the current folder). ``list`` and ``export`` without either show the
current folder's project memories and the user's. IDs may be given as a unique prefix (4+
characters). Exit status 0 ok, 1 failed (unknown id, a refused text such as a secret, store
unavailable), 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Sequence

from core.memory.model import Memory
from core.memory.store import MemoryStore
from core.session.keys import project_key
from core.session.text import counted
from webui import console
from webui.transfer_cli import _run, _store_options

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``anycode memory`` (exposed for tests and help)."""
    parser = argparse.ArgumentParser(prog="anycode memory",
                                     description="List, add, edit, remove and export what anycode remembers "
                                                 "between conversations.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        _store_options(p)
        where = p.add_mutually_exclusive_group()
        where.add_argument("--project", metavar="PATH", default=None,
                           help="the project's memories (default: the current folder's)")
        where.add_argument("--global", dest="user", action="store_true",
                           help="the user's memories, shared by every project")
        return p

    p = cmd("list", "list memories, most recent first")
    p.add_argument("--json", action="store_true", help="a JSON array")
    p = cmd("add", "remember a fact")
    p.add_argument("text", help="the fact, one short sentence")
    p = cmd("edit", "change a memory's text")
    p.add_argument("id", help="memory id (or a unique prefix)")
    p.add_argument("text", help="the new text")
    p = cmd("rm", "remove a memory for good")
    p.add_argument("id", help="memory id (or a unique prefix)")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p = cmd("export", "write the memories as Markdown or JSON")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("-o", "--output", metavar="FILE", default=None, help="write to FILE (created 0600)")
    return parser


def _project(args: argparse.Namespace) -> str:
    return project_key(args.project or os.getcwd())


def _selected(memories: MemoryStore, args: argparse.Namespace) -> list[Memory]:
    if args.user:
        return memories.list(None, "user")
    if args.project:
        return memories.list(_project(args), "project")
    return memories.list(_project(args))


def _line(m: Memory) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.updated_at))
    origin = f"  (from session {m.session_id[:8]})" if m.session_id else ""
    return f"{m.id}  {m.scope:<7}  {m.source:<5}  {when}  {m.text}{origin}"


def to_markdown(memories: list[Memory]) -> str:
    """Memories as Markdown: one section per scope, one bullet per fact."""
    out = ["# anycode memories", ""]
    for scope, heading in (("project", "Project"), ("user", "User (every project)")):
        group = [m for m in memories if m.scope == scope]
        if group:
            out += [f"## {heading}", ""] + [f"- {m.text}" for m in group] + [""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode memory`` with ``argv`` (without the leading ``memory``); the exit status."""
    console.setup_stdio()  # any memory prints, whatever the locale (issue 20)
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if isinstance(getattr(args, "text", None), str):  # typed text: the UTF-8 the terminal sent
        args.text = console.text_arg(args.text)

    def body(store: Any) -> int:
        memories = MemoryStore.for_store(store)
        scope = "user" if args.user else "project"
        pk = None if args.user else _project(args)
        if args.command == "list":
            found = _selected(memories, args)
            if args.json:
                print(console.json_text([m.to_dict() for m in found], indent=2))
            else:
                print("\n".join(_line(m) for m in found) if found else "No memories.")
            return 0
        if args.command == "add":
            m = memories.add(args.text, scope=scope, project_key=pk)
            print(f"Remembered ({m.scope}) {m.id}: {m.text}")
            return 0
        if args.command == "edit":
            m = memories.update(args.id, args.text, project_key=pk)
            print(f"Updated {m.id}: {m.text}")
            return 0
        if args.command == "rm":
            m = memories.get(args.id, pk)
            if not args.yes:
                if not sys.stdin.isatty():
                    print("anycode memory rm: add --yes to remove without asking.", file=sys.stderr)
                    return 2
                if input(f"Remove \"{m.text}\" for good? [y/N] ").strip().lower() not in ("y", "yes"):
                    print("Nothing removed.")
                    return 1
            memories.remove(m.id, project_key=pk)
            print(f"Removed {m.id}: {m.text}")
            return 0
        found = _selected(memories, args)
        rows = [m.to_dict() for m in found]
        # A file is UTF-8 (every character kept); a terminal gets escapes where it cannot show one.
        text = ((json.dumps(rows, ensure_ascii=False, indent=2) if args.output else console.json_text(rows, indent=2))
                + "\n" if args.format == "json" else to_markdown(found))
        if args.output:
            fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            print(f"Wrote {counted(len(found), 'memory', 'memories')} to {args.output}")
        else:
            sys.stdout.write(text)
        return 0

    return _run("anycode memory", args, body)
