"""Keep Gradio and huggingface_hub from reaching the internet: their own settings, set before they load.

These variables are Gradio's and huggingface_hub's own switches, read when Gradio is imported
(they offer no other way to turn analytics and hub calls off), so every module that imports Gradio
imports this one first. ``setdefault`` would let a user's ``GRADIO_ANALYTICS_ENABLED=True``
through; a local chat app over private sessions never wants analytics, so the values are forced.

Nothing of anycode's own is passed through the environment here. A proxy the environment sets for
the internet is kept away from loopback traffic explicitly: anycode's HTTP clients bypass it for
this machine's addresses (:mod:`core.agent.http`), and Gradio's one request to its own address at
start (``networking.url_ok``, which would go through such a proxy and fail) is not made
(``_frontend=False`` in :func:`webui.gui.app.launch_kwargs`; anycode binds and checks the port itself).
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
    """Set Gradio's and huggingface_hub's own offline switches in ``os.environ`` (idempotent): they
    read them from the environment when Gradio is imported and from nowhere else."""
    os.environ.update(OFFLINE_ENV)


apply()
