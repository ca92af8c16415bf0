"""Relative times and the sidebar's date groups (Today / Yesterday / Previous 7 days / Older), in
the request's language (Babel's CLDR data) and the browser's time zone (:func:`webui.i18n.zone`).

Timestamps are Unix seconds (float); groups follow the calendar day where the user is, as a
person reads them — a chat from 23:00 UTC belongs to "Today" for a browser in UTC+8 the next
morning, whatever the server's own time zone.
"""
from __future__ import annotations

import datetime as _dt
import time
from zoneinfo import ZoneInfo

from babel.dates import format_date, format_timedelta

from webui import i18n

# Catalogue keys of the groups, in display order (:func:`group_label` returns one).
GROUPS = ("group_today", "group_yesterday", "group_previous_7_days", "group_older")


def _local_date(ts: float, tz: ZoneInfo | None) -> _dt.date:
    if tz is None:
        return _dt.datetime.fromtimestamp(ts).date()
    return _dt.datetime.fromtimestamp(ts, tz).date()


def group_key(ts: float, now: float | None = None, tz: ZoneInfo | None = None) -> str:
    """The sidebar group (a key of :data:`GROUPS`) of a last-activity time ``ts`` seen at
    ``now`` (default: now) in time zone ``tz`` (default: the browser's, else the server's).

    Future times (clock skew between machines) count as Today.
    """
    now = time.time() if now is None else now
    tz = i18n.zone() if tz is None else tz
    days = (_local_date(now, tz) - _local_date(ts, tz)).days
    if days <= 0:
        return GROUPS[0]
    if days == 1:
        return GROUPS[1]
    if days <= 7:
        return GROUPS[2]
    return GROUPS[3]


def group_label(ts: float, now: float | None = None, tz: ZoneInfo | None = None) -> str:
    """The shown name of :func:`group_key` in the request's language ("Today", "今天")."""
    return i18n.t(group_key(ts, now, tz))


def relative_time(ts: float, now: float | None = None, tz: ZoneInfo | None = None) -> str:
    """A short human time in the request's language: "just now", then Babel's "5 min. ago",
    "3 hr. ago", "2 days ago" ("5分钟前"), and a date ("Mar 12, 2025", "2025年3月12日") for
    anything older than 30 days (in ``tz``, default the browser's)."""
    now = time.time() if now is None else now
    delta = max(0.0, now - ts)
    locale = i18n.babel_locale()
    if delta < 60:
        return i18n.t("just_now")
    if delta < 30 * 86400:
        # threshold 1: "50 min. ago" stays minutes rather than rounding up to "1 hr. ago"
        return format_timedelta(-delta, add_direction=True, format="short", threshold=1, locale=locale)
    tz = i18n.zone() if tz is None else tz
    return format_date(_dt.datetime.fromtimestamp(ts, tz).date() if tz else _dt.date.fromtimestamp(ts),
                       format="medium", locale=locale)


def short_datetime(ts: float, tz: ZoneInfo | None = None) -> str:
    """``YYYY-MM-DD HH:MM`` of Unix seconds ``ts`` in ``tz`` (default: the browser's zone)."""
    tz = i18n.zone() if tz is None else tz
    moment = _dt.datetime.fromtimestamp(ts, tz) if tz else _dt.datetime.fromtimestamp(ts)
    return moment.strftime("%Y-%m-%d %H:%M")


def session_label(title: str | None, created_at: float | None, source: str | None = None) -> str:
    """What the web UI calls a session: its title, else "Session YYYY-MM-DD HH:MM" in the
    request's language and the browser's time zone (the localised form of
    ``core.session.export.session_label``, which the CLI and exports keep in English), else
    "New chat" when no time is known. A title core stored as its fallback (``source ==
    "fallback"``: the title model failed; it is that English label) counts as none."""
    title = (title or "").strip()
    if title and source != "fallback":
        return title
    if not created_at:
        return i18n.t("new_chat")
    return i18n.t("untitled_session", when=short_datetime(created_at))
