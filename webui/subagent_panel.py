"""Sub-agents in the chat: a ``task`` step's live progress and its read-only transcript.

While a sub-agent runs, its task step (the parent's ``task`` tool call) is pending and the
sub-agent's own tool steps appear nested under it (``gr.Chatbot`` metadata ``parent_id``; each
collapses when done). Every task step carries a link "Open the sub-agent's transcript"; a click
opens a read-only panel with the sub-agent's whole run (its task, its steps, its answer), read
from its record (:mod:`core.session.subagents`). The sidebar never lists sub-agent records.

Plain functions (:class:`LiveSubagents`, :func:`transcript`, :func:`transcript_link`) are tested
without a browser; :func:`add_transcript` places the panel and wires the link clicks.
"""
from __future__ import annotations

import json
import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from core.errors import AnycodeError
from webui import i18n
from core.session.entries import messages_of
from core.session.keys import SessionKey
from core.session.subagents import find_record
from webui.chat_text import inline as _inline

log = logging.getLogger(__name__)

TASK_TOOL = "task"
LINK_PREFIX = "#ac-subagent="
LINK_TEXT = i18n.Msg("subagent_link")
TOOL_ICON = "\u2699"  # ⚙, as render.TOOL_ICON
PROGRESS_SEPARATOR = " \u00b7 "  # " · " between a running task step's title and its progress

# A click on a transcript link (inside the chat or the panel) becomes a ``select`` event whose
# value is the task call id; the page never navigates. Capturing at the document: the chat's
# Markdown is re-rendered on every update, so listeners on the links themselves would be lost.
LINKS_JS = """
document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[href*="%s"]');
  if (!a) return;
  e.preventDefault();
  e.stopPropagation();
  const id = decodeURIComponent(a.getAttribute('href').split('%s')[1] || '');
  trigger('select', {index: 0, value: id});
}, true);
""" % (LINK_PREFIX, LINK_PREFIX)

# The panel is a drawer over the right side of the page (the chat stays where it is).
PANEL_CSS = """<style>
#ac-transcript { position: fixed; top: 0; right: 0; width: min(760px, 96vw); height: 100vh; z-index: 60;
  background: var(--background-fill-primary); box-shadow: -4px 0 24px rgba(0,0,0,.18);
  padding: 12px 16px; overflow: auto; }
</style>"""


def transcript_link(call_id: str) -> str:
    """The Markdown link that opens the transcript of task call ``call_id``."""
    return f"[{i18n.t(LINK_TEXT)}]({LINK_PREFIX}{urllib.parse.quote(call_id, safe='')})"


def task_description(arguments: str) -> str:
    """The ``description`` of a task call's raw JSON arguments ("" when missing or unparsable)."""
    try:
        args = json.loads(arguments)
    except (TypeError, ValueError):
        return ""
    desc = args.get("description") if isinstance(args, dict) else None
    return " ".join(desc.split()) if isinstance(desc, str) else ""


def task_step_title(arguments: str, is_error: bool = False) -> str:
    """The title of a task step: ``⚙ task: <description>``."""
    desc = task_description(arguments)
    name = f"task: {_inline(desc)}" if desc else "task"
    return f"{TOOL_ICON} " + (i18n.t("tool_failed", name=name) if is_error else name)


def _step(step_id: str, parent_id: str | None, title: str, content: str, done: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"title": title, "id": step_id, "status": "done" if done else "pending"}
    if parent_id is not None:
        meta["parent_id"] = parent_id
    return {"role": "assistant", "content": content, "metadata": meta}


