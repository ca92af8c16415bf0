"""Which MCP servers a project has: Claude Code's ``.mcp.json`` format, read from three files.

Files, later ones winning for a server name they share (Claude Code's order: the more specific
file wins):

1. the user's ``<config dir>/anycode/mcp.json`` (scope ``user``; ``$ANYCODE_CONFIG_DIR`` replaces
   the platform's config folder, e.g. ``~/.config/anycode``) — the user's own file, trusted;
2. the project's ``.mcp.json`` (scope ``project``) — often committed, shared with Claude Code;
3. the project's ``.anycode/mcp.json`` (scope ``anycode``) — anycode's own, same format.

A project's two files can come from a cloned repository, so their servers run only once the user
approved that configuration (:mod:`core.agent.mcp.trust`, by :attr:`McpConfig.project_digest`, a
hash of what they define; any change asks again).

Format (each file)::

    {"mcpServers": {
        "tracker": {"command": "python", "args": ["tools/tracker.py"], "env": {"TOKEN": "${TRACKER_TOKEN}"}},
        "docs": {"type": "http", "url": "https://docs.example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN:-none}"}},
        "search": {"command": "search-mcp", "readOnly": true, "timeout": 20}}}

- stdio (``"type": "stdio"`` or no type, with ``command``): ``command``, ``args``, ``env``; the
  process runs in the project's folder with the SDK's safe environment (``HOME``, ``PATH``,
  ``LOGNAME``, ``SHELL``, ``TERM``, ``USER``) plus ``env``.
- streamable HTTP (``"type": "http"``, or a ``url`` without type): ``url``, ``headers``.
- anycode's own keys: ``readOnly`` — ``true`` (every tool of the server) or a list of tool names —
  marks tools that change nothing (they run without asking once the user trusts read-only
  marks); ``timeout`` — seconds one call may take (default ``$ANYCODE_MCP_TIMEOUT``, 60).
- ``${VAR}`` and ``${VAR:-default}`` are expanded in ``command``, ``args``, ``env``, ``url`` and
  ``headers`` from anycode's environment (as Claude Code does); a ``${VAR}`` that is not set and
  has no default keeps that server from starting, with a sentence naming the variable.
- ``"type": "sse"`` (the old HTTP+SSE transport) is not supported: such a server gets a sentence.

Values of ``env`` and ``headers`` are secrets: they are never shown, logged or stored in a
session (:meth:`ServerConfig.secret_values` lists them so callers can hide them in text a
server sends back). The digests hash the files as written (``${VAR}`` unexpanded), so a token
changing in the environment asks for no new approval and no hash depends on a secret's value.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import platformdirs

from core.errors import McpConfigError

log = logging.getLogger(__name__)

USER_SCOPE = "user"
PROJECT_SCOPE = "project"
ANYCODE_SCOPE = "anycode"
SCOPES = (USER_SCOPE, PROJECT_SCOPE, ANYCODE_SCOPE)  # in the order read: a later file wins
PROJECT_FILE = ".mcp.json"
ANYCODE_FILE = os.path.join(".anycode", "mcp.json")
USER_FILE = "mcp.json"
STDIO, HTTP = "stdio", "http"
HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamableHttp"}
MAX_FILE_BYTES = 1024 * 1024  # a configuration file larger than this is not read
MAX_NAME_CHARS = 100

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SECRET_MIN_CHARS = 6  # shorter values ("1", "true", "dev") would hide ordinary words


def config_dir() -> Path:
    """The user's anycode configuration folder: ``$ANYCODE_CONFIG_DIR``, else the platform's
    (``platformdirs.user_config_dir("anycode")``, e.g. ``~/.config/anycode`` on Linux)."""
    given = os.environ.get("ANYCODE_CONFIG_DIR", "").strip()
    if given:
        return Path(given).expanduser()
    return Path(platformdirs.user_config_dir("anycode", appauthor=False))


def config_path(scope: str, root: str | os.PathLike[str] | None) -> Path:
    """The file of ``scope`` (``user``, ``project``, ``anycode``) for the project at ``root``.
    Raises :class:`McpConfigError` for another scope, or a project scope without a project."""
    if scope == USER_SCOPE:
        return config_dir() / USER_FILE
    if scope not in SCOPES:
        raise McpConfigError(f"The scope {scope!r} is not one of {', '.join(SCOPES)}.")
    if not root:
        raise McpConfigError(f"The {scope} scope needs a project folder.")
    return Path(root) / (PROJECT_FILE if scope == PROJECT_SCOPE else ANYCODE_FILE)


@dataclass(frozen=True)
class ServerConfig:
    """One configured server, ``${VAR}`` expanded.

    ``scope``/``path``: the file it comes from; ``transport``: ``"stdio"`` or ``"http"``;
    ``command``/``args``/``env`` (stdio) or ``url``/``headers`` (http); ``read_only``: True (every
    tool), or the names of the tools marked read-only; ``timeout``: seconds per call (None: the
    default); ``digest``: a hash of its entry as written (a grant "always" for one of its tools
    holds while it is the same); ``problem``: why it cannot run (None: it can)."""

    name: str
    scope: str
    path: str
    transport: str = STDIO
    command: str | None = None
    # Never in a repr (a log line naming the server must not carry them).
    args: tuple[str, ...] = field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    read_only: bool | frozenset[str] = False
    timeout: float | None = None
    digest: str = ""
    problem: str | None = None
    # What each ${VAR} expanded to (a token in a URL or an argument is a secret too).
    expanded: tuple[str, ...] = field(default=(), repr=False)

    @property
    def trusted_source(self) -> bool:
        """True for the user's own file; a project's files need the user's approval."""
        return self.scope == USER_SCOPE

    def marks_read_only(self, tool: str) -> bool:
        """Whether the configuration marks ``tool`` (as the server names it) read-only."""
        return self.read_only is True or (isinstance(self.read_only, frozenset) and tool in self.read_only)

    def secret_values(self) -> tuple[str, ...]:
        """The values of ``env`` and ``headers`` (and each word of a header such as ``Bearer
        <token>``) and of every ``${VAR}`` expansion, long enough to hide in text, longest first."""
        found: set[str] = {v for v in self.expanded if len(v) >= _SECRET_MIN_CHARS}
        for _, value in (*self.env, *self.headers):
            for part in (value, *value.split()):
                if len(part) >= _SECRET_MIN_CHARS and part.lower() not in ("bearer", "token", "basic"):
                    found.add(part)
        return tuple(sorted(found, key=len, reverse=True))

    def target(self) -> str:
        """What it runs or connects to, for people (no ``env`` or header value): the command line,
        or the URL without its query and user info."""
        if self.transport == HTTP:
            return _safe_url(self.url or "")
        return " ".join([self.command or "", *self.args]).strip()


