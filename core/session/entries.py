"""Session entries: the records a :class:`~core.session.store.SessionStore` appends, and their fold.

Every store holds a session as an ordered list of entries (dicts). Types (``"type"`` key):

- ``header``: ``{"type": "header", "version": 1, "id": str, "project_key": str, "cwd": str,
  "created_at": float, "forked_from"?: {"session_id": str, "message_index": int},
  "version_of"?: {"session_id": str, "message_index": int}}`` — first entry. ``forked_from``: the
  session this one was copied from and the last copied message; ``version_of``: present on a
  version made by Edit or Regenerate, naming the family's root session (the conversation the
  sidebar shows) and the last message shared with the session it was made from.
- ``message``: ``{"type": "message", "ts": float, "message": {...}, "end"?: str}`` — ``message`` is the
  OpenAI chat message exactly as sent to the API (no extra keys inside it); ``end`` marks an
  assistant reply the model did not finish (``"length"``, ``"content_filter"``, ``"no_end"``).
- ``title``: ``{"type": "title", "ts": float, "title": str, "source": "llm" | "user" | "fallback"}``.
- ``version``: ``{"type": "version", "ts": float, "current": str}`` — appended to a family's root
  session when the user switches to (or creates) a version; the last one names the version shown
  when the conversation is opened again (the root itself when none).

Unknown types are kept by the store and ignored by the fold, so a newer version's entries never
break an older reader. Timestamps are Unix seconds (float).

:class:`SessionState` folds entries one at a time; the JSONL index feeds it only the new tail of
a file, and loading a session feeds it everything, so both agree by construction.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable

FORMAT_VERSION = 1
TITLE_SOURCES = ("llm", "user", "fallback")


def header_entry(
    session_id: str,
    project_key: str,
    cwd: str | None,
    *,
    created_at: float | None = None,
    forked_from: dict[str, Any] | None = None,
    version_of: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a header entry; ``created_at`` in Unix seconds (default now). ``forked_from`` and
    ``version_of``: ``{"session_id": str, "message_index": int}`` (see the module docstring)."""
    entry: dict[str, Any] = {
        "type": "header",
        "version": FORMAT_VERSION,
        "id": session_id,
        "project_key": project_key,
        "cwd": cwd,
        "created_at": time.time() if created_at is None else created_at,
    }
    if forked_from is not None:
        entry["forked_from"] = forked_from
    if version_of is not None:
        entry["version_of"] = version_of
    return entry


def message_entry(message: dict[str, Any], *, ts: float | None = None, end: str | None = None) -> dict[str, Any]:
    """Wrap an OpenAI chat message (a dict with ``role``) as a message entry.

    ``end``: for an assistant reply the model did not finish, how it ended (``"length"``,
    ``"content_filter"``, ``"no_end"``); stored beside the message (``"end"`` key of the entry), never
    inside it, so the message stays exactly what the API takes.
    Raises ``ValueError`` when ``message`` is not a dict with a string ``role``.
    """
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise ValueError("a message must be a dict with a 'role' (per the OpenAI chat API)")
    entry = {"type": "message", "ts": time.time() if ts is None else ts, "message": message}
    if end:
        entry["end"] = end
    return entry


def title_entry(title: str, source: str, *, ts: float | None = None) -> dict[str, Any]:
    """Build a title entry. ``source`` is ``"llm"``, ``"user"`` or ``"fallback"`` (ValueError otherwise)."""
    if source not in TITLE_SOURCES:
        raise ValueError(f"title source must be one of {TITLE_SOURCES}, not {source!r}")
    return {"type": "title", "ts": time.time() if ts is None else ts, "title": title, "source": source}


def version_entry(current: str, *, ts: float | None = None) -> dict[str, Any]:
    """Build a version entry naming ``current`` (a session id) as the family's version in use.
    Raises ``ValueError`` for an empty id."""
    if not isinstance(current, str) or not current:
        raise ValueError("a version entry names a session id")
    return {"type": "version", "ts": time.time() if ts is None else ts, "current": current}


def _link(value: Any) -> dict[str, Any] | None:
    # A hand-edited header's link must not crash the list: a dict with a string id, or nothing.
    if isinstance(value, dict) and isinstance(value.get("session_id"), str):
        return value
    return None


def _number(value: Any) -> float | None:
    # bool is an int subclass; a hand-edited "ts": true must not become 1.0.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass
