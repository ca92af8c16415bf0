"""Progress targets: no chat is ever one, and an event whose progress is hidden has one (issue 32).

Gradio's page keeps a loading status for every component some event has shown progress on, and
on each status change of *any* event (every dispatch, start and end) it pushes all of them
again; for each push it copies the component's whole data (a Svelte snapshot), and for a layout
block the data of every block inside it. For a Chatbot holding 200 messages that copy took
100–200 ms of the browser's main thread, once per status change of every event — the
once-a-second live check, the state hub, a rename — after the first event that had the chat
among its outputs. Events that fill a chat therefore show their progress on their other outputs
only (as before, minus the chat), or on none when the chat is all they fill.

An event whose progress is hidden (``show_progress="hidden"``: the state hub, the live check, a
send's stream, the title push ...) draws nothing of it, yet each of its outputs became a target
pushed at every status change for the page's life: ~60 components and the blocks inside them,
~40% of the page's copying at a version switch (round 17's profile). Such an event now shows its
progress on one small component of the page (the language setting, whose data is one string),
not on none: round 13 gave them none (``show_progress_on=[]``) and Gradio 6.31 then drew some of
their updates only after a later status push (the version arrows, the Stop button, a compaction
summary), so each keeps a target whose status changes as before.

An event that fills the open conversation's chat (opening a chat, New chat, a version switch, a
rename, the page load ...) draws no progress either. Gradio's default drew "processing | 0.2s"
over the sidebar list, the title, the top bar's buttons and the message box while a chat opened
(and over the list while a row clicked before the page's load waited for it: fresh-user trial
16), where ChatGPT-like apps show the clicked row as open and then the chat; the overlays also
took clicks and typing meant for the box. Their 13–21 targets, pushed at every status change for
the page's life, go with them.
"""
from __future__ import annotations

from typing import Any

import gradio as gr


def trim_progress_targets(demo: gr.Blocks, sink: Any, quiet: tuple[Any, ...] = ()) -> int:
    """Set the progress targets of every event of ``demo`` that names none itself: an event that
    fills one of the ``quiet`` blocks (the open conversation's chat) draws no progress; an event
    that outputs another ``gr.Chatbot`` shows its progress on its other outputs; one whose
    progress is hidden shows it on ``sink`` alone (a small component that is on the page, e.g. a
    dropdown). Call once, after every event is wired; returns how many events were changed."""
    chats = {id(b) for b in demo.blocks.values() if isinstance(b, gr.Chatbot)}
    hush = {id(b) for b in quiet}
    changed = 0
    for fn in demo.fns.values():
        outputs: list[Any] = list(fn.outputs or [])
        if fn.show_progress_on is not None or not outputs:
            continue  # its own choice, or nothing to show progress on
        if any(id(o) in hush for o in outputs):
            fn.show_progress = "hidden"
        if fn.show_progress == "hidden":
            fn.show_progress_on = [sink]
        elif any(id(o) in chats for o in outputs):
            fn.show_progress_on = [o for o in outputs if id(o) not in chats]
        else:
            continue
        changed += 1
    return changed
