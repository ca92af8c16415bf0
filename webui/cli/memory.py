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

import click

from core.memory.model import Memory
from core.memory.store import MemoryStore
from core.session.keys import project_key
from core.session.text import counted
from core.storage import Storage
from webui.cli import console, options
from webui.cli.transfer import _run

log = logging.getLogger(__name__)


@click.group("memory", cls=options.Group, context_settings=options.CONTEXT,
             short_help="list, add, edit, remove and export what anycode remembers",
             help="List, add, edit, remove and export what anycode remembers between conversations.",
             epilog="Scope: --global means the user's memories (every project); otherwise the project of "
                    "--project PATH (default: the current folder). IDs may be given as a unique prefix (4+ "
                    "characters). Exit status: 0 ok, 1 failed, 2 bad usage.")
def cli() -> None:
    """``anycode memory``: the group; each command opens the store and runs."""


def _command(name: str, help_: str, *params: Any) -> click.Command:
    """Add ``anycode memory NAME`` with ``params``, the store options and the scope
    (``--project PATH`` or ``--global``); it runs :func:`_execute`."""
    def command(ctx: click.Context, **_: Any) -> int:
        return _execute(options.args_of(ctx))

    command.__name__ = f"memory_{name}"
    for param in reversed(params + (
            options.project_option("the project's memories (default: the current folder's)",
                                   callback=options.exclusive_with("user")),
            click.option("--global", "user", is_flag=True, callback=options.exclusive_with("project"),
                         help="the user's memories, shared by every project"))):
        command = param(command)
    return cli.command(name, help=help_, short_help=help_)(options.store_options(click.pass_context(command)))


_command("list", "list memories, most recent first", options.json_option("a JSON array"))
_command("add", "remember a fact", options.argument("text", "the fact, one short sentence", type=options.TYPED_TEXT))
_command("edit", "change a memory's text",
         options.argument("id", "memory id (or a unique prefix)"),
         options.argument("text", "the new text", type=options.TYPED_TEXT))
_command("rm", "remove a memory for good",
         options.argument("id", "memory id (or a unique prefix)"),
         click.option("--yes", is_flag=True, help="do not ask"))
_command("export", "write the memories as Markdown or JSON",
         click.option("--format", type=click.Choice(("md", "json")), default="md", help="md (default) or json"),
         click.option("-o", "--output", metavar="FILE", default=None, help="write to FILE (created 0600)"))


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
    return f"{m.id}  {m.scope:<7}  {m.source:<5}  {when}  {console.terminal_text(m.text)}{origin}"


def to_markdown(memories: list[Memory]) -> str:
    """Memories as Markdown: one section per scope, one bullet per fact."""
    out = ["# anycode memories", ""]
    for scope, heading in (("project", "Project"), ("user", "User (every project)")):
        group = [m for m in memories if m.scope == scope]
        if group:
            out += [f"## {heading}", ""] + [f"- {m.text}" for m in group] + [""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode memory`` with ``argv`` (without the leading ``memory``); the exit status
    (a usage error raises ``SystemExit(2)``)."""
    return options.run(cli, argv, "anycode memory")


def _execute(args: argparse.Namespace) -> int:
    """Run the memory command ``args.command`` on the store ``args`` names; the exit status."""
    def body(storage: Storage) -> int:
        memories = storage.memories
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