def _safe_url(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an invalid URL)"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class McpConfig:
    """A project's servers (name → :class:`ServerConfig`, the winning definition of each), the
    files read, ``problems`` (one sentence per file or entry that could not be read), and
    ``project_digest``: the hash the user's approval of the project's files is kept under (None
    when the project defines no server)."""

    root: str | None
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    project_digest: str | None = None
    files: list[str] = field(default_factory=list)

    @property
    def project_servers(self) -> list[ServerConfig]:
        """The servers that come from the project's files (they need its approval)."""
        return [s for s in self.servers.values() if not s.trusted_source]


def expand(text: str, environ: Mapping[str, str], missing: set[str], values: set[str] | None = None) -> str:
    """``text`` with ``${VAR}`` and ``${VAR:-default}`` replaced from ``environ``; the names of
    unset variables without a default are added to ``missing`` (their text is left as is), the
    values put in to ``values`` (when given)."""
    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is not None and (value != "" or default is None):
            if values is not None:
                values.add(value)
            return value
        if default is not None:
            return default
        missing.add(name)
        return match.group(0)

    return _VAR.sub(one, text)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode("utf-8", "surrogatepass")).hexdigest()


def read_servers(path: Path) -> tuple[dict[str, Any], str | None]:
    """The raw ``mcpServers`` object of the file at ``path`` (``{}`` when the file is missing)
    and a sentence when it cannot be read (then ``{}``): not JSON, not an object, too large."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return {}, None
    except OSError as err:
        return {}, f"{path} cannot be read ({err.strerror or err})."
    if len(data) > MAX_FILE_BYTES:
        return {}, f"{path} is larger than {MAX_FILE_BYTES // 1024} KB; it was not read."
    try:
        parsed = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as err:
        return {}, f"{path} is not valid JSON ({err}); its servers were not read."
    if not isinstance(parsed, dict):
        return {}, f"{path} does not hold a JSON object; its servers were not read."
    servers = parsed.get("mcpServers", {})
    if not isinstance(servers, dict):
        return {}, f"{path}: \"mcpServers\" is not an object; its servers were not read."
    return servers, None


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                              for v in value):
        raise ValueError(f"\"{what}\" must be a list of strings")
    return tuple(str(v) for v in value)


def _mapping(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                              and not isinstance(v, bool) for k, v in value.items()):
        raise ValueError(f"\"{what}\" must be an object of strings")
    return tuple((k, str(v)) for k, v in value.items())


def parse_server(name: Any, entry: Any, scope: str, path: str,
                 environ: Mapping[str, str] | None = None) -> ServerConfig:
    """One ``mcpServers`` entry as a :class:`ServerConfig`; an entry that cannot run gets its
    ``problem`` (never raises)."""
    environ = os.environ if environ is None else environ
    digest = _digest({"scope": scope, "name": name, "entry": entry})
    base = {"name": str(name), "scope": scope, "path": path, "digest": digest}
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        return ServerConfig(**base, problem=f"A server in {path} has no usable name (1 to {MAX_NAME_CHARS} "
                                            "characters).")
    if not isinstance(entry, dict):
        return ServerConfig(**base, problem=f"The server {name!r} in {path} is not a JSON object.")
    kind = entry.get("type")
    try:
        read_only = entry.get("readOnly", False)
        if isinstance(read_only, list):
            read_only = frozenset(_strings(read_only, "readOnly"))
        elif not isinstance(read_only, bool):
            raise ValueError("\"readOnly\" must be true, false or a list of tool names")
        timeout = entry.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout <= 24 * 3600):
            raise ValueError("\"timeout\" must be a number of seconds above 0")
        missing: set[str] = set()
        values: set[str] = set()
        if kind == "sse":
            raise ValueError("the old HTTP+SSE transport (\"type\": \"sse\") is not supported; a server "
                             "speaking streamable HTTP uses \"type\": \"http\"")
        if kind in HTTP_TYPES or (kind is None and "url" in entry and "command" not in entry):
            url = entry.get("url")
            if not isinstance(url, str) or not url.strip():
                raise ValueError("an HTTP server needs a \"url\"")
            url = expand(url.strip(), environ, missing, values)
            if not url.lower().startswith(("http://", "https://")):
                raise ValueError("its \"url\" must start with http:// or https://")
            headers = tuple((k, expand(v, environ, missing, values)) for k, v in _mapping(entry.get("headers"), "headers"))
            server = ServerConfig(**base, transport=HTTP, url=url, headers=headers, read_only=read_only,
                                  timeout=float(timeout) if timeout else None)
        elif kind in (None, "stdio"):
            command = entry.get("command")
            if not isinstance(command, str) or not command.strip():
                raise ValueError("a stdio server needs a \"command\"")
            server = ServerConfig(
                **base, transport=STDIO, command=expand(command.strip(), environ, missing, values),
                args=tuple(expand(a, environ, missing, values) for a in _strings(entry.get("args"), "args")),
                env=tuple((k, expand(v, environ, missing, values)) for k, v in _mapping(entry.get("env"), "env")),
                read_only=read_only, timeout=float(timeout) if timeout else None)
        else:
            raise ValueError(f"its type {kind!r} is not stdio or http")
    except ValueError as err:
        return ServerConfig(**base, problem=f"The server {name!r} in {path} cannot run: {err}.")
    server = replace(server, expanded=tuple(sorted(values)))
    if missing:
        names = ", ".join(sorted(missing))
        return replace(server, problem=(
            f"The server {name!r} in {path} needs the environment variable{'s' if len(missing) > 1 else ''} "
            f"{names}, which {'are' if len(missing) > 1 else 'is'} not set (use ${{VAR:-default}} for a default)."))
    return server


def load_config(root: str | os.PathLike[str] | None, *, environ: Mapping[str, str] | None = None) -> McpConfig:
    """The MCP servers of the project at ``root`` (None: the user's only). Never raises: a file
    that cannot be read adds a sentence to ``problems`` and its servers are left out (and a
    project file that cannot be read still changes the digest, so fixing it asks again)."""
    root_s = os.fspath(root) if root else None
    config = McpConfig(root=root_s)
    project_part: dict[str, Any] = {}
    for scope in SCOPES:
        if scope != USER_SCOPE and not root_s:
            continue
        path = config_path(scope, root_s)
        servers, problem = read_servers(path)
        if problem:
            config.problems.append(problem)
            if scope != USER_SCOPE:
                project_part[scope] = {"unreadable": _file_digest(path)}
            continue
        if path.exists():
            config.files.append(str(path))
        if servers and scope != USER_SCOPE:
            project_part[scope] = servers
        for name, entry in servers.items():
            config.servers[str(name)] = parse_server(name, entry, scope, str(path), environ)
    if project_part:
        config.project_digest = _digest(project_part)
    return config


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()[:MAX_FILE_BYTES + 1]).hexdigest()
    except OSError:
        return "unreadable"


# --- changing the files (``anycode mcp add|remove``) -------------------------------------------


def _lock_for(path: Path) -> Any:
    """A lock (filelock, in the data folder, never beside the user's file) serialising anycode's
    changes of one configuration file: two commands at once each re-read it under the lock, so
    neither drops the other's server."""
    from filelock import FileLock

    from core.settings import data_dir

    folder = data_dir() / "mcp" / "locks"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = hashlib.sha256(os.fspath(path.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return FileLock(str(folder / f"{name}.lock"), timeout=10)


def _read_whole(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise McpConfigError(f"{path} cannot be read ({err.strerror or err}).") from err
    try:
        data = json.loads(raw.decode("utf-8-sig")) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError) as err:
        raise McpConfigError(f"{path} is not valid JSON ({err}); fix it by hand first, nothing was changed.") from err
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise McpConfigError(f"{path} does not hold an \"mcpServers\" object; fix it by hand first, "
                             "nothing was changed.")
    return data


def _write_whole(path: Path, data: dict[str, Any], scope: str) -> None:
    from core.stores.whole_file import place_whole

    path.parent.mkdir(parents=True, exist_ok=True)
    # The user's file may hold tokens: private. A project's file keeps its mode (it is meant
    # to be shared; `${VAR}` keeps a secret out of it).
    try:
        mode = path.stat().st_mode & 0o777 if scope != USER_SCOPE else 0o600
    except FileNotFoundError:
        mode = 0o600 if scope == USER_SCOPE else 0o644
    payload = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    place_whole(path, payload, replace=True, mode=mode)


def add_server(scope: str, root: str | os.PathLike[str] | None, name: str, entry: dict[str, Any], *,
               replace: bool = False) -> Path:
    """Add server ``name`` (``entry``: its ``mcpServers`` object) to the file of ``scope``;
    return the file's path. Raises :class:`McpConfigError` when the name is taken there (unless
    ``replace``), the entry cannot run (its sentence) or the file is broken (nothing changed)."""
    checked = parse_server(name, entry, scope, "the new entry", environ=_AnyEnv())
    if checked.problem:
        raise McpConfigError(checked.problem.replace(" in the new entry", ""))
    path = config_path(scope, root)
    with _lock_for(path):
        data = _read_whole(path)
        servers = data.setdefault("mcpServers", {})
        if name in servers and not replace:
            raise McpConfigError(f"{path} already has a server named {name!r}; remove it first.")
        servers[name] = entry
        _write_whole(path, data, scope)
    log.info("MCP server %s added to %s", name, path)
    return path


def remove_server(scope: str, root: str | os.PathLike[str] | None, name: str) -> Path:
    """Remove server ``name`` from the file of ``scope``; return the file's path. Raises
    :class:`McpConfigError` when it is not there or the file is broken (nothing changed)."""
    path = config_path(scope, root)
    with _lock_for(path):
        data = _read_whole(path)
        servers = data.get("mcpServers", {})
        if name not in servers:
            raise McpConfigError(f"{path} has no server named {name!r}.")
        del servers[name]
        _write_whole(path, data, scope)
    log.info("MCP server %s removed from %s", name, path)
    return path


class _AnyEnv(dict):
    """An environment where every variable is set: checking a new entry's shape must not
    depend on the variables it names being set in this shell."""

    def get(self, key: Any, default: Any = None) -> Any:
        return "set"
