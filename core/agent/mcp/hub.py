"""The MCP servers of one running app: :class:`McpHub`.

One hub per app process, owned by whoever runs turns (the web UI's context, a command): never a
module-level object. It runs one asyncio event loop in a background thread (the official ``mcp``
SDK is asyncio; a turn runs in a plain thread and calls into the loop, waiting with its Stop flag
and a time limit).

Lifecycle of a server (:class:`_Connection`):
- started lazily, by the first turn (or test) that can use it: a project's server only once the
  user approved that project's configuration (:mod:`core.agent.mcp.trust`), a user's at once;
- kept running and reused by every turn and chat of that project (keyed by project folder and
  server name; a changed definition — the file, or a ``${VAR}`` it expands — restarts it);
- restarted when it dies: a call that finds it gone (the process exited, the HTTP server went
  away) fails with a sentence, and the next call or turn starts it again; one that failed to
  start is tried again by turns after :data:`RETRY_AFTER_FAILURE` seconds, then twice as long
  after each further failure, up to :data:`MAX_RETRY_AFTER` (a server that cannot be reached
  must not make every turn wait; the Tools panel's Test always tries);
- stopped with the app (:meth:`McpHub.close`, from the launcher's shutdown path; the SDK closes a
  stdio server's stdin, then terminates its process group).

A stdio server's stderr goes to anycode's log (``core.agent.mcp.hub``, one line per line, cut at
2,000 characters), never into a chat; a line it writes to stdout that is not JSON-RPC is logged
by the SDK and skipped. Values of a server's ``env`` and ``headers`` are replaced by ``[hidden]``
in everything the hub logs, returns or stores.
"""
from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from core.agent.mcp.config import HTTP, McpConfig, ServerConfig, load_config
from core.agent.mcp.results import hide, result_text
from core.agent.mcp.trust import McpTrust
from core.agent.tools import STOPPED_RESULT, ToolError, arguments_object
from core.errors import McpServerError
from core.session.keys import normalize_path, project_key
from core.session.mcp_calls import mcp_tool_name

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 60.0  # seconds one tool call may take ($ANYCODE_MCP_TIMEOUT, a server's "timeout")
START_TIMEOUT = 30.0  # seconds a server gets to start and list its tools
RETRY_AFTER_FAILURE = 15.0  # a server that failed to start is retried by turns after this long, then
MAX_RETRY_AFTER = 600.0  # twice as long after each further failure, up to this
STOP_WAIT = 8.0  # seconds a server gets to stop (the SDK's own escalation takes up to ~4.5 s)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one streamable-HTTP event (the SDK's default is 1 MiB)
MAX_TOOLS_PAGES = 100  # a tools/list paginator that never ends cannot hang a turn
STDERR_LINE_CHARS = 2000
_POLL = 0.1

NOT_STARTED, STARTING, RUNNING, FAILED, STOPPED = "not started", "starting", "running", "failed", "stopped"


