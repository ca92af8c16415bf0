"""A PostgreSQL server for the tests: ``ANYCODE_TEST_PG_URL`` when set, else a throwaway one.

The throwaway server is started once per test process (``initdb`` into a temporary folder,
``pg_ctl start`` on 127.0.0.1 with a free port, fsync off, as the ``postgres`` user when the tests
run as root because PostgreSQL refuses root) and stopped at exit. Each test gets a fresh database
(:func:`fresh_database_url`; an empty schema), dropped at exit. When no server can be had, the caller is skipped
with the reason (binaries missing, initdb failed, …), never silently.

``ANYCODE_TEST_PG_URL`` must name a role allowed to create schemas in its database, e.g.
``postgresql+psycopg://anycode@127.0.0.1:5432/postgres``.
"""
from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass, field

import pytest

ENV = "ANYCODE_TEST_PG_URL"
ROLE = "anycode"


@dataclass
class PgServer:
    """A reachable server: ``url`` is a SQLAlchemy URL of its maintenance database."""

    url: str
    data_dir: str | None = None  # set for a throwaway server we own
    pg_ctl: list[str] = field(default_factory=list)
    schemas: list[str] = field(default_factory=list)
    start_args: list[str] = field(default_factory=list)  # pg_ctl arguments that start it again

    def kill(self) -> None:
        """Crash a throwaway server the way an operator's kill does (``pg_ctl stop -m immediate``:
        every backend aborts, no shutdown checkpoint); its data stays for :meth:`restart`."""
        subprocess.run(self.pg_ctl + ["-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)

    def restart(self) -> None:
        """Start a killed throwaway server again on the same port (crash recovery runs)."""
        done = subprocess.run(self.pg_ctl + self.start_args, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {(done.stderr or done.stdout).strip()[-300:]}")

    def stop(self) -> None:
        """Drop the test schemas (external server) or stop and delete the throwaway server."""
        if self.data_dir is None:
            for name in self.schemas:
                try:
                    _admin_exec(self.url, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                except Exception:  # at exit: a leftover schema is not worth a traceback
                    pass
            return
        subprocess.run(self.pg_ctl + ["-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(os.path.dirname(self.data_dir), ignore_errors=True)


_lock = threading.Lock()
_server: PgServer | None = None
_failure: str | None = None


def _admin_exec(url: str, sql: str) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    with psycopg.connect(
        host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database or "postgres",
        autocommit=True, connect_timeout=10,
    ) as conn:
        conn.execute(sql)


def _find_bin() -> str | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    for d in candidates:
        if os.access(os.path.join(d, "initdb"), os.X_OK) and os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    found = shutil.which("pg_ctl")
    return os.path.dirname(found) if found and shutil.which("initdb") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_throwaway() -> PgServer:
    """Start a throwaway server or raise RuntimeError saying why not."""
    bindir = _find_bin()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) found; install Debian's postgresql or set " + ENV)
    prefix: list[str] = []
    tmp = tempfile.mkdtemp(prefix="anycode-pg-")
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError("running as root and there is no 'postgres' user to run PostgreSQL as") from None
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
        runuser = shutil.which("runuser")
        prefix = [runuser, "-u", "postgres", "--"] if runuser else ["setpriv", f"--reuid={pw.pw_uid}",
                                                                    f"--regid={pw.pw_gid}", "--clear-groups"]
    data = os.path.join(tmp, "data")
    init = subprocess.run(
        prefix + [os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", ROLE, "-E", "UTF8",
                  "--no-locale", "--no-sync"],
        capture_output=True, text=True, timeout=120,
    )
    if init.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {(init.stderr or init.stdout).strip()[-300:]}")
    port = _free_port()
    pg_ctl = prefix + [os.path.join(bindir, "pg_ctl"), "-D", data]
    opts = f"-h 127.0.0.1 -p {port} -k {tmp} -F -c max_connections=300 -c shared_buffers=32MB"
    start_args = ["-o", opts, "-l", os.path.join(tmp, "server.log"), "-w", "-t", "60", "start"]
    start = subprocess.run(pg_ctl + start_args, capture_output=True, text=True, timeout=120)
    if start.returncode != 0:
        try:
            with open(os.path.join(tmp, "server.log")) as f:
                detail = f.read()[-300:]
        except OSError:
            detail = start.stderr
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {detail.strip()}")
    return PgServer(f"postgresql+psycopg://{ROLE}@127.0.0.1:{port}/postgres", data_dir=data, pg_ctl=pg_ctl,
                    start_args=start_args)


def own_server() -> PgServer:
    """A throwaway server of the caller's own (to kill and restart; never the shared one), stopped
    at exit; ``pytest.skip`` with the reason when none can be started."""
    try:
        server = _start_throwaway()
    except Exception as e:  # any reason at all: report it as the skip reason
        pytest.skip(f"PostgreSQL unavailable for an outage test: {e}")
    atexit.register(server.stop)
    return server


def get_server() -> PgServer:
    """The process's PostgreSQL server, started on first use; ``pytest.skip`` with the reason
    when none is available."""
    global _server, _failure
    with _lock:
        if _server is None and _failure is None:
            url = os.environ.get(ENV, "").strip()
            try:
                if url:
                    _admin_exec(url, "SELECT 1")
                    _server = PgServer(url)
                else:
                    _server = _start_throwaway()
                atexit.register(_server.stop)
            except Exception as e:  # any reason at all: report it as the skip reason
                _failure = f"PostgreSQL unavailable ({ENV} {'set' if url else 'unset'}): {e}"
        if _server is None:
            pytest.skip(_failure)
        return _server


def fresh_database_url() -> str:
    """Create an empty schema on the test server and return a SQLAlchemy URL whose connections
    use only it (``options=-csearch_path=…``), so every test starts from an empty database.
    Skips when there is no server. Schemas are dropped when the test process exits.

    A schema, not a database: ``CREATE DATABASE`` takes ~0.4 s, ``CREATE SCHEMA`` ~10 ms."""
    from sqlalchemy.engine import make_url

    server = get_server()
    name = "anycode_t_" + uuid.uuid4().hex[:16]
    _admin_exec(server.url, f'CREATE SCHEMA "{name}"')
    server.schemas.append(name)
    url = make_url(server.url).update_query_dict({"options": f"-csearch_path={name}"})
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """Session-scoped: the PostgreSQL server (skips the test with the reason when unavailable)."""
    return get_server()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty PostgreSQL database's URL for one test."""
    return fresh_database_url()
