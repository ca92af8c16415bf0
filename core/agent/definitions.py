"""Agent definitions (issue 30): named agents written as Markdown files with YAML frontmatter.

A definition is one ``*.md`` file whose frontmatter (parsed with PyYAML's safe loader, never by
hand) names the agent and whose body is its system prompt::

    ---
    name: reviewer                 # required: lowercase letters, digits, '-' and '_' (1-64)
    description: Reviews a change  # required: when to use it (listed in the task tool)
    model: gpt-4o                  # optional: its model (default: the sub-agent / chat model)
    tools: read_file, list_files   # optional: a subset of anycode's tools, `remember` included (default: all)
    mode: expert                   # optional: subagent (default) or expert
    ---
    You are a careful code reviewer. ...

The format is Claude Code's sub-agent format (docs.claude.com, "Subagents": ``name``,
``description``, ``tools`` as a comma-separated string, ``model``), so its files are read as
they are: unknown keys (``color``, ``permissionMode``...) are ignored, Claude Code's tool names
are mapped where one matches an anycode tool (:data:`CLAUDE_TOOLS`; the others are dropped), and
its model aliases (``sonnet``, ``opus``, ``haiku``, ``inherit``) mean "the default model".

Where they are read, first found wins for a name (:func:`agent_folders`):
``<project>/.anycode/agents/``, ``<project>/.claude/agents/``, then the user's
``<data dir>/agents/`` — each with its subfolders (collections of published agents are often
organised by topic: ``agents/engineering/reviewer.md``); hidden folders are skipped, a linked
folder is followed once. The name is the frontmatter's. When two files of one folder tree give the
same name from different subfolders, the folder becomes the namespace (``engineering.reviewer``,
``security.reviewer``; one at the top keeps the plain name) and the clash is reported in one
sentence; two files of the very same folder with one name keep the first, the second is named
and skipped. A file that cannot be used (bad YAML, no name, a duplicate...) is named in one
sentence (:class:`~core.errors.InvalidAgentDefinition`), logged and skipped; the others still
load (:attr:`Definitions.problems` keeps the sentences for ``anycode agents list``).

Frontmatter that YAML refuses but Claude Code accepts is read the way Claude Code reads it: a
``description:`` left unquoted while holding ``: `` (``Examples: … user: "…" assistant: "…"``,
common in published agents) makes PyYAML stop with "mapping values are not allowed here" or
"could not find expected ':'"; then each line starting with a known key (``name:``,
``description:``, ``tools:``, ``model:``…) starts that key, its value is the rest of the line,
and every other line continues the value before it (:func:`lenient_frontmatter`). Other YAML
errors are still refused.

``mode: expert`` (the article's "independent sessions"): the agent keeps one persistent session
per project (:mod:`core.agent.experts`); ``subagent`` starts fresh at every call.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from core.errors import AgentNotFound, InvalidAgentDefinition
from core.settings import data_dir

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
MAX_DEPTH = 8  # subfolder levels searched below an agents folder
MODES = ("subagent", "expert")
MAX_FILE_BYTES = 256 * 1024  # a system prompt, not a book: larger files are refused
# anycode's tool names a definition may list (the workspace tools and `task`).
ANYCODE_TOOLS = ("list_files", "read_file", "write_file", "task", "remember")
# Claude Code's tool names -> anycode's (docs.claude.com "Settings: tools available to Claude").
CLAUDE_TOOLS = {"read": "read_file", "write": "write_file", "edit": "write_file", "multiedit": "write_file",
                "glob": "list_files", "ls": "list_files", "task": "task", "agent": "task"}
# Claude Code model aliases: they name Anthropic models, meaningless to an OpenAI-compatible server.
INHERIT_MODELS = frozenset({"inherit", "sonnet", "opus", "haiku", "default"})
SOURCES = ("project", "claude", "user")
_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class AgentDefinition:
    """One agent: ``name``, ``description``, ``prompt`` (the file's body, its system prompt),
    ``model`` (None: the default), ``tools`` (anycode tool names in file order; None: all),
    ``mode`` (``subagent`` | ``expert``), ``source`` (``project`` | ``claude`` | ``user``:
    :data:`SOURCES`) and ``path`` (the file)."""

    name: str
    description: str
    prompt: str
    model: str | None = None
    tools: tuple[str, ...] | None = None
    mode: str = "subagent"
    source: str = "project"
    path: str = ""

    @property
    def expert(self) -> bool:
        """True for ``mode: expert`` (one persistent session per project)."""
        return self.mode == "expert"

    def allows(self, tool_name: str) -> bool:
        """Whether the agent may use the tool ``tool_name`` (every tool when ``tools`` is None)."""
        return self.tools is None or tool_name in self.tools

    def filter_tools(self, specs: list[dict]) -> list[dict]:
        """The OpenAI ``tools=`` entries of ``specs`` this agent may use, in their order."""
        return [s for s in specs if self.allows((s.get("function") or {}).get("name", ""))]


@dataclass
class Definitions:
    """The agents found: ``agents`` by name (first found wins, in folder order), and ``problems``
    (one sentence per file skipped)."""

    agents: dict[str, AgentDefinition] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> AgentDefinition:
        """The agent named ``name``; raises :class:`~core.errors.AgentNotFound` (naming the
        defined ones)."""
        found = self.agents.get(name)
        if found is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise AgentNotFound(f"No agent is named {name!r} (defined: {known}).")
        return found

    def __iter__(self):
        return iter(self.agents.values())

    def __len__(self) -> int:
        return len(self.agents)


def agent_folders(project_root: str | os.PathLike[str] | None, user_dir: str | os.PathLike[str] | None = None
                  ) -> list[tuple[str, Path]]:
    """``[(source, folder)]`` in lookup order: the project's ``.anycode/agents`` and
    ``.claude/agents`` (when ``project_root`` is given), then ``user_dir`` (default
    ``<data dir>/agents``)."""
    out: list[tuple[str, Path]] = []
    if project_root:
        root = Path(project_root)
        out += [("project", root / ".anycode" / "agents"), ("claude", root / ".claude" / "agents")]
    out.append(("user", Path(user_dir) if user_dir is not None else data_dir() / "agents"))
    return out


def _tools(value: object, path: Path, source: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        names = [p.strip() for p in value.split(",")]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = [v.strip() for v in value]
    else:
        raise InvalidAgentDefinition(f"{path}: skipped, 'tools' must be a comma-separated string or a list of names.")
    out: list[str] = []
    for name in filter(None, names):
        tool = name if name in ANYCODE_TOOLS else CLAUDE_TOOLS.get(re.sub(r"\(.*\)\Z", "", name).strip().lower())
        if tool is None:
            log.info("%s: tool %r has no anycode counterpart; left out", path, name)
        elif tool not in out:
            out.append(tool)
    return tuple(out)


# Keys of Claude Code's and anycode's agent frontmatter: in the lenient reading, a line starting
# with one of them starts a new key; any other "word:" line continues the value before it.
KNOWN_KEYS = frozenset({"name", "description", "tools", "model", "mode", "color", "permissionMode", "disallowedTools",
                        "skills", "hooks", "memory", "maxTurns", "mcpServers", "effort", "isolation", "background",
                        "allowed-tools", "argument-hint", "version", "author", "tags"})
# What PyYAML says about an unquoted value holding ": " — the shape Claude Code reads anyway.
_LENIENT_PROBLEMS = ("mapping values are not allowed here", "could not find expected ':'")
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*)|[ \t]*)\Z")


def lenient_frontmatter(block: str) -> dict[str, object]:
    """``block`` read line by line as Claude Code reads frontmatter YAML refuses: a line at the
    left margin starting ``key:`` with a known key (:data:`KNOWN_KEYS`; the first key of the
    block in any case) starts it, its value is the rest of the line; every other line continues
    the value before it (joined by newlines). A value in matching quotes loses them; the literal
    ``\\n`` some files use for line breaks becomes one; a value of ``- item`` lines is a list."""
    meta: dict[str, list[str]] = {}
    key: str | None = None
    for line in block.splitlines():
        m = _KEY_LINE.match(line)
        if m and (key is None or m.group(1) in KNOWN_KEYS):
            key = m.group(1)
            meta[key] = [m.group(2) or ""]
        elif key is not None:
            meta[key].append(line.strip())
    out: dict[str, object] = {}
    for k, lines in meta.items():
        items = [ln for ln in lines[1:] if ln]
        if not lines[0].strip() and items and all(ln.startswith("- ") for ln in items):
            out[k] = [ln[2:].strip() for ln in items]
            continue
        value = "\n".join(lines).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[k] = value.replace("\\n", "\n")
    return out


def parse_definition(text: str, path: str | os.PathLike[str], source: str = "project") -> AgentDefinition:
    """The definition in ``text`` (a file's content; ``path`` names it in errors). Raises
    :class:`~core.errors.InvalidAgentDefinition` with one sentence naming the file and the fault."""
    path = Path(path)
    match = _FRONTMATTER.match(text)
    if match is None:
        raise InvalidAgentDefinition(f"{path}: skipped, it does not start with a '---' YAML frontmatter block.")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as err:
        if getattr(err, "problem", None) in _LENIENT_PROBLEMS:
            # Claude Code reads this file (an unquoted description holding ": "): so does anycode.
            log.info("%s: frontmatter read line by line (%s)", path, err.problem)  # type: ignore[attr-defined]
            meta = lenient_frontmatter(match.group(1))
        else:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            raise InvalidAgentDefinition(f"{path}: skipped, its frontmatter is not valid YAML{where}.") from None
    if not isinstance(meta, dict):
        raise InvalidAgentDefinition(f"{path}: skipped, its frontmatter is not a set of 'key: value' lines.")
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name.strip()):
        raise InvalidAgentDefinition(
            f"{path}: skipped, 'name' must be 1-64 lowercase letters, digits, '-' or '_' (got {name!r}).")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise InvalidAgentDefinition(f"{path}: skipped, it has no 'description' (what the agent is for).")
    mode = meta.get("mode", "subagent")
    if mode not in MODES:
        raise InvalidAgentDefinition(f"{path}: skipped, 'mode' must be 'subagent' or 'expert' (got {mode!r}).")
    model = meta.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidAgentDefinition(f"{path}: skipped, 'model' must be a model name.")
    model = (model or "").strip() or None
    if model is not None and model.lower() in INHERIT_MODELS:
        model = None
    prompt = text[match.end():].strip()
    if not prompt:
        raise InvalidAgentDefinition(f"{path}: skipped, its body (the agent's system prompt) is empty.")
    return AgentDefinition(name=name.strip(), description=" ".join(description.split()), prompt=prompt,
                           model=model, tools=_tools(meta.get("tools"), path, source), mode=mode,
                           source=source, path=str(path))


# (folders) -> (their signature, what was read): the page asks on every change of a tab's state
# and every reply asks once; reading and parsing the files again is only needed when one changed.
_CACHE: dict[tuple, tuple[tuple, Definitions]] = {}
_CACHE_GUARD = threading.Lock()


def _md_files(folder: Path) -> list[Path]:
    """The ``*.md`` files of ``folder`` and its subfolders (hidden ones skipped, at most
    :data:`MAX_DEPTH` levels, a linked folder followed once), the folder's own first, then each
    subfolder's in name order. Raises ``FileNotFoundError`` for a missing folder, ``OSError`` for
    one that cannot be read."""
    out: list[Path] = []
    seen: set[str] = set()

    def walk(d: Path, depth: int) -> None:
        real = os.path.realpath(d)
        if real in seen:  # a link back to a folder already read
            return
        seen.add(real)
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                if e.is_dir():
                    subdirs.append(Path(e.path))
                elif e.name.endswith(".md") and e.is_file():
                    out.append(Path(e.path))
            except OSError:
                continue
        if depth < MAX_DEPTH:
            for sub in subdirs:
                try:
                    walk(sub, depth + 1)
                except OSError as err:
                    log.info("%s: not read (%s)", sub, err)

    walk(folder, 0)
    return out


def _signature(folders: list[tuple[str, Path]]) -> tuple:
    """What changes when a definition may have: each folder tree's ``.md`` files with their
    modification time (ns) and size; an unreadable folder gives its error (read again then)."""
    out = []
    for _source, folder in folders:
        try:
            files = []
            for path in _md_files(folder):
                st = path.stat()
                files.append((str(path), st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            files = None
        except OSError as err:
            files = ("unreadable", time.monotonic(), str(err))  # never equal twice: read again
        out.append((str(folder), files))
    return tuple(out)


def load_definitions(project_root: str | os.PathLike[str] | None, *,
                     user_dir: str | os.PathLike[str] | None = None, quiet: bool = False) -> Definitions:
    """Every usable definition of :func:`agent_folders` (``*.md`` files, sorted by name in each
    folder; first found wins for a name). Never raises for a file: each one skipped is logged
    (unless ``quiet``: a caller showing ``problems`` itself) and its sentence kept in
    ``problems``; a folder that is missing is simply empty. Files are read again only when one
    was added, removed or changed (name, mtime, size) since the last call for these folders, and
    a skipped file is logged when it is read, not again on every call (every reply asks); the
    result is the caller's own copy."""
    folders = agent_folders(project_root, user_dir)
    cache_key = tuple((s, str(f)) for s, f in folders)
    signature = _signature(folders)
    with _CACHE_GUARD:
        cached = _CACHE.get(cache_key)
    if cached is None or cached[0] != signature:
        cached = (signature, _read_definitions(folders, quiet))
        with _CACHE_GUARD:
            if len(_CACHE) > 64:  # many projects over a long run: start again
                _CACHE.clear()
            _CACHE[cache_key] = cached
    return Definitions(dict(cached[1].agents), list(cached[1].problems))


def _namespace(folder: Path, path: Path) -> str:
    """The namespace of a file's agent: its folder below the agents folder, each part in the
    characters of a name, joined by dots (``engineering/Back End`` → ``engineering.back-end``)."""
    parts = path.parent.relative_to(folder).parts
    return ".".join(re.sub(r"[^a-z0-9_-]+", "-", p.lower()).strip("-") or "x" for p in parts)


def _read_definitions(folders: list[tuple[str, Path]], quiet: bool) -> Definitions:
    found = Definitions()

    def problem(text: str) -> None:
        if not quiet:
            log.warning("%s", text)
        found.problems.append(text)

    for source, folder in folders:
        try:
            files = _md_files(folder)
        except FileNotFoundError:
            continue
        except OSError as err:
            found.problems.append(f"{folder}: skipped, it cannot be read ({err.strerror or err}).")
            continue
        by_name: dict[str, list[AgentDefinition]] = {}
        for path in files:
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise InvalidAgentDefinition(f"{path}: skipped, it is larger than {MAX_FILE_BYTES // 1024} KiB.")
                text = path.read_text(encoding="utf-8")
                agent = parse_definition(text, path, source)
            except UnicodeDecodeError:
                problem(f"{path}: skipped, it is not UTF-8 text.")
            except OSError as err:
                problem(f"{path}: skipped, it cannot be read ({err.strerror or err}).")
            except InvalidAgentDefinition as err:
                problem(str(err))
            else:
                same = by_name.setdefault(agent.name, [])
                twin = next((a for a in same if Path(a.path).parent == path.parent), None)
                if twin is not None:  # two files of one folder: the second is a mistake
                    problem(f"{path}: skipped, the agent {agent.name!r} is already defined in {twin.path}.")
                    continue
                same.append(agent)
        for name, agents in by_name.items():
            if len(agents) > 1:
                # One name from several subfolders: the folder is the namespace, a top-level file
                # keeps the plain name, and the user is told which name is which.
                named = [a if Path(a.path).parent == folder else
                         replace(a, name=f"{_namespace(folder, Path(a.path))}.{name}") for a in agents]
                problem(f"{folder}: the agent name {name!r} is given by {len(agents)} files; they are named "
                        + ", ".join(f"{a.name!r} ({Path(a.path).relative_to(folder)})" for a in named) + ".")
            else:
                named = agents
            for agent in named:
                first = found.agents.get(agent.name)
                if first is None:
                    found.agents[agent.name] = agent
                else:  # the project's definition overrides the user's: expected, not a problem
                    log.info("agent %r of %s is overridden by %s", agent.name, agent.path, first.path)
    return found


TASK_LIST_BUDGET = 2_000  # characters of the task tool's description spent listing agents
DESCRIPTION_CHARS = 240


def agents_listing(definitions: Definitions, budget: int = TASK_LIST_BUDGET) -> str:
    """The lines of the task tool's description naming the agents (``- name: description``, each
    description cut at :data:`DESCRIPTION_CHARS`), at most ``budget`` characters; the agents that
    do not fit are counted in a last line. ``""`` without agents."""
    if not definitions.agents:
        return ""
    lines: list[str] = []
    used = 0
    agents = list(definitions)
    for i, agent in enumerate(agents):
        text = agent.description if len(agent.description) <= DESCRIPTION_CHARS else \
            agent.description[:DESCRIPTION_CHARS - 1] + "…"
        line = f"- {agent.name}{' (expert: remembers its earlier consultations)' if agent.expert else ''}: {text}"
        if used + len(line) > budget and lines:
            lines.append(f"- … and {len(agents) - i} more: " + ", ".join(a.name for a in agents[i:])[:200])
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def agent_system_prompt(agent: AgentDefinition, base: str) -> str:
    """The system prompt of ``agent`` run on top of ``base`` (anycode's own instructions for that
    place: the sub-agent's or the conversation's, with the workspace path): ``base``, then the
    agent's name, the tools it has when its definition names them (the base speaks of every tool,
    which would be untrue for it), and its definition's body."""
    tools = ""
    if agent.tools is not None:
        tools = (f" Of the tools mentioned above you have only: {', '.join(agent.tools)}." if agent.tools
                 else " You have no tools here: answer from what you are told.")
    return f"{base}\n\nYou are the agent \"{agent.name}\".{tools} Your instructions:\n\n{agent.prompt}"


def find_agent(name: str, project_root: str | os.PathLike[str] | None) -> AgentDefinition:
    """The definition named ``name`` for the project at ``project_root``; raises AgentNotFound."""
    return load_definitions(project_root).get(name)


_ADDRESS = re.compile(r"\s*@([a-z0-9][a-z0-9_-]{0,63}(?:\.[a-z0-9][a-z0-9_-]{0,63})*)(?![\w-])")


def addressed_agent(text: object, definitions: Definitions | None) -> AgentDefinition | None:
    """The defined agent a chat message addresses by starting with ``@name`` (issue 30: that
    agent answers it, in this conversation), or None — no ``@`` at the start, or a name no
    definition has (the conversation's assistant answers as usual)."""
    if not isinstance(text, str) or not definitions:
        return None
    match = _ADDRESS.match(text)
    return definitions.agents.get(match.group(1)) if match else None
