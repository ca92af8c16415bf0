"""Workspace tools the model may call (list files, read a file, write a file) and their registry.

Confinement (issue 10, defects 5-7). Checking a path and then opening it is a race: a file or
folder flipped to a symlink in between sends the open outside. So nothing here opens a path by
name from the root: every component is opened relative to the folder before it (``dir_fd``) with
``O_NOFOLLOW``; a symlink met on the way is read (``readlinkat``) and followed by hand only while
its target stays inside the workspace; the opened file descriptor is then checked (a regular file,
one link — a hard link planted in the project can reach a file outside — and, on Linux, its
``/proc/self/fd`` path inside the root). Files are opened ``O_NONBLOCK`` so a FIFO or device never
blocks the open, and are refused by type. ``write_file`` writes a temp file in the target's folder,
fsyncs it and renames it over the target (the rename replaces a symlink planted meanwhile instead of
following it), keeping the file's mode: a failure (disk full, a size limit) leaves the original.

Every call runs in a worker thread with a time limit and a cancel flag (:func:`run_tool`), so a
tool stuck in the kernel (a network file system, a device) can never hold the agent turn: Stop and
the time limit end the call and the model is told so.

Tools are :class:`Tool` entries of a :class:`ToolRegistry`; each declares ``side_effects`` (the
approval gate in :mod:`core.agent.approval` asks before those run; read-only tools never ask) and,
for those, a ``preview`` of the change shown to the user. Errors never raise out of
:func:`run_tool`: they come back as the tool result text so the model can react.
"""
from __future__ import annotations

import difflib
import errno
import json
import logging
import os
import secrets
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