@dataclass
class LiveSubagents:
    """Folds sub-agent events (``core.agent.subagents``) into the live chat rows of a reply.

    ``apply(rows, steps, event)`` edits ``rows`` (the reply's rows) and ``steps`` (tool call id ->
    row index, shared with the reply's own tool steps) and returns True when something changed.
    """

    _args: dict[str, str] = field(default_factory=dict)
    # task step id -> (tool steps started, the one running or None): shown in the step's title,
    # so the progress is seen while the step is collapsed.
    _progress: dict[str, tuple[int, str | None]] = field(default_factory=dict)

    def _retitle(self, rows: list[dict[str, Any]], steps: dict[str, int], task_id: str) -> None:
        if task_id not in steps:
            return
        row = rows[steps[task_id]]
        meta = dict(row.get("metadata") or {})
        if meta.get("status") == "done":
            return  # finished: the title is the call's own again
        count, running = self._progress.get(task_id, (0, None))
        base = str(meta.get("title", "")).split(PROGRESS_SEPARATOR)[0]
        note = i18n.tn("subagent_steps", count) + (i18n.t("subagent_running", name=running) if running else "")
        meta["title"] = base + PROGRESS_SEPARATOR + note
        rows[steps[task_id]] = {**row, "metadata": meta}

    def apply(self, rows: list[dict[str, Any]], steps: dict[str, int], event: Any, prefix: str = "") -> bool:
        kind = type(event).__name__
        if kind == "SubagentStarted":
            task_id = prefix + event.call_id
            if task_id in steps:
                return False
            args = json.dumps({"description": event.description}, ensure_ascii=False)
            steps[task_id] = len(rows)
            parent = prefix[:-1] if prefix else None  # a nested sub-agent: under its parent's step
            rows.append(_step(task_id, parent, task_step_title(args), transcript_link(event.call_id), False))
            return True
        if kind != "SubagentEvent":
            return False
        inner = event.event
        task_id = prefix + event.call_id
        inner_kind = type(inner).__name__
        if inner_kind in ("SubagentStarted", "SubagentEvent"):
            return self.apply(rows, steps, inner, prefix=task_id + "/")
        if inner_kind == "ToolCallStarted":
            step_id = f"{task_id}/{inner.call_id}"
            self._args[step_id] = inner.arguments
            steps[step_id] = len(rows)
            rows.append(_step(step_id, task_id, f"{TOOL_ICON} {_inline(inner.name)}",
                              _tool_body(inner.arguments, None, False), False))
            self._progress[task_id] = (self._progress.get(task_id, (0, None))[0] + 1, inner.name)
            self._retitle(rows, steps, task_id)
            return True
        if inner_kind == "ToolCallFinished":
            step_id = f"{task_id}/{inner.call_id}"
            title = f"{TOOL_ICON} " + (i18n.t("tool_failed", name=_inline(inner.name)) if inner.is_error else _inline(inner.name))
            row = _step(step_id, task_id, title, _tool_body(self._args.get(step_id, ""), inner.result,
                                                           inner.is_error), True)
            if step_id in steps:
                rows[steps[step_id]] = row
            else:
                rows.append(row)
            self._progress[task_id] = (self._progress.get(task_id, (1, None))[0], None)
            self._retitle(rows, steps, task_id)
            return True
        return False


def _tool_body(arguments: str, result: str | None, is_error: bool) -> str:
    from webui.render import tool_step_content  # render imports this module: import at call time

    return tool_step_content(arguments, result, is_error)


@dataclass
class Transcript:
    """What the panel shows: a Markdown ``heading``, chat ``rows``, or a ``notice`` sentence."""

    heading: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    notice: str | None = None


def transcript(ctx: Any, state: dict[str, Any] | None, call_id: str) -> Transcript:
    """The read-only transcript of the sub-agent of task call ``call_id`` in the tab's session.
    A missing session or record, or a store that cannot be read, gives a ``notice``."""
    from webui.render import chat_rows

    if not state or not state.get("session") or not call_id:
        return Transcript(notice=i18n.t("subagent_none"))
    key = SessionKey(state["project"], state["session"])
    try:
        rec = find_record(ctx.store, key, call_id)
    except (AnycodeError, OSError) as err:
        log.warning("cannot read the sub-agent record of %s in %s: %s", call_id, key.session_id, err)
        return Transcript(notice=i18n.t("subagent_unreadable", error=err))
    if rec is None:
        return Transcript(notice=i18n.t("subagent_not_saved"))
    messages = messages_of(rec.entries)
    steps = sum(1 for m in messages if m.get("role") == "tool")
    heading = (i18n.t("subagent_heading", description=_inline(rec.description)) + "\n\n"
               + i18n.tn("subagent_meta", steps, record=rec.key.subpath))
    rows = chat_rows(messages).rows
    if rows and rows[0]["role"] == "user":
        rows[0] = {"role": "user", "content": f"**{i18n.t('subagent_task')}**\n\n" + rows[0]["content"]}
    return Transcript(heading=heading, rows=rows)


def add_transcript(ctx: Any, gr: Any, *, state: Any, notify: Any) -> Any:
    """Place the transcript panel (hidden until a link is clicked) and wire the link clicks.
    ``notify(sentence)`` shows a notice. Returns the panel's column."""
    from webui.i18n_ui import tr

    links = gr.HTML(PANEL_CSS, js_on_load=LINKS_JS, elem_id="ac-subagent-links", padding=False)
    with gr.Column(visible=False, elem_id="ac-transcript") as panel:
        with gr.Row(equal_height=True):
            heading = gr.Markdown("", elem_id="ac-transcript-heading")
            close = gr.Button(tr("close"), size="sm", scale=0, min_width=80, elem_id="ac-transcript-close")
        chat = gr.Chatbot(elem_id="ac-transcript-chat", show_label=False, height="calc(100vh - 120px)",
                          layout="bubble", buttons=["copy"], group_consecutive_messages=False)

    def on_open(st, evt: gr.SelectData):
        shown = transcript(ctx, st, str(evt.value or ""))
        if shown.notice:
            notify(shown.notice)
            return gr.skip(), gr.skip(), gr.skip()
        return gr.Column(visible=True), shown.heading, shown.rows

    # The real class, not the string "gr.SelectData" (this module never imports gradio, and
    # Gradio finds event-data parameters by their annotation).
    on_open.__annotations__["evt"] = gr.SelectData
    links.select(on_open, [state], [panel, heading, chat], api_visibility="private")
    close.click(lambda: gr.Column(visible=False), None, panel, api_visibility="private")
    return panel
