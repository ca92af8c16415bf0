"""Memory entries and their fold into the current memories.

A memory log (one per scope, :mod:`core.stores.memory_log`) holds entries, each a dict:

- ``{"op": "add", "eid", "id", "ts", "text", "source", "session_id", "message_index", "session_project"}``
- ``{"op": "update", "eid", "id", "ts", "text", "source"}``
- ``{"op": "remove", "eid", "id", "ts", "source"}``
- ``{"op": "propose", …the fields of an add}``: a fact the model proposed in a turn that had read
  files, tool output or a sub-agent's result (issue 28: a file must not plant a memory). It is not
  a memory until the user says yes — an ``add`` of the same id — and a ``remove`` dismisses it.

``eid`` is the entry's own unique id (logs merge by it), ``id`` the memory's, ``ts`` Unix
seconds, ``source`` who wrote it: ``"user"`` or ``"model"``. ``session_id`` / ``message_index``
name the conversation and message a memory came from (None when typed in the panel or CLI), and
``session_project`` that conversation's project key (a user memory can come from any project).

The fold does not depend on entry order (a mirror or a migration may deliver entries in another
order): the add makes the memory, the update with the latest ``(ts, eid)`` sets its text, and a
remove, wherever it is, deletes it for good: a removed memory never comes back, whatever
arrives later. Unknown ops and malformed entries are ignored (a newer version's entries never
break an older reader).
"""
from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

SOURCES = ("user", "model")
SCOPES = ("user", "project")


@dataclass(frozen=True)
class Memory:
    """One remembered fact.

    ``scope``: ``"user"`` (every project) or ``"project"`` (``project_key``'s); ``source``:
    ``"user"`` | ``"model"`` (who wrote it last); ``session_id`` / ``message_index`` /
    ``session_project``: the conversation (and its project key) it came from, or None;
    ``created_at`` / ``updated_at``: Unix seconds."""

    id: str
    text: str
    scope: str
    project_key: str | None
    source: str
    session_id: str | None
    message_index: int | None
    created_at: float
    updated_at: float
    session_project: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


def new_memory_id() -> str:
    """A new memory id: 12 hex digits (short enough to type a prefix of it in the CLI)."""
    return uuid.uuid4().hex[:12]


def _eid() -> str:
    return uuid.uuid4().hex


def add_entry(memory_id: str, text: str, source: str, *, session_id: str | None = None,
              message_index: int | None = None, session_project: str | None = None,
              ts: float | None = None) -> dict[str, Any]:
    """An ``add`` entry (``ts`` Unix seconds, default now)."""
    return {"op": "add", "eid": _eid(), "id": memory_id, "ts": time.time() if ts is None else ts, "text": text,
            "source": source, "session_id": session_id, "message_index": message_index,
            "session_project": session_project}


def update_entry(memory_id: str, text: str, source: str, *, ts: float | None = None) -> dict[str, Any]:
    """An ``update`` entry: the memory's new text."""
    return {"op": "update", "eid": _eid(), "id": memory_id, "ts": time.time() if ts is None else ts,
            "text": text, "source": source}


def propose_entry(memory_id: str, text: str, source: str, **origin: Any) -> dict[str, Any]:
    """A ``propose`` entry: ``text`` waits for the user's yes (an add of ``memory_id``)."""
    return {**add_entry(memory_id, text, source, **origin), "op": "propose"}


def remove_entry(memory_id: str, source: str, *, ts: float | None = None) -> dict[str, Any]:
    """A ``remove`` entry: the memory is gone for good."""
    return {"op": "remove", "eid": _eid(), "id": memory_id, "ts": time.time() if ts is None else ts, "source": source}


@dataclass
class MemoryFold:
    """The fold of one scope's log: ``memories`` (id -> Memory, live ones only), ``removed``
    (id -> the text it had when removed, for ids that had an add or a proposal), ``pending``
    (id -> Memory: proposals neither accepted nor dismissed)."""

    memories: dict[str, Memory]
    removed: dict[str, str]
    pending: dict[str, Memory] = field(default_factory=dict)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def fold(entries: Iterable[Any], scope: str, project_key: str | None) -> MemoryFold:
    """Fold a scope's entries (any order) into its memories; see the module docstring."""
    adds: dict[str, dict[str, Any]] = {}
    updates: dict[str, dict[str, Any]] = {}
    proposals: dict[str, dict[str, Any]] = {}
    removed: set[str] = set()
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("id"), str) or _num(e.get("ts")) is None:
            continue
        op, mid = e.get("op"), e["id"]
        if op == "remove":
            removed.add(mid)
        elif op == "propose" and isinstance(e.get("text"), str) and e["text"].strip():
            proposals.setdefault(mid, e)
        elif op in ("add", "update") and isinstance(e.get("text"), str) and e["text"].strip():
            # The first add makes the memory; the latest update (by ts, then eid) sets its text.
            target = adds if op == "add" else updates
            old = target.get(mid)
            order = (e["ts"], str(e.get("eid")))
            if old is None or (order < (old["ts"], str(old.get("eid"))) if op == "add"
                               else order > (old["ts"], str(old.get("eid")))):
                target[mid] = e
    memories: dict[str, Memory] = {}
    gone: dict[str, str] = {}
    for mid, a in adds.items():
        u = updates.get(mid)
        if mid in removed:
            gone[mid] = (u or a)["text"]
            continue
        memories[mid] = _memory(mid, a, u, scope, project_key)
    pending: dict[str, Memory] = {}
    for mid, p in proposals.items():
        if mid in removed:
            gone.setdefault(mid, p["text"])
        elif mid not in adds:
            pending[mid] = _memory(mid, p, None, scope, project_key)
    return MemoryFold(memories, gone, pending)


def _memory(mid: str, a: dict[str, Any], u: dict[str, Any] | None, scope: str, project_key: str | None) -> Memory:
    """The Memory of add (or proposal) entry ``a`` and its latest update ``u``."""
    source = (u or a).get("source")
    index = a.get("message_index")
    return Memory(
        id=mid, text=(u or a)["text"], scope=scope, project_key=project_key,
        source=source if source in SOURCES else "user",
        session_id=a.get("session_id") if isinstance(a.get("session_id"), str) else None,
        message_index=index if isinstance(index, int) and not isinstance(index, bool) else None,
        created_at=float(a["ts"]), updated_at=float(max(a["ts"], u["ts"]) if u else a["ts"]),
        session_project=a.get("session_project") if isinstance(a.get("session_project"), str) else None,
    )
