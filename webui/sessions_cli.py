"""``anycode sessions …``: list, read, export, fork, rename, archive, delete, expire and migrate
sessions from a terminal. Plain argparse over :mod:`core`; no Gradio import.

Exit status: 0 done; 1 the command failed (one sentence on stderr: session not found, ambiguous
id prefix, database unreachable, deletion declined, migration with conflicts, a disk full or an
output path that cannot be written); 2 bad usage.
Session ids accept unique prefixes; an id not found in the current project is looked up in
every project.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import logging
import os
import sys
from typing import Any, Sequence

from core import settings
from core.errors import AmbiguousSessionId, AnycodeError, SessionNotFound, os_error_message
from core.session.entries import messages_of
from core.session.export import session_label, session_to_jsonl, session_to_markdown
from core.session.keys import SessionKey, project_key
from core.session.manager import SessionManager
from core.session.models import SessionMeta
from core.session.text import counted
from core.session.subagents import export_entries, subagent_records
from core.stores.whole_file import place_whole
from webui import console, move_cli, search_cli

log = logging.getLogger(__name__)

PROG = "anycode sessions"


def _common(p: argparse.ArgumentParser, *, top: bool) -> None:
    # The same options before or after the subcommand; SUPPRESS on the subcommand's copy keeps
    # it from overwriting a value given before the subcommand.
    d = (lambda v: v) if top else (lambda v: argparse.SUPPRESS)
    p.add_argument("--store", default=d(None), metavar="SPEC",
                   help="session store: jsonl, jsonl:FOLDER or a database URL (default: $ANYCODE_STORE or jsonl)")
    p.add_argument("--data-dir", default=d(None), metavar="DIR",
                   help="data directory of the JSONL store and mirror outbox (default: $ANYCODE_HOME)")
    p.add_argument("--project", default=d(None), metavar="PATH",
                   help="the project folder whose sessions to use (default: the current folder)")
    p.add_argument("-v", "--verbose", action="store_true", default=d(False), help="log what happens")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the launcher's help and for tests)."""
    parser = argparse.ArgumentParser(prog=PROG, description="Manage stored anycode conversations.")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        _common(p, top=False)
        return p

    p = cmd("list", "list sessions, most recently active first")
    p.add_argument("--all-projects", action="store_true", help="every project, grouped")
    p.add_argument("--archived", action="store_true", help="archived sessions instead")
    p.add_argument("--json", action="store_true", help="machine-readable output (a JSON array)")
    p = cmd("show", "print a session as Markdown (or JSON); a conversation's id shows its version in use")
    p.add_argument("id", help="session id or unique prefix (a version's own id shows that version)")
    p.add_argument("--json", action="store_true", help="the session as JSON instead")
    p.add_argument("--subagents", action="store_true", help="also the runs of its sub-agents (task tool calls)")
    p = cmd("export", "export a session as Markdown or as its JSONL entries; a conversation's id exports "
                      "its version in use")
    p.add_argument("id", help="session id or unique prefix (a version's own id exports that version)")
    p.add_argument("--format", choices=("md", "jsonl"), default="md", help="md (default) or jsonl")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p = cmd("compact", "summarise a session's older messages now (every message stays in the session)")
    p.add_argument("id", help="session id or unique prefix")
    p = cmd("fork", "copy messages 0..N of a session into a new session")
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("--at", type=int, required=True, metavar="N", help="last message index to keep (0-based)")
    p = cmd("versions", "list the versions (Edit/Regenerate) of a session's conversation; * marks the one in use")
    p.add_argument("id", help="session id or unique prefix (the conversation's or any version's)")
    p.add_argument("--json", action="store_true", help="machine-readable output (a JSON array)")
    p = cmd("rename", "set a session's title")
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("title", help="the new title")
    for name, help_ in (("archive", "move a session out of the main list"),
                        ("unarchive", "bring an archived session back")):
        cmd(name, help_).add_argument("id", help="session id or unique prefix")
    p = cmd("rm", "delete a session for good (asks first)")
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p = cmd("cleanup", "delete unarchived sessions idle for more than N days (all projects)")
    p.add_argument("--days", type=float, default=None, help="default: $ANYCODE_CLEANUP_DAYS or 30; 0 disables")
    p.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    search_cli.add_arguments(cmd("search", "find sessions by words said in them (titles and messages)"))
    move_cli.add_arguments(cmd("move", "move sessions to another project folder (one renamed or moved): "
                                       "ID … or --all-from OLD_PATH, to --project PATH (default: here)"))
    p = cmd("migrate", "copy every session (all projects, archived, sub-agent records) to another store")
    p.add_argument("--to", required=True, metavar="SPEC", help="target store: a database URL or jsonl:FOLDER")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode sessions`` with ``argv`` (without the leading ``sessions``); return the exit status."""
    console.setup_stdio()  # any title prints, whatever the locale (issue 20)
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    for name in ("title", "query"):  # typed text, not paths: read as the UTF-8 the terminal sent
        if isinstance(getattr(args, name, None), str):
            setattr(args, name, console.text_arg(getattr(args, name)))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    store = None
    try:
        from core.stores.factory import open_store

        store = open_store(args.store, args.data_dir)
        return _COMMANDS[args.command](SessionManager(store), args)
    except AnycodeError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `anycode sessions show … | head`
        return 0
    except OSError as e:  # disk full, a folder that is a file, no permission: one sentence
        log.info("%s failed", args.command, exc_info=True)
        print(f"{PROG}: {os_error_message(e)}; nothing was saved.", file=sys.stderr)
        return 1
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


# --- helpers -----------------------------------------------------------------------------------


def _project(args: argparse.Namespace) -> str:
    return project_key(args.project or os.getcwd())


def _resolve(mgr: SessionManager, args: argparse.Namespace) -> SessionKey:
    """The session ``args.id`` names: in the chosen project, else (no --project) in any project."""
    try:
        return mgr.find(_project(args), args.id)
    except SessionNotFound:
        if args.project:
            raise
    found: list[SessionKey] = []
    for info in mgr.list_projects():
        try:
            found.append(mgr.find(info.project_key, args.id))
        except SessionNotFound:
            continue
        except AmbiguousSessionId as e:
            raise AmbiguousSessionId(args.id, e.candidates + [k.session_id for k in found]) from None
    if len(found) == 1:
        return found[0]
    if found:
        raise AmbiguousSessionId(args.id, sorted(k.session_id for k in found))
    raise SessionNotFound(f"with id {args.id!r} in any project")


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _meta_dict(m: SessionMeta) -> dict[str, Any]:
    return dataclasses.asdict(m)


def _table(metas: list[SessionMeta]) -> list[str]:
    rows = [f"{'ID':<8}  {'UPDATED':<16}  {'MSGS':>4}  TITLE"]
    for m in metas:
        kind = f" [version of {m.family[:8]}]" if m.version_of else (" [branch]" if m.forked_from else "")
        flags = kind + (" [archived]" if m.archived else "")
        rows.append(f"{m.id[:8]:<8}  {_when(m.updated_at):<16}  {m.message_count:>4}  {session_label(m.title, m.created_at)}{flags}")
    return rows


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# --- commands ----------------------------------------------------------------------------------


def _cmd_list(mgr: SessionManager, args: argparse.Namespace) -> int:
    if args.all_projects:
        projects = [(p.project_key, p.cwd) for p in mgr.list_projects()]
    else:
        projects = [(_project(args), args.project or os.getcwd())]
    groups = [(pk, cwd, mgr.list(pk, archived=args.archived)) for pk, cwd in projects]
    if args.json:
        _out(console.json_text([_meta_dict(m) for _, _, metas in groups for m in metas], indent=2))
        return 0
    lines: list[str] = []
    for pk, cwd, metas in groups:
        if args.all_projects:
            if not metas:
                continue
            noun = "archived session" if args.archived else "session"
            lines += ["", f"{cwd or pk}  ({counted(len(metas), noun)})"]
        lines += _table(metas) if metas else ["No archived sessions." if args.archived else "No sessions yet."]
    if not lines:
        lines = ["No sessions in any project."]
    _out("\n".join(lines).lstrip("\n"))
    return 0


def _shown(mgr: SessionManager, key: SessionKey) -> tuple[SessionKey, tuple[int, int, bool] | None]:
    """The session to show for ``key`` and which version it is: a conversation's id (its
    family's root) stands for the version in use, as in the web UI; a version's own id for that
    version. ``(key, (n, m, in use) or None for a session without versions)``."""
    if mgr.root_of(key) == key:
        key = mgr.current_version(key)
    n, m, in_use = mgr.version_number(key)
    return key, ((n, m, in_use) if m > 1 else None)


def _cmd_show(mgr: SessionManager, args: argparse.Namespace) -> int:
    key, version = _shown(mgr, _resolve(mgr, args))
    session = mgr.get(key)
    records = subagent_records(mgr.store, session.key) if args.subagents else []
    if args.json:
        data = dataclasses.asdict(session) | {"key": str(session.key), "id": session.id}
        if version:
            data["version"] = {"n": version[0], "of": version[1], "in_use": version[2]}
        if args.subagents:
            data["subagents"] = [{"subpath": r.key.subpath, "tool_call_id": r.tool_call_id,
                                  "description": r.description, "parent": r.parent,
                                  "messages": messages_of(r.entries)} for r in records]
        _out(console.json_text(data, indent=2))
    else:
        _out(session_to_markdown(session, records, version))
    return 0


def _cmd_export(mgr: SessionManager, args: argparse.Namespace) -> int:
    key, version = _shown(mgr, _resolve(mgr, args))
    # Both formats carry the session's sub-agent records (core.session.subagents).
    if args.format == "md":
        data = session_to_markdown(mgr.get(key), subagent_records(mgr.store, key), version).encode("utf-8")
    else:
        entries = export_entries(mgr.store, key)
        if not entries:
            raise SessionNotFound(key.session_id)
        data = session_to_jsonl(entries)
    if args.output:
        try:
            # Whole or not at all (a full disk never leaves half an export), private (0600).
            place_whole(args.output, data, replace=True)
        except OSError as e:
            # Name the file the user gave, not the hidden temporary one beside it.
            print(f"{PROG}: {_name_output(e, args.output)}; nothing was written.", file=sys.stderr)
            return 1
        print(f"Exported {key.session_id} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:
            sys.stdout.write(data.decode("utf-8"))
    return 0


def _name_output(err: OSError, output: str) -> str:
    """The sentence for ``err`` about the export file ``output`` (``err`` may name its temporary)."""
    return os_error_message(OSError(err.errno, err.strerror, output))


def _cmd_compact(mgr: SessionManager, args: argparse.Namespace) -> int:
    """Summarise with the configured model (OPENAI_BASE_URL, ANYCODE_MODEL), printing progress."""
    from core.agent.compaction import CompactionFinished, CompactionStarted, compact_session
    from core.agent.config import ModelConfig, make_client

    key = _resolve(mgr, args)
    config = ModelConfig.from_env()
    client = make_client(config)
    for event in compact_session(key, mgr.store, client=client, model=config.model):
        if isinstance(event, CompactionStarted):
            print(f"Summarising {event.messages} earlier messages with {config.model}…", file=sys.stderr)
        elif isinstance(event, CompactionFinished):
            entry = event.entry
            print(f"Compacted {key.session_id}: messages 0–{entry['first_kept_index'] - 1} summarised "
                  f"(~{entry['tokens_before']:,} → ~{entry['tokens_after']:,} tokens); every message is still "
                  "in the session.")
    return 0


def _cmd_fork(mgr: SessionManager, args: argparse.Namespace) -> int:
    try:
        new = mgr.fork(_resolve(mgr, args), args.at)
    except IndexError as e:
        print(f"{PROG}: {e}.", file=sys.stderr)
        return 1
    _out(f"Forked into {new.id} ({counted(len(new.messages), 'message')}): {session_label(new.title, new.created_at)}")
    return 0


def _cmd_versions(mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(mgr, args)
    members = mgr.family(key)
    current = mgr.current_version(key).session_id
    if args.json:
        _out(console.json_text([_meta_dict(m) | {"current": m.id == current} for m in members], indent=2))
        return 0
    lines = [f"  {'#':>2}  {'ID':<8}  {'CREATED':<16}  {'MSGS':>4}  FROM"]
    for n, m in enumerate(members, 1):
        link = m.forked_from or {}
        origin = (f"message {link.get('message_index')} of {str(link.get('session_id'))[:8]}"
                  if m.version_of else "(the conversation)")
        lines.append(f"{'*' if m.id == current else ' '} {n:>2}  {m.id[:8]:<8}  {_when(m.created_at):<16}  "
                     f"{m.message_count:>4}  {origin}")
    _out("\n".join(lines))
    return 0


def _cmd_rename(mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(mgr, args)
    _out(f"Renamed {key.session_id} to: {mgr.rename(key, args.title)}")
    return 0


def _cmd_archive(mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(mgr, args)
    mgr.archive(key)
    _out(f"Archived {key.session_id}")
    return 0


def _cmd_unarchive(mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(mgr, args)
    mgr.unarchive(key)
    _out(f"Unarchived {key.session_id}")
    return 0


def _cmd_rm(mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(mgr, args)
    if not args.yes:
        session = mgr.get(key)
        prompt = f"Delete session {key.session_id} ({session_label(session.title, session.created_at)}, {counted(len(session.messages), 'message')}) for good? [y/N] "
        try:
            answer = input(prompt)
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("Not deleted.", file=sys.stderr)
            return 1
    mgr.delete(key)
    _out(f"Deleted {key.session_id}")
    return 0


def _cmd_cleanup(mgr: SessionManager, args: argparse.Namespace) -> int:
    days = settings.cleanup_days() if args.days is None else args.days
    if days <= 0:
        _out(f"Cleanup is disabled ({days:g} days; 0 or less turns it off).")
        return 0
    if args.dry_run:
        doomed = mgr.idle_sessions(days)  # exactly what SessionManager.cleanup would delete
        for m in doomed:
            _out(f"would delete {m.id}  {_when(m.updated_at)}  {session_label(m.title, m.created_at)}")
        _out(f"{counted(len(doomed), 'session')} idle for over {days:g} days would be deleted.")
        return 0
    removed = mgr.cleanup(days)
    for key in removed:
        _out(f"deleted {key.session_id}")
    _out(f"Deleted {counted(len(removed), 'session')} idle for over {days:g} days.")
    return 0


def _cmd_migrate(mgr: SessionManager, args: argparse.Namespace) -> int:
    from core.stores.migrate import migrate_sessions
    from core.stores.factory import describe, store_from_spec

    target = store_from_spec(args.to, args.data_dir)
    try:
        report = migrate_sessions(mgr.store, target, progress=not args.no_progress)
    finally:
        close = getattr(target, "close", None)
        if callable(close):
            close()
    if args.json:
        _out(console.json_text(report.to_dict(), indent=2))
    else:
        _out(f"Migrated {report.records} records to {describe(args.to)}: {len(report.copied)} copied, "
             f"{len(report.extended)} extended, {len(report.identical)} already identical, "
             f"{len(report.archive_synced)} archive flags set, {report.memory_entries} memory entries copied.")
        for key, why in report.conflicts:
            _out(f"conflict: {key}: {why}")
        for key, why in report.errors:
            _out(f"error: {key}: {why}")
        for key in report.missing:
            _out(f"missing after migration: {key}")
        _out("Verified: every session is in the target, equal." if report.ok else
             "Not everything was migrated; see above. Re-running is safe.")
    return 0 if report.ok else 1


_COMMANDS = {
    "list": _cmd_list, "show": _cmd_show, "compact": _cmd_compact, "export": _cmd_export, "fork": _cmd_fork, "rename": _cmd_rename,
    "versions": _cmd_versions,
    "archive": _cmd_archive, "unarchive": _cmd_unarchive, "rm": _cmd_rm, "cleanup": _cmd_cleanup,
    "migrate": _cmd_migrate, "search": lambda mgr, args: search_cli.run(mgr, args),
    "move": lambda mgr, args: move_cli.run(mgr, args, _resolve),
}

if __name__ == "__main__":
    raise SystemExit(main())
