"""``anycode mcp list|add|remove|test|approve``: the MCP servers of a project from a terminal.

``list``: every server the project sees (``<project>/.mcp.json``, ``<project>/.anycode/mcp.json``,
the user's ``<config dir>/anycode/mcp.json``) — name, where it is configured, transport, what it
runs or connects to (never an ``env`` or header value), whether it may run — and whether the
project's configuration waits for approval. ``add NAME -- COMMAND [ARGS…]`` (stdio) or
``add NAME --transport http URL`` writes a server into the file of ``--scope`` (``user``: yours,
trusted; ``project``: ``.mcp.json``; ``anycode``: ``.anycode/mcp.json`` — a project's file then
waits for approval again). ``remove NAME`` takes one out. ``test NAME`` starts it and lists its
tools. ``approve`` approves the project's configuration as it is now (what the Tools panel's
button does). Exit status 0 ok, 1 failed (no such server, a broken file, a server that does not
start), 2 bad usage.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Sequence

import click

from core.agent.mcp.config import ANYCODE_SCOPE, HTTP, PROJECT_SCOPE, SCOPES, STDIO, USER_SCOPE, add_server, \
    load_config, remove_server
from core.errors import AnycodeError
from webui.cli import console, options

log = logging.getLogger(__name__)

PROG = "anycode mcp"
SCOPE_FILES = {USER_SCOPE: "your mcp.json", PROJECT_SCOPE: ".mcp.json", ANYCODE_SCOPE: ".anycode/mcp.json"}


def _common(f: Any) -> Any:
    f = options.project_option("the project whose MCP servers these are (default: the current folder)")(f)
    f = click.option("--data-dir", metavar="DIR", default=None,
                     help="where anycode keeps what you approved (default: $ANYCODE_HOME or the user data "
                          "directory)")(f)
    return click.option("-v", "--verbose", is_flag=True, default=False, help=options.VERBOSE_HELP)(f)


@click.group("mcp", cls=options.Group, context_settings=options.CONTEXT,
             short_help="list, add, remove, test and approve MCP servers",
             help="The MCP servers whose tools the assistant gets: .mcp.json and .anycode/mcp.json in the project "
                  "(Claude Code's format; they run only once you approve the project's configuration) and your "
                  "own mcp.json in the anycode config folder (trusted).",
             epilog="Exit status: 0 ok, 1 failed (no such server, a broken file, a server that does not start), "
                    "2 bad usage.")
def cli() -> None:
    """``anycode mcp``: the group."""


def _hub(args: argparse.Namespace) -> Any:
    from core.agent.mcp.hub import McpHub

    return McpHub(options.data_dir_of(args))


def _root(args: argparse.Namespace) -> str:
    return os.path.realpath(args.project or os.getcwd())


def _run(args: argparse.Namespace, body: Any) -> int:
    console.setup_stdio()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return body()
    except AnycodeError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"{PROG}: {err.strerror or err} ({err.filename or ''}).".replace(" ().", "."), file=sys.stderr)
        return 1


@cli.command("list", short_help="list the servers and whether they may run",
             help="List the MCP servers the project sees: name, where it is configured, transport, what it runs "
                  "or connects to (never an env or header value) and whether it may run.")
@options.json_option()
@_common
@click.pass_context
def list_cmd(ctx: click.Context, **_: Any) -> int:
    args = options.args_of(ctx)

    def body() -> int:
        status = _hub(args).status(_root(args))
        rows = [{"name": s.name, "scope": s.scope, "file": s.path, "transport": s.transport, "target": s.target,
                 "state": s.state, "problem": s.error if s.state == "cannot run" else None}
                for s in status.servers]
        if args.json:
            print(console.json_text({"servers": rows, "needs_approval": status.needs_approval,
                                     "changed": status.changed, "problems": status.problems}, indent=2))
            return 0
        if not rows:
            print("No MCP servers are configured (add one with 'anycode mcp add NAME -- COMMAND').")
        width = max((len(r["name"]) for r in rows), default=0)
        for r in rows:
            state = "may run" if r["state"] not in ("needs approval", "cannot run") else r["state"]
            print(f"{r['name']:<{width}}  {SCOPE_FILES.get(r['scope'], r['scope']):<17}  {r['transport']:<5}  "
                  f"{state:<14}  {r['target']}")
            if r["problem"]:
                print(f"{'':<{width}}  {r['problem']}")
        if status.needs_approval:
            print("\nThis project's MCP configuration " + ("changed since you approved it" if status.changed
                                                           else "is not approved yet")
                  + ": its servers do not run. Approve it with 'anycode mcp approve' or the Tools panel.")
        sys.stdout.flush()
        for problem in status.problems:
            print(f"{PROG}: {problem}", file=sys.stderr)
        return 0

    return _run(args, body)


def _pairs(values: Sequence[str], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, found, rest = value.partition(sep)
        if not found or not key.strip():
            raise click.UsageError(f"{what} {value!r} is not KEY{sep}VALUE.")
        out[key.strip()] = rest.strip() if sep == ":" else rest
    return out


@cli.command("add", short_help="add a server to a configuration file",
             help="Add an MCP server: 'anycode mcp add NAME -- COMMAND [ARGS...]' (stdio) or "
                  "'anycode mcp add --transport http NAME URL'. Write ${VAR} for a secret: it is expanded from "
                  "the environment when the server starts and never written out.")
@options.argument("name", "the server's name (its tools are offered as mcp__NAME__TOOL)", type=options.TYPED_TEXT)
@options.argument("target", "the command and its arguments (stdio), or the URL (http)", nargs=-1, required=True)
@click.option("--scope", type=click.Choice(SCOPES), default=PROJECT_SCOPE, show_default=True,
              help="which file: user (yours, trusted), project (.mcp.json) or anycode (.anycode/mcp.json)")
@click.option("--transport", type=click.Choice((STDIO, HTTP)), default=STDIO, show_default=True,
              help="stdio (a command anycode starts) or http (a streamable HTTP URL)")
@click.option("-e", "--env", "env", multiple=True, metavar="KEY=VALUE", help="an environment variable (stdio)")
@click.option("-H", "--header", "header", multiple=True, metavar="'KEY: VALUE'", help="an HTTP header (http)")
@click.option("--read-only", is_flag=True, default=False,
              help="mark every tool of it read-only (runs without asking once you trust read-only marks)")
@click.option("--timeout", type=float, default=None, metavar="SECONDS", help="seconds one call may take")
@click.option("--replace", is_flag=True, default=False, help="replace a server of that name in the file")
@_common
@click.pass_context
def add_cmd(ctx: click.Context, **_: Any) -> int:
    args = options.args_of(ctx)
    target = list(args.target)
    if args.transport == HTTP:
        if len(target) != 1:
            raise click.UsageError("an http server takes one URL.")
        entry: dict[str, Any] = {"type": "http", "url": target[0]}
        if args.header:
            entry["headers"] = _pairs(args.header, ":", "the header")
    else:
        entry = {"command": target[0], "args": target[1:]}
        if args.env:
            entry["env"] = _pairs(args.env, "=", "the variable")
    if args.read_only:
        entry["readOnly"] = True
    if args.timeout is not None:
        entry["timeout"] = args.timeout

    def body() -> int:
        path = add_server(args.scope, _root(args), args.name, entry, replace=args.replace)
        print(f"Added the MCP server {args.name!r} to {path}.")
        if args.scope != USER_SCOPE:
            print("The project's configuration changed: its servers run once you approve it "
                  "('anycode mcp approve' or the Tools panel).")
        return 0

    return _run(args, body)


@cli.command("remove", short_help="remove a server from a configuration file",
             help="Remove an MCP server from the file it is configured in (with --scope, from that file).")
@options.argument("name", "the server's name", type=options.TYPED_TEXT)
@click.option("--scope", type=click.Choice(SCOPES), default=None,
              help="which file (default: the one that defines it, when only one does)")
@_common
@click.pass_context
def remove_cmd(ctx: click.Context, **_: Any) -> int:
    args = options.args_of(ctx)

    def body() -> int:
        root = _root(args)
        scope = args.scope
        if scope is None:
            from core.agent.mcp.config import config_path, read_servers

            found = [s for s in SCOPES if args.name in read_servers(config_path(s, root))[0]]
            if not found:
                print(f"{PROG}: no MCP server named {args.name!r} is configured here.", file=sys.stderr)
                return 1
            if len(found) > 1:
                print(f"{PROG}: {args.name!r} is in {', '.join(SCOPE_FILES[s] for s in found)}; say which with "
                      "--scope.", file=sys.stderr)
                return 1
            scope = found[0]
        path = remove_server(scope, root, args.name)
        print(f"Removed the MCP server {args.name!r} from {path}.")
        return 0

    return _run(args, body)


@cli.command("test", short_help="start a server and list its tools",
             help="Start an MCP server (a project's only once its configuration is approved), list its tools, "
                  "and stop it.")
@options.argument("name", "the server's name", type=options.TYPED_TEXT)
@_common
@click.pass_context
def test_cmd(ctx: click.Context, **_: Any) -> int:
    args = options.args_of(ctx)

    def body() -> int:
        hub = _hub(args)
        try:
            report = hub.test(_root(args), args.name)
        finally:
            hub.close()
        if not report.ok:
            print(f"{PROG}: {report.message}", file=sys.stderr)
            return 1
        print(report.message + (f" ({report.server_name})" if report.server_name else ""))
        for tool in report.tools:
            mark = " [read-only]" if tool.read_only_hint else ""
            print(f"  {tool.offered}{mark}  {' '.join(tool.description.split())[:100]}")
        if report.instructions:
            print("Instructions:\n  " + "\n  ".join(report.instructions.splitlines()))
        return 0

    return _run(args, body)


@cli.command("approve", short_help="approve the project's MCP configuration",
             help="Approve the project's MCP configuration (.mcp.json, .anycode/mcp.json) as it is now: its "
                  "servers may then run. Any later change to those files asks again.")
@_common
@click.pass_context
def approve_cmd(ctx: click.Context, **_: Any) -> int:
    args = options.args_of(ctx)

    def body() -> int:
        hub = _hub(args)
        root = _root(args)
        config = load_config(root)
        if config.project_digest is None:
            print("This project's folder defines no MCP server; nothing to approve.")
            return 0
        for server in config.project_servers:
            print(f"  {server.name}: {server.target()}")
        hub.approve(root)
        print(f"Approved: {len(config.project_servers)} MCP server(s) of {root} may run.")
        return 0

    return _run(args, body)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode mcp`` with ``argv`` (without the leading ``mcp``); the exit status."""
    return options.run(cli, argv, PROG)
