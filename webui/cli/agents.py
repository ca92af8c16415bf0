"""``anycode agents list|show NAME [--project PATH] [--json]``: the defined agents from a terminal (issue 30).

``list``: every agent the project sees (``<project>/.anycode/agents/``, ``<project>/.claude/agents/``,
``<data dir>/agents/``; core.agent.definitions), one line each — name, mode, where it comes from,
its model, its description — then the files skipped (one sentence each, on stderr) and the experts'
sessions. ``show NAME``: one definition whole (its system prompt last) and, for an expert, its
session (id, consultations, last activity). Exit status 0 ok, 1 failed (no such agent, store
unavailable), 2 bad usage.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any, Sequence

import click

from core.agent.definitions import AgentDefinition, Definitions, load_definitions
from core.session.experts import expert_key, expert_name
from core.session.keys import project_key
from core.session.manager import SessionManager
from core.storage import Storage
from webui.cli import console, options
from webui.cli.transfer import _run

log = logging.getLogger(__name__)


@click.group("agents", cls=options.Group, context_settings=options.CONTEXT,
             short_help="list and show the defined agents (sub-agents and experts)",
             help="List and show the agents defined for a project: Markdown files with YAML frontmatter in "
                  "<project>/.anycode/agents/, <project>/.claude/agents/ and <data dir>/agents/.",
             epilog="Exit status: 0 ok, 1 failed (no such agent, store unavailable), 2 bad usage.")
def cli() -> None:
    """``anycode agents``: the group."""


def _command(name: str, help_: str, *params: Any) -> click.Command:
    def command(ctx: click.Context, **_: Any) -> int:
        return _execute(options.args_of(ctx))

    command.__name__ = f"agents_{name}"
    for param in reversed(params + (options.project_option("the project whose agents to read (default: the "
                                                           "current folder)"), options.json_option("JSON output"))):
        command = param(command)
    return cli.command(name, help=help_, short_help=help_)(options.store_options(click.pass_context(command)))


_command("list", "list the defined agents and the experts' sessions")
_command("show", "show one agent's definition (and an expert's session)",
         options.argument("name", "the agent's name"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode agents`` with ``argv`` (without the leading ``agents``); the exit status."""
    return options.run(cli, argv, "anycode agents")


def definition_dict(agent: AgentDefinition) -> dict[str, Any]:
    """One definition as JSON (``--json``)."""
    return {"name": agent.name, "description": agent.description, "mode": agent.mode, "model": agent.model,
            "tools": list(agent.tools) if agent.tools is not None else None, "source": agent.source,
            "path": agent.path, "prompt": agent.prompt}


def _expert_rows(manager: SessionManager, pk: str) -> list[dict[str, Any]]:
    rows = []
    for meta in manager.experts(pk):
        rows.append({"agent": expert_name(meta.id), "session_id": meta.id, "messages": meta.message_count,
                     "updated_at": meta.updated_at})
    return rows


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _print_listing(found: Definitions, experts: list[dict[str, Any]]) -> None:
    """One line per agent in aligned columns (name, mode, source, model, description on one line)."""
    if not found.agents:
        print("No agents are defined (add Markdown files to .anycode/agents/; see docs/usage.md).")
    width = max((len(a.name) for a in found), default=0)
    for a in found:
        description = " ".join(a.description.split())  # a folded YAML description stays on its line
        print(f"{a.name:<{width}}  {a.mode:<8}  {a.source:<7}  {a.model or '(default model)'}  {description}")
    if experts:
        print("\nExperts' sessions:")
        for row in experts:
            print(f"{row['session_id']}  {row['messages']} messages  {_when(row['updated_at'])}")


def _execute(args: argparse.Namespace) -> int:
    root = os.path.realpath(args.project or os.getcwd())
    found: Definitions = load_definitions(root, user_dir=options.data_dir_of(args) / "agents", quiet=True)
    pk = project_key(root)

    def body(storage: Storage) -> int:
        manager = SessionManager(storage.sessions)
        experts = _expert_rows(manager, pk)
        if args.command == "list":
            if args.json:
                print(console.json_text({"agents": [definition_dict(a) for a in found], "problems": found.problems,
                                         "experts": experts}, indent=2))
            else:
                _print_listing(found, experts)
            sys.stdout.flush()  # the rows first, whole lines, then what was skipped (on stderr)
            for problem in found.problems:
                print(f"anycode agents: {problem}", file=sys.stderr)
            return 0
        agent = found.get(args.name)
        session = next((r for r in experts if r["agent"] == agent.name), None)
        if args.json:
            print(console.json_text({**definition_dict(agent), "expert_session": session}, indent=2))
            return 0
        tools = ", ".join(agent.tools) if agent.tools is not None else "all"
        lines = [f"name:        {agent.name}", f"description: {agent.description}", f"mode:        {agent.mode}",
                 f"model:       {agent.model or '(default model)'}", f"tools:       {tools or 'none'}",
                 f"from:        {agent.source} ({agent.path})"]
        if agent.expert:
            key = expert_key(pk, agent.name)
            if session is None:
                lines.append(f"session:     {key.session_id} (not consulted yet)")
            else:
                asked = sum(1 for m in manager.get(key).messages if m.get("role") == "user")
                lines.append(f"session:     {key.session_id}, {asked} consultations, last {_when(session['updated_at'])}")
        print("\n".join(lines) + "\n\n" + agent.prompt)
        return 0

    return _run("anycode agents", args, body)
