"""Finding a conversation by words of its title (issue 31, item 15).

``anycode --resume "login bug"`` and ``anycode sessions show "login bug"`` accept a title query
when no session id or id prefix matches (Codex and Claude Code resume by name: openai/codex
#22526, anthropics/claude-code #42971). The rule, kept here so the launcher and every
``sessions`` command agree:

- Text is compared folded (:func:`core.session.fold.fold`: accents, width and case folded on both
  sides — ``"creme brulee"`` finds "Crème brûlée", ``ＡＰＩ`` finds "API" — but never the marks of
  Chinese, Japanese or Korean text: ``が`` is not ``か``), with runs of whitespace as one space
  (``"Fix  LOGIN"`` finds "Fix login").
- A title matches when every word of the query is part of it, in any order (``"bug login"``
  finds "Fix the login bug"); Chinese and Japanese titles have no spaces, so a word is matched
  as a substring, never by word boundaries.
- A title equal to the whole query wins over titles that merely contain its words: "Notes"
  opens the conversation called "Notes" even when "Meeting notes" exists too. Several equal
  titles are still several matches.
- Only conversations are matched (a family's versions fold into its root's row, as the sidebar
  shows them), archived ones too; untitled ones never match.

Tags in a query (item 14): ``tag:work`` (any case; ``tag:"two words"`` is ``two-words``) in the
sidebar's search box or ``anycode sessions search`` keeps only conversations with that tag;
:func:`split_tags` takes them out of the query, the rest is searched as before.
"""
from __future__ import annotations

import logging
import re
from typing import Iterable

from core.session.entries import clean_tag
from core.session.fold import fold
from core.session.models import SessionMeta

log = logging.getLogger(__name__)

_SPACE = re.compile(r"\s+")
_TAG_TERM = re.compile(r'(?<!\S)tag:(?:"([^"]*)"|(\S+))', re.IGNORECASE)


def split_tags(query: str) -> tuple[list[str], str]:
    """``(tags, rest)``: the ``tag:NAME`` terms of ``query`` as stored tags
    (:func:`core.session.entries.clean_tag`; one that cannot be a tag matches nothing, so it is
    kept as ``"\x00"``), and the query without them (whitespace-trimmed)."""
    tags: list[str] = []

    def take(m: re.Match[str]) -> str:
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        try:
            tags.append(clean_tag(raw))
        except ValueError:
            tags.append("\x00")  # no conversation has it: the filter shows nothing, as it should
        return " "

    rest = _TAG_TERM.sub(take, query or "")
    return tags, _SPACE.sub(" ", rest).strip()


def has_tags(tags: Iterable[str], wanted: Iterable[str]) -> bool:
    """True when ``tags`` holds every tag of ``wanted``."""
    return set(wanted) <= set(tags)


def fold_title(text: str) -> str:
    """``text`` as titles are compared: folded (:func:`core.session.fold.fold`), whitespace runs as
    one space, stripped."""
    return _SPACE.sub(" ", fold(text or "")).strip()


def title_matches(metas: Iterable[SessionMeta], query: str) -> list[SessionMeta]:
    """The rows of ``metas`` whose title matches ``query`` (see the module docstring), in the
    order given (callers pass most recent first). An exact title match, when there is one,
    leaves only the exact matches. ``[]`` for a blank query."""
    wanted = fold_title(query)
    if not wanted:
        return []
    words = wanted.split(" ")
    found: list[SessionMeta] = []
    exact: list[SessionMeta] = []
    for m in metas:
        if not m.title:
            continue
        title = fold_title(m.title)
        if title == wanted:
            exact.append(m)
        elif all(w in title for w in words):
            found.append(m)
    return exact or found
