"""A real MCP server for the tests, written with the official ``mcp`` SDK (``MCPServer``).

Run over stdio (what a ``.mcp.json`` ``command`` starts)::

    python -m tests.support.mcp_server stdio [--variant v2] [--name NAME]

or over streamable HTTP on 127.0.0.1 (prints ``READY http://127.0.0.1:<port>/mcp`` once it
listens; with ``--token T`` every request must carry ``Authorization: Bearer T``, else 401)::

    python -m tests.support.mcp_server http --port 0 [--token T]

Tools (``v1``, the default):
``echo(text)``        ``"echo: <text>"``; also writes ``echo called`` and the value of ``$MCP_SECRET``
                      (when set) to stderr, so a test can see that stderr reaches the log, hidden.
``add(a, b)``         the sum (structured content); annotated ``readOnlyHint``.
``picture()``         a 2 KB PNG image block.
``report()``          structured content only (no text block): ``{"status": "green", "count": 3}``.
``big(size)``         ``size`` characters of text (a 10 MB result: ``size=10_000_000``).
``hang(seconds)``     sleeps (a call that outlives its time limit).
``slow(seconds)``     writes this process's pid to ``$MCP_PID_FILE``, then sleeps (a test kills it
                      mid-call).
``die()``             writes a line that is not JSON-RPC to stdout, then exits at once (a server
                      dying mid-call after writing garbage).
``garbage()``         writes a line that is not JSON-RPC to stdout, then answers normally.
``show_env(name)``    the value of environment variable ``name`` in the server (a server echoing
                      a secret it was configured with).
``$MCP_STARTED_FILE``: the server appends its pid there when it starts (a test asks whether it
was started at all). ``$MCP_LINGER``: the process outlives its closed stdin (a server that only
stops when terminated, as the app must do on its way out). Helpers for the tests: :func:`stdio_entry`, :func:`write_config`,
:class:`HttpServer`.

``--variant v2``: ``echo`` is gone, ``shout(text)`` (``"SHOUT: <TEXT>"``) is new — a server whose
tools changed. Instructions: ``"Use echo to repeat text."`` (v2: ``"Use shout to shout."``).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

# A valid 1x1 PNG followed by padding (a 2 KB "image" a result carries as base64).
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
PNG_2K = PNG + b"\0" * (2048 - len(PNG))
# The protocol's stdout, kept before the SDK moves print()s and fd 1 away from it (it protects its
# wire): writing here puts a line that is not JSON-RPC on the wire itself, as a broken server does.
WIRE = os.dup(1)


def build(variant: str = "v1", name: str = "testmcp") -> MCPServer:
    """The test server (see the module docstring)."""
    instructions = "Use echo to repeat text." if variant == "v1" else "Use shout to shout."
    app = MCPServer(name, instructions=instructions, log_level="WARNING")

    if variant == "v1":
        @app.tool(description="Repeat the text back.")
        def echo(text: str) -> str:
            secret = os.environ.get("MCP_SECRET")
            print("echo called" + (f" with secret {secret}" if secret else ""), file=sys.stderr, flush=True)
            return f"echo: {text}"
    else:
        @app.tool(description="Shout the text back.")
        def shout(text: str) -> str:
            return f"SHOUT: {text.upper()}"

    @app.tool(description="Add two numbers.", annotations=ToolAnnotations(readOnlyHint=True))
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool(description="A small picture.")
    def picture() -> Image:
        return Image(data=PNG_2K, format="png")

    @app.tool(description="A status report as structured content only.")
    def report() -> dict:
        from mcp.types import CallToolResult

        return CallToolResult(content=[], structured_content={"status": "green", "count": 3})  # type: ignore[return-value]

    @app.tool(description="A long text.")
    def big(size: int) -> str:
        return "x" * size

    @app.tool(description="Sleep, then answer.")
    async def hang(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "woke up"

    @app.tool(description="Write the pid, then sleep.")
    async def slow(seconds: float) -> str:
        path = os.environ.get("MCP_PID_FILE")
        if path:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        await asyncio.sleep(seconds)
        return "slow done"

    @app.tool(description="Write garbage, then exit.")
    def die() -> str:
        os.write(WIRE, b"this is not JSON-RPC\n")
        os._exit(3)

    @app.tool(description="Write garbage, then answer.")
    def garbage() -> str:
        os.write(WIRE, b"this is not JSON-RPC either\n")
        return "answered after garbage"

    @app.tool(description="The value of an environment variable.")
    def show_env(name: str) -> str:
        return os.environ.get(name, "(unset)")

    return app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_http(app: MCPServer, port: int, token: str | None) -> None:
    """Serve ``app`` over streamable HTTP on 127.0.0.1:``port``, requiring ``token`` if given."""
    import uvicorn
    from starlette.responses import JSONResponse

    inner = app.streamable_http_app()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    config = uvicorn.Config(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(f"READY http://127.0.0.1:{port}/mcp", flush=True)
    server.run()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stdio_entry(variant: str = "v1", **env: str) -> dict:
    """A ``.mcp.json`` entry starting this server over stdio from any folder (``env`` added)."""
    args = ["-m", "tests.support.mcp_server", "stdio"] + (["--variant", variant] if variant != "v1" else [])
    return {"command": sys.executable, "args": args, "env": {"PYTHONPATH": ROOT, **env}}


def write_config(folder, servers: dict, file: str = ".mcp.json") -> None:
    """Write ``{"mcpServers": servers}`` to ``folder/file`` (a folder ``.anycode`` is made)."""
    import json
    from pathlib import Path

    path = Path(folder) / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))


class HttpServer:
    """This server over streamable HTTP in a child process on 127.0.0.1 (``with HttpServer(token=T)
    as srv: srv.url``); stopped (killed) on exit."""

    def __init__(self, token: str | None = None, variant: str = "v1"):
        self.token, self.variant = token, variant
        self.proc = None
        self.url = ""

    def __enter__(self) -> "HttpServer":
        import subprocess
        import time

        port = _free_port()
        cmd = [sys.executable, "-m", "tests.support.mcp_server", "http", "--port", str(port), "--variant", self.variant]
        if self.token:
            cmd += ["--token", self.token]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "PYTHONPATH": ROOT})
        line = self.proc.stdout.readline()
        assert line.startswith("READY "), line
        self.url = line.split()[1]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # READY is printed just before uvicorn binds
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the HTTP MCP server did not listen")

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An MCP server for anycode's tests.")
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--variant", default="v1", choices=("v1", "v2"))
    parser.add_argument("--name", default="testmcp")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    args = parser.parse_args(argv)
    app = build(args.variant, args.name)
    started = os.environ.get("MCP_STARTED_FILE")
    if started:  # a test asks whether anycode started this server at all
        with open(started, "a") as f:
            f.write(f"{os.getpid()}\n")
    if os.environ.get("MCP_LINGER"):  # outlives its closed stdin: only a terminate ends it
        import threading
        import time

        threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
    if args.transport == "stdio":
        app.run()
    else:
        serve_http(app, args.port or _free_port(), args.token)


if __name__ == "__main__":
    main()
