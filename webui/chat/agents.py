"""The sidebar's Agents section (issue 30): the agents defined for the tab's project and the experts'
sessions, and the read-only view a click opens.

Plain functions, no Gradio (:mod:`webui.gui.agents` places them): :func:`section` lists the
definitions (:func:`core.agent.definitions.load_definitions` for the project's folder) — name,
mode, where each comes from — with the expert sessions (``SessionManager.experts``) that exist;
:func:`open_agent` is what a click shows: an expert's whole session (its consultations, read-only,
titled with the agent's name) or, for an agent without a session, its definition.
"""
from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.agent.definitions import AgentDefinition, load_definitions
from core.errors import AnycodeError
from core.session.experts import expert_key, expert_name
from webui import i18n
from webui.chat.subagents import Transcript
from webui.chat.views import project_cwd
from webui.render.rows import chat_rows
from webui.text.chat_text import inline as _inline

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)


@dataclass
class AgentItem:
    """One row of the section: an agent ``name``, its ``mode``, ``source`` (project / claude /
    user; None for an expert session whose definition is gone) and whether it has a session."""

    name: str
    mode: str
    source: str | None
    has_session: bool = False


@dataclass
class Section:
    """The Agents section: its ``items`` (definitions first, in lookup order, then expert
    sessions whose definition is gone) and the files skipped (``problems``)."""

    items: list[AgentItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _folder(ctx: WebContext, project: str) -> str | None:
    try:
        return project_cwd(ctx, project)
    except AnycodeError:
        return None


def section(ctx: WebContext, project: str) -> Section:
    """The Agents section of project ``project``: its definitions and its experts' sessions.
    A store that cannot be read lists the definitions only (logged)."""
    found = load_definitions(_folder(ctx, project), user_dir=ctx.storage.data_dir / "agents", quiet=True)
    try:
        sessions = {expert_name(m.id) for m in ctx.manager.experts(project)}
    except (AnycodeError, OSError) as err:
        log.warning("cannot list the expert sessions of %s: %s", project, err)
        sessions = set()
    items = [AgentItem(a.name, a.mode, a.source, a.name in sessions) for a in found]
    items += [AgentItem(name, "expert", None, True) for name in sorted(sessions - set(found.agents)) if name]
    return Section(items, found.problems)


def section_html(sec: Section) -> str:
    """The section as sidebar HTML (every name escaped): a heading, then one clickable row per
    agent (``data-agent``: its name) saying its mode and where it comes from; ``""`` when the
    project has no agents (the section is not shown)."""
    if not sec.items:
        return ""
    rows = []
    for item in sec.items:
        where = i18n.t(f"agent_source_{item.source}") if item.source else i18n.t("agent_source_gone")
        mode = i18n.t("agent_mode_expert") if item.mode == "expert" else i18n.t("agent_mode_subagent")
        name = html.escape(item.name)
        rows.append(f'<div class="ac-agent-row" role="button" tabindex="0" data-agent="{name}">'
                    f'<span class="ac-agent-name">@{name}</span>'
                    f'<small class="ac-agent-meta">{html.escape(mode)} · {html.escape(where)}</small></div>')
    return (f'<div class="ac-agents"><div class="ac-group">{html.escape(i18n.t("agents_heading"))}</div>'
            + "".join(rows) + "</div>")


def open_agent(ctx: WebContext, state: dict[str, Any] | None, name: str) -> Transcript:
    """What a click on agent ``name`` shows, read-only: its expert session's messages (the
    heading is the agent's name and how many consultations it holds), or its definition when it
    has no session. An unknown name or an unreadable store gives a ``notice``."""
    project = (state or {}).get("project") or ctx.project_key
    found = load_definitions(_folder(ctx, project), user_dir=ctx.storage.data_dir / "agents", quiet=True)
    agent: AgentDefinition | None = found.agents.get(name)
    key = None
    try:
        key = expert_key(project, name)
        session = ctx.manager.get(key) if ctx.storage.sessions.exists(key) else None
    except (AnycodeError, OSError, ValueError) as err:
        log.warning("cannot read the expert session of %s: %s", name, err)
        return Transcript(notice=i18n.t("agent_unreadable", error=err))
    if session is None and agent is None:
        return Transcript(notice=i18n.t("agent_unknown", name=_inline(name)))
    heading = f"### @{_inline(name)}"
    if agent is not None:
        heading += "\n\n" + _inline(agent.description)
    if session is None:
        tools = ", ".join(agent.tools) if agent.tools is not None else i18n.t("agent_all_tools")
        facts = i18n.t("agent_facts", model=agent.model or i18n.t("agent_default_model"), tools=tools,
                       path=agent.path)
        return Transcript(heading=heading + "\n\n" + facts,
                          rows=[{"role": "assistant", "content": "```text\n" + agent.prompt.replace("```", "ʼʼʼ")
                                 + "\n```"}])
    asked = sum(1 for m in session.messages if m.get("role") == "user")
    heading += "\n\n" + i18n.tn("agent_session_meta", asked, session=key.session_id)
    return Transcript(heading=heading, rows=chat_rows(session.messages, session.compactions,
                                                      session.reply_ends).rows)
