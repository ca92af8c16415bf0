"""Rewind to here and Undo rewind in the web UI (issue 29), as plain operations over
:mod:`core.agent.checkpoints` (no Gradio here; the card is :mod:`webui.gui.rewind_card`).

:func:`card` plans a rewind to a chat row's message and says, per file, what would happen (with a
diff, shown as plain text: never HTML); :func:`apply` does it in one of the three modes, with the
files changed outside anycode the user ticked; :func:`undo` puts the files back as they were just
before the last rewind. Each returns the view to show (a conversation rewind opens its new version).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.agent import checkpoints
from core.agent.tools import ToolError, Workspace
from core.agent.workspace import check_workspace
from core.errors import AnycodeError, RewindError, SessionNotFound
from core.session.entries import SessionState
from core.session.keys import SessionKey
from core.session.text import message_text
from webui import i18n
from webui.chat import handlers
from webui.render import rows as render
from webui.text.chat_text import visible_bidi

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

MODES = {"both": "rewind_both", "conversation": "rewind_conversation", "files": "rewind_files"}


@dataclass
class RewindCard:
    """What the card shows for a rewind to stored message ``message_index``: ``title``,
    ``lines`` (one sentence per file), ``diff`` (the unified diffs of the files that would change,
    plain text), ``outside`` (paths changed outside anycode: the checkboxes)."""

    message_index: int
    title: str
    lines: list[str] = field(default_factory=list)
    diff: str = ""
    outside: list[str] = field(default_factory=list)


def _key(state: dict[str, Any]) -> SessionKey:
    return SessionKey(state["project"], state["session"])


def workspace(ctx: WebContext, state: dict[str, Any]) -> Workspace | None:
    """The folder the tab's session's tools use (the one the user chose by hand, else the checked
    project folder); None when it is unavailable."""
    from webui.chat import approvals

    key = _key(state)
    try:
        folded = ctx.manager.state(key)  # one read for both (each a full query on the SQL stores)
    except SessionNotFound:
        folded = SessionState()
    chosen = approvals.runner_kwargs(ctx, state, folded=folded).get("workspace")
    if chosen is not None:
        return chosen
    return check_workspace(key, folded.cwd, origin=folded.origin, opened_in=ctx.project_path,
                           protected_dirs=ctx.storage.protected_dirs()).workspace


def sentence(change: checkpoints.FileChange) -> str:
    """The card's line for one file."""
    if change.status == "restore":
        return i18n.t(f"rewind_file_{change.action}", path=change.path)
    return i18n.t(f"rewind_file_{change.status}", path=change.path)


def message_of_row(ctx: Any, state: dict[str, Any], row_index: int) -> int:
    """The stored message index chat row ``row_index`` shows (as Branch counts it). Raises IndexError."""
    session = ctx.manager.get(_key(state))
    view = render.chat_window(session.messages, handlers.shown_from(session, state), session.compactions,
                              session.reply_ends, session.reply_agents)
    if not 0 <= row_index < len(view.source):
        raise IndexError(i18n.t("no_such_message", n=row_index + 1))
    return view.source[row_index]


def card(ctx: Any, state: dict[str, Any], message_index: int) -> RewindCard:
    """Plan a rewind of the tab's session to ``message_index`` (kept). Raises RewindError,
    SessionNotFound."""
    key = _key(state)
    ws = workspace(ctx, state)
    try:
        plan = checkpoints.plan_rewind(ctx.manager, key, message_index, ws, mode="files", blobs=ctx.storage.blobs)
    except RewindError:
        if ws is not None:
            raise
        plan = checkpoints.plan_rewind(ctx.manager, key, message_index, None, mode="conversation",
                                           blobs=ctx.storage.blobs)
    out = RewindCard(message_index, _title(ctx, key, message_index, plan.keep))
    shown = [f for f in plan.files if f.status != "same"]
    out.lines = [sentence(f) for f in shown] or [i18n.t("rewind_no_files")]
    out.diff = "".join(f.diff() for f in shown if f.status in ("restore", "outside"))
    out.outside = [f.path for f in shown if f.status == "outside"]
    return out


