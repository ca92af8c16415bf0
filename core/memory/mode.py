"""Whether memory is on: ``ANYCODE_MEMORY`` and the Memory panel's "automatic memory" switch.

Modes:

- ``auto`` (default): new sessions read memories; after each exchange a background job lets the
  title model propose memories; the ``remember`` tool and the panel work.
- ``manual``: memories are read and can be added by the user (panel, CLI, ``remember``), but no
  background extraction runs.
- ``off``: memory is not used at all: nothing is read into prompts, no job, no tool.

The panel's switch turns automatic extraction on or off for this data dir; it is kept in
``<data dir>/memory/settings.json`` (``{"auto": true|false}``) and wins over ``auto``/``manual``
from the environment. ``ANYCODE_MEMORY=off`` always wins (an administrator's choice).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from core import settings
from core.stores.whole_file import place_whole

log = logging.getLogger(__name__)

MODES = ("auto", "manual", "off")
ENV = "ANYCODE_MEMORY"
DEFAULT_MODE = "auto"
SETTINGS_FILE = Path("memory") / "settings.json"


def env_mode() -> str:
    """``$ANYCODE_MEMORY`` (auto | manual | off), default ``auto``; an unknown value is logged
    and the default used."""
    raw = os.environ.get(ENV, "").strip().lower()
    if not raw:
        return DEFAULT_MODE
    if raw not in MODES:
        log.warning("%s=%r is not one of %s; using %s", ENV, raw, "|".join(MODES), DEFAULT_MODE)
        return DEFAULT_MODE
    return raw


def _settings_path(folder: str | os.PathLike[str]) -> Path:
    return Path(folder) / SETTINGS_FILE


def memory_mode(folder: str | os.PathLike[str]) -> str:
    """The effective mode: ``off`` from the environment wins; else the panel's switch if set
    (``auto``/``manual``, kept in ``folder``: a storage's
    :attr:`~core.storage.Storage.files_dir`), else the environment's."""
    env = env_mode()
    if env == "off":
        return "off"
    try:
        saved = json.loads(_settings_path(folder).read_text(encoding="utf-8")).get("auto")
    except (OSError, ValueError, AttributeError):
        saved = None
    if isinstance(saved, bool):
        return "auto" if saved else "manual"
    return env


def set_automatic(enabled: bool, folder: str | os.PathLike[str]) -> str:
    """Save the panel's switch (automatic extraction on/off) in ``folder``; return the effective
    mode after it. Raises OSError when the folder cannot be written."""
    path = _settings_path(folder)
    for d in (path.parent.parent, path.parent):
        if not d.is_dir():
            d.mkdir(mode=0o700, exist_ok=True)
    place_whole(path, json.dumps({"auto": bool(enabled)}).encode(), fsync=settings.fsync_enabled(), replace=True)
    return memory_mode(folder)
