"""The sidebar's message search: what was said in a conversation, found as the user types.

Under the search box (which also filters the list by title, as before) a results panel lists the
conversations whose messages match: title, the matching message's snippet with the match
highlighted, and its time. A conversation found by its tags (a word of the query in one of them,
issue 31 item 14) is listed as a "Tag" row showing its tags, the match highlighted; one found by
its title alone is not listed (the list below shows it). A click opens the conversation scrolled
to that message, which is highlighted for a moment. "All projects" widens the search; "Show
archived" includes archived conversations (marked). The index is :mod:`core.search`.

Plain functions (:func:`results_html`, :func:`hit_row`) are tested without a browser;
:mod:`webui.gui.search` places the components and wires them. Every piece of chat text is escaped
(``html.escape``) before it is put in the page: chat text is never rendered as HTML.
"""
from __future__ import annotations

import html
import json
import logging
import re
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from core.session.experts import is_expert_id
from core.errors import AnycodeError, SearchUnavailable
from core.session.text import clean_text
from core.search import SearchHit
from core.search.text import LABEL_ROLES
from core.session.lookup import has_tags, split_tags
from webui.i18n import t
from webui.text.error_text import describe
from webui.text.timefmt import session_label
from webui.render import rows as render
from webui.text.timefmt import relative_time

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

RESULT_LIMIT = 30
HIGHLIGHT_SECONDS = 4


STYLE = """<style>
#ac-search-results:empty { display: none; }
.ac-hits { display: flex; flex-direction: column; gap: 2px; margin: 4px 0 8px; }
.ac-hits-label { font-size: 12px; opacity: .7; padding: 4px 8px; }
.ac-hit-row { display: block; width: 100%; text-align: left; padding: 6px 8px; border-radius: 8px;
  border: 0; background: transparent; cursor: pointer; color: inherit; font: inherit; }
.ac-hit-row:hover { background: var(--background-fill-secondary); }
.ac-hit-head { display: flex; justify-content: space-between; gap: 6px; font-size: 13px; font-weight: 600; }
.ac-hit-title { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.ac-hit-when { font-weight: 400; font-size: 11px; opacity: .7; white-space: nowrap; }
.ac-hit-head, .ac-hit-snippet { text-align: left; }
.ac-hit-snippet { font-size: 12px; font-weight: 400; opacity: .85; display: -webkit-box; -webkit-line-clamp: 3;
  -webkit-box-orient: vertical; overflow: hidden; overflow-wrap: anywhere; }
.ac-hit-snippet mark { background: #fde68a; color: inherit; border-radius: 2px; padding: 0 1px; }
#ac-chat .ac-hit { outline: 2px solid #f59e0b; outline-offset: 2px; border-radius: 8px;
  transition: outline-color 1s; }
</style>"""

_ROLE_LABEL = {"user": "role_user", "assistant": "role_assistant", "tool": "role_tool",
               "compaction": "role_compaction", "title": "role_title", "tag": "role_tag"}  # catalogue keys


# A summary that opens with its own "Summary:" heading (most models write one) would read
# "Summary: Summary: …" after the row's label.
_SUMMARY_LEAD = re.compile(r"^\s*(?:#{1,6}\s*(?:\*\*|__)?summary\b(?:\*\*|__)?\s*[:：]?"
                           r"|(?:\*\*|__)?summary\s*(?:\*\*|__)?\s*[:：](?:\*\*|__)?)\s*", re.IGNORECASE)


# core's English fallback title (core.agent.titles.fallback_title); search hits carry no
# title_source, so it is recognised by its shape and shown as the localised untitled label.
_FALLBACK_TITLE = re.compile(r"Session \d{4}-\d{2}-\d{2} \d{2}:\d{2}")


def _title_source(title: str | None) -> str | None:
    return "fallback" if title and _FALLBACK_TITLE.fullmatch(title) else None


def _snippet(hit: SearchHit) -> tuple[str, list[tuple[int, int]]]:
    """The hit's snippet and marks as shown: a compaction summary's own leading "Summary:" left
    out (unless the match is in it), the marks moved with the text."""
    if hit.role != "compaction":
        return hit.snippet, hit.marks
    lead = _SUMMARY_LEAD.match(hit.snippet)
    if not lead or not lead.end() or any(s < lead.end() for s, _ in hit.marks):
        return hit.snippet, hit.marks
    cut = lead.end()
    return hit.snippet[cut:], [(s - cut, e - cut) for s, e in hit.marks]


def highlighted(snippet: str, marks: list[tuple[int, int]]) -> str:
    """``snippet`` as HTML: every character escaped, each ``[start, end)`` of ``marks`` in ``<mark>``."""
    out, pos = [], 0
    for s, e in sorted(marks):
        if s < pos or e <= s:
            continue
        out += [html.escape(snippet[pos:s]), "<mark>", html.escape(snippet[s:e]), "</mark>"]
        pos = e
    out.append(html.escape(snippet[pos:]))
    return "".join(out)


