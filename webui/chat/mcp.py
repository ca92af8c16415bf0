"""The Tools panel and the MCP side of a turn, over :mod:`core.agent.mcp` (no Gradio here).

- :func:`turn_tools`: what the send hands the runner (``extra_tools``): the app's hub
  (``ctx.mcp``) offering the project's MCP servers' tools for one turn, with the tools the user
  allowed for this chat.
- The Tools panel (:mod:`webui.gui.mcp` places it): :func:`panel` (the project's servers, their
  state and tools, whether its configuration waits for approval), :func:`approve`, :func:`test`,
  :func:`set_trust_read_only`.
- Approval answers for MCP calls: :func:`allow_for_chat` ("Allow for this chat": that tool only)
  and :func:`allow_always` ("Always allow this tool": in this project, while its server is unchanged).

Everything a server or a configuration file says is escaped before it reaches the page.
"""
from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from core.agent.workspace import check_workspace
from core.errors import AnycodeError, SessionNotFound
from core.session.keys import SessionKey, new_session_id, project_key
from core.session.mcp_calls import mcp_tool_name, split_mcp_name
from webui.chat.views import project_cwd
from webui.i18n import t, tn
from webui.text.chat_text import visible_bidi

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

STATE_KEYS = {"running": "mcp_state_running", "starting": "mcp_state_starting", "stopped": "mcp_state_stopped",
              "failed": "mcp_state_failed", "not started": "mcp_state_not_started",
              "needs approval": "mcp_state_needs_approval", "cannot run": "mcp_state_cannot_run"}
SCOPE_KEYS = {"user": "mcp_scope_user", "project": "mcp_scope_project", "anycode": "mcp_scope_anycode"}


def _key(state: dict[str, Any] | None) -> SessionKey | None:
    st = state or {}
    if not st.get("session") or not st.get("project"):
        return None
    return SessionKey(st["project"], st["session"])


def project_root(ctx: WebContext, state: dict[str, Any] | None) -> str | None:
    """The folder whose MCP configuration the tab's project uses: its checked workspace (a
    folder the tools may not use — the home folder, ``/`` — has none: the user's servers only)."""
    project = (state or {}).get("project") or ctx.project_key
    try:
        cwd = project_cwd(ctx, project)
    except (SessionNotFound, AnycodeError, OSError):
        return None
    checked = check_workspace(SessionKey(project, new_session_id()), cwd)
    return checked.workspace.root if checked.workspace is not None else None


def turn_tools(ctx: WebContext, state: dict[str, Any] | None) -> Callable[..., Any]:
    """The runner's ``extra_tools`` for a send in the tab's chat: ``(workspace, messages,
    cancel) -> McpTurn`` from the app's hub, with the MCP tools allowed for this chat."""
    key = _key(state)
    chat_tools = ctx.grants.allowed_tools(str(key)) if key is not None else frozenset()

    def offer(workspace: Any, messages: list[dict], cancel: Any) -> Any:
        return ctx.mcp.turn(workspace.root if workspace is not None else None, messages, cancel,
                            chat_tools=chat_tools)

    return offer


# --- approval answers ----------------------------------------------------------------------------


def is_mcp_tool(name: str | None) -> bool:
    """Whether ``name`` is an MCP tool's offered name (``mcp__<server>__<tool>``)."""
    return split_mcp_name(name) is not None


