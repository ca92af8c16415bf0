"""``anycode sessions …``: list, read, export, fork, rename, archive, delete, expire and migrate
sessions from a terminal: a click group (:data:`cli`) over :mod:`core`; no Gradio import.

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

import click

from core import settings
from core.errors import (AmbiguousSessionId, AmbiguousTitle, AnycodeError, InvalidTitle, SessionNotFound,
                         os_error_message)
from core.session.compaction import shown_sizes
from core.session.entries import clean_tag, messages_of
from core.session.usage import describe as describe_usage, prices, usage_totals
from core.session.export import session_label, session_to_jsonl, session_to_markdown
from core.session.keys import SessionKey, project_key
from core.session.manager import TITLE_SHORTENED, SessionManager, title_shortened
from core.session.models import SessionMeta
from core.session.text import counted
from core.session.subagents import export_entries, subagent_records
from core.storage import Storage
from core.stores.mirror import MirroredSessionStore
from core.stores.whole_file import place_whole
from webui.cli import console, options
from webui.cli import move as move_cli
from webui.cli import search as search_cli

log = logging.getLogger(__name__)

PROG = "anycode sessions"


def _shared(f: Any) -> Any:
    """The options of ``anycode sessions`` itself and of each of its commands (given before or
    after the command's name)."""
    return options.store_options(options.project_option(
        "the project folder whose sessions to use (default: the current folder)")(f))


ID = "session id, unique prefix, or words of its title"


@click.group("sessions", cls=options.Group, context_settings=options.CONTEXT,
             short_help="manage stored conversations: list, show, export, fork, archive, migrate …",
             help="Manage stored anycode conversations: list, read, export, fork, rename, archive, delete, "
                  "expire and migrate sessions. Session ids accept unique prefixes; an id not found in "
                  "the current project is looked up in every project.",
             epilog="Exit status: 0 done, 1 the command failed (one sentence on stderr), 2 bad usage.")
@_shared
def cli(**_: Any) -> None:
    """``anycode sessions``: the group; each command below opens the store and runs."""


def _command(name: str, help_: str, *params: Any, cls: type[click.Command] | None = None) -> click.Command:
    """Add ``anycode sessions NAME`` with ``params`` (click option/argument decorators, in the
    order of its usage line) and the shared options; it opens the store and runs
    ``_COMMANDS[name]``. ``cls``: the click command class, for this command only."""
    def command(ctx: click.Context, **_: Any) -> int:
        return _execute(options.args_of(ctx))

    command.__name__ = f"sessions_{name}"
    for param in reversed(params):
        command = param(command)
    extra = {"cls": cls} if cls else {}
    return cli.command(name, help=help_, short_help=help_, **extra)(_shared(click.pass_context(command)))


REMOVE_MARK = "\ue000"  # a "-TAG" argument of `sessions tag`, told apart from an option before click parses


class _TagCommand(click.Command):
    """``sessions tag ID +x -y``: a ``-y`` that is not one of the command's own options is a tag to
    remove, not an unknown option (``--anything`` unknown stays a usage error)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        known = {o for p in self.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
        out, literal = [], False
        for a in args:
            if a == "--":
                literal = True
            elif not literal and len(a) > 1 and a[0] == "-" and a[1] != "-" and a.split("=")[0] not in known:
                a = REMOVE_MARK + a[1:]
            out.append(a)
        return super().parse_args(ctx, out)


_command("list", "list sessions, most recently active first (pinned ones marked)",
         click.option("--all-projects", is_flag=True, help="every project, grouped"),
         click.option("--archived", is_flag=True, help="archived sessions instead"),
         click.option("--tag", "tags", metavar="TAG", multiple=True, type=options.TYPED_TEXT,
                      help="only conversations with this tag (repeatable: all of them)"),
         click.option("--usage", is_flag=True, help="also the tokens each session used (reads every session; "
                                                     "cost with $ANYCODE_PRICES)"),
         options.json_option())
_command("show", "print a session as Markdown (or JSON); a conversation's id shows its version in use",
         options.argument("id", "session id, unique prefix or words of its title (a version's own id shows that version)"),
         options.json_option("the session as JSON instead"),
         click.option("--subagents", is_flag=True, help="also the runs of its sub-agents (task tool calls)"))
_command("export", "export a session as Markdown, as its JSONL entries or as an HTML page to share; a "
                   "conversation's id exports its version in use",
         options.argument("id", "session id, unique prefix or words of its title (a version's own id exports that version)"),
         click.option("--format", type=click.Choice(("md", "jsonl", "html")), default="md",
                      help="md (default), jsonl, or html: one self-contained page to share (no script, no "
                           "remote assets, light/dark)"),
         click.option("-o", "--output", metavar="FILE", default=None,
                      help="write to FILE instead of standard output"))
_command("compact", "summarise a session's older messages now (every message stays in the session)",
         options.argument("id", ID))
_command("fork", "copy messages 0..N of a session into a new session",
         options.argument("id", ID),
         click.option("--at", type=int, required=True, metavar="N", help="last message index to keep (0-based)"))
_command("versions", "list the versions (Edit/Regenerate) of a session's conversation; * marks the one in use",
         options.argument("id", "session id or unique prefix (the conversation's or any version's)"),
         options.json_option())
_command("checkpoints", "list the files the agent changed in a session, round by round (and its rewinds)",
         options.argument("id", "session id or unique prefix (a conversation's id: its version in use)"),
         options.json_option("the checkpoint entries as JSON"))
_command("rewind", "go back to message N: conversation and files (default), or one of them; --undo puts the "
                   "files back as they were before the last rewind",
         options.argument("id", "session id or unique prefix (a conversation's id: its version in use)"),
         click.option("--to", type=int, metavar="N", default=None,
                      help="last message index to keep (0-based, as `show` numbers them)"),
         click.option("--files-only", is_flag=True, callback=options.exclusive_with("conversation_only"),
                      help="only the files go back; the conversation stays"),
         click.option("--conversation-only", is_flag=True, callback=options.exclusive_with("files_only"),
                      help="only the conversation (a new version cut at N); the files stay"),
         click.option("--dry-run", is_flag=True, help="only print what would change"),
         click.option("--include", metavar="PATH", multiple=True,
                      help="also restore PATH though it was changed outside anycode since (repeatable)"),
         click.option("--undo", is_flag=True, help="undo the last rewind instead (no --to)"))
_command("rename", "set a session's title",
         options.argument("id", ID),
         options.argument("title", "the new title", type=options.TYPED_TEXT))
_command("pin", "pin a conversation to the top of the list (web sidebar too)", options.argument("id", ID))
_command("unpin", "unpin a conversation", options.argument("id", ID))
_command("tag", "add (+TAG or TAG) and remove (-TAG) tags of a conversation; with none, print its tags",
         options.argument("id", ID),
         options.argument("changes", "+TAG adds, -TAG removes (put -- before a tag named like an option)",
                          nargs=-1, type=options.TYPED_TEXT, metavar="[+TAG|-TAG]..."),
         cls=_TagCommand)
_command("archive", "move a session out of the main list", options.argument("id", ID))
_command("unarchive", "bring an archived session back", options.argument("id", ID))
_command("rm", "delete a session for good (asks first)",
         options.argument("id", ID),
         click.option("-y", "--yes", is_flag=True, help="do not ask for confirmation"))
_command("cleanup", "delete unarchived sessions idle for more than N days (all projects); the local copy only — "
                    "a mirror keeps its copy (see --mirror)",
         click.option("--days", type=float, default=None,
                      help="default: $ANYCODE_CLEANUP_DAYS or 30 ($ANYCODE_MIRROR_RETENTION_DAYS with --mirror); "
                           "0 disables"),
         click.option("--dry-run", is_flag=True, help="only list what would be deleted"),
         click.option("--mirror", is_flag=True,
                      help="delete the mirror's expired copies instead ($ANYCODE_MIRROR); the local copies stay"))
_command("mirror", "the mirror's status: lag, writes waiting, conversations that had changes from elsewhere "
                   "(kept as versions there), and its recent log",
         options.json_option(),
         click.option("--flush", type=float, default=2.0, metavar="SECONDS",
                      help="first copy what is waiting for up to SECONDS (default 2; 0: just report)"))
_command("search", "find sessions by words said in them (titles and messages)", *search_cli.PARAMS)
_command("move", "move sessions to another project folder (one renamed or moved): ID … or --all-from OLD_PATH, "
                 "to --project PATH (default: here)", *move_cli.PARAMS)
_command("pull", "bring from the mirror what this machine lacks: new sessions, the rest of ones it has the start "
                 "of; where both machines wrote, the mirror's history becomes a version",
         click.option("--all-projects", is_flag=True, help="every project in the mirror (default: this folder's "
                                                           "project, found by its git remote at any path)"),
         click.option("--from", "source", metavar="SPEC", default=None,
                      help="the store to pull from (default: $ANYCODE_MIRROR)"),
         options.json_option("print the report as JSON"))
_command("migrate", "copy every session (all projects, archived, sub-agent records) to another store",
         click.option("--to", required=True, metavar="SPEC", help="target store: a database, s3:// or redis:// URL, or jsonl:FOLDER"),
         click.option("--no-progress", is_flag=True, help="no progress bar"),
         options.json_option("print the report as JSON"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode sessions`` with ``argv`` (without the leading ``sessions``); return the exit
    status (a usage error raises ``SystemExit(2)``)."""
    return options.run(cli, argv, PROG)


def _execute(args: argparse.Namespace) -> int:
    """Open the store ``args`` names and run the command ``args.command`` on it; the exit status."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with options.open_storage(args) as storage:
            mgr = SessionManager(storage.sessions, protected_dirs=storage.protected_dirs())
            return _COMMANDS[args.command](storage, mgr, args)
    except AmbiguousTitle as e:  # the matches, to pick from by id
        lines = [f"  {sid}  {title}" for sid, title in e.candidates[:20]]
        if len(e.candidates) > 20:
            lines.append(f"  … and {len(e.candidates) - 20} more")
        print(f"{PROG}: {e}\n" + "\n".join(lines), file=sys.stderr)
        return 1
    except AnycodeError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `anycode sessions show … | head`
        return 0
    except OSError as e:  # disk full, a folder that is a file, no permission: one sentence
        log.info("%s failed", args.command, exc_info=True)
        print(f"{PROG}: {os_error_message(e)}; nothing was saved.", file=sys.stderr)
        return 1


# --- helpers -----------------------------------------------------------------------------------


def _project(args: argparse.Namespace) -> str:
    return project_key(args.project or os.getcwd())


def _resolve(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> SessionKey:
    """The session ``args.id`` names: an id or unique id prefix in the chosen project, else (no
    --project) in any project; when none matches, the conversation whose title holds those words
    (:meth:`SessionManager.find_title`, the same order). Raises ``SessionNotFound``,
    ``AmbiguousSessionId``, ``AmbiguousTitle``."""
    here = search_cli.keys_of_folder(storage, args.project or os.getcwd())
    for pk in here:  # this folder's project, then its other paths (another checkout or machine)
        try:
            return mgr.find(pk, args.id)
        except SessionNotFound:
            pass
    found: list[SessionKey] = []
    for info in ([] if args.project else mgr.list_projects()):
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
    # No id or prefix matched: words of a title (core.session.lookup), here first, then anywhere.
    try:
        return mgr.find_title(_project(args), args.id, everywhere=not args.project)
    except AmbiguousTitle as e:
        raise AmbiguousTitle(args.id, e.candidates) from None


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _meta_dict(m: SessionMeta) -> dict[str, Any]:
    return dataclasses.asdict(m)


def _table(metas: list[SessionMeta], used: dict[str, Any] | None = None) -> list[str]:
    rows = [f"{'ID':<8}  {'UPDATED':<16}  {'MSGS':>4}  " + (f"{'TOKENS':>9}  " if used else "") + "TITLE"]
    for m in metas:
        kind = f" [version of {m.family[:8]}]" if m.version_of else (" [branch]" if m.forked_from else "")
        flags = kind + (" [archived]" if m.archived else "") + (" [pinned]" if m.pinned else "")
        flags += "".join(f" #{tag}" for tag in m.tags)
        tokens = ""
        if used:
            u = used[m.id]
            tokens = f"{('~' if u.estimated else '') + format(u.total, ','):>9}  "
        rows.append(f"{m.id[:8]:<8}  {_when(m.updated_at):<16}  {m.message_count:>4}  {tokens}"
                    f"{session_label(m.title, m.created_at)}{flags}")
    return rows


def _out(text: str, *, exact: bool = False) -> None:
    """Print ``text`` (a newline added when missing); on a terminal its controls are shown as
    labels (:func:`console.terminal_text`) unless ``exact`` (JSON: its escapes say it all)."""
    if not exact:
        text = console.terminal_text(text)  # chat content never drives the terminal (escapes, bidi)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# --- commands ----------------------------------------------------------------------------------


def _cmd_list(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    if args.all_projects:
        projects = [(p.project_key, p.cwd) for p in mgr.list_projects()]
    else:
        projects = [(_project(args), args.project or os.getcwd())]
    groups = [(pk, cwd, mgr.list(pk, archived=args.archived)) for pk, cwd in projects]
    if not args.all_projects:
        # This folder's project includes its sessions recorded at another path of the same git
        # checkout (another machine's, after a pull): the page lists them too (trial 7, defect 3).
        pk, cwd, metas = groups[0]
        aliases = search_cli.keys_of_folder(storage, cwd)[1:]
        if aliases:
            for alias in aliases:
                metas = metas + mgr.list(alias, archived=args.archived)
            metas.sort(key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)
            groups = [(pk, cwd, metas)]
    if args.tags:
        # A conversation's tags are its root's: list its versions with it, like the sidebar.
        wanted = {clean_tag(t) for t in args.tags}
        groups = [(pk, cwd, _tagged(metas, wanted)) for pk, cwd, metas in groups]
    used: dict[str, Any] = {}
    if getattr(args, "usage", False):
        for _, _, metas in groups:
            for m in metas:
                used[m.id] = usage_totals(storage.sessions.load(m.key) or [])
    if args.json:
        rows = [_meta_dict(m) | ({"usage": used[m.id].to_dict() | {"cost": used[m.id].cost(prices())}} if used else {})
                for _, _, metas in groups for m in metas]
        _out(console.json_text(rows, indent=2), exact=True)
        return 0
    lines: list[str] = []
    for pk, cwd, metas in groups:
        if args.all_projects:
            if not metas:
                continue
            noun = "archived session" if args.archived else "session"
            lines += ["", f"{cwd or pk}  ({counted(len(metas), noun)})"]
        lines += _table(metas, used) if metas else ["No archived sessions." if args.archived else "No sessions yet."]
    if not lines:
        lines = ["No sessions in any project."]
    _out("\n".join(lines).lstrip("\n"))
    return 0


def _tagged(metas: list[SessionMeta], wanted: set[str]) -> list[SessionMeta]:
    """The rows of ``metas`` whose conversation (the family root's row) has every tag of ``wanted``."""
    tags = {m.id: set(m.tags) for m in metas}
    return [m for m in metas if wanted <= tags.get(m.family, set(m.tags))]


def _shown(mgr: SessionManager, key: SessionKey) -> tuple[SessionKey, tuple[int, int, bool] | None]:
    """The session to show for ``key`` and which version it is: a conversation's id (its
    family's root) stands for the version in use, as in the web UI; a version's own id for that
    version. ``(key, (n, m, in use) or None for a session without versions)``."""
    if mgr.root_of(key) == key:
        key = mgr.current_version(key)
    n, m, in_use = mgr.version_number(key)
    return key, ((n, m, in_use) if m > 1 else None)


def _cmd_show(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key, version = _shown(mgr, _resolve(storage, mgr, args))
    session = mgr.get(key)
    records = subagent_records(storage.sessions, session.key) if args.subagents else []
    if args.json:
        pinned, tags = mgr.pin_and_tags(key)  # the conversation's (a version's record has none)
        data = dataclasses.asdict(session) | {"key": str(session.key), "id": session.id, "pinned": pinned,
                                               "tags": list(tags)}
        data.pop("system_at", None)  # the fold's index for the web view, not part of the session
        if version:
            data["version"] = {"n": version[0], "of": version[1], "in_use": version[2]}
        if args.subagents:
            data["subagents"] = [{"subpath": r.key.subpath, "tool_call_id": r.tool_call_id,
                                  "description": r.description, "parent": r.parent,
                                  "messages": messages_of(r.entries)} for r in records]
        totals = usage_totals(storage.sessions.load(key) or [])
        data["usage"] = totals.to_dict() | {"cost": totals.cost(prices())}
        _out(console.json_text(data, indent=2), exact=True)
    else:
        _out(session_to_markdown(session, records, version, tags=mgr.pin_and_tags(key)[1]))
        totals = usage_totals(storage.sessions.load(key) or [])
        if totals.replies:
            _out(f"Usage: {describe_usage(totals)}")
    return 0


def _cmd_export(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key, version = _shown(mgr, _resolve(storage, mgr, args))
    # Both formats carry the session's sub-agent records (core.session.subagents).
    if args.format == "html":
        from webui.chat.share_page import session_to_html

        data = session_to_html(mgr.get(key), version=version, tags=mgr.pin_and_tags(key)[1]).encode("utf-8")
    elif args.format == "md":
        data = session_to_markdown(mgr.get(key), subagent_records(storage.sessions, key), version,
                                   tags=mgr.pin_and_tags(key)[1]).encode("utf-8")
    else:
        entries = export_entries(storage.sessions, key)
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


def _cmd_compact(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    """Summarise with the configured model (OPENAI_BASE_URL, ANYCODE_MODEL), printing progress."""
    from core.agent.compaction import compact_session
    from core.agent.events import CompactionFinished, CompactionStarted
    from core.agent.config import ModelConfig, make_client

    key = _resolve(storage, mgr, args)
    config = ModelConfig.from_env()
    client = make_client(config)
    for event in compact_session(key, mgr, client=client, model=config.model, data_dir=storage.data_dir):
        if isinstance(event, CompactionStarted):
            print(f"Summarising {event.messages} earlier messages with {config.model}…", file=sys.stderr)
        elif isinstance(event, CompactionFinished):
            entry = event.entry
            shown = shown_sizes(entry)  # never "after" larger than "before"; "~" marks estimates
            sizes = (f" ({'~' if shown[2] else ''}{shown[0]:,} → {'~' if shown[3] else ''}{shown[1]:,} tokens"
                     + ("; ~ = estimated" if shown[2] or shown[3] else "") + ")") if shown else ""
            print(f"Compacted {key.session_id}: messages 0–{entry['first_kept_index'] - 1} summarised"
                  f"{sizes}; every message is still in the session.")
    return 0


def _cmd_fork(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    try:
        new = mgr.fork(_resolve(storage, mgr, args), args.at)
    except IndexError as e:
        print(f"{PROG}: {e}.", file=sys.stderr)
        return 1
    _out(f"Forked into {new.id} ({counted(len(new.messages), 'message')}): {session_label(new.title, new.created_at)}")
    return 0


def _cmd_versions(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(storage, mgr, args)
    members = mgr.family(key)
    current = mgr.current_version(key).session_id
    if args.json:
        _out(console.json_text([_meta_dict(m) | {"current": m.id == current} for m in members], indent=2), exact=True)
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


def _cmd_rename(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(storage, mgr, args)
    try:
        title = mgr.rename(key, args.title)
    except InvalidTitle as e:  # nothing written: say why, and that the old title stays
        print(f"{PROG}: {str(e).rstrip('.')}; the title was kept.", file=sys.stderr)
        return 1
    if title_shortened(args.title):
        print(f"{PROG}: {TITLE_SHORTENED}", file=sys.stderr)
    _out(f"Renamed {key.session_id} to: {title}")
    return 0


def _cmd_pin(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = mgr.pin(_resolve(storage, mgr, args), args.command == "pin")
    _out(f"{'Pinned' if args.command == 'pin' else 'Unpinned'} {key.session_id}")
    return 0


def _cmd_tag(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(storage, mgr, args)
    removing = tuple("-" + REMOVE_MARK)
    add = [c[1:] if c.startswith("+") else c for c in args.changes if not c.startswith(removing)]
    remove = [c[1:] for c in args.changes if c.startswith(removing)]
    tags = mgr.tag(key, add=add, remove=remove) if args.changes else mgr.pin_and_tags(key)[1]
    _out(f"Tags of {mgr.root_of(key).session_id}: " + (" ".join(f"#{t}" for t in tags) or "(none)"))
    return 0


def _cmd_archive(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(storage, mgr, args)
    mgr.archive(key)
    _out(f"Archived {key.session_id}")
    return 0


def _cmd_unarchive(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(storage, mgr, args)
    mgr.unarchive(key)
    _out(f"Unarchived {key.session_id}")
    return 0


def _cmd_rm(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    key = _resolve(storage, mgr, args)
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


def _mirrored(storage: Storage) -> MirroredSessionStore:
    if storage.mirror is None:
        raise AnycodeError("No mirror is configured: set ANYCODE_MIRROR (a database URL) to keep a second copy.")
    return storage.mirror


def _cmd_cleanup_mirror(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    store = _mirrored(storage)
    days = settings.mirror_retention_days() if args.days is None else args.days
    if not days or days <= 0:
        _out("The mirror keeps every copy (ANYCODE_MIRROR_RETENTION_DAYS is not set; give --days N to "
             "delete copies idle for over N days).")
        return 0
    doomed = store.expire_mirror(days, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    for m in doomed:
        _out(f"{verb} the mirror's copy of {m.id}  {_when(m.updated_at)}  {session_label(m.title, m.created_at)}")
    _out(f"{'Would delete' if args.dry_run else 'Deleted'} {counted(len(doomed), 'mirror copy', 'mirror copies')} "
         f"idle for over {days:g} days; the local copies stay.")
    return 0


def _cmd_mirror(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    store = _mirrored(storage)
    if args.flush > 0:
        store.flush(args.flush)
    st = store.status()
    events = store.outbox.events(20)
    if args.json:
        data = dict(st, diverged=[{"session": d.key.session_id, "project": d.key.project_key,
                                   "version": d.target, "at": d.diverged_at} for d in st.get("diverged") or []],
                    log=[{"at": at, "kind": kind, "text": text} for at, kind, text in events])
        _out(console.json_text(data, indent=2), exact=True)
        return 0
    state = {"ok": "up to date", "catching_up": "catching up", "failing": "failing"}.get(st["state"], st["state"])
    _out(f"Mirror: {st['mirror']} — {state}")
    lag = st.get("lag_seconds")
    _out(f"Waiting: {counted(st.get('pending_items') or 0, 'write')} ({counted(st.get('pending_entries') or 0, 'entry', 'entries')})"
         + (f", the oldest for {lag:.0f} s" if lag is not None else ""))
    if st.get("last_success_at"):
        _out(f"Last copied: {_when(st['last_success_at'])}")
    if st.get("last_error"):
        _out(f"Last error: {st['last_error']}")
    if st.get("last_warning"):
        _out(f"Warning: {st['last_warning']}")
    diverged = st.get("diverged") or []
    if diverged:
        _out(f"{counted(len(diverged), 'conversation')} had changes from elsewhere; yours were kept as versions there:")
        for d in diverged:
            _out(f"  {d.key.session_id} -> version {d.target}  ({_when(d.diverged_at)})")
    else:
        _out("No conversation had changes from elsewhere.")
    if events:
        _out("Log:")
        for at, kind, text in events:
            _out(f"  {_when(at)}  {kind}: {text}")
    return 0


def _cmd_cleanup(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    if args.mirror:
        return _cmd_cleanup_mirror(storage, mgr, args)
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
    from core.stores.blobs import collect_unreferenced

    blobs = collect_unreferenced(storage.sessions, storage.blobs)  # checkpoint bytes no session refers to any more
    for key in removed:
        _out(f"deleted {key.session_id}")
    if blobs:
        _out(f"Removed {counted(len(blobs), 'checkpoint blob')} no session refers to.")
    _out(f"Deleted {counted(len(removed), 'session')} idle for over {days:g} days.")
    return 0


def _cmd_migrate(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    from core.storage import Storage as StorageOf
    from core.stores.migrate import migrate_sessions
    from core.stores.factory import describe, store_from_spec

    # The target's own memory log and blob folder (a JSONL folder keeps them beside its sessions;
    # a database's blobs stay in this data dir, where they already are).
    with StorageOf(store_from_spec(args.to, storage.data_dir), data_dir=storage.data_dir) as target:
        report = migrate_sessions(storage.sessions, target.sessions, memories=(storage.memory_log, target.memory_log),
                                  blobs=(storage.blobs, target.blobs), progress=not args.no_progress)
    if args.json:
        _out(console.json_text(report.to_dict(), indent=2), exact=True)
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


def _rewind_workspace(storage: Storage, mgr: SessionManager, key: SessionKey):
    from core.agent.workspace import check_workspace

    session = mgr.get(key)
    checked = check_workspace(key, session.cwd, origin=session.origin, protected_dirs=storage.protected_dirs())
    return checked.workspace


def _cmd_checkpoints(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    from core.agent.checkpoints import checkpoints_of

    key, _ = _shown(mgr, _resolve(storage, mgr, args))
    cps = checkpoints_of(storage.sessions.load(key) or [])
    if args.json:
        _out(console.json_text(cps, indent=2), exact=True)
        return 0
    if not cps:
        _out(f"No file changes are recorded in {key.session_id[:8]}.")
        return 0
    lines = []
    for cp in cps:
        what = ("undo of a rewind" if cp.get("undoes") else f"rewind to message {cp.get('to', 0) - 1}"
                if cp.get("rewind") else f"after message {cp['at'] - 1}")
        lines.append(f"{_when(cp.get('ts') or 0)}  {what}:")
        for f in cp["files"]:
            kind = ("created" if f.get("before") is None else "removed" if f.get("after") is None else "changed")
            note = "  (too large: only its hash was kept)" if f.get("kept") is False else ""
            lines.append(f"    {kind:<8} {f.get('path')}{note}")
    _out("\n".join(lines))
    return 0


def _cmd_rewind(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    from core.agent import checkpoints

    key, _ = _shown(mgr, _resolve(storage, mgr, args))
    ws = _rewind_workspace(storage, mgr, key)
    if args.undo:
        if args.to is not None:
            print(f"{PROG}: --undo takes no --to.", file=sys.stderr)
            return 2
        if args.dry_run:
            _, plan = checkpoints.plan_undo(mgr, key, ws, blobs=storage.blobs)
            _out("\n".join(["Undo would put back:"] + [f"  {c.sentence()}" for c in plan]))
            return 0
        result = checkpoints.undo(mgr, key, ws, chosen=args.include, blobs=storage.blobs)
        _out("\n".join([f"Undid the last rewind; showing {result.key.session_id[:8]}."]
                       + [f"  {c.path}: put back" for c in result.files]
                       + [f"  {c.sentence()}" for c in result.left]))
        return 0
    if args.to is None:
        print(f"{PROG}: rewind needs --to N (or --undo).", file=sys.stderr)
        return 2
    mode = "files" if args.files_only else "conversation" if args.conversation_only else "both"
    if args.dry_run:
        plan = checkpoints.plan_rewind(mgr, key, args.to, ws if mode != "conversation" else None, mode=mode,
                                       blobs=storage.blobs)
        lines = [f"Rewind to message {plan.keep - 1} ({ {'both': 'conversation and files', 'files': 'files only', 'conversation': 'conversation only'}[mode] }):"]
        lines += [f"  {f.sentence()}" for f in plan.files] or (["  no file changes"] if mode != "conversation" else [])
        _out("\n".join(lines))
        return 0
    result = checkpoints.rewind(mgr, key, args.to, ws if mode != "conversation" else None, mode=mode,
                                chosen=args.include, blobs=storage.blobs)
    lines = [f"Rewound to message {args.to}" + (f"; the conversation continues in version {result.key.session_id[:8]}."
                                                if result.key != key else ".")]
    lines += [f"  {c.sentence()}" for c in result.files] + [f"  {c.sentence()}" for c in result.left]
    _out("\n".join(lines))
    return 0


def _cmd_pull(storage: Storage, mgr: SessionManager, args: argparse.Namespace) -> int:
    from core.session.identity import project_identity
    from core.stores.aliases import header_identity
    from core.stores.factory import describe, store_from_spec
    from core.stores.pull import pull_sessions

    spec = (args.source or os.environ.get("ANYCODE_MIRROR", "")).strip()
    if not spec:
        print(f"{PROG} pull: no mirror is configured: set ANYCODE_MIRROR to the mirror's URL or give --from SPEC.",
              file=sys.stderr)
        return 1
    remote = store_from_spec(spec, storage.data_dir)
    try:
        keys = None
        if not args.all_projects:
            folder = os.path.abspath(args.project or os.getcwd())
            own, identity = project_key(folder), project_identity(folder)
            # This folder's project: its own key, and any key of the same git identity (another
            # machine's checkout at another path).
            keys = [p.project_key for p in remote.list_projects()
                    if p.project_key == own or (identity and header_identity(remote, p.project_key)[0] == identity)]
        report = pull_sessions(remote, storage.sessions, aliases=storage.aliases, memory_log=storage.memory_log,
                               blobs=storage.blobs, project_keys=keys)
    finally:
        remote.close()
    if args.json:
        _out(console.json_text(report.to_dict()), exact=True)
    else:
        for key, version in report.versions:
            _out(f"both machines wrote in {key.split('/')[-1][:8]}: the mirror's history is kept as version {version[:8]}")
        for key, why in report.errors:
            print(f"not pulled {key}: {why}", file=sys.stderr)
        _out(f"{report.summary()} (from {describe(spec)})")
    return 0 if report.ok else 1


_COMMANDS = {
    "pull": _cmd_pull,
    "checkpoints": _cmd_checkpoints, "rewind": _cmd_rewind,
    "list": _cmd_list, "show": _cmd_show, "compact": _cmd_compact, "export": _cmd_export, "fork": _cmd_fork, "rename": _cmd_rename,
    "versions": _cmd_versions,
    "pin": _cmd_pin, "unpin": _cmd_pin, "tag": _cmd_tag,
    "archive": _cmd_archive, "unarchive": _cmd_unarchive, "rm": _cmd_rm, "cleanup": _cmd_cleanup,
    "migrate": _cmd_migrate, "mirror": _cmd_mirror,
    "search": lambda storage, mgr, args: search_cli.run(storage, mgr, args),
    "move": lambda storage, mgr, args: move_cli.run(storage, mgr, args, _resolve),
}

if __name__ == "__main__":
    raise SystemExit(main())