# Tool output stored in a session is capped so one `read_file` of a huge log cannot bloat the
# session file and every later request.
OUTPUT_CAP_BYTES = 64 * 1024
# A directory listing longer than this is cut (the byte cap would cut it anyway, mid-name).
MAX_LIST_ENTRIES = 1000
# Seconds one tool call may take before the turn goes on without it (ANYCODE_TOOL_TIMEOUT).
DEFAULT_TOOL_TIMEOUT = 60.0
# How often a waiting call checks the cancel flag (seconds).
_POLL_SECONDS = 0.05
# Symlinks followed by hand in one path, as the kernel's own limit (MAXSYMLINKS, 40).
MAX_SYMLINK_HOPS = 40
# The largest preview text (a diff) shown for an approval, in characters.
PREVIEW_CAP_CHARS = 200_000

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model as the result."""


def tool_timeout() -> float:
    """``$ANYCODE_TOOL_TIMEOUT`` in seconds (default 60); an unparsable or non-positive value is
    logged and the default used."""
    raw = os.environ.get("ANYCODE_TOOL_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TOOL_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        log.warning("ANYCODE_TOOL_TIMEOUT=%r is not a positive number; using %g", raw, DEFAULT_TOOL_TIMEOUT)
        return DEFAULT_TOOL_TIMEOUT
    return value


def _umask() -> int:
    # Read once at import: os.umask can only be read by setting it, which is racy in threads.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_umask()


class _Opened:
    """File descriptors opened along a path; closed together (``with``)."""

    def __init__(self) -> None:
        self.fds: list[int] = []

    def add(self, fd: int) -> int:
        self.fds.append(fd)
        return fd

    def __enter__(self) -> "_Opened":
        return self

    def __exit__(self, *exc: Any) -> None:
        for fd in reversed(self.fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()


@dataclass(frozen=True)
class Workspace:
    """The folder the tools may touch. ``root`` is stored as its real, absolute path.

    Raises ToolError when ``root`` is not a directory. Which folder a session may use is decided
    by :func:`core.agent.workspace.session_workspace`, never by what a session file says alone.
    """

    root: str
    # The turn's checkpoint recorder (core.agent.checkpoints.Recorder), set with object.__setattr__
    # by the runner; write_file reports each change to it. Not a field: two Workspaces of one root
    # stay equal. Sub-agents share the parent's Workspace, so their changes land in its checkpoint.
    recorder = None

    def __init__(self, root: str | os.PathLike):
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ToolError(f"The workspace {real} is not a directory.")
        object.__setattr__(self, "root", real)

    # --- paths -----------------------------------------------------------------------------

    def _parts(self, path: str) -> list[str]:
        """``path`` (relative to the root, or absolute inside it) as components below the root."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("A non-empty 'path' string is required.")
        if "\x00" in path:
            raise ToolError("The path contains a NUL character.")
        expanded = os.path.expanduser(path)
        if os.path.isabs(expanded):
            norm = os.path.normpath(expanded)
            if norm == self.root:
                return []
            if not norm.startswith(self.root.rstrip(os.sep) + os.sep):
                raise ToolError(f"Access denied: {path} is outside the workspace {self.root}.")
            expanded = norm[len(self.root.rstrip(os.sep)) + 1:]
        return [p for p in expanded.split(os.sep) if p not in ("", ".")]

    def _outside(self, path: str) -> ToolError:
        return ToolError(f"Access denied: {path} is outside the workspace {self.root}.")

    def _check_inside(self, fd: int, path: str) -> None:
        """On Linux, the kernel's name of the opened ``fd`` must lie inside the root (a folder
        moved out of the workspace while we held it is caught here)."""
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return  # no /proc: the dir_fd walk alone confines the path
        root = self.root.rstrip(os.sep)
        if real != root and not real.startswith(root + os.sep):
            raise self._outside(path)

    def _walk(self, path: str, opened: _Opened, *, create_dirs: bool = False,
              final: Callable[[int, str], Any] | None = None) -> tuple[int, str | None, Any]:
        """Walk ``path`` from the root without following links by name.

        Returns ``(dir_fd, name, result)``: the folder holding the last component (``name`` None
        when the path is the root itself or a folder and ``final`` is None), and what
        ``final(dir_fd, name)`` returned. ``final`` opens the last component with ``O_NOFOLLOW``;
        when it (or a folder on the way) is a symlink, the link's target is substituted and the
        walk goes on, refused once it leaves the root. ``create_dirs`` makes missing folders.
        Raises ToolError, OSError.
        """
        todo = self._parts(path)
        stack: list[int] = [opened.add(os.open(self.root, _DIR_FLAGS))]
        names: list[str] = []
        hops = 0
        while todo:
            comp = todo.pop(0)
            if comp == ".":
                continue
            if comp == "..":
                if not names:
                    raise self._outside(path)
                names.pop()
                stack.pop()
                continue
            dir_fd = stack[-1]
            if not todo and final is not None:
                try:
                    return dir_fd, comp, final(dir_fd, comp)
                except OSError as err:
                    if err.errno not in (errno.ELOOP, errno.EMLINK):
                        raise
            else:
                try:
                    stack.append(opened.add(os.open(comp, _DIR_FLAGS, dir_fd=dir_fd)))
                    names.append(comp)
                    continue
                except FileNotFoundError:
                    if not create_dirs:
                        raise ToolError(f"No such directory: {os.sep.join(names + [comp])}") from None
                    try:
                        os.mkdir(comp, 0o777, dir_fd=dir_fd)
                    except FileExistsError:
                        pass
                    todo.insert(0, comp)
                    continue
                except OSError as err:
                    if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
            # A symlink (or not a folder): read the link where it is, never through its name again.
            try:
                target = os.readlink(comp, dir_fd=dir_fd)
            except OSError as err:
                if err.errno == errno.EINVAL:
                    raise ToolError(f"Not a directory: {os.sep.join(names + [comp])}") from None
                raise
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise ToolError(f"Too many symbolic links in {path}.")
            if os.path.isabs(target):
                norm = os.path.normpath(target)
                root = self.root.rstrip(os.sep)
                if norm != root and not norm.startswith(root + os.sep):
                    raise self._outside(path)
                del stack[1:]
                names = []
                target = norm[len(root) + 1:] if norm != root else ""
            todo = [p for p in target.split("/") if p not in ("", ".")] + todo
        return stack[-1], None, None

    def relative(self, dir_fd: int, name: str, path: str) -> str:
        """The workspace-relative path of ``name`` in the opened folder ``dir_fd`` (links on the
        way resolved, as the kernel names the folder); ``path`` as shown when /proc is missing."""
        try:
            real = os.readlink(f"/proc/self/fd/{dir_fd}")
        except OSError:
            return self.display_parts(path)
        rel = os.path.relpath(os.path.join(real, name), self.root)
        return rel if not rel.startswith("..") else self.display_parts(path)

    def display_parts(self, path: str) -> str:
        """``path`` as the model gave it, relative to the root when it was absolute inside."""
        try:
            parts = self._parts(path)
        except ToolError:
            return path
        return os.sep.join(parts) or "."