def step_parts(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an MCP tool name, for the approval card's title."""
    return split_mcp_name(name)


def allow_for_chat(ctx: WebContext, state: dict[str, Any], tool: str) -> None:
    """"Allow for this chat" on an MCP call: ``tool`` runs without asking in this chat (this app)."""
    key = _key(state)
    if key is not None:
        ctx.grants.allow_tool(str(key), tool)


def allow_always(ctx: WebContext, state: dict[str, Any], tool: str) -> bool:
    """"Always allow this tool": ``tool`` runs without asking in this project from now on, while
    its server's definition is unchanged. False (logged) when it cannot be recorded: its server
    is not configured any more, or the trust file cannot be written."""
    root = project_root(ctx, state)
    config = ctx.mcp.config(root)
    parts = split_mcp_name(tool)
    server = next((s for s in config.servers.values()
                   if parts is not None and split_mcp_name(mcp_tool_name(s.name, "x"))[0] == parts[0]), None)
    if server is None or not config.root:
        log.warning("%s cannot be always allowed: its server is not configured for this project", tool)
        return False
    try:
        ctx.mcp.trust.allow_always(project_key(config.root), tool, server.digest)
    except OSError as err:
        log.warning("cannot record the always-allowed MCP tool %s: %s", tool, err)
        return False
    return True


# --- the Tools panel -----------------------------------------------------------------------------


@dataclass
class McpPanel:
    """What the Tools panel shows: ``html`` (the servers), ``approval`` (Markdown asking to
    approve the project's configuration; "" when nothing waits), ``servers`` (names for Test),
    the read-only switch (``trust_read_only``, ``trust_locked``: set by the environment)."""

    html: str
    approval: str = ""
    servers: list[str] = field(default_factory=list)
    trust_read_only: bool = False
    trust_locked: bool = False


def _server_html(s: Any) -> str:
    e = html.escape
    state = t(STATE_KEYS.get(s.state, "mcp_state_not_started"))
    head = (f'<div class="ac-mcp-head"><b>{e(visible_bidi(s.name))}</b> '
            f'<span class="ac-mcp-state ac-mcp-{e(s.state.replace(" ", "-"))}">{e(state)}</span> '
            f'<span class="ac-mcp-where">{e(t(SCOPE_KEYS.get(s.scope, "mcp_scope_user")))} · '
            f'{e(s.transport)} · <code>{e(visible_bidi(s.target))}</code></span></div>')
    body = ""
    if s.error:
        body += f'<div class="ac-mcp-error">{e(visible_bidi(s.error))}</div>'
    if s.tools:
        items = "".join(
            f'<li><code>{e(visible_bidi(tool.name))}</code>'
            + (f' <span class="ac-mcp-ro">{e(t("mcp_read_only"))}</span>' if tool.read_only_hint else "")
            + (f' — {e(visible_bidi(" ".join(tool.description.split())[:160]))}' if tool.description else "")
            + "</li>" for tool in s.tools)
        body += (f'<details class="ac-mcp-tools"><summary>{e(tn("mcp_tool_count", len(s.tools)))}</summary>'
                 f'<ul>{items}</ul></details>')
    if s.instructions:
        body += (f'<details class="ac-mcp-instructions"><summary>{e(t("mcp_instructions"))}</summary>'
                 f'<pre>{e(visible_bidi(s.instructions[:4000]))}</pre></details>')
    return f'<li class="ac-mcp-server" data-server="{e(s.name)}">{head}{body}</li>'


def panel(ctx: WebContext, state: dict[str, Any] | None) -> McpPanel:
    """The Tools panel for the tab's project (nothing is started to draw it)."""
    root = project_root(ctx, state)
    try:
        status = ctx.mcp.status(root)
    except Exception as err:  # noqa: BLE001 -- the panel says it cannot read, never breaks the page
        log.warning("cannot read the MCP configuration: %s", err)
        return McpPanel(html=f'<p class="ac-mcp-error">{html.escape(str(err))}</p>')
    parts = []
    if not status.servers:
        parts.append(f'<p class="ac-mcp-none">{html.escape(t("mcp_none"))}</p>')
    else:
        parts.append('<ul class="ac-mcp-list">' + "".join(_server_html(s) for s in status.servers) + "</ul>")
    for problem in status.problems:
        parts.append(f'<p class="ac-mcp-error">{html.escape(visible_bidi(problem))}</p>')
    approval = ""
    if status.needs_approval:
        waiting = [s for s in status.servers if s.state == "needs approval"]
        listed = "\n".join(f"- **{_md(s.name)}** ({_md(t(SCOPE_KEYS.get(s.scope, 'mcp_scope_project')))}): "
                           f"`{_code(s.target)}`" for s in waiting)
        approval = t("mcp_approval_changed" if status.changed else "mcp_approval_needed") + "\n\n" + listed
    return McpPanel(html="".join(parts), approval=approval, servers=[s.name for s in status.servers],
                    trust_read_only=status.trust_read_only, trust_locked=status.read_only_from_env)


def _md(text: str) -> str:
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>&" else ch for ch in visible_bidi(text))


def _code(text: str) -> str:
    return visible_bidi(text).replace("`", "'")


def approve(ctx: WebContext, state: dict[str, Any] | None) -> str:
    """Approve the project's MCP configuration as it is now; returns the sentence to show."""
    root = project_root(ctx, state)
    if root is None:
        return t("mcp_no_project")
    try:
        config = ctx.mcp.approve(root)
    except OSError as err:
        log.warning("cannot record the MCP approval: %s", err)
        return t("mcp_approval_not_saved")
    return t("mcp_approved", n=len(config.project_servers))


def test(ctx: WebContext, state: dict[str, Any] | None, name: str | None) -> tuple[str, bool]:
    """Start (again) server ``name`` of the tab's project and list its tools: ``(sentence, ok)``."""
    if not name:
        return t("mcp_pick_server"), False
    report = ctx.mcp.test(project_root(ctx, state), name)
    return report.message, report.ok


def set_trust_read_only(ctx: WebContext, on: bool) -> str | None:
    """The panel's "Trust read-only marks" switch; a notice when it cannot be saved."""
    try:
        ctx.mcp.trust.set_trust_read_only(bool(on))
    except OSError as err:
        log.warning("cannot save the read-only switch: %s", err)
        return t("mcp_switch_not_saved")
    return None
