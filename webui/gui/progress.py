"""No chat is ever a progress target (issue 32).

Gradio's page keeps a loading status for every component some event has shown progress on, and
on each status change of *any* event (every dispatch, start and end) it pushes all of them
again; for each push it copies the component's whole data (a Svelte snapshot). For a Chatbot
holding 200 messages that copy took 100–200 ms of the browser's main thread, once per status
change of every event — the once-a-second live check, the state hub, a rename — after the first
event that had the chat among its outputs. Events that fill a chat therefore show their progress
on their other outputs only (as before, minus the chat), or on none when the chat is all they fill.
"""
from __future__ import annotations

from typing import Any

import gradio as gr


def keep_chats_off_progress(demo: gr.Blocks) -> int:
    """Give every event of ``demo`` that outputs a ``gr.Chatbot`` (and names no
    ``show_progress_on`` itself) its other outputs as progress targets. Call once, after every
    event is wired; returns how many events were changed."""
    chats = {id(b) for b in demo.blocks.values() if isinstance(b, gr.Chatbot)}
    changed = 0
    for fn in demo.fns.values():
        outputs: list[Any] = list(fn.outputs or [])
        if fn.show_progress_on is not None or not any(id(o) in chats for o in outputs):
            continue
        fn.show_progress_on = [o for o in outputs if id(o) not in chats]
        changed += 1
    return changed
