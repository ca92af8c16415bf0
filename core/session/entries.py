"""Session entries: the records a :class:`~core.session.store.SessionStore` appends, and their fold.

Every store holds a session as an ordered list of entries (dicts). Types (``"type"`` key):

- ``header``: ``{"type": "header", "version": 1, "id": str, "project_key": str, "cwd": str,
  "created_at": float, "forked_from"?: {"session_id": str, "message_index": int},
  "version_of"?: {"session_id": str, "message_index": int}}`` — first entry. ``forked_from``: the
  session this one was copied from and the last copied message; ``version_of``: present on a
  version made by Edit or Regenerate, naming the family's root session (the conversation the
  sidebar shows) and the last message shared with the session it was made from. ``copy_of``
  (``{"session_id": str}``, optional) marks a version holding a *copy* of that session's history
  from elsewhere — a mirror keeping a machine's diverged history, ``sessions pull`` keeping the
  other machine's (:mod:`core.stores.pull`): a pull does not copy such a version where a history
  already holds its messages.
- ``message``: ``{"type": "message", "ts": float, "message": {...}, "end"?: str, "agent"?: str,
  "mcp"?: {call id: {"server": str, "tool": str}}}`` — ``message`` is the OpenAI chat message exactly
  as sent to the API (no extra keys inside it); ``end`` marks an assistant reply the model did not
  finish (``"length"``, ``"content_filter"``, ``"no_end"``); ``mcp`` names the MCP server and tool
  each of its calls went to (:mod:`core.session.mcp_calls`).
- ``title``: ``{"type": "title", "ts": float, "title": str, "source": "llm" | "user" | "fallback"}``.
- ``version``: ``{"type": "version", "ts": float, "current": str}`` — appended to a family's root
  session when the user switches to (or creates) a version; the last one names the version shown
  when the conversation is opened again (the root itself when none).

- ``pin``: ``{"type": "pin", "ts": float, "pinned": bool}`` — appended to a conversation's root
  (issue 31): the newest one (``ts``) says whether the chat sits at the top of the sidebar.
- ``tags``: ``{"type": "tags", "ts": float, "add": [str], "remove": [str]}`` — appended to a
  conversation's root: tags added and removed (each cleaned by :func:`clean_tag`). For each tag
  the newest entry naming it wins.
- ``archive``: ``{"type": "archive", "ts": float, "archived": bool}`` — appended to a
  conversation's root when the user archives or unarchives it by hand (not by auto-archive).
  Where the record lives (main list or archive) is the archive state; these entries only date the
  user's choices, so a mirror can carry the newest one to the other machines
  (:mod:`core.session.metadata`). The fold ignores them.
- ``reply_error``: ``{"type": "reply_error", "ts": float, "at": int, "error": str, "reason": str,
  "status"?: int, "detail"?: str}`` — a turn failed at the model (HTTP 401, a context-length 400,
  the server unreachable …) after ``at`` messages were stored, so no reply was saved: ``error``
  is the error's class name (:mod:`core.errors`), ``reason`` its sentence, ``status``/``detail``
  the server's status code and message, secrets hidden (:func:`core.memory.secrets.hide_secrets`).
  Only the last one, and only while the session still holds exactly ``at`` messages, says why the
  last message has no answer (:func:`reply_error_of`); a reply or any later message makes it history.

Two writers (two tabs, two processes, two machines through a mirror) pinning or tagging at once is
normal: both entries are appended, none replaces the other, and the fold decides per field by
the entries' timestamps — the title is the newest user title (else the newest generated one), the
pin state the newest ``pin`` entry's, and each tag's presence the newest entry that named that tag
(a tie goes to the later entry). Tab A adding "work" while tab B adds "urgent" keeps both; A
unpinning while B pins leaves whichever happened last. By time rather than by position, so a
mirror can merge two machines' changes in any order (:mod:`core.session.metadata`) and every
copy folds to the same result.

Unknown types are kept by the store and ignored by the fold, so a newer version's entries never
break an older reader. Timestamps are Unix seconds (float).

:class:`SessionState` folds entries one at a time; the JSONL index feeds it only the new tail of
a file, and loading a session feeds it everything, so both agree by construction.
"""
from __future__ import annotations

import json
import re
import time
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

from core.errors import InvalidTag

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


# Where a thinking-mode server's reasoning is kept on an assistant message: the key it streamed it
# in (DeepSeek, Kimi, vLLM's older parser: reasoning_content; vLLM's newer one, OpenRouter: reasoning).
REASONING_KEYS = ("reasoning_content", "reasoning")


def reasoning_of(message: Any) -> str:
    """The reasoning stored on an assistant ``message`` ("" when none; never its answer)."""
    if not isinstance(message, dict):
        return ""
    for key in REASONING_KEYS:
        if isinstance(message.get(key), str) and message[key].strip():
            return message[key]
    return ""


