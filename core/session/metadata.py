"""Merging a conversation's metadata between two copies of it (a machine and its mirror).

A conversation's *metadata* entries — ``title``, ``pin`` and ``tags``, appended to its family
root (:mod:`core.session.entries`) — say nothing about the order of its messages, so unlike the
message history (never merged out of order: divergent histories stay versions) they can be merged
between two copies of one conversation: machine B's rename, pin or tags reach the chat machine A
is using, and A's reach B's, even when both wrote messages meanwhile.

The rule is **the latest change of each field wins, by the entry's timestamp**, the same on both
copies:

- the title: the newest title entry, where a title the user chose always beats a generated one
  (the fold's own rule), so a rename on A made after B's rename wins on both machines;
- the pin state: the newest ``pin`` entry (pinning on B after unpinning on A leaves it pinned);
- tags, per tag: the newest ``tags`` entry naming that tag says whether it is there (B adding
  "urgent" while A adds "work" keeps both; A removing "work" after B added it removes it);
- archived or not: the newest ``archive`` entry (an archive or unarchive by hand). A copy taking
  one moves the conversation to match (:meth:`~core.session.manager.SessionManager.follow_archive_choice`);
  auto-archive writes no entry, so it stays the local copy's own.

The fold (:class:`~core.session.entries.SessionState`) applies the same rule by timestamp, not
by position, so the order in which a copy receives the entries never matters (two machines'
deliveries racing, a pull racing a rename). A copy receives another's entry only when it is newer
than every entry of that field (for tags: of that tag) the copy holds — as it is, same ``ts``; a
``tags`` entry cut to the tags it wins — so merging twice adds nothing (the second time nothing
is newer) and a copy never grows by the other's older changes. Timestamps come from each machine's clock, so machines sharing a
mirror keep their clocks in sync (NTP), as for the reply lease.
"""
from __future__ import annotations

from typing import Any, Iterable

from core.session.entries import TITLE_SOURCES

METADATA_TYPES = frozenset({"title", "pin", "tags", "archive"})
_NEVER = float("-inf")


def is_metadata(entry: Any) -> bool:
    """True for a metadata entry (``title``, ``pin``, ``tags``, ``archive``) — one the merge may
    add to a copy out of its place in the history."""
    return isinstance(entry, dict) and entry.get("type") in METADATA_TYPES


def history_of(entries: Iterable[Any]) -> list[Any]:
    """``entries`` without the metadata entries: the part two copies must agree on in order."""
    return [e for e in entries if not is_metadata(e)]


def _ts(entry: dict[str, Any]) -> float:
    ts = entry.get("ts")
    return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else _NEVER


def _title_rank(entry: dict[str, Any]) -> tuple[bool, float] | None:
    title = entry.get("title")
    if not isinstance(title, str) or not title.strip() or entry.get("source") not in TITLE_SOURCES:
        return None
    return entry.get("source") == "user", _ts(entry)


def _tag_marks(entry: dict[str, Any]) -> dict[str, bool]:
    """``{tag: present}`` a tags entry sets (an added tag wins over the same tag removed)."""
    add, remove = entry.get("add"), entry.get("remove")
    if not isinstance(add, list) or not isinstance(remove, list):
        return {}
    marks = {t: False for t in remove if isinstance(t, str) and t}
    marks.update({t: True for t in add if isinstance(t, str) and t})
    return marks


class _Latest:
    """The newest change of each field a copy holds."""

    def __init__(self, entries: Iterable[Any]):
        self.title: tuple[bool, float] | None = None
        self.pin = _NEVER
        self.archive = _NEVER
        self.tags: dict[str, float] = {}
        for e in entries:
            if is_metadata(e):
                self.take(e)

    def take(self, e: dict[str, Any]) -> None:
        kind = e.get("type")
        if kind == "title":
            rank = _title_rank(e)
            if rank is not None and (self.title is None or rank >= self.title):
                self.title = rank
        elif kind == "pin" and isinstance(e.get("pinned"), bool):
            self.pin = max(self.pin, _ts(e))
        elif kind == "archive" and isinstance(e.get("archived"), bool):
            self.archive = max(self.archive, _ts(e))
        elif kind == "tags":
            for tag in _tag_marks(e):
                self.tags[tag] = max(self.tags.get(tag, _NEVER), _ts(e))


def metadata_to_apply(target: Iterable[Any], source: Iterable[Any]) -> list[dict[str, Any]]:
    """The metadata entries of ``source`` that ``target`` should append to follow the rule of
    the module docstring: each newer than every entry of its field (a tag, for tags) ``target``
    holds, in ``source``'s order, as they are — a ``tags`` entry naming some tags ``target``
    changed later is cut to the others (same ``ts``). ``[]`` when ``target`` is up to date, so
    applying the result and asking again gives ``[]`` (idempotent). Entries without a usable
    timestamp never win over one with a timestamp."""
    latest = _Latest(target)
    out: list[dict[str, Any]] = []
    for e in source:
        if not is_metadata(e):
            continue
        kind, ts = e.get("type"), _ts(e)
        if kind == "title":
            rank = _title_rank(e)
            if rank is not None and (latest.title is None or rank > latest.title):
                out.append(e)
                latest.take(e)
        elif kind == "pin":
            if isinstance(e.get("pinned"), bool) and ts > latest.pin:
                out.append(e)
                latest.take(e)
        elif kind == "archive":
            if isinstance(e.get("archived"), bool) and ts > latest.archive:
                out.append(e)
                latest.take(e)
        elif kind == "tags":
            won = {t: present for t, present in _tag_marks(e).items() if ts > latest.tags.get(t, _NEVER)}
            if not won:
                continue
            if len(won) == len(_tag_marks(e)):
                out.append(e)
            else:
                out.append({**e, "add": [t for t in e["add"] if won.get(t) is True],
                            "remove": [t for t in e["remove"] if won.get(t) is False]})
            latest.take(out[-1])
    return out


def is_root(entries: list[Any]) -> bool:
    """Whether ``entries`` (a main record) is a conversation's family root, the record its
    metadata is written to: its header (when it has one) is not a version's."""
    head = entries[0] if entries and isinstance(entries[0], dict) and entries[0].get("type") == "header" else {}
    return not isinstance(head.get("version_of"), dict)


def archive_choice(entries: Iterable[Any]) -> tuple[float, bool] | None:
    """``(ts, archived)`` of the newest ``archive`` entry of ``entries`` (the user's last archive
    or unarchive by hand); None when there is none."""
    best: tuple[float, bool] | None = None
    for e in entries:
        if isinstance(e, dict) and e.get("type") == "archive" and isinstance(e.get("archived"), bool):
            if best is None or _ts(e) >= best[0]:
                best = (_ts(e), e["archived"])
    return best