def call_timeout() -> float:
    """``$ANYCODE_MCP_TIMEOUT`` in seconds (default 60): how long one MCP tool call may take
    unless its server's ``timeout`` says otherwise. A bad value is logged and the default used."""
    raw = os.environ.get("ANYCODE_MCP_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_CALL_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        log.warning("ANYCODE_MCP_TIMEOUT=%r is not a positive number; using %g", raw, DEFAULT_CALL_TIMEOUT)
        return DEFAULT_CALL_TIMEOUT
    return value


@dataclass(frozen=True)
class ToolInfo:
    """One tool a server lists: ``server`` (configured name), ``name`` (as the server names it),
    ``offered`` (the name the model sees, :func:`core.session.mcp_calls.mcp_tool_name`),
    ``description``, ``schema`` (its JSON schema, an object schema), ``read_only_hint`` (the
    server's ``annotations.readOnlyHint``)."""

    server: str
    name: str
    offered: str
    description: str = ""
    schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only_hint: bool = False

    def spec(self) -> dict:
        """The OpenAI ``tools=`` entry."""
        return {"type": "function", "function": {"name": self.offered, "description": self.description,
                                                 "parameters": self.schema}}


def object_schema(schema: Any) -> dict:
    """A tool's input schema as the chat completions API takes it: a JSON object schema (a
    server's schema that is not one — missing, another type — becomes an open object)."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    out = dict(schema)
    if out.get("type") != "object":
        return {"type": "object", "properties": {}}
    out.setdefault("properties", {})
    return out


class _Dead(Exception):
    """The connection is gone (the process exited, the stream closed)."""


def _is_dead(err: BaseException) -> bool:
    """Whether ``err`` means the connection is gone (not just this request failed)."""
    try:
        import anyio
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return False
    if isinstance(err, MCPError):
        return err.code == CONNECTION_CLOSED
    return isinstance(err, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                            ConnectionError, EOFError, _Dead))


def _is_timeout(err: BaseException) -> bool:
    try:
        from mcp.shared.exceptions import MCPError
        from mcp_types import REQUEST_TIMEOUT
    except ImportError:  # pragma: no cover
        return isinstance(err, TimeoutError)
    return isinstance(err, (TimeoutError, asyncio.TimeoutError)) or (
        isinstance(err, MCPError) and err.code == REQUEST_TIMEOUT)


def _reason(err: BaseException, secrets: tuple[str, ...]) -> str:
    """A short, secret-free description of ``err`` for a sentence."""
    text = str(err).strip() or type(err).__name__
    group = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11+; anyio's task groups raise these
    if group is not None and isinstance(err, group):
        text = "; ".join(_reason(e, secrets) for e in err.exceptions[:3])
    if isinstance(err, FileNotFoundError):
        text = f"the command {err.filename or ''} was not found".replace("  ", " ")
    return hide(" ".join(text.split())[:300], secrets)


def _drain_stderr(fd: int, server: str, secrets: tuple[str, ...]) -> None:
    """Log each line a stdio server writes to stderr (secrets hidden, cut); ends at EOF."""
    with open(fd, "rb", closefd=True) as stream:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                log.info("MCP server %s (stderr): %s", server, hide(line[:STDERR_LINE_CHARS], secrets))


class _OneLine(logging.Filter):
    """The SDK logs a line a server wrote to stdout that is not JSON-RPC with a traceback quoting
    the line (which could hold anything the server knows): one sentence instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and "JSONRPC" in str(record.msg):
            record.msg, record.args, record.exc_info, record.exc_text = (
                "an MCP server wrote a line to stdout that is not JSON-RPC; it was skipped", (), None, None)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _quiet_sdk_logs() -> None:
    sdk = logging.getLogger("mcp.client.stdio")
    if not any(isinstance(f, _OneLine) for f in sdk.filters):
        sdk.addFilter(_OneLine())


class _Connection:
    """One server's connection; every coroutine here runs on the hub's loop."""

    def __init__(self, config: ServerConfig, root: str | None):
        self.config = config
        self.root = root
        self.secrets = config.secret_values()
        self.state = NOT_STARTED
        self.error: str | None = None
        self.client: Any = None
        self.instructions = ""
        self.server_name = ""
        self.tools: list[ToolInfo] = []
        self.failed_at = 0.0
        self.failures = 0  # failed starts in a row
        self._task: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        cfg = self.config
        if cfg.transport == HTTP:
            import httpx2

            http = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=httpx2.Timeout(30.0, read=300.0))
            stack.push_async_callback(http.aclose)
            return streamable_http_client(cfg.url or "", http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES)
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        stack.callback(errlog.close)
        threading.Thread(target=_drain_stderr, args=(read_fd, cfg.name, self.secrets),
                         name=f"mcp-stderr-{cfg.name}", daemon=True).start()
        params = StdioServerParameters(command=cfg.command or "", args=list(cfg.args), env=dict(cfg.env) or None,
                                       cwd=self.root or None, encoding_error_handler="replace")
        return stdio_client(params, errlog=errlog)

    async def _run(self, ready: asyncio.Future) -> None:
        """Hold the connection open until :meth:`stop` (the SDK's context must be entered and left
        in one task)."""
        from mcp import Client
        from mcp_types import Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = self._transport(stack)
                client = Client(transport, cache=None, client_info=Implementation(name="anycode", version="0.1"))
                await stack.enter_async_context(client)
                self.client = client
                self.instructions = (client.instructions or "").strip()
                info = client.server_info
                self.server_name = f"{info.name} {info.version}".strip() if info is not None else ""
                if not ready.done():
                    ready.set_result(True)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as err:  # noqa: BLE001 -- handed to start(), or logged
            if not ready.done():
                ready.set_exception(err if isinstance(err, Exception) else McpServerError("stopped"))
            elif not isinstance(err, asyncio.CancelledError):
                log.info("MCP server %s closed: %s", self.config.name, _reason(err, self.secrets))
            if isinstance(err, asyncio.CancelledError):
                raise
        finally:
            self.client = None
            if self.state == RUNNING:
                self.state = STOPPED

    async def start(self, timeout: float) -> None:
        """Start the server (a running one: nothing). Raises :class:`McpServerError` with a
        sentence when it does not start within ``timeout`` seconds."""
        if self.client is not None and self.state == RUNNING:
            return
        await self.stop()
        self.state, self.error = STARTING, None
        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        self._stop = asyncio.Event()
        self._task = loop.create_task(self._run(ready), name=f"mcp-{self.config.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except BaseException as err:
            await self._abandon()
            self._failed()
            if isinstance(err, asyncio.CancelledError):
                self.error = "its start was interrupted"
                raise
            self.error = (f"it did not start within {timeout:g} seconds" if _is_timeout(err)
                          else f"it did not start: {_reason(err, self.secrets)}")
            log.warning("MCP server %s: %s", self.config.name, self.error)
            raise McpServerError(f"The MCP server {self.config.name!r} is not running: {self.error}.") from None
        self.state = RUNNING
        log.info("MCP server %s started (%s)", self.config.name, self.server_name or self.config.transport)

    def _failed(self) -> None:
        self.state, self.failed_at, self.failures = FAILED, time.monotonic(), self.failures + 1

    @property
    def retry_after(self) -> float:
        """Seconds after a failed start before a turn tries again (doubling, capped)."""
        return min(RETRY_AFTER_FAILURE * 2 ** max(0, self.failures - 1), MAX_RETRY_AFTER)

    async def _abandon(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, STOP_WAIT)

    async def stop(self) -> None:
        """Close the connection (stdio: the SDK closes stdin, then terminates the process group)."""
        task = self._task
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_WAIT)
        except BaseException:  # noqa: BLE001 -- stuck or failed: cancelled below
            await self._abandon()
        self._task = None
        self.client = None
        if self.state in (RUNNING, STARTING):
            self.state = STOPPED

    async def died(self, why: str) -> None:
        """The connection was found gone: say so and clean up (the next use starts it again)."""
        log.warning("MCP server %s stopped: %s", self.config.name, why)
        self.state, self.error = STOPPED, why
        await self.stop()
        self.state = STOPPED

    async def list_tools(self) -> list[ToolInfo]:
        """Fetch the server's whole tool list (every page) and keep it."""
        client = self.client
        if client is None:
            raise _Dead("not connected")
        listed: list[Any] = []
        cursor = None
        for _ in range(MAX_TOOLS_PAGES):
            page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            listed += list(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        tools: list[ToolInfo] = []
        for tool in listed:
            annotations = getattr(tool, "annotations", None)
            tools.append(ToolInfo(
                server=self.config.name, name=tool.name, offered=mcp_tool_name(self.config.name, tool.name),
                description=(tool.description or getattr(tool, "title", None) or "").strip()[:4000],
                schema=object_schema(getattr(tool, "input_schema", None)),
                read_only_hint=bool(getattr(annotations, "read_only_hint", False))))
        self.tools = tools
        return tools

    async def prepare(self, *, force: bool = False) -> None:
        """Make the server ready for a turn: started (a failed one only after
        :attr:`retry_after`, unless ``force``) and its tools listed; a dead one restarted
        once. Raises :class:`McpServerError` when it cannot be used now."""
        async with self.lock:
            if (self.state == FAILED and not force and self.client is None
                    and time.monotonic() - self.failed_at < self.retry_after):
                raise McpServerError(f"The MCP server {self.config.name!r} is not running: {self.error}.")
            for attempt in (1, 2):
                await self.start(START_TIMEOUT)
                try:
                    await asyncio.wait_for(self.list_tools(), START_TIMEOUT)
                    self.failures = 0
                    return
                except BaseException as err:
                    if isinstance(err, asyncio.CancelledError):
                        raise
                    why = _reason(err, self.secrets)
                    if attempt == 1 and _is_dead(err):
                        await self.died(f"it had exited ({why})")
                        continue
                    self.error = f"it did not list its tools ({why})"
                    self._failed()
                    await self.stop()
                    self.state = FAILED
                    raise McpServerError(f"The MCP server {self.config.name!r} is not usable: {self.error}.") from None

    async def call(self, tool: str, arguments: dict, timeout: float) -> Any:
        """Call ``tool``; starts the server first when it is not running (a dead one comes back
        for the next call). Raises the SDK's errors, :class:`McpServerError`, ``TimeoutError``."""
        if self.client is None:
            async with self.lock:
                if self.client is None:
                    await self.start(min(START_TIMEOUT, timeout))
        client = self.client
        if client is None:
            raise _Dead("not connected")
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments, read_timeout_seconds=timeout),
                                          timeout + 2.0)
        except BaseException as err:
            if _is_dead(err) and self.client is client:
                # Gone: the next call (or turn) starts it again; this one fails with a sentence.
                self.client, self.state = None, STOPPED
                self.error = f"it exited during a call of {tool} ({_reason(err, self.secrets)})"
                log.warning("MCP server %s stopped: %s", self.config.name, self.error)
                asyncio.get_running_loop().create_task(self._closed_after_death())
            raise

    async def _closed_after_death(self) -> None:
        async with self.lock:
            if self.client is None and self._task is not None:
                await self.stop()
                self.state = STOPPED


