"""Relative times and the sidebar's date groups (Today / Yesterday / Previous 7 days / Older).

Timestamps are Unix seconds (float); groups follow the local calendar day, as a person reads them.
"""
from __future__ import annotations

import datetime as _dt
import time

GROUPS = ("Today", "Yesterday", "Previous 7 days", "Older")


def _local_date(ts: float) -> _dt.date:
    return _dt.datetime.fromtimestamp(ts).date()


def group_label(ts: float, now: float | None = None) -> str:
    """Return the sidebar group of a last-activity time ``ts`` seen at ``now`` (default: now).

    Future times (clock skew between machines) count as Today.
    """
    now = time.time() if now is None else now
    days = (_local_date(now) - _local_date(ts)).days
    if days <= 0:
        return "Today"
    if days == 1:
        return "Yesterday"
    if days <= 7:
        return "Previous 7 days"
    return "Older"


def relative_time(ts: float, now: float | None = None) -> str:
    """Return a short human time like ``just now``, ``5 min ago``, ``3 h ago``, ``2 d ago`` or a
    date (``12 Mar 2025``) for anything older than 30 days."""
    now = time.time() if now is None else now
    delta = max(0.0, now - ts)
    if delta < 60:
        return "just now"
    if delta < 3600:
        return f"{int(delta // 60)} min ago"
    if delta < 86400:
        return f"{int(delta // 3600)} h ago"
    if delta < 30 * 86400:
        return f"{int(delta // 86400)} d ago"
    return _dt.datetime.fromtimestamp(ts).strftime("%d %b %Y").lstrip("0")
