"""What the search index holds and how a query is read: store-independent rules.

- :func:`entry_documents` turns session entries into the texts that are indexed: user and
  assistant text, each tool call as ``name arguments`` (arguments cut to :data:`ARGS_CHARS`),
  tool results cut to :data:`TOOL_RESULT_CHARS` (a 5 MB file read would otherwise dwarf the
  conversation), compaction summaries (``{"type": "compaction", "summary": ...}``). System and
  developer messages are not indexed: they are the app's prompt, the same in every session.
- :func:`parse_query` splits what the user typed into terms, never raising: words separated by
  spaces, ``"quoted phrases"`` kept whole; every FTS operator character is taken literally.
- :func:`make_snippet` cuts the piece of a text around the first match and says where the
  matches are, so the UI can highlight them after escaping (chat text is never rendered as HTML).
- A conversation's **title and tags** are matched too (:func:`collect_hits`), from the index's
  per-session metadata rather than from documents: a term matches when it is part of the title or
  of one of the tags, ``#`` included (issue 31, item 14: a plain word finds a chat by its tag, as
  by its title; ``#work`` as tags are shown).
  They are the fold of the session's entries (the last title, the tags the ``tags`` entries left),
  which change in place, while documents are only ever appended.

Matching is a substring match of every term (a trigram index in SQLite FTS5 and PostgreSQL
``pg_trgm``): it finds words inside Chinese and Japanese text, which has no spaces, and parts of
identifiers such as ``snake_case`` and ``dotted.names``. Text and terms are folded on both sides
(:func:`core.session.fold.fold`: case, accents and width for Latin, Greek and Cyrillic, width and
case only for the other scripts, so ``creme`` finds "Crème" and ``が`` never finds "か"): each index
keeps a folded copy of every document that is not plain ASCII, and searches that.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from core.session.export import message_text
from core.session.fold import fold, fold_spans
from core.session.text import clean_text

log = logging.getLogger(__name__)

TOOL_RESULT_CHARS = 1000  # characters of a tool result that are indexed
ARGS_CHARS = 1000  # characters of a tool call's arguments that are indexed
TEXT_CHARS = 100_000  # a single message's text beyond this is not indexed (a pasted log)
MAX_TERMS = 16  # more terms than this are dropped (each costs a scan)
SNIPPET_CHARS = 160
INDEXED_ROLES = ("user", "assistant", "tool")
LABEL_ROLES = ("title", "tag")  # hits found by the conversation's title or tags, not by a message
# The trigram tokenizer needs 3 characters; shorter terms are matched by a scan (LIKE).
MIN_INDEXED_TERM = 3


@dataclass(frozen=True)
class Document:
    """One indexed text: ``idx`` is the message's index in the session's messages (a compaction
    summary gets the index of the next message), ``role`` one of user/assistant/tool/compaction,
    ``ts`` Unix seconds or None."""

    idx: int
    role: str
    ts: float | None
    text: str


@dataclass
class SearchHit:
    """One session matching a query (the newest matching message stands for it).

    ``session_id``/``project_key``: the main session (a sub-agent record's match is reported on its
    parent, with ``subpath`` naming the record); ``title``: the session's title or None;
    ``archived``; ``message_index``: index into the session's messages (None for a title or tag
    match); ``role``: the message's role, ``"title"`` (every term is in the title) or ``"tag"``
    (every term is in the title or a tag, at least one only in a tag: the snippet is then the
    conversation's tags as ``#a #b``); ``ts``: the message's time (Unix seconds) or the session's
    ``updated_at`` for a title or tag match; ``snippet``: plain text around the match; ``marks``:
    ``[start, end)`` character ranges of the matches inside ``snippet``; ``created_at`` of the
    session (for its label).
    """

    session_id: str
    project_key: str
    title: str | None
    archived: bool
    message_index: int | None
    role: str
    ts: float | None
    snippet: str
    marks: list[tuple[int, int]] = field(default_factory=list)
    subpath: str | None = None
    created_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for ``anycode sessions search --json``)."""
        d = dict(self.__dict__)
        d["marks"] = [list(m) for m in self.marks]
        return d


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _clean(text: str, limit: int) -> str:
    # NUL cannot be stored by PostgreSQL text columns; the cut keeps the index proportionate.
    return text[:limit].replace("\x00", " ")


def message_document_text(message: dict[str, Any]) -> str:
    """The indexed text of one OpenAI chat message ('' when nothing of it is indexed)."""
    role = message.get("role")
    if role not in INDEXED_ROLES:
        return ""
    text = message_text(message.get("content"))
    if role == "tool":
        return _clean(text, TOOL_RESULT_CHARS)
    parts = [_clean(text, TEXT_CHARS)] if text else []
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                parts.append(_clean(f"{fn.get('name', '')} {fn.get('arguments', '')}", ARGS_CHARS))
    return "\n".join(p for p in parts if p)


def entry_documents(entries: Iterable[Any], first_index: int = 0) -> Iterator[tuple[int, Document | None]]:
    """Yield ``(message_count_after, document_or_None)`` per entry of ``entries``.

    ``first_index``: how many messages came before ``entries`` in the session (for an append).
    Entries that are not messages or compaction summaries yield None (the count still matters)."""
    n = first_index
    for entry in entries:
        if not isinstance(entry, dict):
            yield n, None
            continue
        kind = entry.get("type")
        if kind == "message" and isinstance(entry.get("message"), dict):
            msg = entry["message"]
            text = message_document_text(msg)
            doc = Document(n, str(msg.get("role")), _num(entry.get("ts")), text) if text.strip() else None
            n += 1
            yield n, doc
        elif kind == "compaction" and isinstance(entry.get("summary"), str) and entry["summary"].strip():
            yield n, Document(n, "compaction", _num(entry.get("ts")), _clean(entry["summary"], TEXT_CHARS))
        else:
            yield n, None


_TOKEN = re.compile(r'"([^"]*)"?|(\S+)')


def parse_query(query: str) -> list[str]:
    """The terms of ``query``: ``"quoted phrases"`` (an unclosed quote runs to the end) and
    words separated by whitespace. Every character is literal — FTS operators (``AND``, ``NEAR``,
    ``*``, ``-``, ``(``) are just text — so no query can raise. Duplicates and blanks are dropped;
    at most :data:`MAX_TERMS` terms. A lone surrogate (a cut emoji from a browser) becomes U+FFFD,
    as the stores write it, so it can be encoded for the index and still matches stored text."""
    terms: list[str] = []
    seen: set[str] = set()
    for m in _TOKEN.finditer(clean_text(query or "")):
        term = m.group(1) if m.group(1) is not None else m.group(2)
        term = term.replace("\x00", "").strip()
        if not term or fold(term) in seen:
            continue
        seen.add(fold(term))
        terms.append(term)
    return terms[:MAX_TERMS]


def fts5_phrase(term: str) -> str:
    """``term`` as one FTS5 string (a phrase): quotes doubled, so operators stay literal text."""
    return '"' + term.replace('"', '""') + '"'


def like_pattern(term: str) -> str:
    """``%term%`` for ``LIKE … ESCAPE '\\'`` with ``%``, ``_`` and ``\\`` taken literally."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _pattern(terms: list[str]) -> re.Pattern[str] | None:
    """The folded terms as one pattern over folded text (None without a term that folds to text)."""
    folded = {fold(t) for t in terms} - {""}
    if not folded:
        return None
    # Longest first, so "parse_line" is marked whole rather than its "parse" part.
    return re.compile("|".join(sorted((re.escape(t) for t in folded), key=len, reverse=True)))


def make_snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> tuple[str, list[tuple[int, int]]]:
    """``(snippet, marks)``: about ``width`` characters of ``text`` around its first match
    (whitespace runs collapsed, ``…`` where cut) and the ``[start, end)`` ranges of every term
    occurrence inside it, matched folded (``creme`` marks "Crème" whole). With no match the start
    of the text is returned, unmarked."""
    flat = " ".join(text.split())
    pat = _pattern(terms)
    if pat is None:
        found = []
    elif flat.isascii():  # the common case: folding is lower-casing, positions stay
        found = [m.span() for m in pat.finditer(flat.lower())]
    else:
        folded, starts, ends = fold_spans(flat)
        found = [(starts[m.start()], ends[m.end() - 1]) for m in pat.finditer(folded)]
    if not found:
        cut = flat[:width]
        return cut + ("…" if len(flat) > width else ""), []
    start = max(0, found[0][0] - width // 3)
    end = min(len(flat), start + width)
    start = max(0, min(start, end - width))
    prefix = "…" if start > 0 else ""
    piece = flat[start:end]
    marks = [(a - start + len(prefix), b - start + len(prefix)) for a, b in found if a >= start and b <= end]
    return prefix + piece + ("…" if end < len(flat) else ""), marks


def tags_text(tags: Iterable[str]) -> str:
    """A conversation's tags as a tag hit's snippet shows them: ``#work #urgent``."""
    return " ".join("#" + t for t in tags)


def _tags(value: Any) -> tuple[str, ...]:
    """Tags as an index row holds them (a JSON list, a list, or NULL) as a tuple; () when malformed."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return ()
    if isinstance(value, (list, tuple)):
        return tuple(t for t in value if isinstance(t, str) and t)
    return ()


class Scope:
    """The records a search may report, indexed once (an index may keep it between searches).

    ``records``: ``(owner, project_key, session_id, subpath ('' for the main session), archived,
    title, created_at, updated_at, tags, ...)`` tuples, ``tags`` a JSON list, a list or None
    (extra fields are kept as they are)."""

    def __init__(self, records: Iterable[tuple[Any, ...]]):
        self.rows = {r[0]: r for r in records}
        self.owners = set(self.rows)
        self.mains = {(r[1], r[2]): r for r in self.rows.values() if r[3] == ""}
        # (folded title, tags, folded "#tag"s, record) of every main session with a title or tags;
        # "#tag" as tags are shown, so "#work" finds the tag work too.
        self.labels: list[tuple[str, tuple[str, ...], list[str], tuple[Any, ...]]] = []
        for r in self.mains.values():
            tags = _tags(r[8])
            if r[5] or tags:
                self.labels.append((fold(r[5] or ""), tags, ["#" + fold(t) for t in tags], r))
        self.by_session: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for r in self.rows.values():
            self.by_session.setdefault((r[1], r[2]), []).append(r)


def collect_hits(scope: Scope, found: dict[int, int], docs: dict[int, tuple[int, str, float | None, str]],
                 terms: list[str], limit: int) -> list[SearchHit]:
    """One :class:`SearchHit` per main session, shared by every index.

    ``scope``: the records in scope; ``found``: ``{owner: newest matching document id}``; ``docs``:
    ``{document id: (idx, role, ts, text)}``. Sessions whose title or tags match come first (a
    ``"title"`` hit when every term is in the title, else a ``"tag"`` hit), then the others, each
    group most recently active first; a sub-agent record's match is reported on its parent; at
    most ``limit`` hits."""
    rows, mains = scope.rows, scope.mains
    hits: dict[tuple[str, str], SearchHit] = {}
    folded = [fold(t) for t in terms]
    labelled: list[tuple[str, tuple[Any, ...], tuple[str, ...]]] = []
    for title, tags, low_tags, r in scope.labels:
        if all(t in title for t in folded):
            labelled.append(("title", r, tags))
        elif low_tags and all(t in title or any(t in g for g in low_tags) for t in folded):
            labelled.append(("tag", r, tags))
    labelled.sort(key=lambda x: x[1][7] or 0, reverse=True)
    for role, r, tags in labelled[:limit]:
        snippet, marks = make_snippet(r[5] if role == "title" else tags_text(tags), terms)
        hits[(r[1], r[2])] = SearchHit(r[2], r[1], r[5], bool(r[4]), None, role, r[7], snippet, marks, None, r[6])
    best: dict[tuple[str, str], tuple[int, int]] = {}
    for owner, doc_id in found.items():
        r = rows.get(owner)
        if r is None:
            continue
        k = (r[1], r[2])
        if k not in best or doc_id > best[k][1]:
            best[k] = (owner, doc_id)

    def recency(kv: tuple[tuple[str, str], tuple[int, int]]) -> tuple[float, int]:
        main = mains.get(kv[0])
        return ((main[7] or 0.0) if main is not None else 0.0), kv[1][1]

    for k, (owner, doc_id) in sorted(best.items(), key=recency, reverse=True):
        r, main = rows[owner], mains.get(k)
        if doc_id not in docs or main is None:
            continue  # a sub-agent record whose parent is gone or out of scope
        idx, role, ts, text = docs[doc_id]
        snippet, marks = make_snippet(text, terms)
        sub = r[3] or None
        hit = SearchHit(main[2], main[1], main[5], bool(main[4]), None if sub else idx, role, ts, snippet, marks,
                        sub, main[6])
        if k in hits or len(hits) < limit:  # a title or tag match keeps its rank and shows the message
            hits[k] = hit
    return list(hits.values())[:limit]
