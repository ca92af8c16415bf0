"""The plain functions behind the approval card and the workspace notice (no Gradio here).

Over :mod:`core.agent.approval` and :mod:`core.agent.workspace`; ``webui.gui.approval_card`` maps
their results onto components. ``state`` is the tab's state dict (see :mod:`webui.chat.views`).
The user's answers and choices go to the context's :class:`~core.agent.approval.Grants` (the
running app) and, for the record, to the session as approval entries.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.agent import approval as ap
from core.agent.repair import closing_results
from core.agent.tools import ToolError, Workspace
from core.agent.workspace import check_workspace
from core.errors import AnycodeError, SessionNotFound
from core.session.entries import SessionState, messages_of
from core.session.keys import SessionKey, new_session_id
from webui import i18n
from webui.chat import mcp
from webui.chat.views import project_cwd
from webui.text.chat_text import visible_bidi
from webui.text.error_text import describe

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

ANSWERED_NOTICE = i18n.Msg("approval_answered")


@dataclass
class ApprovalView:
    """What the approval area shows for the tab's session.

    ``pending``: the oldest call waiting for the user (None: no card); ``ask``: the per-chat
    switch (True: ask before changes); ``workspace_problem``: why the file tools are off for this
    chat (None: they are on); ``choosable``: the user may choose that folder anyway;
    ``cwd``: the folder the chat records.
    """

    pending: ap.PendingApproval | None = None
    ask: bool = True
    workspace_problem: str | None = None
    choosable: bool = False
    cwd: str | None = None

    @property
    def preview(self) -> str:
        """The card's text for ``pending`` (a diff, or the call's arguments) with every bidi
        control shown as its label (:func:`webui.text.chat_text.visible_bidi`): applied, U+202E
        would show a path or command reversed (issue 31, item 9). "" without a pending call."""
        return visible_bidi(self.pending.preview) if self.pending else ""

    @property
    def mcp(self) -> tuple[str, str] | None:
        """``(server, tool)`` when the waiting call goes to an MCP server (the card then names
        them and offers "Always allow this tool"); None otherwise."""
        return mcp.step_parts(self.pending.tool) if self.pending else None


def _key(state: dict[str, Any]) -> SessionKey | None:
    if not state or not state.get("session") or not state.get("project"):
        return None
    return SessionKey(state["project"], state["session"])


def grants(ctx: WebContext) -> ap.Grants:
    """The context's grants (one per running app)."""
    return ctx.grants


def _workspace_slot(project: str, cwd: str | None) -> str:
    # A choice is for one folder of one project: a crafted session of that project naming
    # another folder does not inherit it.
    return f"{project}\n{cwd}"


def view(ctx: WebContext, state: dict[str, Any] | None) -> ApprovalView:
    """The approval area for the tab's session (a new chat: the project's folder check only).
    Never raises: a store failure shows nothing."""
    state = state or {}
    key = _key(state)
    mode = ap.approval_mode()
    try:
        if key is None:
            project = state.get("project") or ctx.project_key
            cwd = project_cwd(ctx, project)
            checked = check_workspace(SessionKey(project, new_session_id()), cwd,
                                      chosen=grants(ctx).workspace(_workspace_slot(project, cwd)),
                                      protected_dirs=ctx.storage.protected_dirs())
            return ApprovalView(ask=mode == "ask", workspace_problem=checked.problem,
                                choosable=checked.choosable, cwd=cwd)
        entries = ctx.storage.sessions.load(key) or []
        # The entries just loaded are folded (once per change of the file), not loaded again
        folded = ctx.manager.state(key, entries=entries) if entries else SessionState()
    except (AnycodeError, OSError) as err:
        log.warning("cannot read approvals: %s", err)
        return ApprovalView(ask=mode == "ask")
    cwd = folded.cwd
    checked = check_workspace(key, cwd, chosen=grants(ctx).workspace(_workspace_slot(key.project_key, cwd)),
                              origin=folded.origin, opened_in=ctx.project_path, identity=folded.identity,
                              protected_dirs=ctx.storage.protected_dirs())
    pending = ap.ApprovalState.from_entries(entries).pending()
    chat_mode = grants(ctx).chat_mode(str(key)) or mode
    return ApprovalView(pending=pending[0] if pending else None, ask=chat_mode == "ask",
                        workspace_problem=checked.problem, choosable=checked.choosable, cwd=checked.cwd)