def message_entry(message: dict[str, Any], *, ts: float | None = None, end: str | None = None,
                  agent: str | None = None, mcp: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """Wrap an OpenAI chat message (a dict with ``role``) as a message entry.

    ``agent``: the name of the defined agent that wrote this reply (issue 30: ``@name`` in the
    chat), stored beside the message (``"agent"`` key of the entry) like ``end``.

    ``end``: for an assistant reply the model did not finish, how it ended (``"length"``,
    ``"content_filter"``, ``"no_end"``); stored beside the message (``"end"`` key of the entry), never
    inside it, so the message stays exactly what the API takes.

    ``mcp``: ``{call id: {"server", "tool"}}`` for the calls of this assistant message that went
    to an MCP server (:mod:`core.session.mcp_calls`), stored beside the message likewise.
    Raises ``ValueError`` when ``message`` is not a dict with a string ``role``.
    """
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise ValueError("a message must be a dict with a 'role' (per the OpenAI chat API)")
    entry = {"type": "message", "ts": time.time() if ts is None else ts, "message": message}
    if end:
        entry["end"] = end
    if agent:
        entry["agent"] = agent
    if mcp:
        entry["mcp"] = mcp
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


MAX_REASON_CHARS = 1000  # a reply_error's reason and detail are cut to this (a server can send pages)


def reply_error_entry(error: str, reason: str, at: int, *, status: int | None = None, detail: str = "",
                      ts: float | None = None) -> dict[str, Any]:
    """Build a reply_error entry: the turn failed with error class ``error`` (e.g.
    ``"ModelAuthError"``) saying ``reason`` after ``at`` stored messages; ``status``/``detail``: the
    server's status code and message when it sent one. The caller hides secrets first (this module
    stores what it is given); texts are cut to :data:`MAX_REASON_CHARS`. Raises ``ValueError`` for
    a negative or non-integer ``at`` or an empty ``reason``."""
    if not isinstance(at, int) or isinstance(at, bool) or at < 0:
        raise ValueError("a reply_error entry needs the message count it failed after")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("a reply_error entry needs a reason")
    entry: dict[str, Any] = {"type": "reply_error", "ts": time.time() if ts is None else ts, "at": at,
                             "error": str(error), "reason": reason[:MAX_REASON_CHARS]}
    if isinstance(status, int) and not isinstance(status, bool):
        entry["status"] = status
    if detail:
        entry["detail"] = str(detail)[:MAX_REASON_CHARS]
    return entry


def reply_error_of(entries: Iterable[Any]) -> dict[str, Any] | None:
    """The reply_error entry saying why the session's last message has no answer: the last
    reply_error entry of ``entries`` when it was written at the session's current message count
    (its ``at``); None when there is none, or messages were added since (a reply, a new message)."""
    count, last = 0, None
    for e in entries:
        if not isinstance(e, dict):
            continue
        if e.get("type") == "message" and isinstance(e.get("message"), dict):
            count += 1
        elif e.get("type") == "reply_error" and isinstance(e.get("reason"), str) and e["reason"].strip():
            last = e
    if last is None or last.get("at") != count or isinstance(last.get("at"), bool):
        return None
    return last


MAX_TAG_CHARS = 40
MAX_TAGS = 20  # per conversation; more are refused (InvalidTag), so a row stays readable
_TAG_SPACE = re.compile(r"\s+")
# Control characters and bidi controls (shown reversed), and the characters the CLI gives a
# meaning to (`sessions tag ID +x -y`, "tag:x" in search) or that would split a tag list.
_TAG_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff,;:#\"'<>`]")


def clean_tag(text: str) -> str:
    """A tag as stored: NFKC-normalised, lower case, whitespace runs as one ``-``, at most
    :data:`MAX_TAG_CHARS` characters, without a leading ``+``/``-``. Raises :class:`InvalidTag`
    (a ``ValueError``) for one that is empty afterwards or holds a control character or one of
    ``, ; : # " ' < > ``` (which the command line, search and the tag lists give a meaning to)."""
    if not isinstance(text, str):
        raise InvalidTag("A tag must be text.")
    tag = _TAG_SPACE.sub("-", unicodedata.normalize("NFKC", text).strip().lower()).lstrip("+-").strip("-")
    if not tag:
        raise InvalidTag("A tag cannot be empty.")
    if _TAG_BAD.search(tag):
        raise InvalidTag(f"A tag cannot hold {_TAG_BAD.search(tag).group()!r}; use letters, digits, - and _.")
    return tag[:MAX_TAG_CHARS]


def pin_entry(pinned: bool, *, ts: float | None = None) -> dict[str, Any]:
    """Build a pin entry (``pinned``: True pins the conversation to the top of the list)."""
    return {"type": "pin", "ts": time.time() if ts is None else ts, "pinned": bool(pinned)}


def archive_entry(archived: bool, *, ts: float | None = None) -> dict[str, Any]:
    """Build an archive entry: the user archived (``archived``) or unarchived the conversation."""
    return {"type": "archive", "ts": time.time() if ts is None else ts, "archived": bool(archived)}


def tags_entry(add: Iterable[str] = (), remove: Iterable[str] = (), *, ts: float | None = None) -> dict[str, Any]:
    """Build a tags entry adding ``add`` and removing ``remove`` (each cleaned by
    :func:`clean_tag`; a tag in both is added). Raises :class:`InvalidTag`, and ``ValueError``
    when nothing is added or removed."""
    added = list(dict.fromkeys(clean_tag(t) for t in add))
    removed = [t for t in dict.fromkeys(clean_tag(t) for t in remove) if t not in added]
    if not added and not removed:
        raise ValueError("a tags entry adds or removes at least one tag")
    return {"type": "tags", "ts": time.time() if ts is None else ts, "add": added, "remove": removed}


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


def _newer(ts: float | None, than: float | None) -> bool:
    """Whether a change at ``ts`` replaces one at ``than`` (None: no time; it loses to any time,
    and ties go to the later entry, as in file order)."""
    if ts is None:
        return than is None
    return than is None or ts >= than


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
    origin: str | None = None  # "imported" / "restored": the header came from elsewhere
    identity: str | None = None  # the project's git identity (core.session.identity), when recorded
    pinned: float | None = None  # when the last pin entry pinned it (Unix seconds; 1.0 if it had no time); None: not pinned
    tags: tuple[str, ...] = ()  # in the order first added; a new tuple per change (states share them)
    # When the title, the pin state and each tag last changed (the winning entries' ts): the fold
    # keeps the newest change of each, whatever order the entries arrived in (a mirror's merge,
    # core.session.metadata). Tuples, never changed in place (states share them).
    title_ts: float | None = None
    pin_ts: float | None = None
    tag_ts: tuple[tuple[str, float | None], ...] = ()

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
                # A title the user chose is never replaced by a generated one, whatever the
                # order; among titles of one kind the newest (ts) wins, ties to the later line.
                ts = _number(entry.get("ts"))
                if (source == "user") > (self.title_source == "user") or (
                        (source == "user") == (self.title_source == "user") and _newer(ts, self.title_ts)):
                    self.title, self.title_source, self.title_ts = title, source, ts
            return False
        if kind == "pin":
            ts = _number(entry.get("ts"))
            if isinstance(entry.get("pinned"), bool) and _newer(ts, self.pin_ts):  # the newest one wins
                self.pinned = (ts or 1.0) if entry["pinned"] else None
                self.pin_ts = ts
            return False
        if kind == "tags":
            add, remove = entry.get("add"), entry.get("remove")
            if isinstance(add, list) and isinstance(remove, list):
                # Per tag, the newest entry naming it decides (ties: the later line).
                ts = _number(entry.get("ts"))
                seen = dict(self.tag_ts)
                drop = {t for t in remove if isinstance(t, str) and _newer(ts, seen.get(t))} - set(add)
                more = [t for t in add if isinstance(t, str) and t and _newer(ts, seen.get(t))]
                if drop or more:
                    kept = [t for t in self.tags if t not in drop]
                    kept += [t for t in dict.fromkeys(more) if t not in kept]
                    self.tags = tuple(kept[:MAX_TAGS])
                    seen.update(dict.fromkeys([*drop, *more], ts))
                    self.tag_ts = tuple(seen.items())
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
            self.origin = ("imported" if isinstance(entry.get("imported_from"), dict) else
                           "restored" if isinstance(entry.get("restored_from"), dict) else None)
            ident = entry.get("project_identity")
            self.identity = ident if isinstance(ident, str) and ident else None
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


def _message_marks(entries: Iterable[Any], mark: str) -> dict[int, str]:
    """``{message index: value}`` of the non-empty string ``mark`` key on the message entries of
    ``entries``, indexes counted like :func:`messages_of`."""
    marks: dict[int, str] = {}
    n = 0
    for e in entries:
        if isinstance(e, dict) and e.get("type") == "message" and isinstance(e.get("message"), dict):
            if isinstance(e.get(mark), str) and e[mark]:
                marks[n] = e[mark]
            n += 1
    return marks


def reply_ends_of(entries: Iterable[Any]) -> dict[int, str]:
    """``{message index: end}`` for the message entries of ``entries`` carrying an ``end`` mark
    (replies the model did not finish), indexes counted like :func:`messages_of`."""
    return _message_marks(entries, "end")


def reply_agents_of(entries: Iterable[Any]) -> dict[int, str]:
    """``{message index: agent name}`` for the message entries of ``entries`` a defined agent
    wrote (an ``agent`` mark, issue 30), indexes counted like :func:`messages_of`."""
    return _message_marks(entries, "agent")


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
