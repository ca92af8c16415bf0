"""How the model side talks HTTP to servers on this machine: directly, never through a proxy.

A proxy set in the environment for the internet (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``)
cannot reach a model server on this machine (Ollama, llama.cpp, vLLM on 127.0.0.1). Every HTTP
client of the model side — the openai client (:func:`core.agent.config.make_client`) and the
context-window probes (:mod:`core.agent.context`) — is built with :func:`loopback_mounts`, so such
requests go straight to the server and nothing has to be written into ``NO_PROXY``. Requests to
any other host keep the environment's proxy.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

# This machine's own addresses, as httpx URL patterns name them.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def loopback_mounts() -> dict[str, None]:
    """httpx ``mounts`` that send requests to :data:`LOOPBACK_HOSTS` (any scheme and port) over
    the client's own transport, without a proxy, whatever the environment says; a fresh dict."""
    return {f"all://{host}": None for host in LOOPBACK_HOSTS}
