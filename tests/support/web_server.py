"""Start ``python -m webui`` as a real server process for HTTP-level tests (no browser needed).

:func:`launch` returns an :class:`AppProcess` (call ``wait_ready()``: it returns once the app printed its
URL); ``stop()`` sends SIGTERM (the launcher's clean shutdown) and waits. :class:`Proc` (any subprocess
whose output a thread collects, so a chatty server never blocks on a full pipe) is shared with the
browser tests (``tests/support/chromium.py``).
"""
from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120  # seconds; a loaded 2-core machine needs tens of seconds to import Gradio


class Proc:
    """A subprocess whose output lines (stdout and stderr merged) are collected by a thread, so a
    chatty process never blocks on a full pipe and reading never blocks: ``lines`` (all so far),
    :meth:`wait_for` (the next line holding a text), :meth:`stop`."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        self.p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        for line in self.p.stdout:
            self.lines.append(line)
            self._q.put(line)

    def output(self, timeout: float = 10) -> str:
        """All the output, to its end, of the process that ended (waits for it; then for the
        reading thread to get the last lines)."""
        self.p.wait(timeout)
        self._reader.join(timeout)
        return "".join(self.lines)

    def wait_for(self, needle: str, timeout: float = 90) -> str:
        """The first line from now on that holds ``needle``; AssertionError with the output so far
        when the process exits or ``timeout`` seconds pass first."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self._q.get(timeout=0.5)
            except queue.Empty:
                if self.p.poll() is not None:
                    break
                continue
            if needle in line:
                return line
        raise AssertionError(f"{needle!r} not printed; output:\n{''.join(self.lines)}")

    def stop(self) -> int | None:
        """SIGTERM (the launcher's clean shutdown), then wait (SIGKILL after 20 s); the exit status."""
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        return self.p.returncode


class AppProcess(Proc):
    """A running launcher: ``url`` (``http://host:port/`` as printed, once :meth:`wait_ready`
    returned), ``lines`` (output)."""

    url = ""

    def wait_ready(self, timeout: float = START_TIMEOUT) -> "AppProcess":
        """Block until the app serves; AssertionError with its output when it did not start."""
        try:
            self.url = self.wait_for("anycode is running at", timeout).split()[-1]
        except AssertionError:
            self.stop()
            raise AssertionError("the app did not start:\n" + "".join(self.lines)) from None
        return self


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def has_ipv6_loopback() -> bool:
    """True when ``::1`` can be bound on this machine."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def app_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of an app under test: data under ``home``, this tree's code, no proxies,
    a model server that does not exist (no test reaches the internet)."""
    env = dict(os.environ, ANYCODE_HOME=str(home), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
               NO_PROXY="127.0.0.1,localhost,::1", OPENAI_API_KEY="sk-test",
               OPENAI_BASE_URL="http://127.0.0.1:9/v1", ANYCODE_MAX_RETRIES="0",
               ANYCODE_TIMEOUT="2")
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ANYCODE_ALLOWED_HOSTS",
                "GRADIO_TEMP_DIR"):
        env.pop(var, None)
    env.update(extra)
    return env


def launch(tmp: Path, host: str = "127.0.0.1", *args: str, env: dict[str, str] | None = None,
           project: Path | None = None) -> AppProcess:
    """Start the launcher on ``host`` (a free port) with data under ``tmp``; returns at once —
    call :meth:`AppProcess.wait_ready` (several apps can start side by side)."""
    project = project or tmp / "project"
    project.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "webui", "--no-browser", "--host", host,
            "--port", str(free_port(host)), "--project", str(project),
            "--data-dir", str(tmp / "data"), *args]
    return AppProcess(argv, env or app_env(tmp / "home"), tmp)
