"""Text as it is compared when people look for it: accents, width and case folded, on both sides.

``--resume "creme brulee"`` must find "Crème brûlée", ``ＡＰＩ`` must find "API", "STRASSE" must
find "Straße": a person types what they remember, not the exact code points stored. Title lookup
(:mod:`core.session.lookup`) and every full-text index (:mod:`core.search`) fold the stored text
and the query with :func:`fold`, so they agree on what matches.

The rule, per *cluster* (a character with the combining marks that follow it):

- **Latin, Greek and Cyrillic** (where a mark is an accent on a letter a reader still recognises):
  compatibility-decomposed (NFKD: full-width ``Ａ`` is ``A``, ``ﬁ`` is ``fi``), case-folded
  (``ß`` is ``ss``), and every combining mark removed (``é`` is ``e``, ``ё`` is ``е``).
- **Every other script** — Han, Kana, Hangul, and the scripts whose marks are letters of their own
  (Arabic, Hebrew, Devanagari, Thai…): only compatibility-composed (NFKC: half-width ``ｶﾞ`` is
  ``ガ``; a decomposed ``か`` + U+3099 is ``が``) and case-folded. Marks stay: Japanese dakuten tell
  ``が`` from ``か``, and Hangul syllables are never taken apart into jamo.

:func:`fold_spans` also says where each folded character comes from, so a match found in folded
text is marked on the text as shown.
"""
from __future__ import annotations

import re
import unicodedata

# The half-width voiced marks compose with the kana before them under NFKC (ｶﾞ → ガ).
_EXTRA_MARKS = frozenset("\uff9e\uff9f")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# Latin (Basic to Extended-B, IPA, Additional, C, D, E), Greek (and Extended), Cyrillic (and
# Supplement, Extended A–C): the scripts whose accents are folded.
_FOLDED_RANGES = ((0x0000, 0x02AF), (0x0370, 0x03FF), (0x0400, 0x052F), (0x1C80, 0x1C8F), (0x1E00, 0x1FFF),
                  (0x2C60, 0x2C7F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F), (0xA720, 0xA7FF), (0xAB30, 0xAB6F))


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch) in ("Mn", "Me") or ch in _EXTRA_MARKS


def _accents_fold(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _FOLDED_RANGES)


def _fold_cluster(cluster: str) -> str:
    decomposed = unicodedata.normalize("NFKD", cluster)
    base = next((c for c in decomposed if not _is_mark(c)), "")
    if base and _accents_fold(base):
        again = unicodedata.normalize("NFKD", decomposed.casefold())  # "İ".casefold() brings a mark back
        return "".join(c for c in again if not _is_mark(c))
    return unicodedata.normalize("NFKC", cluster).casefold()


def _clusters(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``[(start, end)]`` of each cluster of ``text[start:end]``; marks at the very start belong to
    the character before ``start`` (returned as a cluster of their own: the caller drops them)."""
    out: list[tuple[int, int]] = []
    i = start
    while i < end:
        j = i + 1
        while j < end and _is_mark(text[j]):
            j += 1
        out.append((i, j))
        i = j
    return out


def fold_spans(text: str) -> tuple[str, list[int], list[int]]:
    """``(folded, starts, ends)``: :func:`fold` of ``text``, and for each folded character the
    ``[start, end)`` in ``text`` of the cluster it comes from (a match ``[a, b)`` of the folded text
    is ``[starts[a], ends[b - 1])`` of ``text``)."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for run in _NON_ASCII.finditer(text):
        ascii_part = text[pos:run.start()]
        out.append(ascii_part.lower())
        starts.extend(range(pos, run.start()))
        ends.extend(range(pos + 1, run.start() + 1))
        for a, b in _clusters(text, run.start(), run.end()):
            if _is_mark(text[a]):
                # Marks after an ASCII letter ("e" + U+0301): Latin, so dropped; the letter before
                # them now reaches over them, so a match on it marks the whole "é".
                if ends and ends[-1] == a and _accents_fold(text[a - 1]):
                    ends[-1] = b
                    continue
            piece = _fold_cluster(text[a:b])
            out.append(piece)
            starts.extend([a] * len(piece))
            ends.extend([b] * len(piece))
        pos = run.end()
    out.append(text[pos:].lower())
    starts.extend(range(pos, len(text)))
    ends.extend(range(pos + 1, len(text) + 1))
    return "".join(out), starts, ends


def fold(text: str) -> str:
    """``text`` as it is compared (rules in the module docstring); ASCII text is just lower-cased."""
    if text.isascii():
        return text.lower()
    return fold_spans(text)[0]


def needs_fold(text: str) -> bool:
    """Whether :func:`fold` can change ``text`` in a way an ASCII-case-insensitive comparison
    (SQLite's ``LIKE``, FTS5's trigram tokenizer) would not already ignore: any non-ASCII text."""
    return not text.isascii()
