"""Long conversations and long session lists in the web UI (issue 17): a conversation of
thousands of messages opens on its latest ones (earlier ones on request), and the sidebar renders
one page of a 10,000-session list. The Chromium half: ``tests/browser/test_browser_long_history.py``."""
from __future__ import annotations

import time

import pytest

from core import LocalSessionStore, SessionManager
from core.session.entries import header_entry, message_entry, title_entry
from core.session.keys import SessionKey, new_session_id, project_key
from webui.chat import handlers
from webui.render import rows as render
from webui.chat.context import WebContext
from tests.support.storage import storage_of


def _long_session(store, proj, n_rounds: int) -> SessionKey:
    key = SessionKey(project_key(str(proj)), new_session_id())
    t0 = time.time() - 3600
    entries = [header_entry(key.session_id, key.project_key, str(proj), created_at=t0),
               message_entry({"role": "system", "content": "sys"}, ts=t0)]
    for i in range(n_rounds):
        entries.append(message_entry({"role": "user", "content": f"question {i}"}, ts=t0 + i))
        if i % 3 == 0:
            entries.append(message_entry({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
                ts=t0 + i))
            entries.append(message_entry({"role": "tool", "tool_call_id": f"c{i}", "content": "a.py"}, ts=t0 + i))
        entries.append(message_entry({"role": "assistant", "content": f"answer {i}"}, ts=t0 + i))
    store.append(key, entries)
    return key


@pytest.fixture
def ctx(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    store = LocalSessionStore(tmp_path / "home", fsync=False)
    return WebContext(storage=storage_of(store), manager=SessionManager(store), project_path=str(proj))


class TestLongConversation:
    """Opening a conversation of thousands of messages renders every one of them (the page
    needed 14.6 s for 10,000 and crashed at 100,000), or its window cuts a tool step from its
    call, or Branch/search rows point at the wrong message once only a window is shown."""

    def test_opens_on_the_latest_messages_then_earlier_on_request(self, ctx):
        key = _long_session(ctx.storage.sessions, ctx.project_path, 1000)
        view = handlers.open_session(ctx, key.project_key, key.session_id)
        total = len(ctx.manager.get(key).messages)
        assert view.rows[-1] == {"role": "assistant", "content": "answer 999"}
        assert len(view.rows) <= render.CHAT_WINDOW + 10
        assert view.state["earlier"] > 0 and view.state["from"] > 0
        assert view.rows[0]["role"] != "assistant" or "metadata" not in view.rows[0]  # never a lone tool step
        shown = view.state["from"]
        assert ctx.manager.get(key).messages[shown]["role"] != "tool"
        more = handlers.earlier(ctx, view.state)
        assert more.state["from"] < shown and len(more.rows) > len(view.rows)
        assert more.rows[-len(view.rows):] == view.rows  # the same latest rows, more above them
        # all the way back
        st = more.state
        while st["earlier"]:
            st = handlers.earlier(ctx, st).state
        assert st["from"] == 0 and len(handlers.reload(ctx, st).rows) == len(render.chat_rows(
            ctx.manager.get(key).messages).rows)
        assert total > 2000

    def test_branch_from_a_windowed_row_forks_at_that_message(self, ctx):
        key = _long_session(ctx.storage.sessions, ctx.project_path, 600)
        view = handlers.open_session(ctx, key.project_key, key.session_id)
        row = next(i for i, r in enumerate(view.rows) if r.get("content") == "question 550")
        fork = handlers.branch(ctx, view.state, row)
        messages = ctx.manager.get(SessionKey(key.project_key, fork.session_id)).messages
        assert messages[-1] == {"role": "user", "content": "question 550"}

    def test_a_search_hit_far_back_is_shown(self, ctx):
        from webui.chat.search import hit_row

        key = _long_session(ctx.storage.sessions, ctx.project_path, 800)
        messages = ctx.manager.get(key).messages
        idx = next(i for i, m in enumerate(messages) if m.get("content") == "question 5")
        view = handlers.open_session(ctx, key.project_key, key.session_id, include=idx)
        row = hit_row(ctx, key.project_key, key.session_id, idx, view.state["from"])
        assert view.rows[row]["content"] == "question 5"
        assert view.rows[-1]["content"] == "answer 799"

    def test_a_send_keeps_the_window(self, ctx, fake_openai, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
        key = _long_session(ctx.storage.sessions, ctx.project_path, 700)
        view = handlers.open_session(ctx, key.project_key, key.session_id)
        fake_openai.push({"text": "fresh answer"})
        updates = list(handlers.send(ctx, view.state, "one more", None, "tab-1"))
        assert all(len(u.rows or []) <= len(view.rows) + 5 for u in updates)
        assert handlers.reload(ctx, updates[-1].state).rows[-1]["content"] == "fresh answer"


class TestHiddenCount:
    """Guards the "Show N earlier messages" count: it must be the rows above the window, so a
    system message (the prompt, or one an import or a hand edit put in the middle) is never
    counted, wherever it stands, and the count reaches 0 exactly when everything is shown."""

    def test_counts_only_the_messages_drawn_as_rows(self, ctx):
        key = SessionKey(project_key(ctx.project_path), new_session_id())
        t0 = time.time() - 3600
        entries = [header_entry(key.session_id, key.project_key, ctx.project_path, created_at=t0),
                   message_entry({"role": "system", "content": "sys"}, ts=t0)]
        for i in range(300):
            if i == 40:
                entries.append(message_entry({"role": "system", "content": "imported note"}, ts=t0 + i))
            entries.append(message_entry({"role": "user", "content": f"question {i}"}, ts=t0 + i))
            entries.append(message_entry({"role": "assistant", "content": f"answer {i}"}, ts=t0 + i))
        ctx.storage.sessions.append(key, entries)
        view = handlers.open_session(ctx, key.project_key, key.session_id)
        # 602 messages (two system), the last 200 shown: 402 above, of which 400 are rows
        assert (view.state["from"], view.state["earlier"]) == (402, 400)
        more = handlers.earlier(ctx, view.state)
        assert (more.state["from"], more.state["earlier"]) == (202, 200)
        third = handlers.earlier(ctx, more.state)
        # 2 above: the prompt and "question 0"; only the question is a row
        assert (third.state["from"], third.state["earlier"]) == (2, 1)
        assert handlers.earlier(ctx, third.state).state["earlier"] == 0


class TestLongSessionList:
    """A list of 10,000 sessions rendered whole (seconds of HTML), or paging that hides the open
    conversation or stops at the first page."""

    def _fill(self, ctx, n):
        pk = project_key(ctx.project_path)
        now = time.time()
        ids = []
        for i in range(n):
            key = SessionKey(pk, new_session_id())
            ctx.storage.sessions.append(key, [header_entry(key.session_id, pk, ctx.project_path, created_at=now - i * 60),
                                   message_entry({"role": "user", "content": "x"}, ts=now - i * 60),
                                   title_entry(f"Chat number {i}", "llm", ts=now - i * 60)])
            ids.append(key.session_id)
        return pk, ids

    def test_first_page_then_more_and_the_open_one_always_listed(self, ctx):
        pk, ids = self._fill(ctx, 250)
        page1 = handlers.session_list_html(ctx, pk)
        assert page1.count('data-sid=') == render.SIDEBAR_PAGE and "Show more (150 older)" in page1
        page2 = handlers.session_list_html(ctx, pk, limit=2 * render.SIDEBAR_PAGE)
        assert page2.count('data-sid=') == 200 and "Show more (50 older)" in page2
        with_active = handlers.session_list_html(ctx, pk, active=ids[240])
        assert f'data-sid="{ids[240]}"' in with_active and with_active.count('data-sid=') == 241
        found = handlers.session_list_html(ctx, pk, query="number 249")
        assert f'data-sid="{ids[249]}"' in found and "Show more" not in found
