"""``anycode import …``, ``anycode backup FILE.zip`` and ``anycode restore FILE.zip``: bring
history in from other tools, and save or bring back everything: click commands over :mod:`core`;
no Gradio import.

Exit status: 0 done; 1 something could not be imported/restored (each named on stderr, the
rest done) or the command failed (one sentence); 2 bad usage.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import click

from core.errors import AnycodeError, os_error_message
from core.session.text import counted
from webui.cli import console, options

if TYPE_CHECKING:
    from core.storage import Storage

log = logging.getLogger(__name__)


@click.group("import", cls=options.Group, context_settings=options.CONTEXT,
             short_help="import ChatGPT, Claude Code or Codex history",
             help="Import conversations from ChatGPT, Claude Code or Codex. Re-running imports nothing twice.",
             epilog="Exit status: 0 done, 1 something could not be imported (each named on stderr, the rest "
                    "done) or the command failed, 2 bad usage.")
def import_cli() -> None:
    """``anycode import``: one command per source."""


def _import_command(name: str, help_: str, *params: Any) -> click.Command:
    def command(ctx: click.Context, **_: Any) -> int:
        return _import(options.args_of(ctx, source=name))

    command.__name__ = f"import_{name.replace('-', '_')}"
    for param in reversed(params + (
            click.option("--dry-run", is_flag=True, help="read and count; write nothing"),
            click.option("--no-progress", is_flag=True, help="no progress bar"),
            options.json_option("print the report as JSON"))):
        command = param(command)
    return import_cli.command(name, help=help_, short_help=help_)(options.store_options(click.pass_context(command)))


_import_command("chatgpt", "a ChatGPT data export: conversations.json or the export .zip",
                options.argument("file", "conversations.json or the export .zip"),
                options.project_option("the project the conversations go to (default: the current folder)"))
for _name, _what in (("claude-code", "Claude Code sessions (default folder: ~/.claude/projects)"),
                     ("codex", "Codex CLI sessions (default folder: ~/.codex/sessions)")):
    _import_command(_name, _what,
                    options.argument("dir", "the folder (or one .jsonl file) to import", required=False),
                    options.project_option("only the sessions recorded in this project folder "
                                           "(default: every project)"))


@click.command("backup", context_settings=options.CONTEXT, short_help="save every session into one zip file",
               help="Write every session of every project (archived ones and sub-agent records included) into "
                    "one zip file with a manifest and checksums.")
@options.argument("file", "the zip file to write (an existing file is left alone unless --force)")
@click.option("--force", is_flag=True, help="replace FILE if it exists (only once the new backup is complete)")
@options.store_options
@click.pass_context
def backup_cli(ctx: click.Context, **_: Any) -> int:
    """``anycode backup FILE.zip``."""
    return _backup(options.args_of(ctx))


@click.command("restore", context_settings=options.CONTEXT,
               short_help="bring back the sessions of a backup (nothing is overwritten)",
               help="Bring back the sessions of a backup made with 'anycode backup'. Sessions already present "
                    "are skipped; a session that differs is reported and left as it is: nothing is overwritten.")
@options.argument("file", "the backup zip file")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@options.json_option("print the report as JSON")
@options.store_options
@click.pass_context
def restore_cli(ctx: click.Context, **_: Any) -> int:
    """``anycode restore FILE.zip``."""
    return _restore(options.args_of(ctx))


def _run(prog: str, args: argparse.Namespace, body: Callable[[Storage], int]) -> int:
    """Open the storage the store options name (:func:`webui.cli.options.open_storage`), run
    ``body`` on it and close it; the exit status (1 with one sentence for a store or OS error)."""
    console.setup_stdio()  # titles and folder names print whatever the locale (issue 20)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with options.open_storage(args) as storage:
            return body(storage)
    except AnycodeError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"{prog}: {os_error_message(err)}.", file=sys.stderr)
        return 1


def _with_progress(items: Iterable[Any], enabled: bool) -> tuple[Iterable[Any], Callable[[Any], None] | None, Any]:
    if not enabled or not sys.stderr.isatty():
        return items, None, None
    try:
        from tqdm import tqdm
    except ImportError:
        return items, None, None
    bar = tqdm(unit=" conversations", desc="importing", file=sys.stderr, dynamic_ncols=True)
    return items, (lambda _s: bar.update(1)), bar


def import_main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode import`` with ``argv`` (without the leading ``import``); return the exit status."""
    return options.run(import_cli, argv, "anycode import")