def apply(ctx: Any, state: dict[str, Any], message_index: int, mode: str, chosen: list[str] | None = None
          ) -> handlers.SessionView:
    """Rewind the tab's session to ``message_index`` in ``mode`` (``both``/``conversation``/``files``),
    restoring the ``chosen`` files changed outside too; the view to show now, with a notice saying
    what went back. A failure shows the session as it is with the reason."""
    key = _key(state)
    try:
        ws = workspace(ctx, state) if mode != "conversation" else None
        result = checkpoints.rewind(ctx.manager, key, message_index, ws, mode=mode, chosen=chosen or [],
                                    blobs=ctx.storage.blobs)
    except (AnycodeError, OSError, ToolError) as err:
        log.warning("rewind of %s failed: %s", key.session_id, err)
        return handlers.reload(ctx, state, notice=i18n.t("rewind_failed", error=_reason(err)))
    notice = i18n.t("rewind_done", files=_counts(result))
    return handlers.view_of(ctx.manager.get(result.key), notice=notice)


def can_undo(ctx: Any, state: dict[str, Any]) -> bool:
    """Whether the tab's session has a rewind to undo (never raises)."""
    if not state.get("session"):
        return False
    try:
        return checkpoints.last_rewind(ctx.storage.sessions.load(_key(state)) or []) is not None
    except (AnycodeError, OSError):
        return False


def undo(ctx: Any, state: dict[str, Any]) -> handlers.SessionView:
    """Undo the tab's session's last rewind (files changed outside since are left as they are);
    a conversation rewind's earlier version is shown again."""
    key = _key(state)
    try:
        result = checkpoints.undo(ctx.manager, key, workspace(ctx, state), blobs=ctx.storage.blobs)
    except (AnycodeError, OSError, ToolError) as err:
        log.warning("undo of a rewind of %s failed: %s", key.session_id, err)
        return handlers.reload(ctx, state, notice=i18n.t("rewind_failed", error=_reason(err)))
    notice = i18n.t("rewind_undone") + (" " + i18n.tn("rewind_left", len(result.left)) if result.left else "")
    view = handlers.view_of(ctx.manager.get(result.key), notice=notice)
    if not result.left:
        view.notice_level = "info"  # it did what was asked: not a warning (trial 7)
    return view


TITLE_SNIPPET = 60  # characters of the chosen message quoted in the card's title


def _title(ctx: Any, key: Any, message_index: int, keep: int) -> str:
    """The card's title: the chosen message quoted ("Rewind to “…”"), as the user sees it on
    screen; the stored message count ("Rewind to message 5": an internal number, trial 7) only
    when that message has no text (a tool step)."""
    try:
        msg = ctx.manager.get(key).messages[message_index]
        text = " ".join(message_text(msg.get("content")).split())
    except (AnycodeError, OSError, IndexError, AttributeError):
        text = ""
    if not text:
        return i18n.t("rewind_title", n=keep)
    if len(text) > TITLE_SNIPPET:
        text = text[: TITLE_SNIPPET - 1].rstrip() + "…"
    return i18n.t("rewind_title_quote", text=visible_bidi(text))  # as written, not reordered


def _counts(result: checkpoints.RewindResult) -> str:
    text = i18n.tn("rewind_done_files", len(result.files))
    return text + (" " + i18n.tn("rewind_left", len(result.left)) if result.left else "")


def _reason(err: BaseException) -> str:
    from webui.text.error_text import describe

    return describe(err)


# --- Edit and Regenerate: the files of the turn they replace (issue 29, item 2) -----------------

REPLACING = ("edit", "regenerate")


