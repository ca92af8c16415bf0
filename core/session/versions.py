"""Valid cut points and version families (pure functions over messages and metadata).

A cut keeps messages ``[0 .. index]``. Per the OpenAI chat completions API, every ``tool_calls``
id of an assistant message must be answered by a ``tool`` message before the next non-tool
message, so a cut inside a tool round (after the assistant message with the calls and before the
last of its results) would leave a call without its result. :func:`valid_cut` moves such a cut to
the nearest boundary that keeps the round whole — after its last result when every call has one,
else before the assistant message — and never makes a result up.

A family is a root session and its versions (sessions whose header's ``version_of`` names the
root; see :mod:`core.session.entries`). :func:`divergences` computes, from metadata only, where
the shown version's conversation has alternatives, for the ``‹ n / m ›`` arrows shown at every
such message; :func:`use_order` reads, from the root's version entries, which version was used
last, so switching at one point brings back the version last used below it (as ChatGPT does).
"""
from __future__ import annotations

from typing import Any, Iterable

from core.session.models import SessionMeta


def _call_ids(message: dict[str, Any]) -> set[str]:
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    if not isinstance(calls, list):
        return set()
    return {c.get("id") for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)}


def valid_cut(messages: list[dict[str, Any]], index: int) -> int:
    """The cut nearest ``index`` that holds no tool call without its result (see the module
    docstring); ``-1`` means "copy nothing". ``index`` outside the messages is returned as is."""
    if not 0 <= index < len(messages):
        return index
    # The round holding ``index``: the last assistant with calls at or before it, followed only
    # by tool results up to ``index``.
    start = index
    while start >= 0 and messages[start].get("role") == "tool":
        start -= 1
    if start < 0 or not _call_ids(messages[start]):
        return index
    end = start
    while end + 1 < len(messages) and messages[end + 1].get("role") == "tool":
        end += 1
    answered = {m.get("tool_call_id") for m in messages[start + 1:end + 1]}
    if not _call_ids(messages[start]) <= answered:
        return start - 1  # the round never finished: keep nothing of it
    return end


def last_user_before(messages: list[dict[str, Any]], index: int) -> int:
    """The index of the last user message at or before ``index`` (-1 when none): where a
    regenerated reply's new version is cut, so the model is asked that question again."""
    for i in range(min(index, len(messages) - 1), -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def _tree(metas: Iterable[SessionMeta], root: str) -> dict[str, tuple[str | None, int]]:
    # member id -> (parent id, messages shared with the parent). A parent outside the family
    # (deleted) is replaced by the root, the best structural guess.
    members = {m.id: m for m in metas}
    tree: dict[str, tuple[str | None, int]] = {}
    for m in members.values():
        if m.id == root:
            tree[m.id] = (None, 0)
            continue
        link = m.forked_from or m.version_of or {}
        parent = link.get("session_id")
        if parent not in members or parent == m.id:
            parent = root
        try:
            shared = int((m.version_of or link).get("message_index", -1)) + 1
        except (TypeError, ValueError):
            shared = 0
        tree[m.id] = (parent, max(0, shared))
    return tree


def _path(tree: dict[str, tuple[str | None, int]], node: str) -> list[str]:
    path, seen = [node], {node}
    while True:
        parent = tree.get(path[-1], (None, 0))[0]
        if parent is None or parent in seen:
            return path
        path.append(parent)
        seen.add(parent)


def shared_length(tree: dict[str, tuple[str | None, int]], a: str, b: str, counts: dict[str, int]) -> int:
    """How many leading messages sessions ``a`` and ``b`` share, from the fork tree alone."""
    if a == b:
        return counts.get(a, 0)
    pa, pb = _path(tree, a), _path(tree, b)
    common = next((n for n in pa if n in set(pb)), None)
    if common is None:
        return 0
    shared = counts.get(common, 0)
    for path in (pa, pb):
        for node in path[:path.index(common)]:
            shared = min(shared, tree[node][1])
    return shared


def use_order(root_entries: Iterable[Any]) -> dict[str, int]:
    """``{session id: rank}`` from a family root's entries: the higher the rank, the more recently
    that version was made or switched to (the position of the last ``version`` entry naming it;
    see :mod:`core.session.entries`). Versions never named are absent. Malformed entries are
    ignored."""
    order: dict[str, int] = {}
    n = 0
    for entry in root_entries:
        if isinstance(entry, dict) and entry.get("type") == "version" and isinstance(entry.get("current"), str):
            n += 1
            order[entry["current"]] = n
    return order


def divergences(metas: list[SessionMeta], root: str, shown: str,
                used: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Where the family's versions differ from the shown one: a list, in message order, of
    ``{"index": first differing message index, "n": 1-based position of the shown version,
    "m": how many versions there are at that message, "ids": [the session to open for each, in
    creation order]}``; only points with ``m > 1``. ``metas``: the family's members (root and
    versions, see :meth:`core.session.manager.SessionManager.family`). For an alternative holding
    several versions (they diverge again further down), the one to open is the one used last
    (``used``, from :func:`use_order`), else the most recently active. Reads no messages."""
    tree = _tree(metas, root)
    if shown not in tree:
        return []
    by_id = {m.id: m for m in metas}
    counts = {m.id: m.message_count for m in metas}
    shared_with_shown = {m: shared_length(tree, m, shown, counts) for m in tree}
    # A version with nothing after the shared part (its reply failed or is still coming) is an
    # alternative too, so the user can always get back from it.
    points = sorted({s for m, s in shared_with_shown.items() if m != shown and s <= counts[shown]})
    out = []
    for p in points:
        candidates = [m for m in tree if shared_with_shown[m] >= p]
        classes: list[list[str]] = []
        for m in sorted(candidates, key=lambda i: (by_id[i].created_at, i)):
            for cls in classes:
                if shared_length(tree, cls[0], m, counts) > p:
                    cls.append(m)
                    break
            else:
                classes.append([m])
        if len(classes) < 2:
            continue
        ids, n = [], 0
        for pos, cls in enumerate(classes):
            if shown in cls:
                ids.append(shown)
                n = pos + 1
            else:  # open the version last used below this point in that alternative
                ids.append(max(cls, key=lambda i: ((used or {}).get(i, 0), by_id[i].updated_at,
                                                   by_id[i].created_at)))
        out.append({"index": p, "n": n, "m": len(classes), "ids": ids})
    return out
