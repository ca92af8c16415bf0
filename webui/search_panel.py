"""The sidebar's message search: what was said in a conversation, found as the user types.

Under the search box (which also filters the list by title, as before) a results panel lists the
conversations whose messages match: title, the matching message's snippet with the match
highlighted, and its time. A click opens the conversation scrolled to that message, which is
highlighted for a moment. "All projects" widens the search; "Show archived" includes archived
conversations (marked). The index is :mod:`core.search`.

Plain functions (:func:`results_html`, :func:`hit_row`) are tested without a browser;
:func:`add_search` places the components and wires them. Every piece of chat text is escaped
(``html.escape``) before it is put in the page: chat text is never rendered as HTML.
"""
from __future__ import annotations

import html
import json
import logging
import re
import threading
import time
from typing import Any, Callable

from core.errors import AnycodeError
from core.session.text import clean_text
from core.search import SearchHit, open_search
from webui.i18n import t
from webui.error_text import describe
from webui.timefmt import session_label
from webui import handlers, render
from webui.timefmt import relative_time

log = logging.getLogger(__name__)

RESULT_LIMIT = 30
HIGHLIGHT_SECONDS = 4

# Clicks on a result become a ``select`` event carrying {sid, pk, idx} as JSON in ``value``.
RESULTS_JS = """
element.addEventListener('click', (e) => {
  const row = e.target.closest('[data-hit]');
  if (!row) return;
  trigger('select', {index: Number(row.dataset.idx || -1), value: row.dataset.hit});
});
"""

# After the conversation opened: wait for its rows, scroll the hit's row into view, highlight it.
SCROLL_JS = """
(target) => {
  let t; try { t = JSON.parse(target || 'null'); } catch (e) { t = null; }
  if (!t || t.row === null || t.row === undefined) return [];
  const started = Date.now();
  const seek = () => {
    const chat = document.getElementById('ac-chat');
    const rows = chat ? chat.querySelectorAll('[data-testid=user], [data-testid=bot]') : [];
    if (rows.length > t.row) {
      const el = rows[t.row];
      document.querySelectorAll('#ac-chat .ac-hit').forEach((x) => x.classList.remove('ac-hit'));
      el.classList.add('ac-hit');
      el.scrollIntoView({block: 'center'});
      setTimeout(() => el.classList.remove('ac-hit'), %d);
      return;
    }
    if (Date.now() - started < 5000) setTimeout(seek, 100);
  };
  setTimeout(seek, 50);
  return [];
}
""" % (HIGHLIGHT_SECONDS * 1000)

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
               "compaction": "role_compaction", "title": "role_title"}  # catalogue keys


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


def render_hits(hits: list[SearchHit], *, query: str, now: float | None = None) -> str:
    """HTML for the results panel (empty string when ``query`` is blank)."""
    if not query.strip():
        return ""
    hits = [h for h in hits if h.role != "title"]  # title matches are in the list below already
    if not hits:
        return STYLE + f'<div class="ac-hits"><div class="ac-hits-label">{html.escape(t("search_no_match"))}</div></div>'
    out = [STYLE, f'<div class="ac-hits" role="list" aria-label="{html.escape(t("search_found_label"))}">',
           f'<div class="ac-hits-label">{html.escape(t("search_in_messages", n=len(hits)))}</div>']
    for h in hits:
        data = json.dumps({"sid": h.session_id, "pk": h.project_key, "role": h.role,
                           "idx": h.message_index if h.message_index is not None else -1})
        badge = f' <span class="ac-badge">{html.escape(t("archived_badge"))}</span>' if h.archived else ""
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


def results_html(ctx: Any, project: str, query: str, *, all_projects: bool = False, archived: bool = False,
                 limit: int = RESULT_LIMIT, now: float | None = None) -> str:
    """Search ``query`` in ``project`` (or every project) and render the panel; a store error
    becomes one sentence in the panel instead of an exception."""
    query = clean_text(query or "")  # a lone surrogate from the browser: not encodable for the index
    if not query.strip():
        return ""
    try:
        hits = open_search(ctx.store).search(query, project_keys=None if all_projects else [project],
                                             archived=archived, limit=limit)
    except (AnycodeError, TypeError, OSError) as err:
        log.warning("search failed: %s", err)
        return STYLE + f'<div class="ac-hits"><div class="ac-hits-label">{html.escape(describe(err))}</div></div>'
    return render_hits(hits, query=query, now=now)