def _import(args: argparse.Namespace) -> int:
    def body(storage: Storage) -> int:
        from core.importers import chatgpt, claude_code, codex
        from core.importers.base import import_sessions

        default_cwd = None
        source_path = args.file if args.source == "chatgpt" else args.dir or (
            claude_code.default_dir() if args.source == "claude-code" else codex.default_dir())
        if not os.path.exists(source_path):
            print(f"anycode import: there is no {source_path} to import from.", file=sys.stderr)
            return 1
        if args.source == "chatgpt":
            items = chatgpt.read_export(args.file)
            default_cwd = args.project
        elif args.source == "claude-code":
            items = claude_code.read_sessions(args.dir or claude_code.default_dir(), project=args.project)
        else:
            items = codex.read_sessions(args.dir or codex.default_dir(), project=args.project)
        items, progress, bar = _with_progress(items, not args.no_progress)
        try:
            report = import_sessions(storage.sessions, items, default_cwd=default_cwd, dry_run=args.dry_run, progress=progress)
        finally:
            if bar is not None:
                bar.close()
        if args.json:
            print(console.json_text(report.to_dict(), indent=2))
        else:
            for problem in report.problems:
                print(f"skipped {problem}", file=sys.stderr)
            for sid, why in report.failed:
                print(f"not imported {sid}: {why}", file=sys.stderr)
            print(report.summary())
        written = report.imported or report.skipped or report.updated or report.versions
        unreadable = not written and any(p.line == 0 for p in report.problems)
        return 0 if report.ok and not unreadable else 1

    return _run("anycode import", args, body)


def backup_main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode backup FILE.zip``; return the exit status."""
    return options.run(backup_cli, argv, "anycode backup")


def _backup(args: argparse.Namespace) -> int:
    def body(storage: Storage) -> int:
        from core.stores.backup import backup_store

        report = backup_store(storage.sessions, args.file, memory_log=storage.memory_log, blobs=storage.blobs,
                              replace=args.force)
        print(f"Backed up {counted(report.sessions, 'session')} ({counted(report.records, 'record')}, "
              f"{counted(report.bytes, 'byte')}) and {counted(report.memories, 'memory entry', 'memory entries')} "
              f"to {report.path}.")
        return 0

    return _run("anycode backup", args, body)


def restore_main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode restore FILE.zip``; return the exit status."""
    return options.run(restore_cli, argv, "anycode restore")


def _restore(args: argparse.Namespace) -> int:
    def body(storage: Storage) -> int:
        from core.stores.backup import restore_backup

        report = restore_backup(args.file, storage.sessions, memory_log=storage.memory_log, blobs=storage.blobs,
                                progress=not args.no_progress and sys.stderr.isatty())
        if args.json:
            print(console.json_text(report.to_dict(), indent=2))
            return 0 if report.ok else 1
        for key, why in report.conflicts:
            print(f"conflict: {key}: {why}", file=sys.stderr)
        for key, why in report.errors:
            print(f"error: {key}: {why}", file=sys.stderr)
        print(f"Restored {counted(len(report.copied), 'record')} ({len(report.extended):,} extended, "
              f"{len(report.identical) + len(report.newer):,} already present, "
              f"{counted(len(report.conflicts), 'conflict')}) "
              f"from {args.file}.")
        return 0 if report.ok else 1

    return _run("anycode restore", args, body)
