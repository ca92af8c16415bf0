"""Workspace tools the model may call: list files, read a file, write a file.

Every path is resolved inside the session's workspace (its real cwd) and refused if it leaves it:
``..`` segments, absolute paths elsewhere, and symlinks pointing outside are all caught by comparing
fully resolved real paths. Errors never raise out of :func:`run_tool`: they come back as the tool
result text so the model can react and the loop goes on.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# Tool output stored in a session is capped so one `read_file` of a huge log cannot bloat the
# session file and every later request.
OUTPUT_CAP_BYTES = 64 * 1024
# A directory listing longer than this is cut (the byte cap would cut it anyway, mid-name).
MAX_LIST_ENTRIES = 1000


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model as the result."""


@dataclass(frozen=True)
class Workspace:
    """The folder the tools may touch. ``root`` is stored as its real, absolute path."""

    root: str

    def __init__(self, root: str | os.PathLike):
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ToolError(f"The workspace {real} is not a directory.")
        object.__setattr__(self, "root", real)

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root, or absolute) if it stays inside.

        Symlinks are resolved first, so a link pointing outside is refused. Raises ToolError.
        """
        if not isinstance(path, str) or not path.strip():
            raise ToolError("A non-empty 'path' string is required.")
        if "\x00" in path:
            raise ToolError("The path contains a NUL character.")
        candidate = os.path.realpath(os.path.join(self.root, os.path.expanduser(path)))
        if os.path.commonpath([self.root, candidate]) != self.root:
            raise ToolError(f"Access denied: {path} is outside the workspace {self.root}.")
        return Path(candidate)

    def display(self, path: Path) -> str:
        """``path`` relative to the root, for messages (``.`` for the root itself)."""
        rel = os.path.relpath(path, self.root)
        return "." if rel == "." else rel


def list_files(workspace: Workspace, path: str = ".") -> str:
    """One entry per line, sorted; directories end in ``/``. Raises ToolError."""
    target = workspace.resolve(path)
    if not target.exists():
        raise ToolError(f"No such directory: {path}")
    if not target.is_dir():
        raise ToolError(f"Not a directory: {path}")
    entries = sorted(target.iterdir(), key=lambda p: p.name)
    lines = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"... and {len(entries) - MAX_LIST_ENTRIES} more entries")
    return "\n".join(lines) if lines else f"(the directory {workspace.display(target)} is empty)"


def read_file(workspace: Workspace, path: str) -> str:
    """The file's text (UTF-8; undecodable bytes become U+FFFD). Raises ToolError."""
    target = workspace.resolve(path)
    if not target.exists():
        raise ToolError(f"No such file: {path}")
    if target.is_dir():
        raise ToolError(f"{path} is a directory; use list_files.")
    # Read at most a little over the cap: the result is capped anyway, and a multi-GB file must
    # not be loaded into memory.
    with open(target, "rb") as fh:
        data = fh.read(OUTPUT_CAP_BYTES * 4)
        rest = len(fh.read()) if len(data) == OUTPUT_CAP_BYTES * 4 else 0
    text = data.decode("utf-8", errors="replace")
    if rest:
        text += f"\n[file continues: {len(data) + rest} bytes in total]"
    return text


def write_file(workspace: Workspace, path: str, content: str) -> str:
    """Create or overwrite ``path`` with ``content`` (UTF-8), creating parent folders inside the
    workspace. Returns a one-line confirmation. Raises ToolError."""
    if not isinstance(content, str):
        raise ToolError("'content' must be a string.")
    target = workspace.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory.")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8", errors="replace")  # a lone surrogate becomes "?"
    target.write_bytes(data)
    return f"Wrote {len(data)} bytes to {workspace.display(target)}"


_TOOLS = {"list_files": list_files, "read_file": read_file, "write_file": write_file}

# The OpenAI `tools=` parameter describing the functions above (per the chat completions API).
TOOL_SPECS: list[dict] = [
    {"type": "function", "function": {
        "name": "list_files",
        "description": "List the files and folders in a directory of the workspace (folders end in /).",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "Directory relative to the workspace root; default '.'"}},
            "required": []}}},
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a UTF-8 text file of the workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace root"}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file",
        "description": "Create or overwrite a text file in the workspace (parent folders are created).",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace root"},
            "content": {"type": "string", "description": "The full new content of the file"}},
            "required": ["path", "content"]}}},
]


def cap_output(text: str, limit: int = OUTPUT_CAP_BYTES) -> str:
    """``text`` if its UTF-8 encoding fits in ``limit`` bytes, else its start cut on a character
    boundary plus a note giving the original size in bytes; the whole result fits in ``limit``."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    note = f"\n\n[output truncated: the original was {len(data)} bytes; showing the first {{kept}} bytes]"
    room = limit - len(note.format(kept=limit).encode())
    # Decoding with errors="ignore" drops a multi-byte character cut in half at the end.
    head = data[:room].decode("utf-8", errors="ignore")
    return head + note.format(kept=len(head.encode("utf-8")))


def run_tool(workspace: Workspace, name: str, raw_arguments: str | None) -> tuple[str, bool]:
    """Run tool ``name`` with the model's raw JSON ``raw_arguments``.

    Returns ``(text, is_error)``; the text is capped (:func:`cap_output`). Never raises for
    anything the model can get wrong (unknown tool, bad JSON, missing or extra arguments, a
    missing file, a path outside the workspace).
    """
    try:
        func = _TOOLS.get(name)
        if func is None:
            raise ToolError(f"Unknown tool {name!r}; available tools: {', '.join(_TOOLS)}.")
        try:
            args = json.loads(raw_arguments) if raw_arguments and raw_arguments.strip() else {}
        except ValueError as err:
            raise ToolError(f"The arguments are not valid JSON ({err}).") from None
        if not isinstance(args, dict):
            raise ToolError("The arguments must be a JSON object.")
        try:
            text = func(workspace, **args)
        except TypeError as err:
            raise ToolError(f"Wrong arguments for {name}: {err}.") from None
        return cap_output(text), False
    except ToolError as err:
        return cap_output(f"Error: {err}"), True
    except OSError as err:
        return cap_output(f"Error: {err.strerror or err} ({err.filename or ''})".replace(" ()", "")), True
    except Exception as err:  # noqa: BLE001 -- a tool bug must not kill the conversation
        log.exception("tool %s failed", name)
        return cap_output(f"Error: the tool {name} failed ({type(err).__name__}: {err})."), True