def replaced_turn(ctx: Any, state: dict[str, Any], kind: str, row_index: int, text: str | None = None
                  ) -> tuple[RewindCard, dict[str, Any]] | None:
    """When an Edit (``kind`` ``"edit"``, the edited ``text``) or a Regenerate (``"regenerate"``)
    of chat row ``row_index`` replaces a turn that changed files: ``(the card, its target)``, the
    card offering the conversation with the files or the conversation only; None when nothing
    asks (no file changed after the cut, no workspace, an edit that changes nothing, a row the
    operation refuses: the operation itself then says why). The target is what the answer
    carries: ``{"kind", "row", "message" (kept), "session", "text"}``. Never raises."""
    from core.session.export import message_text
    from core.session.text import clean_text, is_blank
    from core.session.versions import last_user_before

    if kind not in REPLACING or not state.get("session"):
        return None
    try:
        session = ctx.manager.get(_key(state))
        index = message_of_row(ctx, state, row_index)
        if kind == "edit":
            message = session.messages[index]
            edited = clean_text((text or "").strip())
            if (message.get("role") != "user" or is_blank(edited)
                    or edited == message_text(message.get("content")).strip()):
                return None
            keep = index - 1
        else:
            keep = last_user_before(session.messages, index)
        ws = workspace(ctx, state)
        if keep < 0 or ws is None:
            return None
        plan = checkpoints.plan_rewind(ctx.manager, _key(state), keep, ws, mode="files", blobs=ctx.storage.blobs)
    except (AnycodeError, IndexError, OSError, ToolError) as err:
        log.info("no file rewind offered for %s of row %d: %s", kind, row_index, err)
        return None
    shown = [f for f in plan.files if f.status != "same"]
    if not shown:
        return None
    out = RewindCard(keep, i18n.t(f"rewind_{kind}_title"))
    out.lines = [sentence(f) for f in shown]
    out.diff = "".join(f.diff() for f in shown if f.status in ("restore", "outside"))
    out.outside = [f.path for f in shown if f.status == "outside"]
    target = {"kind": kind, "row": int(row_index), "message": keep, "session": state["session"],
              "text": text if kind == "edit" else None}
    return out, target


def replace_turn(ctx: Any, state: dict[str, Any], target: dict[str, Any], mode: str,
                 chosen: list[str] | None = None) -> tuple[handlers.SessionView | None, str | None]:
    """Answer the card of :func:`replaced_turn`: ``mode`` ``"conversation"`` does the Edit or
    Regenerate as it would have been done without the card; ``"both"`` rewinds the conversation
    and the files (the ``chosen`` ones changed outside too) to the cut, which is the same new
    version the Edit or Regenerate makes, with the files as they were there. Returns ``(the view,
    the text to send)`` — an Edit sends its text; a Regenerate's view carries ``regen_guard`` (ask
    the model again); ``(view, None)`` with a notice when nothing is to be sent; ``(None, None)``
    for a repeat of the same Regenerate click."""
    from webui.chat import versions

    kind = target.get("kind")
    if target.get("session") != state.get("session"):
        return handlers.reload(ctx, state, notice=i18n.t("rewind_failed", error=i18n.t("rewind_chat_changed"))), None
    try:
        if mode == "conversation":
            if kind == "edit":
                return versions.edit(ctx, state, int(target["row"]), target.get("text"))
            return versions.regenerate(ctx, state, int(target["row"])), None
        result = checkpoints.rewind(ctx.manager, _key(state), int(target["message"]), workspace(ctx, state),
                                    mode="both", chosen=chosen or [], blobs=ctx.storage.blobs)
    except (AnycodeError, IndexError, ValueError, OSError, ToolError) as err:
        log.warning("%s with a rewind of %s failed: %s", kind, state.get("session"), err)
        return handlers.reload(ctx, state, notice=i18n.t("rewind_failed", error=_reason(err))), None
    view = handlers.view_of(ctx.manager.get(result.key), notice=i18n.t("rewind_done", files=_counts(result)))
    view.notice_level = "info"
    if kind == "edit":
        return view, target.get("text")
    import time

    view.state["regen_guard"] = [result.key.session_id, int(target["row"]), time.time()]
    return view, None
