"""Read Claude Code sessions (``~/.claude/projects/<encoded path>/<session id>.jsonl``).

Each line is a record with ``type`` (``user``, ``assistant``, ``system``, ``summary``, …),
``uuid``, ``parentUuid``, ``sessionId``, ``cwd``, ``timestamp`` (ISO 8601) and, for user and
assistant records, an Anthropic Messages API ``message`` (``content``: a string or blocks
``text``, ``thinking``, ``tool_use {id, name, input}``, ``tool_result {tool_use_id, content}``,
``image``). Records form a tree through ``parentUuid``; after a compaction the chain restarts at a
``system`` record (``subtype: compact_boundary``) that names the old chain in
``logicalParentUuid``, followed by a user record with ``isCompactSummary: true``.

Mapping to OpenAI chat messages (per the chat completions API):

- The main line is the ``parentUuid`` chain ending at the last non-sidechain user/assistant record
  (through compaction boundaries), oldest first.
- Assistant records of one API response (one ``message.id``, written block by block) become one
  assistant message: text → ``content``, ``tool_use`` → ``tool_calls`` (``input`` as JSON text);
  thinking is dropped.
- ``tool_result`` blocks become ``tool`` messages right after the call they answer; user text
  stays a user message; images become ``[image]``; ``isMeta`` records (caveats the CLI injects)
  are left out.
- A slash command becomes what the user meant: its record (``<command-name>/review</command-name>
  <command-args>12</command-args>``) and the prompt it expanded to (the ``isMeta`` record after
  it) are one user message, ``/review 12`` then the prompt. A command that ran in the terminal
  only (``/cost``, ``/model``, shell mode's ``!ls``) and what it printed
  (``<local-command-stdout>``, ``<bash-stdout>``) are a ``note`` entry, not a message: the model
  never saw them. Terminal colour codes are stripped.
- A compact summary becomes a ``compaction`` entry at its place (the messages before it stay).
- ``summary`` records give the title; sidechain records (``isSidechain``) and ``agent-*.jsonl``
  files become sub-agent records (``subagents/<agent id>``); ``cwd`` gives the project.
"""
from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Iterator

from core.importers.base import (ImportedMessage, ImportedSession, ImportProblem, inside, iso_seconds, iter_jsonl,
                                  outside_problem, refused_name)
from core.session.text import parse_json

log = logging.getLogger(__name__)

