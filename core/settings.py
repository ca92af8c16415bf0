"""Settings read from the environment, each with its default and the reason for it.

- ``ANYCODE_HOME``: where sessions are stored; default the platformdirs user data dir for
  ``anycode`` (e.g. ``~/.local/share/anycode`` on Linux). Never inside the user's project.
- ``ANYCODE_CLEANUP_DAYS``: sessions with no activity for this many days are deleted at start
  (default 30, as Claude Code's ``cleanupPeriodDays``); 0 or less disables cleanup.
- ``ANYCODE_ARCHIVE_DAYS``: sessions with no activity for this many days are archived at start
  (the design article's "超过 N 天未活跃" rule); default off (unset, 0 or less), so nothing moves
  out of the list unless asked. Archived sessions are kept by cleanup.
- ``ANYCODE_CONTEXT_WINDOW``: the model's context window in tokens; wins over what the server
  reports (see ``core.agent.context``). Unset: asked of the server, else a model-family table,
  else 32,768.
- ``ANYCODE_COMPACT_AT``: the fraction of the window at which the older messages are summarised
  before the next request (default 0.8; accepted 0.1 to 0.95).
- ``ANYCODE_MIRROR_RETENTION_DAYS``: mirror copies idle for this many days are removed from the
  mirror (``sessions cleanup --mirror``, and at start); default keep. Local cleanup and
  auto-archive never touch the mirror's copy.
- ``ANYCODE_FSYNC``: ``0``/``false``/``no``/``off`` turns off the fsync after each append
  (faster on slow disks, at the price of losing the last rounds on power loss; a killed
  process loses nothing either way, the kernel still has the data).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import platformdirs

log = logging.getLogger(__name__)

DEFAULT_CLEANUP_DAYS = 30
_FALSE = {"0", "false", "no", "off"}


def data_dir() -> Path:
    """Return the base data directory: ``$ANYCODE_HOME`` or the platformdirs user data dir."""
    home = os.environ.get("ANYCODE_HOME", "").strip()
    if home:
        return Path(home).expanduser()
    return Path(platformdirs.user_data_dir("anycode", appauthor=False))


def inside_data_dir(path: str | os.PathLike[str], folder: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``path`` is anycode's data folder (``folder``, default :func:`data_dir`) or inside it,
    compared by absolute and by real path. Such a folder is never a project: its tools would reach
    every stored conversation (issue 28)."""
    homes = {os.path.abspath(os.path.expanduser(os.fspath(folder or data_dir())))}
    homes |= {os.path.realpath(h) for h in homes}
    given = os.path.abspath(os.path.expanduser(os.fspath(path)))
    for p in {given, os.path.realpath(given)}:
        for h in homes:
            if p == h or p.startswith(h.rstrip(os.sep) + os.sep):
                return True
    return False


def cleanup_days() -> float:
    """Return ``$ANYCODE_CLEANUP_DAYS`` (days, may be fractional), default 30.

    An unparsable value is logged and the default used, so a typo never deletes anything unexpected.
    """
    raw = os.environ.get("ANYCODE_CLEANUP_DAYS", "").strip()
    if not raw:
        return float(DEFAULT_CLEANUP_DAYS)
    try:
        return float(raw)
    except ValueError:
        log.warning("ANYCODE_CLEANUP_DAYS=%r is not a number; using %d", raw, DEFAULT_CLEANUP_DAYS)
        return float(DEFAULT_CLEANUP_DAYS)


def archive_days() -> float:
    """Return ``$ANYCODE_ARCHIVE_DAYS`` (days, may be fractional); 0 (off) when unset or unparsable
    (logged): a typo never archives anything."""
    raw = os.environ.get("ANYCODE_ARCHIVE_DAYS", "").strip()
    if not raw:
        return 0.0
    try:
        return float(raw)
    except ValueError:
        log.warning("ANYCODE_ARCHIVE_DAYS=%r is not a number; auto-archive stays off", raw)
        return 0.0


def mirror_retention_days() -> float | None:
    """``$ANYCODE_MIRROR_RETENTION_DAYS``: mirror copies (``ANYCODE_MIRROR``) idle for this many days
    are removed by ``anycode sessions cleanup --mirror`` and at start; None (the default: unset, 0
    or less, unparsable — logged) keeps them. The mirror's own rule, independent of the local
    ``ANYCODE_CLEANUP_DAYS`` (the design article: the external copy is cleaned by its own
    lifecycle policy), so a mirror can be the long-lived copy."""
    raw = os.environ.get("ANYCODE_MIRROR_RETENTION_DAYS", "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        log.warning("ANYCODE_MIRROR_RETENTION_DAYS=%r is not a number; mirror copies are kept", raw)
        return None
    return value if value > 0 else None


def fsync_enabled() -> bool:
    """Return False when ``$ANYCODE_FSYNC`` is 0/false/no/off, else True."""
    return os.environ.get("ANYCODE_FSYNC", "1").strip().lower() not in _FALSE


DEFAULT_COMPACT_AT = 0.8


def context_window_override() -> int | None:
    """``$ANYCODE_CONTEXT_WINDOW`` in tokens (``128000``, ``128k``), or None when unset/unparsable
    (logged: a typo must not shrink every request)."""
    raw = os.environ.get("ANYCODE_CONTEXT_WINDOW", "").strip().lower().replace("_", "").replace(",", "")
    if not raw:
        return None
    try:
        value = int(float(raw[:-1]) * 1000) if raw.endswith("k") else int(raw)
    except ValueError:
        log.warning("ANYCODE_CONTEXT_WINDOW=%r is not a number of tokens; ignored", raw)
        return None
    if value < 512:
        log.warning("ANYCODE_CONTEXT_WINDOW=%d is below 512 tokens; ignored", value)
        return None
    return value


def compact_at() -> float:
    """``$ANYCODE_COMPACT_AT``: the fraction of the context window that triggers compaction
    (default 0.8; values outside 0.1..0.95 are clamped, unparsable ones logged and ignored)."""
    raw = os.environ.get("ANYCODE_COMPACT_AT", "").strip()
    if not raw:
        return DEFAULT_COMPACT_AT
    try:
        value = float(raw.rstrip("%")) / (100 if raw.endswith("%") else 1)
    except ValueError:
        log.warning("ANYCODE_COMPACT_AT=%r is not a fraction; using %s", raw, DEFAULT_COMPACT_AT)
        return DEFAULT_COMPACT_AT
    return min(0.95, max(0.1, value))