def _compaction_of(session: Any, message_index: int) -> dict | None:
    """The compaction a ``compaction`` hit found: the index names where its entry was written (the
    message count then, ``at``); its divider stands at its ``first_kept_index``."""
    found = [c for c in session.compactions if c.get("at") == message_index]
    return found[-1] if found else None


def hit_include(ctx: Any, project: str, session_id: str, message_index: int, role: str | None = None) -> int:
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


def hit_row(ctx: Any, project: str, session_id: str, message_index: int | None, start: int = 0,
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
    view = render.chat_window(session.messages, start, session.compactions, session.reply_ends)
    found = _compaction_of(session, message_index) if role == "compaction" else None
    if found is not None:
        wanted = render.summary_divider(found)["metadata"]["id"]
        for row, shown in enumerate(view.rows):
            if (shown.get("metadata") or {}).get("id") == wanted:
                return row
    for row, idx in enumerate(view.source):
        if idx >= message_index:
            return row
    return len(view.source) - 1 if view.source else None


def warm_up(ctx: Any) -> threading.Thread | None:
    """Bring the search index up to date for every project in a background thread, so the first
    search after a long time (or ever: a first build reads every session) does not wait for it.
    Returns the thread (None when the store has no search)."""
    try:
        index = open_search(ctx.store)
    except TypeError:
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


def add_search(ctx: Any, gr: Any, *, state: Any, search: Any, show_archived: Any, tab: Any,
               show: Callable[..., tuple], switching: Callable[..., Any], switch: dict[str, Any],
               idle_box: Callable[[], Any]) -> Any:
    """Place the results panel (call inside the sidebar, under the search box) and wire it.

    ``show(view, query, archived)``, ``switching(fn)``, ``switch`` (outputs of an open) and
    ``idle_box()`` are the app's own, so opening a result is exactly opening a session from the
    list. Returns the results component."""
    from webui.i18n_ui import tr

    all_projects = gr.Checkbox(label=tr("search_all_projects"), value=False, elem_id="ac-search-all",
                               visible=True, container=False)
    results = gr.HTML("", js_on_load=RESULTS_JS, elem_id="ac-search-results")
    target = gr.Textbox(visible="hidden", elem_id="ac-search-target")

    def on_query(st, query, archived, everywhere):
        project = (st or {}).get("project") or ctx.project_key
        return results_html(ctx, project, query or "", all_projects=bool(everywhere), archived=bool(archived))

    inputs = [state, search, show_archived, all_projects]
    # always_last: while one search runs, only the newest query waits (typing never queues a backlog).
    search.change(on_query, inputs, results, api_visibility="private", trigger_mode="always_last",
                  show_progress="hidden")
    all_projects.input(on_query, inputs, results, api_visibility="private", show_progress="hidden")
    show_archived.input(on_query, inputs, results, api_visibility="private", show_progress="hidden")

    def on_hit(st, query, archived, evt: gr.SelectData):
        try:
            data = json.loads(evt.value)
            project, sid, idx = str(data["pk"]), str(data["sid"]), int(data.get("idx", -1))
            role = data.get("role")
            # A hit far back in a long conversation: the chat opens from there on.
            view = handlers.open_session(ctx, project, sid,
                                         include=hit_include(ctx, project, sid, idx, role) if idx >= 0 else None)
            row = hit_row(ctx, project, sid, idx, view.state.get("from", 0), role)
        except (ValueError, TypeError, KeyError) as err:
            log.warning("bad search result click %r: %s", evt.value, err)
            return (*show(handlers.reload(ctx, st), query, archived), idle_box(), gr.skip())
        except AnycodeError as err:  # deleted meanwhile
            return (*show(handlers.reload(ctx, st, notice=describe(err)), query, archived), idle_box(), gr.skip())
        return (*show(view, query, archived), idle_box(),
                json.dumps({"sid": sid, "row": row, "at": time.time()}))

    warm_up(ctx)
    results.select(switching(on_hit), [tab, state, search, show_archived],
                   outputs=[*switch["outputs"], target], api_visibility="private")
    target.change(None, target, None, js=SCROLL_JS)
    return results