def render_hits(hits: list[SearchHit], *, query: str, now: float | None = None,
                versions: dict[str, tuple[int, int]] | None = None) -> str:
    """HTML for the results panel (empty string when ``query`` is blank). ``versions``: for a hit
    found in a version that is not its conversation's version in use, ``{session_id: (n, m)}``
    (see :func:`one_per_conversation`): the row says "in version n of m". Title matches are left
    out (the list below shows them); a tag match is a "Tag" row showing the conversation's tags."""
    versions = versions or {}
    if not query.strip():
        return ""
    hits = [h for h in hits if h.role != "title"]  # title matches are in the list below already
    if not hits:
        return STYLE + f'<div class="ac-hits"><div class="ac-hits-label">{html.escape(t("search_no_match"))}</div></div>'
    heading = (t("search_in_messages_tags", n=len(hits)) if any(h.role == "tag" for h in hits)
               else t("search_in_messages", n=len(hits)))
    out = [STYLE, f'<div class="ac-hits" role="list" aria-label="{html.escape(t("search_found_label"))}">',
           f'<div class="ac-hits-label">{html.escape(heading)}</div>']
    for h in hits:
        data = json.dumps({"sid": h.session_id, "pk": h.project_key, "role": h.role,
                           "idx": h.message_index if h.message_index is not None else -1})
        badge = f' <span class="ac-badge">{html.escape(t("archived_badge"))}</span>' if h.archived else ""
        if h.session_id in versions:
            n, m = versions[h.session_id]
            badge += f' <span class="ac-badge ac-hit-version">{html.escape(t("search_in_version", n=n, m=m))}</span>'
        who = t(_ROLE_LABEL[h.role]) if h.role in _ROLE_LABEL else h.role
        who = t("role_subagent", role=who) if h.subpath else who
        when = relative_time(h.ts, now) if h.ts else ""
        out.append(
            f'<button type="button" class="ac-hit-row" role="listitem" data-hit="{html.escape(data)}" '
            f'data-idx="{h.message_index if h.message_index is not None else -1}">'
            f'<span class="ac-hit-head"><span class="ac-hit-title">{html.escape(session_label(h.title, h.created_at, _title_source(h.title)))}'
            f'</span><span class="ac-hit-when">{html.escape(when)}</span></span>'
            f'<span class="ac-hit-snippet"><b>{html.escape(who)}:</b> {highlighted(*_snippet(h))}{badge}</span>'
            "</button>"
        )
    out.append("</div>")
    return "".join(out)


def results_html(ctx: WebContext, project: str, query: str, *, all_projects: bool = False, archived: bool = False,
                 limit: int = RESULT_LIMIT, now: float | None = None) -> str:
    """Search ``query`` in ``project`` (or every project) and render the panel; a store error
    becomes one sentence in the panel instead of an exception."""
    query = clean_text(query or "")  # a lone surrogate from the browser: not encodable for the index
    wanted, query = split_tags(query)  # tag:NAME keeps tagged conversations (issue 31)
    if not query.strip():
        return ""  # nothing to look for in messages: the list below is filtered by the tags
    try:
        # This project's sessions include its aliases (the same checkout on another machine).
        keys = None if all_projects else [project, *ctx.alias_keys(project)]
        hits = ctx.storage.search.search(query, project_keys=keys, archived=archived,
                                         limit=max(limit * 10, 300) if wanted else limit)
        if wanted:
            tags: dict[str, tuple[str, ...]] = {}
            for pk in keys or [p.project_key for p in ctx.manager.list_projects()]:
                tags.update(ctx.manager.conversation_tags(pk))
            hits = [h for h in hits if has_tags(tags.get(h.session_id, ()), wanted)][:limit]
    except (AnycodeError, OSError) as err:
        log.warning("search failed: %s", err)
        return STYLE + f'<div class="ac-hits"><div class="ac-hits-label">{html.escape(describe(err))}</div></div>'
    hits = [h for h in hits if not is_expert_id(h.session_id)]  # an expert's session is no chat (issue 30)
    hits, versions = one_per_conversation(ctx.manager, hits)
    return render_hits(hits, query=query, now=now, versions=versions)


