"""Prompt texts sent to the model (kept apart so they are easy to find and change)."""
from __future__ import annotations

import logging

from core.agent.language import Language, language_instruction

log = logging.getLogger(__name__)

# Seed `generateTitle`'s instruction, verbatim; :func:`title_prompt` adds the language line.
TITLE_PROMPT = (
    "Generate a concise title (max 10 words) for this conversation.\n"
    "Output only the title text, no quotes or formatting."
)


def title_prompt(language: Language | None) -> str:
    """The title request's system message: :data:`TITLE_PROMPT` and one sentence naming the
    conversation's language (issue 20: a conversation in Chinese gets a Chinese title, whatever
    the UI's language), see :func:`core.agent.language.language_instruction`."""
    return f"{TITLE_PROMPT}\n{language_instruction('the title', language)}"


def system_prompt(workspace_path: str) -> str:
    """The agent's instructions, stored as the first (system) message of a new session.

    ``workspace_path`` is the absolute folder the tools are confined to.
    """
    return (
        "You are anycode, a helpful assistant that can work on the files of the user's project.\n"
        f"Workspace: {workspace_path}\n"
        "You have tools to list files, read a file and write a file; paths are relative to the "
        "workspace and cannot leave it. Use the tools when the user asks about or wants changes to "
        "their files; otherwise just answer. Keep answers concise and use Markdown for code."
    )


# The fake test server recognises sub-agent requests by this start (tests/support/fake_openai.py).
SUBAGENT_PROMPT_START = "You are a sub-agent of anycode"


def subagent_system_prompt(workspace_path: str) -> str:
    """A sub-agent's instructions (the first message of its record; the task follows as the user
    message). ``workspace_path``: the absolute folder its tools are confined to."""
    return (
        f"{SUBAGENT_PROMPT_START}: another agent handed you one task and sees only your final "
        "answer, not your steps.\n"
        f"Workspace: {workspace_path}\n"
        "Use the tools (paths are relative to the workspace and cannot leave it) to do the task, "
        "then reply with a complete, self-contained answer: what you found or did, with the file "
        "paths and details the other agent needs. Do not ask questions; do what you can."
    )


# The memory extraction request (issue 14). The fake server recognises it by its first words.
MEMORY_PROMPT = (
    "You maintain the long-term memory of a coding assistant: short facts worth knowing in the user's "
    "future conversations (their preferences, the project's conventions, decisions taken, pitfalls "
    "found). You get the current memories (with their ids) and the latest exchange of a conversation.\n"
    "Answer with JSON only, of this shape: {\"add\": [\"fact\", ...], \"remove\": [\"<memory id>\", ...]}\n"
    "- add: new lasting facts stated or decided in this exchange; one short sentence each, written in "
    "the language of the conversation. A fact about the user themselves that holds in every project may "
    "be given as {\"text\": \"fact\", \"scope\": \"user\"}; plain strings are project facts.\n"
    "- remove: ids of current memories this exchange shows to be wrong or outdated.\n"
    "- Do not add what is already remembered, one-off task details, or anything temporary.\n"
    "- Never include secrets: no API keys, tokens, passwords, private keys or credentials.\n"
    "- When nothing should change, answer {\"add\": [], \"remove\": []}."
)


def memory_prompt(language: Language | None) -> str:
    """The memory extraction request's system message: :data:`MEMORY_PROMPT` and the sentence
    naming the conversation's language for the facts (the JSON keys stay as they are)."""
    return f"{MEMORY_PROMPT}\n{language_instruction('each fact', language)} Keep the JSON keys in English."


REMEMBER_TOOL_DESCRIPTION = (
    "Save a short fact to long-term memory so future conversations know it. Use it when the user asks "
    "you to remember something, or states a lasting preference or project convention. One short "
    "sentence in the user's language; never a secret (keys, tokens, passwords)."
)
