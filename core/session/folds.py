"""Folds of the sessions loaded last, reused while the store hands back the very same entries.

Why: folding a loaded session into a :class:`~core.session.models.Session` walks its entries
six times (messages, cut-off replies, agents, the last error, compactions, usage) and its
metadata once more — 160 ms for 100,000 messages, paid by the open of a long chat and again by
the context meter, the approval card and the moved-folder check that follow it (issue 32).

When is a fold reused: only when ``entries`` holds the very same entry objects, in the same
order, as when it was folded (``is``, not ``==``: a check of a few milliseconds, where equality
would cost as much as the fold). The JSONL store shares the parsed entries of an unchanged file
between reads (:mod:`core.stores.entry_cache`), and entries are read-only
(:meth:`core.session.store.SessionStore.load`), so the same objects mean the same content; a
store that parses afresh on each read never reuses one, and a file that changed (another writer's
append included) is parsed into new objects. The memo keeps the entries it folded alive, so an
object's identity cannot be reused by another entry while it is kept.
"""
from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from typing import Any, Callable, TypeVar

T = TypeVar("T")

MEMO_SESSIONS = 8  # sessions whose folds are kept: the open ones of a few tabs
# Entries kept alive by the memo at most (about the JSONL store's cache budget: a 100,000-message
# session's 19 MB file holds 100,003): a fold keeps its entries, which the store's cache may have
# let go, so eight long sessions would otherwise hold eight files' worth of objects.
MEMO_ENTRIES = 200_000


class FoldMemo:
    """Per key, the last entries folded and each fold made of them (``kind`` → result), for at
    most ``size`` keys and ``max_entries`` entries in all (the least recently used go first).

    Thread-safe; a fold runs outside the lock. Results are shared: callers copy what they
    change (:meth:`core.session.manager.SessionManager.get` hands out copies)."""

    def __init__(self, size: int = MEMO_SESSIONS, max_entries: int = MEMO_ENTRIES) -> None:
        self.size = size
        self.max_entries = max_entries
        self._items: OrderedDict[Any, tuple[tuple[Any, ...], dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def fold(self, key: Any, entries: list[Any], kind: str, make: Callable[[list[Any]], T]) -> T:
        """``make(entries)``, or the result it gave for the very same entries of ``key`` before."""
        with self._lock:
            known = self._items.get(key)
        if known is not None and _same(known[0], entries):
            kept, results = known
            if kind in results:
                with self._lock:
                    if key in self._items:
                        self._items.move_to_end(key)
                return results[kind]
        else:
            kept, results = tuple(entries), {}  # a copy: the caller's list is theirs to change
        value = make(entries)
        with self._lock:
            self._items.pop(key, None)
            if len(kept) <= self.max_entries:  # a session longer than that alone is folded each time
                self._items[key] = (kept, {**results, kind: value})
            while len(self._items) > self.size or sum(len(k) for k, _ in self._items.values()) > self.max_entries:
                self._items.popitem(last=False)
        return value


def _same(a: tuple[Any, ...], b: list[Any]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))