def _open_regular(dir_fd: int, name: str, path: str, *, must_exist: bool = True) -> tuple[int, os.stat_result] | None:
    """Open ``name`` in ``dir_fd`` read-only, non-blocking, not following a link; check it is a
    regular file with one link. Returns ``(fd, stat)``, or None when it does not exist and
    ``must_exist`` is False. Raises ToolError, OSError (ELOOP for a symlink)."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if must_exist:
            raise ToolError(f"No such file: {path}") from None
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path} is a directory; use list_files." if must_exist else f"{path} is a directory.")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path} is not a regular file (a FIFO, socket or device); refused.")
        if st.st_nlink > 1:
            raise ToolError(f"{path} has {st.st_nlink} hard links (a hard link can reach a file outside "
                            "the workspace); refused.")
        return fd, st
    except BaseException:
        os.close(fd)
        raise


# Characters that make a file name in a listing ambiguous or misleading: line breaks and other
# controls (a name "evil\nname.txt" read as two files) and the bidi controls that reorder what is
# shown (U+202E makes "txt.sh" look like "hs.txt"); trial defect D5 of issue 31.
_NAME_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe_char(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code < 0xA0 or ch in _BIDI or ch in "\u2028\u2029"


def listed_name(name: str) -> str:
    """``name`` as one line of a listing: unchanged when plain, else in double quotes with its
    control, line-break and bidi characters escaped (``\\n``, ``\\u202e``; ``"`` and ``\\`` too),
    so every entry is one line and reads as what it is (``"evil\\nname.txt"``)."""
    if not any(_unsafe_char(c) for c in name) and not name.startswith('"'):
        return name
    out = []
    for ch in name:
        if ch in _NAME_ESCAPES:
            out.append(_NAME_ESCAPES[ch])
        elif _unsafe_char(ch):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def list_files(workspace: Workspace, path: str = ".") -> str:
    """One entry per line, sorted; directories end in ``/``; a name with a line break, another
    control character or a bidi control is quoted and escaped (:func:`listed_name`). Raises
    ToolError."""
    with _Opened() as opened:
        try:
            fd, name, _ = workspace._walk(path if path not in ("", None) else ".", opened)
        except ToolError as err:
            if str(err).startswith("No such directory"):
                raise ToolError(f"No such directory: {path}") from None
            raise
        workspace._check_inside(fd, path)
        entries = []
        with os.scandir(fd) as it:
            for entry in it:
                entries.append((entry.name, entry.is_dir(follow_symlinks=False)))
    entries.sort()
    lines = [listed_name(n) + ("/" if is_dir else "") for n, is_dir in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"... and {len(entries) - MAX_LIST_ENTRIES} more entries")
    return "\n".join(lines) if lines else f"(the directory {workspace.display_parts(path)} is empty)"


def _read_bytes(workspace: Workspace, path: str, limit: int) -> tuple[bytes, int] | None:
    """Up to ``limit`` bytes of the regular file ``path`` and its size in bytes; None when it
    does not exist. Raises ToolError."""
    with _Opened() as opened:
        def open_final(dir_fd: int, name: str):
            return _open_regular(dir_fd, name, path, must_exist=False)

        try:
            _, name, got = workspace._walk(path, opened, final=open_final)
        except ToolError as err:
            if str(err).startswith("No such directory"):
                return None
            raise
        if name is None:
            raise ToolError(f"{path} is a directory; use list_files.")
        if got is None:
            return None
        fd, st = got
        opened.add(fd)
        workspace._check_inside(fd, path)
        chunks, size = [], 0
        while size < limit:
            piece = os.read(fd, min(1 << 20, limit - size))
            if not piece:
                break
            chunks.append(piece)
            size += len(piece)
        return b"".join(chunks), max(st.st_size, size)


def read_file(workspace: Workspace, path: str) -> str:
    """The file's text (UTF-8; undecodable bytes become U+FFFD). Raises ToolError."""
    # Read at most a little over the cap: the result is capped anyway, and a multi-GB file must
    # not be loaded into memory.
    got = _read_bytes(workspace, path, OUTPUT_CAP_BYTES * 4)
    if got is None:
        raise ToolError(f"No such file: {path}")
    data, total = got
    text = data.decode("utf-8", errors="replace")
    if total > len(data):
        text += f"\n[file continues: {total} bytes in total]"
    return text


def write_file(workspace: Workspace, path: str, content: str) -> str:
    """Create or overwrite ``path`` with ``content`` (UTF-8), creating parent folders inside the
    workspace. The new bytes go to a temp file in the same folder, fsynced, then renamed over the
    target, so a failure (disk full, a file size limit) leaves the original whole; an existing
    file keeps its permission bits. Returns a one-line confirmation. Raises ToolError, OSError."""
    if not isinstance(content, str):
        raise ToolError("'content' must be a string.")
    data = content.encode("utf-8", errors="replace")  # a lone surrogate becomes "?"
    with _Opened() as opened:
        def open_final(dir_fd: int, name: str):
            return _open_regular(dir_fd, name, path, must_exist=False)

        dir_fd, name, got = workspace._walk(path, opened, create_dirs=True, final=open_final)
        if name is None:
            raise ToolError(f"{path} is a directory.")
        workspace._check_inside(dir_fd, path)
        if got is not None:
            opened.add(got[0])
            mode = stat.S_IMODE(got[1].st_mode)
        else:
            mode = _NEW_FILE_MODE
        recorder = workspace.recorder
        if recorder is not None:
            # Before the rename: the old bytes (read from the file we hold open) and the new ones
            # are stored first, so a checkpoint never names bytes that were not kept (issue 29).
            recorder.wrote(workspace.relative(dir_fd, name, path), got[0] if got is not None else None,
                           mode if got is not None else None, data, mode)
        _replace(dir_fd, name, data, mode)
    return f"Wrote {len(data)} bytes to {workspace.display_parts(path)}"


def _replace(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write ``data`` to a new temp file in ``dir_fd``, fsync, give it ``mode``, rename it over
    ``name`` and fsync the folder. On any failure the temp file is removed and ``name`` is
    untouched. Raises OSError."""
    tmp = f".anycode-{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    try:
        os.fsync(dir_fd)
    except OSError:  # some file systems refuse fsync on a folder; the rename is done
        pass


def preview_write(workspace: Workspace, path: str, content: str) -> str:
    """What ``write_file(path, content)`` would change, as text: a unified diff against the
    current file, or the new file's content (every line ``+``). Raises ToolError."""
    if not isinstance(content, str):
        raise ToolError("'content' must be a string.")
    shown = workspace.display_parts(path)
    try:
        got = _read_bytes(workspace, path, PREVIEW_CAP_CHARS * 4)
    except ToolError:
        raise
    new_lines = content.splitlines(keepends=True)
    if got is None:
        head = ["--- /dev/null\n", f"+++ b/{shown}\n", f"@@ -0,0 +1,{len(new_lines)} @@\n"]
        body = head + ["+" + line for line in new_lines]
    else:
        data, total = got
        old = data.decode("utf-8", errors="replace")
        if total > len(data):
            return (f"{shown}: the current file is {total} bytes, too large to compare; it would be "
                    f"replaced by {len(content.encode('utf-8', errors='replace'))} bytes.")
        body = list(difflib.unified_diff(old.splitlines(keepends=True), new_lines,
                                         fromfile=f"a/{shown}", tofile=f"b/{shown}"))
        if not body:
            return f"{shown}: no change (the file already has this content)."
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in body)
    if len(text) > PREVIEW_CAP_CHARS:
        text = text[:PREVIEW_CAP_CHARS] + "\n[diff cut]\n"
    return text


# --- the registry ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    """One tool the model may call.

    ``run(workspace, **arguments) -> str`` does the work (raises ToolError/OSError for the
    model to read); ``parameters`` is its JSON schema (per the OpenAI function-calling API);
    ``side_effects``: the tool changes something (a file, a process, the network) and needs
    approval (:mod:`core.agent.approval`); a tool that only writes anycode's own stores, or only
    reads, sets False. ``preview(workspace, **arguments) -> str`` shows the change for approval
    (default: the arguments as JSON). ``timeout``: seconds (None: ``$ANYCODE_TOOL_TIMEOUT``).
    """

    name: str
    description: str
    parameters: dict
    run: Callable[..., str]
    side_effects: bool = False
    preview: Callable[..., str] | None = None
    timeout: float | None = None

    def spec(self) -> dict:
        """The OpenAI ``tools=`` entry of this tool."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


@dataclass
class ToolRegistry:
    """Tools by name, in the order added. ``specs`` is the live OpenAI ``tools=`` list."""

    tools: dict[str, Tool] = field(default_factory=dict)
    specs: list[dict] = field(default_factory=list)

    def __init__(self, tools: Iterable[Tool] = ()):
        self.tools, self.specs = {}, []
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> Tool:
        """Register ``tool`` (replacing one of the same name). Returns it."""
        if tool.name in self.tools:
            self.specs[:] = [s for s in self.specs if s["function"]["name"] != tool.name]
        self.tools[tool.name] = tool
        self.specs.append(tool.spec())
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool named ``name``, or None."""
        return self.tools.get(name)

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self.tools)


_PATH = {"type": "string", "description": "File path relative to the workspace root"}
DEFAULT_TOOLS = ToolRegistry([
    Tool("list_files", "List the files and folders in a directory of the workspace (folders end in /).",
         {"type": "object", "properties": {
             "path": {"type": "string", "description": "Directory relative to the workspace root; default '.'"}},
          "required": []}, list_files),
    Tool("read_file", "Read a UTF-8 text file of the workspace.",
         {"type": "object", "properties": {"path": _PATH}, "required": ["path"]}, read_file),
    Tool("write_file", "Create or overwrite a text file in the workspace (parent folders are created).",
         {"type": "object", "properties": {
             "path": _PATH, "content": {"type": "string", "description": "The full new content of the file"}},
          "required": ["path", "content"]}, write_file, side_effects=True, preview=preview_write),
])

# The OpenAI `tools=` parameter describing the default tools (per the chat completions API);
# the same list object as DEFAULT_TOOLS.specs, so a tool registered later appears in it.
TOOL_SPECS: list[dict] = DEFAULT_TOOLS.specs


def register_tool(tool: Tool) -> Tool:
    """Add ``tool`` to the default registry (and so to ``TOOL_SPECS``). Returns it."""
    return DEFAULT_TOOLS.add(tool)


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


def parse_arguments(tool_name: str, raw_arguments: str | None, registry: ToolRegistry | None = None
                    ) -> tuple[Tool, dict]:
    """The tool and its arguments dict for a model's call. Raises ToolError (unknown tool, bad
    JSON, not an object)."""
    registry = registry or DEFAULT_TOOLS
    tool = registry.get(tool_name)
    if tool is None:
        raise ToolError(f"Unknown tool {tool_name!r}; available tools: {', '.join(registry.names())}.")
    return tool, arguments_object(raw_arguments)


def arguments_object(raw_arguments: str | None) -> dict:
    """A call's raw JSON arguments as a dict (empty text: ``{}``). Raises ToolError (bad JSON,
    not an object), whose message is meant for the model."""
    try:
        args = json.loads(raw_arguments) if raw_arguments and raw_arguments.strip() else {}
    except ValueError as err:
        raise ToolError(f"The arguments are not valid JSON ({err}).") from None
    if not isinstance(args, dict):
        raise ToolError("The arguments must be a JSON object.")
    return args


def apply_arguments(tool: Tool, fn: Callable[..., str], workspace: Workspace, args: dict) -> str:
    """``fn(workspace, **args)``, where ``fn`` is ``tool``'s ``run`` or ``preview``; arguments
    that do not fit its signature (a ``TypeError`` naming an argument) raise :class:`ToolError`
    ("Wrong arguments for …"), any other ``TypeError`` passes through."""
    try:
        return fn(workspace, **args)
    except TypeError as err:
        if "argument" not in str(err):
            raise
        raise ToolError(f"Wrong arguments for {tool.name}: {err}.") from None


def _call(tool: Tool, workspace: Workspace, args: dict) -> tuple[str, bool]:
    try:
        return cap_output(apply_arguments(tool, tool.run, workspace, args)), False
    except ToolError as err:
        return cap_output(f"Error: {err}"), True
    except OSError as err:
        return cap_output(f"Error: {err.strerror or err} ({err.filename or ''})".replace(" ()", "")), True
    except Exception as err:  # noqa: BLE001 -- a tool bug must not kill the conversation
        log.exception("tool %s failed", tool.name)
        return cap_output(f"Error: the tool {tool.name} failed ({type(err).__name__}: {err})."), True


STOPPED_RESULT = "Error: the tool call was stopped by the user before it finished."


def timed_out_result(seconds: float) -> str:
    """The result text of a call that hit its time limit."""
    return f"Error: the tool call did not finish within {seconds:g} seconds and was abandoned."


def run_tool(workspace: Workspace, name: str, raw_arguments: str | None, *,
             registry: ToolRegistry | None = None, cancel: threading.Event | None = None,
             timeout: float | None = None) -> tuple[str, bool]:
    """Run tool ``name`` with the model's raw JSON ``raw_arguments``.

    Returns ``(text, is_error)``; the text is capped (:func:`cap_output`). Never raises for
    anything the model can get wrong (unknown tool, bad JSON, missing or extra arguments, a
    missing file, a path outside the workspace). The call runs in a daemon worker thread: when
    ``cancel`` is set (Stop) or ``timeout`` seconds pass (default the tool's own, else
    ``$ANYCODE_TOOL_TIMEOUT``), this returns at once with an error result and the worker is
    abandoned (its late result is dropped).
    """
    try:
        tool, args = parse_arguments(name, raw_arguments, registry)
    except ToolError as err:
        return cap_output(f"Error: {err}"), True
    limit = timeout if timeout is not None else (tool.timeout or tool_timeout())
    box: list[tuple[str, bool]] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append(_call(tool, workspace, args))
        finally:
            done.set()

    worker = threading.Thread(target=work, name=f"tool-{name}", daemon=True)
    worker.start()
    deadline = time.monotonic() + limit
    while not done.wait(_POLL_SECONDS):
        if cancel is not None and cancel.is_set():
            log.info("tool %s stopped by the user", name)
            return STOPPED_RESULT, True
        if time.monotonic() >= deadline:
            log.warning("tool %s still running after %g s; abandoned", name, limit)
            return timed_out_result(limit), True
    return box[0]
