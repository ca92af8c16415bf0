"""Start-up checks of the launcher that touch the machine: is the data directory usable, can the
server bind a port (probed the way uvicorn/asyncio will bind it), how a host goes into a URL.

Plain functions without Gradio; they raise ``OSError`` (or return a reason) and ``webui.cli.launcher`` turns
that into its one-sentence error.
"""
from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
import uuid
from pathlib import Path

# asyncio's create_server (what uvicorn binds with) sets SO_REUSEADDR on POSIX only; on Windows
# it would let two servers share a port, so it is left off there (as asyncio does).
REUSE_ADDRESS = os.name == "posix" and sys.platform != "cygwin"


# --- data directory ------------------------------------------------------------------------


def data_dir_problem(path: Path) -> str | None:
    """Why ``path`` cannot hold anycode's files (a short lower-case reason), or None when it can.

    Creates the directory (and its parents) when missing, then writes and deletes a probe file, so a
    file in the way, a read-only file system or a permission problem shows at start."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return "it is a file, not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".anycode-write-test-{uuid.uuid4().hex}"
        with open(probe, "xb") as f:
            f.write(b"ok")
        probe.unlink()
    except OSError as err:
        return _reason(err)
    return None


def _reason(err: OSError) -> str:
    if isinstance(err, FileExistsError) or err.errno == errno.ENOTDIR:
        return "a file is in the way of that path"
    text = err.strerror or str(err)
    return text[:1].lower() + text[1:]


# --- hosts and ports -----------------------------------------------------------------------


def ipv6_literal(host: str) -> str | None:
    """The bare IPv6 address when ``host`` is one (``::1`` or ``[::1]``), else None."""
    bare = host.strip()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    try:
        return bare if isinstance(ipaddress.ip_address(bare), ipaddress.IPv6Address) else None
    except ValueError:
        return None


def url_host(host: str) -> str:
    """``host`` as it goes into a URL (and into Gradio's ``server_name``, which builds one):
    IPv6 literals in brackets, anything else unchanged."""
    v6 = ipv6_literal(host)
    return f"[{v6}]" if v6 else host.strip()


def bind_host(host: str) -> str:
    """``host`` as a socket wants it: IPv6 literals without brackets."""
    return ipv6_literal(host) or host.strip()


def browse_host(host: str) -> str:
    """Where a browser on this machine reaches a server listening on ``host``: the loopback
    address for the wildcard ones (``::`` is bound IPv6-only, as asyncio does), else ``host``."""
    v6 = ipv6_literal(host)
    if v6 is not None and ipaddress.ip_address(v6).is_unspecified:
        return "[::1]"
    if host.strip() == "0.0.0.0":
        return "127.0.0.1"
    return url_host(host)


def resolve(host: str, port: int) -> list[tuple]:
    """``getaddrinfo`` results for listening on ``host`` (deduplicated, as asyncio does).
    Raises ``socket.gaierror`` for a name that does not resolve."""
    infos = socket.getaddrinfo(bind_host(host) or None, port, socket.AF_UNSPEC,
                               socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    return list(dict.fromkeys(infos))


def try_bind(host: str, port: int) -> None:
    """Bind (and release) ``port`` on every address of ``host`` with the options the server will
    use: SO_REUSEADDR on POSIX (so sockets of a stopped server lingering in TIME_WAIT do not count
    as taken) and IPV6_V6ONLY on IPv6 sockets. Raises ``OSError`` when it cannot be bound."""
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _name, addr in resolve(host, port):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            if REUSE_ADDRESS:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == getattr(socket, "AF_INET6", None) and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
    finally:
        for sock in socks:
            sock.close()


def port_in_use(err: OSError) -> bool:
    """True when ``err`` from :func:`try_bind` means "someone else has this port" (try the next
    one), False for problems no other port fixes (no such address, permission denied)."""
    return err.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1))
