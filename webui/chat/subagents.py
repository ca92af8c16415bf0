"""Sub-agents in the chat: a ``task`` step's live progress and its read-only transcript.

While a sub-agent runs, its task step (the parent's ``task`` tool call) is pending and the
sub-agent's own tool steps appear nested under it (``gr.Chatbot`` metadata ``parent_id``; each
collapses when done). Every task step carries a link "Open the sub-agent's transcript"; a click
opens a read-only panel with the sub-agent's whole run (its task, its steps, its answer), read
from its record (:mod:`core.session.subagents`). The sidebar never lists sub-agent records.

Plain functions (:class:`LiveSubagents`, :func:`transcript`), tested without a browser; the task
step and its link are :mod:`webui.render.tool_steps`, the panel is :mod:`webui.gui.subagents`.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.agent.events import SubagentEvent, SubagentStarted, ToolCallFinished, ToolCallStarted, TurnEvent
from core.errors import AnycodeError
from webui import i18n
from core.session.entries import messages_of
from core.session.keys import SessionKey
from core.session.subagents import find_record
from webui.render.rows import chat_rows
from webui.render.tool_steps import LINK_TEXT, TOOL_ICON, task_step_title, tool_step_content, transcript_link  # noqa: F401 (LINK_TEXT)
from webui.text.chat_text import inline as _inline

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

PROGRESS_SEPARATOR = " \u00b7 "  # " · " between a running task step's title and its progress


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

    def apply(self, rows: list[dict[str, Any]], steps: dict[str, int], event: TurnEvent, prefix: str = "") -> bool:
        """Fold one sub-agent event into ``rows``; ``prefix`` names the enclosing task steps of a
        nested sub-agent (``"<task id>/"``). True when something shown changed."""
        match event:
            case SubagentStarted():
                return self._started(rows, steps, event, prefix)
            case SubagentEvent(event=SubagentStarted() | SubagentEvent() as inner):
                return self.apply(rows, steps, inner, prefix=prefix + event.call_id + "/")
            case SubagentEvent(event=ToolCallStarted() as inner):
                self._tool_started(rows, steps, prefix + event.call_id, inner)
                return True
            case SubagentEvent(event=ToolCallFinished() as inner):
                self._tool_finished(rows, steps, prefix + event.call_id, inner)
                return True
        return False

    def _started(self, rows: list[dict[str, Any]], steps: dict[str, int], event: SubagentStarted, prefix: str) -> bool:
        task_id = prefix + event.call_id
        if task_id in steps:
            return False
        args = json.dumps({"description": event.description}, ensure_ascii=False)
        steps[task_id] = len(rows)
        parent = prefix[:-1] if prefix else None  # a nested sub-agent: under its parent's step
        rows.append(_step(task_id, parent, task_step_title(args), transcript_link(event.call_id), False))
        return True

    def _tool_started(self, rows: list[dict[str, Any]], steps: dict[str, int], task_id: str,
                      inner: ToolCallStarted) -> None:
        step_id = f"{task_id}/{inner.call_id}"
        self._args[step_id] = inner.arguments
        steps[step_id] = len(rows)
        rows.append(_step(step_id, task_id, f"{TOOL_ICON} {_inline(inner.name)}",
                          tool_step_content(inner.arguments, None, False), False))
        self._progress[task_id] = (self._progress.get(task_id, (0, None))[0] + 1, inner.name)
        self._retitle(rows, steps, task_id)

    def _tool_finished(self, rows: list[dict[str, Any]], steps: dict[str, int], task_id: str,
                       inner: ToolCallFinished) -> None:
        step_id = f"{task_id}/{inner.call_id}"
        title = f"{TOOL_ICON} " + (i18n.t("tool_failed", name=_inline(inner.name)) if inner.is_error else _inline(inner.name))
        row = _step(step_id, task_id, title, tool_step_content(self._args.get(step_id, ""), inner.result,
                                                           inner.is_error), True)
        if step_id in steps:
            rows[steps[step_id]] = row
        else:
            rows.append(row)
        self._progress[task_id] = (self._progress.get(task_id, (1, None))[0], None)
        self._retitle(rows, steps, task_id)


@dataclass
class Transcript:
    """What the panel shows: a Markdown ``heading``, chat ``rows``, or a ``notice`` sentence."""

    heading: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    notice: str | None = None


def transcript(ctx: WebContext, state: dict[str, Any] | None, call_id: str) -> Transcript:
    """The read-only transcript of the sub-agent of task call ``call_id`` in the tab's session.
    A missing session or record, or a store that cannot be read, gives a ``notice``."""
    if not state or not state.get("session") or not call_id:
        return Transcript(notice=i18n.t("subagent_none"))
    key = SessionKey(state["project"], state["session"])
    try:
        rec = find_record(ctx.storage.sessions, key, call_id)
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
