"""``anycode import …``, ``anycode backup FILE.zip`` and ``anycode restore FILE.zip``: bring
history in from other tools, and save or bring back everything. Plain argparse over :mod:`core`;
no Gradio import.

Exit status: 0 done; 1 something could not be imported/restored (each named on stderr, the
rest done) or the command failed (one sentence); 2 bad usage.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Callable, Iterable, Sequence

from core.errors import AnycodeError, os_error_message
from core.session.text import counted
from webui import console

log = logging.getLogger(__name__)


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, metavar="SPEC",
                   help="session store: jsonl, jsonl:FOLDER or a database URL (default: $ANYCODE_STORE or jsonl)")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="data directory (default: $ANYCODE_HOME or the user data directory)")
    p.add_argument("-v", "--verbose", action="store_true", help="log what happens")


def build_import_parser() -> argparse.ArgumentParser:
    """The parser of ``anycode import`` (exposed for tests and help)."""
    parser = argparse.ArgumentParser(prog="anycode import",
                                     description="Import conversations from ChatGPT, Claude Code or Codex. "
                                                 "Re-running imports nothing twice.")
    sub = parser.add_subparsers(dest="source", required=True, metavar="SOURCE")

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        _store_options(p)
        p.add_argument("--dry-run", action="store_true", help="read and count; write nothing")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.add_argument("--json", action="store_true", help="print the report as JSON")
        return p

    p = cmd("chatgpt", "a ChatGPT data export: conversations.json or the export .zip")
    p.add_argument("file", help="conversations.json or the export .zip")
    p.add_argument("--project", metavar="PATH", default=None,
                   help="the project the conversations go to (default: the current folder)")
    for name, what in (("claude-code", "Claude Code sessions (default folder: ~/.claude/projects)"),
                       ("codex", "Codex CLI sessions (default folder: ~/.codex/sessions)")):
        p = cmd(name, what)
        p.add_argument("dir", nargs="?", default=None, help="the folder (or one .jsonl file) to import")
        p.add_argument("--project", metavar="PATH", default=None,
                       help="only the sessions recorded in this project folder (default: every project)")
    return parser


def _open(args: argparse.Namespace) -> Any:
    from core.stores.factory import open_store

    return open_store(args.store, args.data_dir)


def _close(store: Any) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()


def _run(prog: str, args: argparse.Namespace, body: Callable[[Any], int]) -> int:
    console.setup_stdio()  # titles and folder names print whatever the locale (issue 20)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    store = None
    try:
        store = _open(args)
        return body(store)
    except AnycodeError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"{prog}: {os_error_message(err)}.", file=sys.stderr)
        return 1
    finally:
        if store is not None:
            _close(store)


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
    args = build_import_parser().parse_args(list(sys.argv[1:] if argv is None else argv))

    def body(store: Any) -> int:
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
            report = import_sessions(store, items, default_cwd=default_cwd, dry_run=args.dry_run, progress=progress)
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
        unreadable = not (report.imported or report.skipped) and any(p.line == 0 for p in report.problems)
        return 0 if report.ok and not unreadable else 1

    return _run("anycode import", args, body)


def backup_main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode backup FILE.zip``; return the exit status."""
    parser = argparse.ArgumentParser(prog="anycode backup",
                                     description="Write every session of every project (archived ones and "
                                                 "sub-agent records included) into one zip file with a manifest "
                                                 "and checksums.")
    parser.add_argument("file", help="the zip file to write (an existing file is left alone unless --force)")
    parser.add_argument("--force", action="store_true",
                        help="replace FILE if it exists (only once the new backup is complete)")
    _store_options(parser)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))

    def body(store: Any) -> int:
        from core.stores.backup import backup_store

        report = backup_store(store, args.file, replace=args.force)
        print(f"Backed up {counted(report.sessions, 'session')} ({counted(report.records, 'record')}, "
              f"{counted(report.bytes, 'byte')}) and {counted(report.memories, 'memory entry', 'memory entries')} "
              f"to {report.path}.")
        return 0

    return _run("anycode backup", args, body)


def restore_main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode restore FILE.zip``; return the exit status."""
    parser = argparse.ArgumentParser(prog="anycode restore",
                                     description="Bring back the sessions of a backup made with 'anycode backup'. "
                                                 "Sessions already present are skipped; a session that differs is "
                                                 "reported and left as it is: nothing is overwritten.")
    parser.add_argument("file", help="the backup zip file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    _store_options(parser)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))

    def body(store: Any) -> int:
        from core.stores.backup import restore_backup

        report = restore_backup(args.file, store, progress=not args.no_progress and sys.stderr.isatty())
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
