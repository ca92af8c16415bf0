"""What a NEW session's system prompt learns from earlier ones (design article: "新 Session 启动时，
Memory 层的内容通过 System Prompt 注入当前 Messages").

:func:`session_context` returns the text appended to the system prompt of a session's first
request, and which memories it holds:

- **Memories**: the user's and the project's, most recently updated first, as many as fit in
  :data:`MEMORY_TOKEN_BUDGET` tokens (the rest are left out, oldest first), under the heading
  :data:`MEMORY_HEADING`, one ``- [scope] fact`` line each.
- **Project instructions**: ``AGENTS.md`` and then ``CLAUDE.md`` at the workspace root when
  present (the community conventions of Codex and Claude Code), each cut to
  :data:`INSTRUCTIONS_TOKEN_BUDGET` tokens.

Tokens are estimated without a tokenizer (the model may be any): a non-ASCII character counts
as one token (CJK text is about one token per character), ASCII as a quarter (OpenAI's rule of
thumb of ~4 characters per token), so the estimate errs on the long side.

The system message is stored with the session, but its memory section is not what the model gets:
every request carries the memories as they are *then* (:func:`with_memory_section`, applied by the
runner to each request), so a memory removed or edited in the panel is never sent again in its old
form, in any chat, new or resumed (issue 28).
"""
from __future__ import annotations

import logging
import math
import os
import stat
from dataclasses import dataclass, field

from core.memory.model import Memory

log = logging.getLogger(__name__)

MEMORY_TOKEN_BUDGET = 1000
INSTRUCTIONS_TOKEN_BUDGET = 4000  # per file
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
MEMORY_HEADING = "## Memories from earlier conversations"
_MEMORY_INTRO = ("Facts remembered from the user's earlier conversations (most recent first). Use them when "
                 "relevant; newer instructions from the user win.")
_ITEM_PREFIX = {"user": "- [user] ", "project": "- [project] "}


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ASCII characters / 4 + one per other character, rounded up."""
    ascii_chars = sum(1 for c in text if c < "\x80")
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


@dataclass
class SessionContext:
    """``text``: what to append to the system prompt (``""`` when nothing); ``memories``: the
    memories it holds, in prompt order; ``files``: the instruction file names it holds."""

    text: str = ""
    memories: list[Memory] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def memory_section(memories: list[Memory], budget: int = MEMORY_TOKEN_BUDGET) -> tuple[str, list[Memory]]:
    """The memory section for ``memories`` (given most recent first) within ``budget`` tokens;
    returns ``(text, memories included)``. ``("", [])`` when there are none."""
    lines, used = [], []
    spent = estimate_tokens(MEMORY_HEADING + _MEMORY_INTRO)
    for m in memories:
        line = _ITEM_PREFIX.get(m.scope, "- ") + " ".join(m.text.split())
        cost = estimate_tokens(line) + 1
        if spent + cost > budget:
            log.info("memory budget of %d tokens reached: %d of %d memories included", budget, len(used), len(memories))
            break
        lines.append(line)
        used.append(m)
        spent += cost
    if not lines:
        return "", []
    return "\n".join([MEMORY_HEADING, _MEMORY_INTRO, *lines]), used


def with_memory_section(system_text: str, section: str) -> str:
    """``system_text`` with its memory section (from :data:`MEMORY_HEADING` to the next ``## ``
    heading or the end) replaced by ``section`` — the current memories, or ``""`` for none. A
    prompt that had no section gets ``section`` before its project instructions (or at its end)."""
    if not isinstance(system_text, str):
        return system_text
    at = system_text.find(MEMORY_HEADING)
    if at >= 0:
        end = system_text.find("\n## ", at + len(MEMORY_HEADING))
        head, tail = system_text[:at].rstrip("\n"), system_text[end:].lstrip("\n") if end >= 0 else ""
    else:
        if not section:
            return system_text
        split = system_text.find("\n## Project instructions")
        head = system_text[:split].rstrip("\n") if split >= 0 else system_text.rstrip("\n")
        tail = system_text[split:].lstrip("\n") if split >= 0 else ""
    return "\n\n".join(part for part in (head, section, tail) if part)


def memories_in_prompt(system_text: object) -> list[str]:
    """The memory lines (``"[scope] fact"``) a stored system prompt holds (``[]`` when none); the
    inverse of :func:`memory_section`, so the UI can show which memories a session started with."""
    if not isinstance(system_text, str) or MEMORY_HEADING not in system_text:
        return []
    after = system_text.split(MEMORY_HEADING, 1)[1].split("\n")
    out = []
    for line in after[2:]:
        if not line.startswith("- ["):
            break
        out.append(line[2:])
    return out


def _read_own_file(path: str, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``path`` when it is a regular file of its own — the rules the file
    tools apply (core.agent.tools): not followed if it is a symlink now (``O_NOFOLLOW``), never
    waited on (``O_NONBLOCK``: a FIFO), and refused when it has more than one link (a hard link
    can be a file outside the project, such as another user's notes or /etc/shadow's twin).
    None when absent or refused (logged)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("could not read %s: %s", path, e)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_nlink != 1:
            log.warning("%s has %d hard links (it may be a file outside the project); not read", path, st.st_nlink)
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read(limit)
    except OSError as e:
        log.warning("could not read %s: %s", path, e)
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def instruction_files(root: str | os.PathLike[str] | None,
                      budget: int = INSTRUCTIONS_TOKEN_BUDGET) -> list[tuple[str, str]]:
    """``[(name, text)]`` of ``AGENTS.md`` / ``CLAUDE.md`` at the workspace ``root`` (regular files
    with one link only, symlinks leaving the root ignored: :func:`_read_own_file`), each cut to
    ``budget`` tokens. Unreadable ones are logged."""
    if not root:
        return []
    found = []
    real_root = os.path.realpath(root)
    for name in INSTRUCTION_FILES:
        path = os.path.join(real_root, name)
        real = os.path.realpath(path)
        if os.path.commonpath([real_root, real]) != real_root:
            log.warning("%s points outside the workspace; not read", path)
            continue
        raw = _read_own_file(real, budget * 4 + 1)
        if raw is None:
            continue
        text = raw.decode("utf-8", "replace").replace("\x00", "")
        cut = False
        while estimate_tokens(text) > budget:
            text, cut = text[: int(len(text) * 0.9)], True
        if len(raw) > budget * 4:
            cut = True
        text = text.strip()
        if cut:
            text += f"\n[… {name} was cut to about {budget} tokens]"
        if text:
            found.append((name, text))
    return found


def session_context(memories: list[Memory], root: str | os.PathLike[str] | None, *,
                    memory_budget: int = MEMORY_TOKEN_BUDGET) -> SessionContext:
    """The context of a new session: ``memories`` (most recent first; the user's and the
    project's) within ``memory_budget`` tokens, then the instruction files at ``root``."""
    parts, files = [], []
    text, used = memory_section(memories, memory_budget)
    if text:
        parts.append(text)
    for name, body in instruction_files(root):
        parts.append(f"## Project instructions ({name})\n{body}")
        files.append(name)
    return SessionContext("\n\n".join(parts), used, files)
