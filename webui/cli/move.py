"""``anycode sessions move``: re-file sessions under another project folder (issue 18, item 6).

For a project folder that was renamed or moved: its sessions are stored under the old folder's
project key and their file tools are off (the old folder is gone). ``move ID… --project PATH``
moves the named sessions, ``move --all-from OLD_PATH --project PATH`` every session of the old
folder's project; ``--project`` defaults to the current folder. Each conversation moves whole
(versions, sub-agent records, archived flag; same ids, entries and timestamps) through
:func:`core.stores.move.move_conversation`; re-running after a failure finishes the move.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from core.errors import AnycodeError, os_error_message
from core.session.export import session_label
from core.session.keys import SessionKey, normalize_path, project_key
from core.session.text import counted
from webui.cli import options

if TYPE_CHECKING:
    from core.storage import Storage

log = logging.getLogger(__name__)


# The ``move`` command's own parameters (``--project``, the target, is the shared option).
PARAMS = (
    options.argument("ids", "session ids or unique prefixes (any project)", nargs=-1, metavar="ID..."),
    click.option("--all-from", metavar="OLD_PATH", default=None,
                 help="every session (archived ones too) recorded in this folder's project"),
)


def _keys(storage: Storage, mgr: Any, args: argparse.Namespace, resolve: Any) -> list[SessionKey]:
    keys: list[SessionKey] = []
    if args.all_from:
        old = project_key(normalize_path(args.all_from))
        keys += [m.key for archived in (False, True) for m in mgr.list(old, archived=archived)]
        keys += [m.key for m in mgr.experts(old)]  # the experts' sessions (issue 30) go with the project
    for sid in args.ids:
        keys.append(resolve(storage, mgr, argparse.Namespace(id=sid, project=None)))
    return list(dict.fromkeys(keys))


def run(storage: Storage, mgr: Any, args: argparse.Namespace, resolve: Any, out: Any = None) -> int:
    """Move the sessions ``args`` names to ``args.project`` (default: the current folder), in
    ``storage`` (whose sessions ``mgr`` manages).
    ``resolve(storage, mgr, namespace_with_id_and_project)`` finds a session by id in any project.
    Prints one line per conversation; returns the exit status (1 when any failed)."""
    from core.stores.move import move_conversation

    out = out or sys.stdout
    if not args.ids and not args.all_from:
        print("anycode sessions move: name sessions (ID …) or --all-from OLD_PATH.", file=sys.stderr)
        return 2
    target = normalize_path(args.project or os.getcwd())
    if not os.path.isdir(target):
        print(f"anycode sessions move: the target folder {target} does not exist; nothing was moved.",
              file=sys.stderr)
        return 1
    keys = _keys(storage, mgr, args, resolve)
    moved = failed = 0
    for key in keys:
        if not storage.sessions.exists(key):
            continue  # moved with its conversation's root
        try:
            meta = mgr.get(key)
            report = move_conversation(storage.sessions, key, target, protected_dirs=storage.protected_dirs())
        except (AnycodeError, OSError) as err:
            why = str(err) if isinstance(err, AnycodeError) else f"{os_error_message(err)}; re-run to finish"
            print(f"not moved {key.session_id}: {why}", file=sys.stderr)
            failed += 1
            continue
        label = session_label(meta.title, meta.created_at)
        if report.already:
            out.write(f"{key.session_id[:8]}  {label}: already in {target}\n")
            continue
        extra = f" (with {counted(len(report.moved) - 1, 'version')})" if len(report.moved) > 1 else ""
        out.write(f"moved {key.session_id[:8]}  {label}{extra}\n")
        moved += 1
    out.write(f"Moved {counted(moved, 'conversation')} to {target}."
              + (f" {failed} not moved; see above." if failed else "") + "\n")
    return 1 if failed else 0
