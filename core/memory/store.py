"""``MemoryStore``: the user's and each project's memories over a memory log backend.

Every change is one appended entry (:mod:`core.memory.model`) in the scope's log
(:mod:`core.stores.memory_log`), so two processes adding at once both keep their memory, and a
removal is itself a record that outlives any copy of the add. Reads fold the whole log (memory
logs are small: facts of a sentence each).

Rules applied on every write, whoever writes (panel, CLI, ``remember`` tool, extraction job):
the text is one line (whitespace collapsed), 1..:data:`MAX_TEXT_CHARS` characters, and must not
look like a secret (:func:`core.memory.secrets.secret_reason`; :class:`InvalidMemory` otherwise).
Adding a text the scope already holds (case and spacing ignored) returns the existing memory.
"""
from __future__ import annotations

import logging
from typing import Any, Iterable

from core.errors import InvalidMemory, MemoryNotFound
from core.memory.model import (
    SCOPES,
    SOURCES,
    Memory,
    MemoryFold,
    add_entry,
    fold,
    new_memory_id,
    remove_entry,
    update_entry,
)
from core.memory.secrets import secret_reason
from core.stores.memory_log import USER_SCOPE, MemoryLog, memory_log_for, project_scope

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 500


def clean_text(text: Any) -> str:
    """``text`` as stored: one line, whitespace collapsed. Raises :class:`InvalidMemory` when it
    is empty, longer than :data:`MAX_TEXT_CHARS` characters, or looks like a secret."""
    if not isinstance(text, str):
        raise InvalidMemory("A memory must be text.")
    text = " ".join(text.split())
    if not text:
        raise InvalidMemory("A memory cannot be empty.")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidMemory(f"A memory is a short fact: at most {MAX_TEXT_CHARS} characters (this one has {len(text)}).")
    reason = secret_reason(text)
    if reason:
        raise InvalidMemory(f"Not stored: this looks like it contains {reason}, and memories never hold secrets.")
    return text


def same_text(a: str, b: str) -> bool:
    """Whether two memory texts say the same (case and spacing ignored)."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


class MemoryStore:
    """Memories of the user (scope ``"user"``) and of each project (scope ``"project"`` plus a
    project key), over ``log`` (a :class:`~core.stores.memory_log.MemoryLog`).

    Build one with :meth:`for_store` from a session store. Thread- and process-safe as its log."""

    def __init__(self, log_backend: MemoryLog):
        self.log = log_backend

    @classmethod
    def for_store(cls, store: Any) -> "MemoryStore":
        """The memory store kept beside a session store (same data dir or database, mirrored
        with it). Raises :class:`~core.errors.StoreUnavailable` for a store that cannot keep them."""
        return cls(memory_log_for(store))

    def __repr__(self) -> str:
        return f"MemoryStore({self.log!r})"

    @staticmethod
    def _scope_name(scope: str, project_key: str | None) -> str:
        if scope == "user":
            return USER_SCOPE
        if scope == "project":
            if not project_key:
                raise ValueError("a project memory needs a project key")
            return project_scope(project_key)
        raise ValueError(f"memory scope must be one of {SCOPES}, not {scope!r}")

    def _fold(self, scope: str, project_key: str | None) -> MemoryFold:
        return fold(self.log.load(self._scope_name(scope, project_key)), scope,
                    project_key if scope == "project" else None)

    # --- reads ------------------------------------------------------------------------------

    def list(self, project_key: str | None = None, scope: str | None = None) -> list[Memory]:
        """Live memories, most recently updated first: the user's, plus ``project_key``'s when
        given; ``scope`` ("user" | "project") keeps one of the two."""
        scopes = [scope] if scope else ["user", "project"]
        out: list[Memory] = []
        for s in scopes:
            if s == "project" and not project_key:
                continue
            out += self._fold(s, project_key).memories.values()
        return sorted(out, key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)

    def removed_texts(self, project_key: str | None) -> list[str]:
        """Texts of removed memories (user's and the project's): the extraction job never
        proposes them again."""
        texts = list(self._fold("user", None).removed.values())
        if project_key:
            texts += self._fold("project", project_key).removed.values()
        return texts

    def get(self, memory_id: str, project_key: str | None = None) -> Memory:
        """The live memory whose id is ``memory_id`` or starts with it (at least 4 characters),
        among the user's and ``project_key``'s. Raises :class:`MemoryNotFound` (none, removed,
        or an ambiguous prefix)."""
        if not isinstance(memory_id, str) or not memory_id.strip():
            raise MemoryNotFound("Give a memory id.")
        memory_id = memory_id.strip()
        live = self.list(project_key)
        exact = [m for m in live if m.id == memory_id]
        if exact:
            return exact[0]
        found = [m for m in live if len(memory_id) >= 4 and m.id.startswith(memory_id)]
        if len(found) == 1:
            return found[0]
        if found:
            raise MemoryNotFound(f"The id prefix {memory_id!r} matches {len(found)} memories; type more of it.")
        raise MemoryNotFound(f"No memory {memory_id!r} was found.")

    # --- writes -----------------------------------------------------------------------------

    def add(self, text: str, *, scope: str = "project", project_key: str | None = None, source: str = "user",
            session_id: str | None = None, message_index: int | None = None) -> Memory:
        """Store a new fact; return it (or the live memory already saying the same).

        Raises :class:`InvalidMemory` (see :func:`clean_text`), ValueError (bad scope/source),
        StoreUnavailable."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
        text = clean_text(text)
        name = self._scope_name(scope, project_key)
        for m in self.list(project_key, scope):
            if same_text(m.text, text):
                return m
        entry = add_entry(new_memory_id(), text, source, session_id=session_id, message_index=message_index,
                          session_project=project_key if session_id else None)
        self.log.append(name, [entry])
        memory = self._fold(scope, project_key).memories.get(entry["id"])
        if memory is None:  # pragma: no cover - removed in the instant since (another process)
            raise MemoryNotFound(f"The memory {entry['id']} was removed while it was being added.")
        log.info("memory %s added (%s, %s)", entry["id"], scope, source)
        return memory

    def add_many(self, texts: Iterable[str], *, scope: str, project_key: str | None, source: str,
                 session_id: str | None = None, message_index: int | None = None) -> list[Memory]:
        """:meth:`add` for each text, skipping (and logging) invalid ones; the memories added."""
        added = []
        for text in texts:
            try:
                added.append(self.add(text, scope=scope, project_key=project_key, source=source,
                                      session_id=session_id, message_index=message_index))
            except InvalidMemory as e:
                log.info("memory candidate dropped: %s", e)
        return added

    def update(self, memory_id: str, text: str, *, project_key: str | None = None, source: str = "user") -> Memory:
        """Change a memory's text; return it. Raises :class:`MemoryNotFound`, :class:`InvalidMemory`."""
        memory = self.get(memory_id, project_key)
        text = clean_text(text)
        if text == memory.text:
            return memory
        self.log.append(self._scope_name(memory.scope, memory.project_key), [update_entry(memory.id, text, source)])
        return self.get(memory.id, project_key)

    def remove(self, memory_id: str, *, project_key: str | None = None, source: str = "user") -> Memory:
        """Remove a memory for good; return what it was. Raises :class:`MemoryNotFound`."""
        memory = self.get(memory_id, project_key)
        self.log.append(self._scope_name(memory.scope, memory.project_key), [remove_entry(memory.id, source)])
        log.info("memory %s removed (%s)", memory.id, source)
        return memory
