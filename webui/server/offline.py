"""Keep Gradio and huggingface_hub from reaching the internet.

These variables are read when Gradio is imported, so every module that imports Gradio imports this
one first. ``setdefault`` would let a user's ``GRADIO_ANALYTICS_ENABLED=True`` through; a local
chat app over private sessions never wants analytics, so the values are forced.
"""
from __future__ import annotations

import os

OFFLINE_ENV = {
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "GRADIO_SHARE": "False",
}


def apply() -> None:
    """Set the offline environment variables in ``os.environ`` (idempotent)."""
    os.environ.update(OFFLINE_ENV)
    # A proxy configured for the internet must not intercept the app's own loopback traffic
    # (Gradio checks its own URL at start).
    no_proxy = [p for p in os.environ.get("NO_PROXY", "").split(",") if p]
    for host in ("127.0.0.1", "localhost"):
        if host not in no_proxy:
            no_proxy.append(host)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(no_proxy)


apply()
