"""Terminal text for the command line (the launcher, ``anycode sessions|memory|import|backup|restore``):
any Unicode title prints, whatever the locale says (issue 20).

The commands keep English output (people script them), but what they print includes titles,
messages, memories and folder names in any language and with emoji. Python writes them in the
locale's encoding, so under ``LC_ALL=C`` without Python's UTF-8 mode (``PYTHONUTF8=0``), with
``PYTHONIOENCODING=ascii`` or on a Latin-1 terminal one Chinese title was a ``UnicodeEncodeError``
and a traceback. :func:`setup_stdio` fixes the streams once at start:

- an ASCII stream chosen by the C/POSIX locale writes UTF-8 instead, as Python's own UTF-8 mode
  does for that locale (PEP 538/540: "C" almost always means an unset locale, not an ASCII
  terminal); an encoding the user chose (``PYTHONIOENCODING``) is kept;
- any other stream that cannot hold every character (Latin-1, cp1252) shows what it cannot
  encode as ``?`` rather than crashing; ``--json`` output uses ``\\uXXXX`` escapes there
  (:func:`json_text`), so a script loses nothing;
- folder names that are not valid in the locale's encoding (kept by Python as surrogate escapes)
  are written back as the bytes they were.

Text typed as an argument (a title to rename to, a search query, a memory) arrives decoded with
the locale's encoding; :func:`text_arg` reads it as UTF-8 when its bytes are UTF-8, which is what
terminals send. Aligned columns stay aligned because the one free-text column (the title) is
always the last one.
"""
from __future__ import annotations

import codecs
import json
import logging
import os
import re
import sys
from typing import Any

log = logging.getLogger(__name__)


def _codec(stream: Any) -> str | None:
    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "").name
    except LookupError:
        return None


def setup_stdio() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` print any Unicode text (rules in the module
    docstring). Streams that cannot be reconfigured (a test's capture) are left alone. Idempotent."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        name = _codec(stream)
        if not callable(reconfigure) or name is None:
            continue
        try:
            if name == "ascii" and not os.environ.get("PYTHONIOENCODING"):  # chosen by the locale, not by the user
                reconfigure(encoding="utf-8", errors="surrogateescape")
            elif name == "utf-8":
                reconfigure(errors="surrogateescape")
            else:
                reconfigure(errors="replace")
        except (ValueError, OSError) as err:  # e.g. a stream already written in another encoding
            log.debug("cannot reconfigure %r: %s", stream, err)


def unicode_stdout() -> bool:
    """True when standard output can hold every character (a UTF encoding)."""
    name = _codec(sys.stdout)
    return bool(name) and name.startswith("utf")


def json_text(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value)`` for standard output: characters as they are on a UTF-8 stream,
    ``\\uXXXX`` escapes where the stream cannot hold them (the JSON means the same)."""
    return json.dumps(value, ensure_ascii=not unicode_stdout(), **kwargs)


def text_arg(value: str) -> str:
    """A text argument as typed: re-read as UTF-8 when the locale decoded it otherwise (its bytes
    are valid UTF-8), else unchanged. For titles, queries and memories; never for paths (a path
    must stay as the operating system gave it)."""
    if not isinstance(value, str) or value.isascii() or sys.getfilesystemencoding().lower() in ("utf-8", "utf8"):
        return value
    try:
        return os.fsencode(value).decode("utf-8")
    except (UnicodeError, ValueError):
        return value


# What a terminal would obey instead of show: C0 controls but tab and newline (ESC starts the
# escape sequences that recolour, retitle or rewrite a terminal), DEL, C1 controls, and the bidi
# controls (UAX #9) that reorder a line ("evil" after U+202E reads "live").
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str, stream: Any = None) -> str:
    """``text`` as it is safe to print on a terminal: each control a terminal would act on (see
    :data:`_TERMINAL_CONTROLS`) written as its label ``⟨U+001B⟩``, so chat content can neither
    drive the terminal nor reorder what it shows. Only when ``stream`` (default stdout) is a
    terminal: a file or pipe gets the text exactly as stored (``--json`` escapes it anyway)."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if not text or not (callable(isatty) and isatty()):
        return text
    return _TERMINAL_CONTROLS.sub(lambda m: f"\u27e8U+{ord(m.group(0)):04X}\u27e9", text)