def one_per_conversation(manager: Any, hits: list[SearchHit]) -> tuple[list[SearchHit], dict[str, tuple[int, int]]]:
    """Fold the index's hits (one per stored session, so one per version of a conversation:
    versions share their first messages) into one per conversation (issue 31, item 3): the hit
    in the conversation's version in use when it has one, else the best-ranked hit of another
    version, reported in the returned ``{session_id: (n, m)}`` ("version n of m", creation order,
    the root being 1). A title or tag hit is the conversation's (its family root holds both): it
    names the version in use, unlabelled. Each hit carries its conversation's title. Order: the
    first hit of each conversation keeps its place. Metadata only (``manager``'s, a SessionManager: the list of each
    project searched). The page's results panel and ``anycode sessions search`` both use it."""
    metas: dict[tuple[str, str], Any] = {}
    for pk in dict.fromkeys(h.project_key for h in hits):
        try:
            listed = manager.list(pk) + manager.list(pk, archived=True)
        except (AnycodeError, OSError) as err:
            log.warning("cannot read the versions of project %s: %s", pk, err)
            continue
        metas.update(((pk, m.id), m) for m in listed)
    groups: dict[tuple[str, str], list[SearchHit]] = {}
    for h in hits:
        meta = metas.get((h.project_key, h.session_id))
        family = meta.family if meta is not None and (h.project_key, meta.family) in metas else h.session_id
        groups.setdefault((h.project_key, family), []).append(h)
    out: list[SearchHit] = []
    labels: dict[str, tuple[int, int]] = {}
    for (pk, family), found in groups.items():
        root = metas.get((pk, family))
        members = sorted((m for (p, _), m in metas.items() if p == pk and m.family == family),
                         key=lambda m: (m.created_at, m.id))
        if root is None or len(members) < 2:
            out.extend(found)
            continue
        in_use = root.current_version if root.current_version and (pk, root.current_version) in metas else family
        best = next((h for h in found if h.session_id == in_use), found[0])
        if best.role in LABEL_ROLES:
            best = replace(best, session_id=in_use)
        elif best.session_id != in_use:
            labels[best.session_id] = ([m.id for m in members].index(best.session_id) + 1, len(members))
        out.append(replace(best, title=root.title or best.title))
    return out, labels


def _compaction_of(session: Any, message_index: int) -> dict | None:
    """The compaction a ``compaction`` hit found: the index names where its entry was written (the
    message count then, ``at``); its divider stands at its ``first_kept_index``."""
    found = [c for c in session.compactions if c.get("at") == message_index]
    return found[-1] if found else None


def hit_include(ctx: WebContext, project: str, session_id: str, message_index: int, role: str | None = None) -> int:
    """The stored message index a chat opened for this hit must show: the message itself, or for
    a compaction summary the message before its divider (the divider is drawn at its cut, not
    where the summary was written)."""
    if role != "compaction" or message_index < 0:
        return message_index
    try:
        session = ctx.manager.get(ctx.manager.find(project, session_id))
    except AnycodeError:
        return message_index
    found = _compaction_of(session, message_index)
    return max(0, int(found["first_kept_index"]) - 1) if found else message_index


def hit_row(ctx: WebContext, project: str, session_id: str, message_index: int | None, start: int = 0,
            role: str | None = None) -> int | None:
    """The chat row showing stored message ``message_index`` of the session when the chat shows
    its messages from ``start`` on (rows skip the system message and fold tool results into
    their step), or None when there is none. A ``compaction`` hit (``role``) is the summary
    divider's row."""
    if message_index is None or message_index < 0:
        return None
    try:
        session = ctx.manager.get(ctx.manager.find(project, session_id))
    except AnycodeError:
        return None
    view = render.chat_window(session.messages, start, session.compactions, session.reply_ends, session.reply_agents)
    found = _compaction_of(session, message_index) if role == "compaction" else None
    if found is not None:
        wanted = render.summary_divider(found)["metadata"]["id"]
        for row, shown in enumerate(view.rows):
            if (shown.get("metadata") or {}).get("id") == wanted:
                return row
    # The message's own row: its text row first, not a row the page adds above it with the same
    # index ("Used N memories", "Thinking": issue 31, item 2 — the note was highlighted instead).
    own = [row for row, idx in enumerate(view.source) if idx == message_index and not render.added_row(view.rows[row])]
    plain = [row for row in own if not view.rows[row].get("metadata")]
    if plain or own:
        return (plain or own)[0]
    for row, idx in enumerate(view.source):
        if idx >= message_index and not render.added_row(view.rows[row]):
            return row
    return len(view.source) - 1 if view.source else None


def warm_up(ctx: WebContext) -> threading.Thread | None:
    """Bring the search index up to date for every project in a background thread, so the first
    search after a long time (or ever: a first build reads every session) does not wait for it.
    Returns the thread (None when the store has no search)."""
    try:
        index = ctx.storage.search
    except SearchUnavailable:
        return None

    def run() -> None:
        t0 = time.perf_counter()
        try:
            n = index.update()
        except Exception as err:  # a cache: the next search tries again and reports
            log.warning("search index warm-up failed: %s", err)
            return
        if n:
            log.info("search index: %d session files indexed in %.1f s", n, time.perf_counter() - t0)

    thread = threading.Thread(target=run, name="anycode-search-warm-up", daemon=True)
    thread.start()
    return thread
