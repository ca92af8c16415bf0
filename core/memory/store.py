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

import difflib
import logging
import re
import unicodedata
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
    propose_entry,
    remove_entry,
    update_entry,
)
from core.memory.secrets import secret_reason
from core.stores.aliases import ProjectAliases, same_project_keys
from core.stores.memory_log import USER_SCOPE, MemoryLog, project_scope

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


# Words that carry no fact of their own ("The user prefers tabs" says what "User prefers tabs" says).
_STOP = frozenset("a an the is are was were be to of for in on at with and or that this it its by as "
                  "always should uses use".split())
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_WORD = re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+")


def _words(text: str) -> list[str]:
    """The content words of ``text``: NFKC, case-folded, punctuation dropped, each CJK character a
    word of its own (those scripts put no spaces between words), stop words left out."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    return [w for w in words if w not in _STOP]


def fact_relation(old: str, new: str) -> str | None:
    """How ``new`` relates to the stored fact ``old``: ``"same"`` (a restatement: the same content
    words, or nearly the same text), ``"narrower"`` (it says part of what ``old`` says),
    ``"wider"`` (it says all of ``old`` and more: an update of it), or None (another fact).

    Rule, on content words (:func:`_words`): equal sets, or a text similarity of 0.9 and more
    (``difflib``, for a changed word ending), are the same; one set inside the other, with at least
    two words in the smaller, is narrower or wider. A changed value ("port 5432" → "port 5433")
    differs in a word on both sides, so it is another fact, never merged by this rule."""
    a, b = _words(old), _words(new)
    if not a or not b:
        return "same" if same_text(old, new) else None
    sa, sb = set(a), set(b)
    if sa == sb:
        return "same"
    changed = sa ^ sb
    if (len(sa) == len(sb) and not any(any(c.isdigit() for c in w) for w in changed)
            and difflib.SequenceMatcher(None, " ".join(a), " ".join(b)).ratio() >= 0.9):
        return "same"  # a changed word ending ("answer"/"answers"), never a changed number
    if sb < sa and len(sb) >= 2:
        return "narrower"
    if sa < sb and len(sa) >= 2:
        return "wider"
    return None


class MemoryStore:
    """Memories of the user (scope ``"user"``) and of each project (scope ``"project"`` plus a
    project key), over ``log`` (a :class:`~core.stores.memory_log.MemoryLog`).

    A storage keeps one (:attr:`core.storage.Storage.memories`: its memory log and project
    aliases). Thread- and process-safe as its log.

    ``aliases``: a :class:`~core.stores.aliases.ProjectAliases` registry (issue 26, item 5): a
    project's memories then include those recorded under its other keys — the same git checkout
    at another path, e.g. on another machine — so they are listed, used in new sessions, edited
    and removed (in the log they were recorded in) as this project's. None: the key alone."""

    def __init__(self, log_backend: MemoryLog, aliases: ProjectAliases | None = None):
        self.log = log_backend
        self.aliases = aliases

    def project_keys(self, project_key: str | None) -> list[str]:
        """``project_key`` first, then the other keys of the same project (:attr:`aliases`)."""
        if not project_key:
            return []
        if self.aliases is None:
            return [project_key]
        return [project_key, *same_project_keys(self.aliases, project_key)]

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
        """Live memories, most recently updated first: the user's, plus ``project_key``'s (and its
        aliases', :meth:`project_keys`) when given; ``scope`` ("user" | "project") keeps one of the two."""
        scopes = [scope] if scope else ["user", "project"]
        out: list[Memory] = []
        for s in scopes:
            for pk in (self.project_keys(project_key) if s == "project" else [None]):
                out += self._fold(s, pk).memories.values()
        return sorted(out, key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)

    def pending(self, project_key: str | None = None) -> list[Memory]:
        """Proposals waiting for the user's yes (:meth:`propose`), oldest first: the user's and
        ``project_key``'s."""
        out: list[Memory] = list(self._fold("user", None).pending.values())
        for pk in self.project_keys(project_key):
            out += self._fold("project", pk).pending.values()
        return sorted(out, key=lambda m: (m.created_at, m.id))

    def removed_texts(self, project_key: str | None) -> list[str]:
        """Texts of removed memories (user's and the project's): the extraction job never
        proposes them again."""
        texts = list(self._fold("user", None).removed.values())
        for pk in self.project_keys(project_key):
            texts += self._fold("project", pk).removed.values()
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
        """Store a new fact; return it — or the live memory of the same scope already saying it
        (:func:`fact_relation` "same" or "narrower"), or that memory updated to the new text when
        the new one says all of it and more ("wider": an update replaces rather than adds).

        Raises :class:`InvalidMemory` (see :func:`clean_text`), ValueError (bad scope/source),
        StoreUnavailable."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
        text = clean_text(text)
        name = self._scope_name(scope, project_key)
        for m in self.list(project_key, scope):
            relation = fact_relation(m.text, text)
            if relation in ("same", "narrower"):
                return m  # a restatement of a known fact is not stored twice (issue 28)
            if relation == "wider":
                log.info("memory %s updated instead of adding a near-duplicate", m.id)
                return self.update(m.id, text, project_key=project_key, source=source)
        entry = add_entry(new_memory_id(), text, source, session_id=session_id, message_index=message_index,
                          session_project=project_key if session_id else None)
        self.log.append(name, [entry])
        memory = self._fold(scope, project_key).memories.get(entry["id"])
        if memory is None:  # pragma: no cover - removed in the instant since (another process)
            raise MemoryNotFound(f"The memory {entry['id']} was removed while it was being added.")
        log.info("memory %s added (%s, %s)", entry["id"], scope, source)
        return memory

    def propose(self, text: str, *, scope: str = "project", project_key: str | None = None,
                source: str = "model", session_id: str | None = None, message_index: int | None = None) -> Memory | None:
        """Keep ``text`` as a proposal that is not a memory until :meth:`accept` (issue 28: a fact
        from a turn that read files or tool output is never stored silently). Returns it, or None
        when it restates a live memory, a pending proposal or one the user dismissed or removed.
        Raises :class:`InvalidMemory` (a secret, too long, empty)."""
        text = clean_text(text)
        known = ([m.text for m in self.list(project_key, scope)] + [m.text for m in self.pending(project_key)]
                 + self.removed_texts(project_key))
        if any(fact_relation(old, text) in ("same", "narrower") for old in known):
            return None
        entry = propose_entry(new_memory_id(), text, source, session_id=session_id, message_index=message_index,
                              session_project=project_key if session_id else None)
        self.log.append(self._scope_name(scope, project_key), [entry])
        log.info("memory %s proposed (%s): waiting for the user", entry["id"], scope)
        return self._fold(scope, project_key).pending.get(entry["id"])

    def _pending_one(self, memory_id: str, project_key: str | None) -> Memory:
        found = [m for m in self.pending(project_key) if m.id == memory_id]
        if not found:
            raise MemoryNotFound(f"No proposed memory {memory_id!r} is waiting (answered already?).")
        return found[0]

    def accept(self, memory_id: str, *, project_key: str | None = None) -> Memory:
        """The user's yes to a proposal: it becomes a memory (the same id). Raises :class:`MemoryNotFound`."""
        p = self._pending_one(memory_id, project_key)
        entry = add_entry(p.id, p.text, "user", session_id=p.session_id, message_index=p.message_index,
                          session_project=p.session_project)
        self.log.append(self._scope_name(p.scope, p.project_key), [entry])
        return self.get(p.id, project_key)

    def dismiss(self, memory_id: str, *, project_key: str | None = None) -> Memory:
        """The user's no to a proposal: gone for good (never proposed again). Raises :class:`MemoryNotFound`."""
        p = self._pending_one(memory_id, project_key)
        self.log.append(self._scope_name(p.scope, p.project_key), [remove_entry(p.id, "user")])
        return p

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
