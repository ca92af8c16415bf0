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

The system message is stored with the session, so a resumed session keeps exactly the prompt it
started with: its history stays what the model saw; memories added later reach new sessions only.
"""
from __future__ import annotations

import logging
import math
import os
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


def instruction_files(root: str | os.PathLike[str] | None,
                      budget: int = INSTRUCTIONS_TOKEN_BUDGET) -> list[tuple[str, str]]:
    """``[(name, text)]`` of ``AGENTS.md`` / ``CLAUDE.md`` at the workspace ``root`` (files only,
    symlinks leaving the root ignored), each cut to ``budget`` tokens. Unreadable ones are logged."""
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
        if not os.path.isfile(real):
            continue
        try:
            with open(real, "rb") as f:
                raw = f.read(budget * 4 + 1)
        except OSError as e:
            log.warning("could not read %s: %s", path, e)
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
