"""``anycode projects`` and ``anycode mirror lifecycle``: history that follows you (issue 26).

``anycode projects`` lists the projects the store holds sessions of — key, folder, sessions and the
identity (git remote plus the path inside the checkout, :mod:`core.session.identity`) each is
known by, so the same project at two paths shows as one identity. ``anycode mirror lifecycle
--days N`` puts an expiration rule on an S3 mirror's prefix: the design article's "the external
mirror is cleaned by the backend's lifecycle policy"; for Redis and database mirrors it says which
setting does the same. Exit status 0 ok, 1 failed, 2 bad usage.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

import click

from core.storage import Storage
from core.stores.aliases import learn_from_store
from webui.cli import console, options
from webui.cli.transfer import _run

log = logging.getLogger(__name__)


@click.command("projects", context_settings=options.CONTEXT,
               short_help="list projects with their folders and identities (git remote)",
               help="List the projects the store holds sessions of: key, folder, sessions and the identity "
                    "(git remote plus the path inside the checkout) each is known by. Projects of one "
                    "identity are one project, whatever their paths on different machines.",
               epilog="Exit status: 0 done, 1 the store failed (one sentence on stderr), 2 bad usage.")
@options.json_option()
@options.store_options
@click.pass_context
def projects_cli(ctx: click.Context, **_: Any) -> int:
    """``anycode projects``."""
    return _projects(options.args_of(ctx))


def _projects(args: argparse.Namespace) -> int:
    def body(storage: Storage) -> int:
        aliases = storage.aliases
        learn_from_store(storage.sessions, aliases)  # headers are the source; the registry only a cache
        rows = []
        for info in storage.sessions.list_projects():
            rows.append({"project_key": info.project_key, "cwd": info.cwd, "sessions": info.session_count,
                         "identity": aliases.identity_of(info.project_key)})
        if args.json:
            print(console.json_text(rows, indent=2))
            return 0
        if not rows:
            print("No projects yet.")
            return 0
        for r in rows:
            print(f"{r['sessions']:>5}  {r['identity'] or '(no git remote)':<48}  {r['cwd'] or r['project_key']}")
        return 0

    return _run("anycode projects", args, body)


@click.group("mirror", cls=options.Group, context_settings=options.CONTEXT,
             short_help="the mirror's own retention (lifecycle rule on an S3 prefix)",
             help="Settings that belong to the mirror (ANYCODE_MIRROR) rather than to this machine.")
def mirror_cli() -> None:
    """``anycode mirror``: the group."""


@mirror_cli.command("lifecycle", context_settings=options.CONTEXT,
                    short_help="expire the mirror's copies N days after they were written",
                    help="Put an expiration rule on the S3 mirror's prefix: every object there expires N days "
                         "after it was written (the bucket's lifecycle policy; local copies are not touched). "
                         "For a Redis mirror set ANYCODE_MIRROR_TTL_DAYS; for a database mirror "
                         "ANYCODE_MIRROR_RETENTION_DAYS.",
                    epilog="Exit status: 0 done, 1 the mirror refused or is not S3, 2 bad usage.")
@click.option("--days", type=click.IntRange(min=1), required=True, metavar="N", help="days after which copies expire")
@click.option("--mirror", "spec", metavar="SPEC", default=None, help="the mirror (default: $ANYCODE_MIRROR)")
def lifecycle_cli(days: int, spec: str | None) -> int:
    """``anycode mirror lifecycle --days N``."""
    from core.errors import StoreUnavailable

    spec = (spec or os.environ.get("ANYCODE_MIRROR", "")).strip()
    if not spec.startswith("s3://"):
        hint = ("set ANYCODE_MIRROR_TTL_DAYS" if spec.startswith(("redis://", "rediss://"))
                else "set ANYCODE_MIRROR_RETENTION_DAYS" if spec else "set ANYCODE_MIRROR to s3://BUCKET/PREFIX first")
        print(f"anycode mirror lifecycle: a lifecycle rule is for an S3 mirror; {hint}.", file=sys.stderr)
        return 1
    from core.stores.s3_store import S3SessionStore

    try:
        rule = S3SessionStore(spec).put_lifecycle(days)
    except StoreUnavailable as err:
        print(f"anycode mirror lifecycle: {err}", file=sys.stderr)
        return 1
    print(f"Objects under s3://{spec[5:].split('/', 1)[0]}/{rule['Filter']['Prefix']} now expire "
          f"{days} day{'s' if days != 1 else ''} after they were written (rule {rule['ID']}).")
    return 0