class SessionState:
    """The metadata a fold of entries yields (no messages kept, so memory stays small).

    ``created_at`` is None until a header (or, lacking one, the first timestamped entry) is seen;
    ``last_message_at`` is the ts of the last message entry (in file order); ``version_of``: the
    header's link to its family root (a version); ``current``: the last version entry's session id
    (a family root's version in use; None until one is appended).
    """

    id: str | None = None
    project_key: str | None = None
    cwd: str | None = None
    created_at: float | None = None
    last_message_at: float | None = None
    message_count: int = 0
    forked_from: dict[str, Any] | None = None
    title: str | None = None
    title_source: str | None = None
    has_header: bool = False
    version_of: dict[str, Any] | None = None
    current: str | None = None

    def feed(self, entry: Any) -> bool:
        """Fold one entry in; return True when it was a message entry. Malformed entries are ignored."""
        if not isinstance(entry, dict):
            return False
        kind = entry.get("type")
        if kind == "message":
            if not isinstance(entry.get("message"), dict):
                return False
            self.message_count += 1
            ts = _number(entry.get("ts"))
            if ts is not None:
                # The last message's time, in file order (not the largest): a clock that jumped
                # ahead and back does not pin the session to the top of the list, and a reader
                # that looks only at the last message line agrees with one that reads them all.
                self.last_message_at = ts
                if self.created_at is None:
                    self.created_at = ts
            return True
        if kind == "title":
            title, source = entry.get("title"), entry.get("source")
            if isinstance(title, str) and title.strip() and source in TITLE_SOURCES:
                # A title the user chose is never replaced by a generated one, whatever the order.
                if source == "user" or self.title_source != "user":
                    self.title, self.title_source = title, source
            return False
        if kind == "version":
            if isinstance(entry.get("current"), str) and entry["current"]:
                self.current = entry["current"]  # append-only: the last one wins
            return False
        if kind == "header" and not self.has_header:
            self.has_header = True
            self.id = entry.get("id") if isinstance(entry.get("id"), str) else self.id
            self.project_key = entry.get("project_key") if isinstance(entry.get("project_key"), str) else None
            self.cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
            created = _number(entry.get("created_at"))
            if created is not None:
                self.created_at = created
            forked = entry.get("forked_from")
            self.forked_from = forked if isinstance(forked, dict) else None
            self.version_of = _link(entry.get("version_of"))
        return False

    def feed_all(self, entries: Iterable[Any]) -> "SessionState":
        """Fold every entry of ``entries``; return self."""
        for entry in entries:
            self.feed(entry)
        return self

    def updated_at(self, default: float = 0.0) -> float:
        """The later of creation and the last message (Unix seconds); ``default`` when neither is known."""
        created, last = self.created_at, self.last_message_at
        if created is None:
            return default if last is None else last
        return created if last is None or last < created else last

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the state (for indexes)."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SessionState":
        """Rebuild from :meth:`to_dict` output; unknown keys are dropped."""
        try:
            return cls(**data)  # the common case: exactly our own keys
        except TypeError:
            known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            return cls(**known)


def reply_ends_of(entries: Iterable[Any]) -> dict[int, str]:
    """``{message index: end}`` for the message entries of ``entries`` carrying an ``end`` mark
    (replies the model did not finish), indexes counted like :func:`messages_of`."""
    ends: dict[int, str] = {}
    n = 0
    for e in entries:
        if isinstance(e, dict) and e.get("type") == "message" and isinstance(e.get("message"), dict):
            if isinstance(e.get("end"), str) and e["end"]:
                ends[n] = e["end"]
            n += 1
    return ends


def messages_of(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """The OpenAI messages of ``entries``, in order (other entry types skipped)."""
    return [
        e["message"]
        for e in entries
        if isinstance(e, dict) and e.get("type") == "message" and isinstance(e.get("message"), dict)
    ]


# One encoder for every store (the JSONL lines, the SQL rows, exports), so a session is the
# same bytes wherever it lives.
_SURROGATES = re.compile("[\ud800-\udfff]")


def encode_entries(entries: Iterable[Any]) -> bytes:
    """Serialise entries as JSONL bytes, one line each, ending with ``\\n``.

    Raises ``ValueError`` for an entry that is not a dict or not JSON-serialisable (NaN and
    infinities included, as they are not JSON); nothing is written then.
    """
    return b"".join(encode_entry(entry).encode("utf-8") + b"\n" for entry in entries)


def encode_entry(entry: Any) -> str:
    """One entry as its JSON line text (no newline), the same in every store: compact,
    ``ensure_ascii=False``, lone surrogates replaced by U+FFFD so the text is valid UTF-8.

    Raises ``ValueError`` for a non-dict or a value JSON cannot hold (NaN, infinities, objects)."""
    if not isinstance(entry, dict):
        raise ValueError(f"a session entry must be a dict, not {type(entry).__name__}")
    try:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"session entry is not JSON-serialisable: {exc}") from exc
    if _SURROGATES.search(line):
        line = _SURROGATES.sub("\ufffd", line)
    return line