SOURCE = "claude-code"
_UUID_FILE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.jsonl\Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_dir() -> Path:
    """Claude Code's projects folder: ``$CLAUDE_CONFIG_DIR/projects`` or ``~/.claude/projects``."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(base).expanduser() / "projects" if base else Path.home() / ".claude" / "projects"


def session_files(root: str | os.PathLike[str]) -> list[Path]:
    """Main session files under ``root`` (a projects folder, one project's folder, or one file),
    sorted; ``agent-*.jsonl`` sub-agent files are found by :func:`read_session` beside them."""
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*.jsonl") if _UUID_FILE.match(p.name) and "subagents" not in p.parts)


def read_sessions(root: str | os.PathLike[str], *, project: str | None = None) -> Iterator[ImportedSession | ImportProblem]:
    """Yield every Claude Code session under ``root``; with ``project`` (a folder path), only the
    sessions recorded in that folder. A missing ``root`` yields one problem."""
    root_path = Path(root)
    if not root_path.exists():
        yield ImportProblem(str(root_path), 0, "no such folder (is Claude Code installed for this user?)")
        return
    wanted = os.path.realpath(project) if project else None
    for path in session_files(root_path):
        if root_path.is_dir() and not inside(path, root_path):
            yield outside_problem(path)
            continue
        for item in read_session(path):
            if wanted and isinstance(item, ImportedSession) and (item.cwd is None or os.path.realpath(item.cwd) != wanted):
                continue
            yield item


def read_session(path: str | os.PathLike[str]) -> Iterator[ImportedSession | ImportProblem]:
    """The session in one Claude Code JSONL file (with its sub-agent records), plus a problem for
    each unreadable line. A file with no conversation (only a title, say) yields nothing.

    Sub-agent files are read only from inside the file's folder: a ``sessionId`` or ``agentId``
    that is a path (absolute, ``..``, separators, NUL) refuses the record with a problem naming
    it, and a file that is a link out of the folder is not read."""
    path = Path(path)
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    try:
        for item in iter_jsonl(str(path)):
            if isinstance(item, ImportProblem):
                yield item
            elif isinstance(item[1], dict):
                records.append(item[1])
                lines.append(item[0])
            else:
                yield ImportProblem(str(path), item[0], "not a JSON object")
    except OSError as err:
        yield ImportProblem(str(path), 0, f"cannot be read ({err.strerror or err})")
        return
    named = next((n for n, r in enumerate(records) if "sessionId" in r), None)
    session_id = records[named]["sessionId"] if named is not None else path.stem
    refused = refused_name(str(path), lines[named] if named is not None else 0, "session id", session_id)
    if refused is not None:
        yield refused
        return
    main = [r for r in records if not r.get("isSidechain")]
    side = [r for r in records if r.get("isSidechain")]
    chain = _main_chain(main)
    if not chain:
        return
    messages, extras = _convert(chain)
    if not messages:
        return
    cwd = next((r["cwd"] for r in chain if isinstance(r.get("cwd"), str)), None)
    on_chain = {r.get("uuid") for r in chain}
    titles = [r for r in records if r.get("type") == "summary" and isinstance(r.get("summary"), str)]
    title = next((r["summary"] for r in reversed(titles) if r.get("leafUuid") in on_chain),
                 titles[-1]["summary"] if titles else None)
    custom = [r.get("customTitle") for r in records if r.get("type") == "custom-title" and isinstance(r.get("customTitle"), str)]
    if custom:
        title = custom[-1]
    subagents, problems = _sidechains(side, str(path))
    yield from problems
    for agent_path in _agent_files(path, session_id):
        if not inside(agent_path, path.parent):
            yield outside_problem(agent_path)
            continue
        agent_records = []
        for item in iter_jsonl(str(agent_path)):
            if isinstance(item, ImportProblem):
                yield item
            elif isinstance(item[1], dict):
                agent_records.append(item[1])
        msgs, _ = _convert(_main_chain(agent_records, sidechain_ok=True))
        if msgs:
            subagents[_name(agent_path.stem)] = msgs
    yield ImportedSession(
        SOURCE, session_id, str(path), messages, title=title, cwd=cwd,
        created_at=iso_seconds(chain[0].get("timestamp")), subagents=subagents, extra_entries=extras,
    )


def _agent_files(path: Path, session_id: str) -> list[Path]:
    """The sub-agent files of the session ``session_id`` (a name :func:`unsafe_name` accepted, so
    the folder below is ``path``'s own); a file that links out of ``path``'s folder is returned
    unread, for the caller to refuse."""
    found = sorted((path.parent / session_id / "subagents").glob("agent-*.jsonl"))
    for candidate in sorted(path.parent.glob("agent-*.jsonl")):
        if not inside(candidate, path.parent):
            continue  # not even its first line is read
        # Older Claude Code kept sub-agent files beside the sessions, naming the parent inside.
        try:
            with open(candidate, "rb") as fh:
                first = parse_json(fh.readline() or b"{}")
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and first.get("sessionId") == session_id:
            found.append(candidate)
    return found


def _name(raw: str) -> str:
    name = _UNSAFE.sub("-", raw).lstrip(".-") or "agent"
    return name[:80]


def _main_chain(records: list[dict[str, Any]], *, sidechain_ok: bool = False) -> list[dict[str, Any]]:
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}
    leaf = next((r for r in reversed(records) if r.get("type") in ("user", "assistant")
                 and (sidechain_ok or not r.get("isSidechain")) and isinstance(r.get("uuid"), str)), None)
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    node = leaf
    while node is not None and node.get("uuid") not in seen:
        seen.add(node.get("uuid"))
        chain.append(node)
        parent = node.get("parentUuid") or node.get("logicalParentUuid")
        node = by_uuid.get(parent) if isinstance(parent, str) else None
    return chain[::-1]


def _sidechains(records: list[dict[str, Any]], file: str
                ) -> tuple[dict[str, list[ImportedMessage]], list[ImportProblem]]:
    """Sidechain records grouped into one sub-agent record per chain (keyed by agent id or the
    chain's first uuid), and a problem for each chain whose agent id is refused
    (:func:`core.importers.base.unsafe_name`)."""
    problems: list[ImportProblem] = []
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}
    children: set[str] = {r.get("parentUuid") for r in records if isinstance(r.get("parentUuid"), str)}
    out: dict[str, list[ImportedMessage]] = {}
    for leaf in [r for r in records if r.get("uuid") not in children and r.get("type") in ("user", "assistant")]:
        chain, node, seen = [], leaf, set()
        while node is not None and node.get("uuid") not in seen:
            seen.add(node.get("uuid"))
            chain.append(node)
            node = by_uuid.get(node.get("parentUuid"))
        chain.reverse()
        agent_id = chain[0].get("agentId")
        if agent_id is not None:
            refused = refused_name(file, 0, "sub-agent id", agent_id)
            if refused is not None:
                problems.append(refused)
                continue
        msgs, _ = _convert(chain)
        if msgs:
            name = _name(str(agent_id or f"sidechain-{str(chain[0].get('uuid'))[:8]}"))
            out[name if name not in out else f"{name}-{len(out)}"] = msgs
    return out, problems


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "image":
                    parts.append("[image]")
                elif block.get("type") == "document":
                    parts.append("[document]")
        return "\n".join(parts)
    return "" if content is None else str(content)


def _convert(chain: list[dict[str, Any]]) -> tuple[list[ImportedMessage], list[tuple[int, dict[str, Any]]]]:
    """OpenAI messages of a record chain, and compaction entries as ``(message index, entry)``."""
    out: list[ImportedMessage] = []
    extras: list[tuple[int, dict[str, Any]]] = []
    last_assistant: tuple[int, str] | None = None  # (index in out, Anthropic message id)
    boundary: dict[str, Any] | None = None
    command: tuple[str, float | None] | None = None  # a slash command typed, its expansion not seen yet

    def flush(sent: bool) -> None:
        """The pending command with nothing after it of its own: the model got it as typed
        (``sent``: a reply follows), else it ran in the terminal only (a note)."""
        nonlocal command
        if command is not None:
            line, when = command
            if sent:
                out.append(ImportedMessage({"role": "user", "content": line}, when))
            else:
                extras.append((len(out), note_entry(line, "", when, len(out))))
        command = None

    for rec in chain:
        kind = rec.get("type")
        ts = iso_seconds(rec.get("timestamp"))
        if kind == "system" and rec.get("subtype") == "compact_boundary":
            boundary = rec.get("compactMetadata") if isinstance(rec.get("compactMetadata"), dict) else {}
            continue
        msg = rec.get("message")
        if kind == "system" and rec.get("subtype") == "local_command" and isinstance(rec.get("content"), str):
            msg, kind = {"role": "user", "content": rec["content"]}, "user"  # newer Claude Code's form
        if kind not in ("user", "assistant") or not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if rec.get("isMeta"):
            # Caveats the CLI injects are left out; the prompt a slash command expanded to is what
            # the user meant, so it joins the command as one user message.
            expanded = strip_terminal(_text_of(content)).strip()
            if command is not None and expanded and not expanded.startswith("Caveat:"):
                out.append(ImportedMessage({"role": "user", "content": f"{command[0]}\n\n{expanded}"}, command[1]))
                command, last_assistant = None, None
            continue
        if kind == "user" and (isinstance(content, str) or (
                isinstance(content, list) and not any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                      for b in content))):
            markup = _text_of(content)
            typed = command_line(markup)
            if typed is not None:
                flush(False)
                command = (typed, ts)
                continue
            output = command_output(markup)
            if output is not None:
                extras.append((len(out), note_entry(command[0] if command else None, output, ts, len(out))))
                command = None
                continue
        flush(kind == "assistant")
        if kind == "user" and rec.get("isCompactSummary"):
            meta = boundary or {}
            extras.append((len(out), {
                "type": "compaction", "ts": ts, "summary": _text_of(content), "first_kept_index": len(out),
                "tokens_before": meta.get("preTokens"), "tokens_after": None, "model": None,
                "trigger": meta.get("trigger") if meta.get("trigger") in ("auto", "manual") else "auto",
            }))
            boundary = None
            continue
        if kind == "assistant":
            text, calls = [], []
            for block in content if isinstance(content, list) else [{"type": "text", "text": _text_of(content)}]:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    text.append(block["text"])
                elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    calls.append({"id": block["id"], "type": "function", "function": {
                        "name": str(block.get("name") or "tool"),
                        "arguments": json.dumps(block.get("input") if block.get("input") is not None else {},
                                                ensure_ascii=False)}})
            msg_id = msg.get("id") if isinstance(msg.get("id"), str) else None
            if (msg_id and last_assistant and last_assistant[1] == msg_id
                    and all(m.message["role"] == "tool" for m in out[last_assistant[0] + 1:])):
                # One API response written block by block: the blocks join the same message.
                target = out[last_assistant[0]].message
                if text:
                    target["content"] = "\n".join(filter(None, [target.get("content"), *text]))
                if calls:
                    target.setdefault("tool_calls", []).extend(calls)
                continue
            if not text and not calls:
                continue
            message: dict[str, Any] = {"role": "assistant", "content": "\n".join(text) if text else None}
            if calls:
                message["tool_calls"] = calls
            out.append(ImportedMessage(message, ts))
            last_assistant = (len(out) - 1, msg_id or "")
            continue
        # user
        if isinstance(content, list):
            user_text = []
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    result = _text_of(block.get("content"))
                    if block.get("is_error") and not result.startswith("Error"):
                        result = f"Error: {result}"
                    out.append(ImportedMessage({"role": "tool", "tool_call_id": str(block.get("tool_use_id")),
                                                "content": result}, ts))
                else:
                    user_text.append(_text_of([block]))
            text = "\n".join(t for t in user_text if t)
        else:
            text = _text_of(content)
        if text.strip():
            out.append(ImportedMessage({"role": "user", "content": text}, ts))
            last_assistant = None
    flush(False)
    return out, extras


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_OUTPUT_TAGS = ("local-command-stdout", "local-command-stderr", "bash-stdout", "bash-stderr")


def strip_terminal(text: str) -> str:
    """``text`` without terminal control sequences (colours, cursor moves, titles): what a
    terminal shows, not the codes that drew it."""
    return _ANSI.sub("", text)


def _tag(text: str, name: str) -> str | None:
    m = re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return m.group(1) if m else None


def command_line(text: str) -> str | None:
    """The slash command a Claude Code record's markup stands for — ``<command-name>/review
    </command-name><command-args>123</command-args>`` is ``/review 123``, a shell-mode
    ``<bash-input>ls</bash-input>`` is ``!ls`` — or None when ``text`` is not a command record."""
    stripped = text.strip()
    if not stripped.startswith("<"):
        return None
    shell = _tag(stripped, "bash-input")
    if shell is not None:
        return "!" + strip_terminal(shell).strip()
    name = _tag(stripped, "command-name")
    if name is None and _tag(stripped, "command-message") is None:
        return None
    name = strip_terminal(name if name is not None else _tag(stripped, "command-message") or "").strip()
    if not name:
        return None
    args = strip_terminal(_tag(stripped, "command-args") or "").strip()
    name = name if name.startswith("/") else "/" + name
    return f"{name} {args}" if args else name


def command_output(text: str) -> str | None:
    """What a local command printed (``<local-command-stdout>``, shell mode's ``<bash-stdout>``
    / ``<bash-stderr>``), terminal codes stripped, or None when ``text`` is no such record."""
    stripped = text.strip()
    if not stripped.startswith("<"):
        return None
    parts = [_tag(stripped, name) for name in _OUTPUT_TAGS]
    if all(p is None for p in parts):
        return None
    return "\n".join(strip_terminal(p).strip() for p in parts if p and p.strip())


def note_entry(command: str | None, output: str, ts: float | None, at: int) -> dict[str, Any]:
    """A ``note`` entry after ``at`` messages: a command run in Claude Code's terminal and what it
    printed (the model never saw either, so neither is a message); the session fold ignores it."""
    return {"type": "note", "ts": ts, "at": at, "source": SOURCE, "kind": "local_command", "command": command,
            "text": output}
