"""Prompt texts sent to the model (kept apart so they are easy to find and change)."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

# Seed `generateTitle`'s instruction, verbatim.
TITLE_PROMPT = (
    "Generate a concise title (max 10 words) for this conversation.\n"
    "Output only the title text, no quotes or formatting."
)


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