@dataclass
class ServerStatus:
    """What the Tools panel and ``anycode mcp list`` show of one configured server."""

    name: str
    scope: str
    path: str
    transport: str
    target: str
    state: str  # running, starting, stopped, failed, not started, needs approval, cannot run
    error: str | None = None
    tools: list[ToolInfo] = field(default_factory=list)
    instructions: str = ""
    server_name: str = ""


@dataclass
class ProjectStatus:
    """A project's MCP configuration as the user sees it: ``servers``, ``problems`` (files or
    entries that cannot be read), whether its own files wait for approval (``needs_approval``:
    never approved; ``changed``: approved once, changed since), and the read-only switch."""

    root: str | None
    servers: list[ServerStatus]
    problems: list[str]
    needs_approval: bool
    changed: bool
    trust_read_only: bool
    read_only_from_env: bool


@dataclass
class TestReport:
    """The outcome of :meth:`McpHub.test`: ``ok``, a sentence (``message``), the tools listed."""

    ok: bool
    message: str
    tools: list[ToolInfo] = field(default_factory=list)
    instructions: str = ""
    server_name: str = ""
    seconds: float = 0.0


class McpHub:
    """The MCP servers of one running app (see the module docstring). Thread-safe.

    ``base_dir``: the data folder holding the trust file (default :func:`core.settings.data_dir`).
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, *, trust: McpTrust | None = None):
        self.trust = trust or McpTrust(base_dir)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: dict[tuple[str, str], _Connection] = {}
        self._closed = False

    # --- the loop ----------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        _quiet_sdk_logs()
        with self._lock:
            if self._closed:
                raise McpServerError("The app is stopping; MCP servers are not started any more.")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="mcp-loop", daemon=True)
                self._thread.start()
                ready.wait(10)
                self._loop = loop
            return self._loop

    def _wait(self, coro: Any, timeout: float, cancel: Any = None) -> Any:
        """Run ``coro`` on the loop and wait for it from this thread: at most ``timeout`` seconds
        (then ``TimeoutError``), ending at once when ``cancel`` is set (``InterruptedError``); the
        coroutine is cancelled either way."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        deadline = time.monotonic() + timeout
        while True:
            try:
                return future.result(_POLL)
            except concurrent.futures.TimeoutError:
                if future.done():  # the coroutine's own time-out, not this wait's
                    raise
            if cancel is not None and cancel.is_set():
                future.cancel()
                raise InterruptedError("stopped")
            if time.monotonic() >= deadline:
                future.cancel()
                raise TimeoutError(f"no answer within {timeout:g} seconds")

    # --- configuration -----------------------------------------------------------------------

    def config(self, root: str | None) -> McpConfig:
        """The MCP configuration of the project at ``root`` (None: the user's only)."""
        return load_config(normalize_path(root) if root else None)

    def approved(self, config: McpConfig) -> bool:
        """Whether ``config``'s project files are approved (or there are none)."""
        if config.project_digest is None or not config.root:
            return True
        return self.trust.approved(project_key(config.root), config.project_digest)

    def approve(self, root: str) -> McpConfig:
        """Approve the current MCP configuration of the project at ``root`` (what its files define
        now); returns it. Its servers start with the next turn."""
        config = self.config(root)
        if config.project_digest is not None:
            self.trust.approve(project_key(config.root or root), config.root, config.project_digest)
        return config

    def runnable(self, config: McpConfig) -> list[ServerConfig]:
        """The servers of ``config`` that may run: no problem, and the user's own or from an
        approved project configuration."""
        approved = self.approved(config)
        return [s for s in config.servers.values() if s.problem is None and (s.trusted_source or approved)]

    def _connection(self, root: str | None, server: ServerConfig) -> _Connection:
        key = (root or "", server.name)
        with self._lock:
            conn = self._conns.get(key)
            if conn is not None and conn.config != server:
                old, conn = conn, None
                log.info("MCP server %s changed its definition; restarting it", server.name)
                if self._loop is not None:
                    asyncio.run_coroutine_threadsafe(old.stop(), self._loop)
            if conn is None:
                conn = self._conns[key] = _Connection(server, root)
            return conn

    def connections(self, root: str | None, config: McpConfig | None = None) -> list[_Connection]:
        """The connections of the servers of ``root`` that may run (created, not started)."""
        config = config or self.config(root)
        return [self._connection(config.root, s) for s in self.runnable(config)]

    # --- turns ---------------------------------------------------------------------------------

    def prepare(self, root: str | None, *, cancel: Any = None, force: bool = False,
                names: list[str] | None = None) -> tuple[McpConfig, list[_Connection], list[str]]:
        """Start (if needed) and list the tools of ``root``'s runnable servers, all at once;
        returns the configuration, the connections ready, and a sentence per server that is not.
        ``names``: only those servers. Waits at most :data:`START_TIMEOUT` + a little; Stop
        (``cancel``) ends the wait."""
        config = self.config(root)
        conns = [c for c in self.connections(config.root, config) if names is None or c.config.name in names]
        if not conns:
            return config, [], []

        async def all_ready() -> list[Any]:
            return await asyncio.gather(*(c.prepare(force=force) for c in conns), return_exceptions=True)

        try:
            outcomes = self._wait(all_ready(), 2 * START_TIMEOUT + STOP_WAIT, cancel)
        except (TimeoutError, InterruptedError) as err:
            return config, [c for c in conns if c.state == RUNNING], [f"MCP servers were not ready: {err}."]
        ready, problems = [], []
        for conn, outcome in zip(conns, outcomes):
            if isinstance(outcome, BaseException):
                problems.append(str(outcome) if isinstance(outcome, McpServerError)
                                else f"The MCP server {conn.config.name!r} failed: {_reason(outcome, conn.secrets)}.")
            else:
                ready.append(conn)
        return config, ready, problems

    def turn(self, root: str | None, messages: list[dict] | None = None, cancel: Any = None, *,
             chat_tools: frozenset[str] = frozenset()) -> Any:
        """One turn's offer (:class:`core.agent.mcp.turn.McpTurn`) for a turn in the project at
        ``root`` (None: no workspace, the user's servers only): its servers started and listed.
        ``messages``: the history (earlier MCP calls whose tool is gone get a readable error);
        ``chat_tools``: tools the user allowed for this chat. Never raises (a server that cannot
        be used is left out and logged)."""
        from core.agent.mcp.turn import McpTurn

        try:
            config, ready, problems = self.prepare(root, cancel=cancel)
        except Exception as err:  # noqa: BLE001 -- a broken MCP setup never stops a turn
            log.warning("MCP servers unavailable for this turn: %s", err)
            config, ready, problems = self.config(root), [], [str(err)]
        for problem in problems + config.problems:
            log.warning("%s", problem)
        project = project_key(config.root) if config.root else ""
        return McpTurn(self, config, ready, messages or [], cancel=cancel, chat_tools=chat_tools,
                       always=self.trust.always_allowed(project) if project else {},
                       trust_read_only=self.trust.trusts_read_only(), approved=self.approved(config))

    def call(self, conn: _Connection, tool: ToolInfo, raw_arguments: str | None, cancel: Any = None) -> tuple[str, bool]:
        """Run one call of ``tool`` on ``conn``: ``(text for the tool message, is_error)``. Never
        raises: a bad argument, a time-out, Stop, a server that died or answered garbage each
        cost this call only, with a sentence the model can read."""
        name = conn.config.name
        try:
            arguments = arguments_object(raw_arguments)
        except ToolError as err:
            return f"Error: {err}", True
        limit = conn.config.timeout or call_timeout()
        try:
            result = self._wait(conn.call(tool.name, arguments, limit), limit + 5.0, cancel)
        except InterruptedError:
            return STOPPED_RESULT, True
        except BaseException as err:  # noqa: BLE001 -- every failure becomes the call's result
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            why = _reason(err, conn.secrets)
            if _is_timeout(err):
                return (f"Error: the MCP server {name!r} did not answer {tool.name} within {limit:g} seconds; "
                        "the call was abandoned."), True
            if _is_dead(err):
                return (f"Error: the MCP server {name!r} stopped while answering {tool.name} ({why}); it will be "
                        "started again for the next call."), True
            if isinstance(err, McpServerError):
                return f"Error: {err}", True
            from mcp.shared.exceptions import MCPError

            if isinstance(err, MCPError):
                return f"Error: the MCP server {name!r} refused the call of {tool.name}: {why}", True
            log.warning("MCP server %s: unreadable answer to %s: %s", name, tool.name, why)
            return (f"Error: the MCP server {name!r} sent an answer to {tool.name} that anycode cannot read "
                    f"({type(err).__name__})."), True
        return result_text(result, conn.secrets)

    # --- the Tools panel, the CLI ------------------------------------------------------------

    def status(self, root: str | None) -> ProjectStatus:
        """Every configured server of ``root`` with its state (nothing is started)."""
        config = self.config(root)
        approved = self.approved(config)
        runnable = {s.name for s in self.runnable(config)}
        servers = []
        for server in config.servers.values():
            with self._lock:
                conn = self._conns.get((config.root or "", server.name))
            if conn is not None and conn.config != server:
                conn = None
            if server.problem:
                state, error = "cannot run", server.problem
            elif server.name not in runnable:
                state, error = "needs approval", None
            elif conn is None:
                state, error = NOT_STARTED, None
            else:
                state, error = conn.state, conn.error
            servers.append(ServerStatus(
                name=server.name, scope=server.scope, path=server.path, transport=server.transport,
                target=hide(server.target(), server.secret_values()), state=state, error=error,
                tools=list(conn.tools) if conn is not None else [],
                instructions=conn.instructions if conn is not None else "",
                server_name=conn.server_name if conn is not None else ""))
        project = project_key(config.root) if config.root else ""
        return ProjectStatus(
            root=config.root, servers=servers, problems=list(config.problems),
            needs_approval=config.project_digest is not None and not approved,
            changed=bool(project and config.project_digest is not None and not approved
                         and self.trust.approved_digest(project) is not None),
            trust_read_only=self.trust.trusts_read_only(), read_only_from_env=self.trust.read_only_from_env())

    def test(self, root: str | None, name: str, cancel: Any = None) -> TestReport:
        """Start server ``name`` of ``root`` (again, if it failed) and list its tools. A project's
        server is tested only once its configuration is approved (testing runs its command)."""
        config = self.config(root)
        server = config.servers.get(name)
        if server is None:
            return TestReport(False, f"No MCP server named {name!r} is configured here.")
        if server.problem:
            return TestReport(False, server.problem)
        if not server.trusted_source and not self.approved(config):
            return TestReport(False, f"The MCP server {name!r} comes from this project's configuration, which "
                                     "you have not approved yet; approve it first (testing runs its command).")
        began = time.monotonic()
        try:
            _, ready, problems = self.prepare(root, cancel=cancel, force=True, names=[name])
        except McpServerError as err:
            return TestReport(False, str(err))
        seconds = time.monotonic() - began
        if not ready:
            return TestReport(False, problems[0] if problems else f"The MCP server {name!r} did not start.",
                              seconds=seconds)
        conn = ready[0]
        return TestReport(True, f"The MCP server {name!r} answered in {seconds:.1f} s with {len(conn.tools)} "
                                f"tool{'s' if len(conn.tools) != 1 else ''}.", list(conn.tools),
                          conn.instructions, conn.server_name, seconds)

    def close(self, timeout: float = STOP_WAIT + 2.0) -> None:
        """Stop every server and the loop (the app is stopping). Idempotent; waits at most
        ``timeout`` seconds."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread, conns = self._loop, self._thread, list(self._conns.values())
        if loop is None:
            return

        async def stop_all() -> None:
            await asyncio.gather(*(c.stop() for c in conns), return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(timeout)
        except Exception as err:  # noqa: BLE001 -- stopping anyway
            log.warning("MCP servers did not all stop in time: %s", err)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(2.0)
        log.info("MCP servers stopped (%d)", len(conns))

    def running(self) -> list[str]:
        """``root: name`` of the servers running now (for logs and tests)."""
        with self._lock:
            return [f"{root}: {name}" for (root, name), c in self._conns.items() if c.state == RUNNING]