def decide(ctx: WebContext, state: dict[str, Any], call_id: str | None, *, allow: bool, scope: str = "once",
           reason: str | None = None) -> str | None:
    """Answer the pending approval of ``call_id``: store the decision entry and hand it to the run
    that resumes the turn. ``scope``: ``once``, ``chat`` (a file change: every change in this chat;
    an MCP tool: that tool in this chat) or ``always`` (an MCP tool in this project). Returns
    None, or a notice when there is nothing to answer (an "always" that could not be saved is
    logged; the call still runs, and the next one asks again)."""
    key = _key(state)
    if key is None or not call_id:
        return ANSWERED_NOTICE
    try:
        waiting = {p.call_id: p for p in ap.ApprovalState.from_entries(ctx.storage.sessions.load(key) or []).pending()}
    except SessionNotFound as err:
        return describe(err)
    if call_id not in waiting:
        return ANSWERED_NOTICE
    reason = ap.clean_reason(reason) if not allow else None
    ctx.manager.add_approval(key, ap.decision_entry(call_id, allow, scope=scope, reason=reason))
    tool = waiting[call_id].tool
    if allow and scope in ("chat", "always") and mcp.is_mcp_tool(tool):
        # An MCP tool: "for this chat" and "always" allow that tool only, never every change.
        if scope == "chat":
            mcp.allow_for_chat(ctx, state, tool)
        else:
            mcp.allow_always(ctx, state, tool)
        scope = "once"
    grants(ctx).decide(str(key), call_id, ap.Decision(allow, reason, scope))
    log.info("approval of %s in %s: %s (%s)", call_id, key.session_id, "allow" if allow else "deny", scope)
    return None


def stop_pending(ctx: WebContext, state: dict[str, Any]) -> bool:
    """Stop pressed while the turn waits for an approval: deny it and end the turn (no model
    call; the denied result and "interrupted" results for later calls are stored). True when
    there was one."""
    key = _key(state)
    if key is None:
        return False
    entries = ctx.storage.sessions.load(key) or []
    approvals = ap.ApprovalState.from_entries(entries)
    if not approvals.pending():
        return False
    messages = messages_of(entries)
    closing = ap.closing_round(approvals, ap.STOP_REASON, closing_results(messages))
    ctx.manager.store_round(key, closing, expected_count=len(messages))
    log.info("Stop denied the pending approval in %s", key.session_id)
    return True


def set_ask(ctx: WebContext, state: dict[str, Any], ask: bool) -> None:
    """The per-chat switch: ask before changes (True) or run them (False), for this running app."""
    key = _key(state)
    if key is not None:
        grants(ctx).set_chat_mode(str(key), "ask" if ask else "auto")


def choose_workspace(ctx: WebContext, state: dict[str, Any]) -> str | None:
    """The user chose the chat's recorded folder despite the warning. Returns a notice when that
    is not possible (the folder is missing), else None."""
    shown = view(ctx, state)
    if not shown.workspace_problem:
        return None
    if not shown.choosable or not shown.cwd:
        return shown.workspace_problem
    project = (state or {}).get("project") or ctx.project_key
    grants(ctx).choose_workspace(_workspace_slot(project, shown.cwd), shown.cwd)
    log.info("the user chose %s as the workspace of project %s", shown.cwd, project)
    return None


def runner_kwargs(ctx: WebContext, state: dict[str, Any], *, folded: SessionState | None = None) -> dict[str, Any]:
    """``approval`` (the policy with the user's answers) and, when the user chose the chat's
    folder by hand, ``workspace`` — for :func:`core.agent.runner.run_session_stream`.
    ``folded``: the session's state as the caller just read it (``manager.state``), not read again."""
    key = _key(state)
    if key is None:
        return {}
    out: dict[str, Any] = {"approval": grants(ctx).policy(str(key))}
    if folded is None:
        try:
            folded = ctx.manager.state(key)
        except SessionNotFound:
            folded = SessionState()
        except (AnycodeError, OSError):
            return out
    cwd = folded.cwd
    chosen = grants(ctx).workspace(_workspace_slot(key.project_key, cwd))
    if chosen:
        try:
            out["workspace"] = Workspace(chosen)
        except ToolError as err:
            log.warning("the chosen workspace is unavailable: %s", err)
    elif folded.origin or folded.identity:
        # An imported or restored chat: its folder counts once anycode was opened in it (the core
        # alone never trusts the recorded folder of such a chat). A chat of the same git checkout
        # recorded at another path (another machine): its tools use the folder opened here.
        opened = check_workspace(key, cwd, origin=folded.origin, opened_in=ctx.project_path,
                                 identity=folded.identity, protected_dirs=ctx.storage.protected_dirs())
        if opened.workspace is not None:
            out["workspace"] = opened.workspace
    return out
