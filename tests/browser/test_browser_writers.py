"""Two writers in a real Chromium (issue 25): two tabs of one app on the default store, and two app
processes on one SQLite file or one PostgreSQL database — a reply being written is shown in the
other tab, a Send there waits for it and goes after it, the list follows chats made elsewhere
without a reload, and a kill -9 of the process writing a reply leaves the chat free within 15 s."""
from __future__ import annotations

import time

import pytest

from core.session.manager import SessionManager
from core.stores.factory import store_from_spec
from core.stores.jsonl_store import LocalSessionStore
from tests.support.chromium import TIMEOUT_MS, _post, expect, hold_next, send, wait_held
from tests.core.agent.test_two_writers import strict_problem

pytestmark = pytest.mark.browser

WRITING = "A reply is being written in another tab or window"
SLOW_A = "Slowly, the answer for A " * 12
SLOW_B = "Then the answer for B " * 12


def _open_tab(page, url):
    other = page.context.browser.new_page(viewport={"width": 1360, "height": 860})
    other.set_default_timeout(TIMEOUT_MS)
    other.goto(url)
    return other


def _session_id(page):
    deadline = time.time() + TIMEOUT_MS / 1000
    while "session=" not in page.url and time.time() < deadline:
        page.wait_for_timeout(50)
    return page.url.split("session=")[1].split("&")[0]


def _history(store, project_dir, sid):
    from core.session.keys import SessionKey, project_key

    return SessionManager(store).get(SessionKey(project_key(str(project_dir)), sid)).messages


def _contents(store, project_dir, sid):
    return [m["content"] for m in _history(store, project_dir, sid) if m["role"] != "system"]


def _one_chat_answered(world, page):
    """Tab A starts the app, sends "hello" and has its answer: ``(app url, session id)``."""
    url = world["start_app"]()
    page.goto(url)
    send(page, "hello")
    expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: hello", timeout=TIMEOUT_MS)
    return url, _session_id(page)


def _race(world, a, b_url, b_page=None):
    """Tab A sends a slow reply; tab B (opened at ``b_url`` unless given) sees it being written,
    sends meanwhile, waits, and its reply goes after A's; tab A is told of B's reply and shows it."""
    _post(world["fake"] + "/_script", {"replies": [{"text": SLOW_A, "delay": 0.1, "chunk": 3},
                                                   {"text": SLOW_B, "delay": 0.1, "chunk": 4}]})
    send(a, "question A")
    expect(a.locator("[data-testid=bot]").last).to_contain_text("Slowly", timeout=TIMEOUT_MS)
    if b_page is None:
        b = _open_tab(a, b_url)
        expect(b.locator("#ac-chat")).to_contain_text("question A", timeout=TIMEOUT_MS)  # B's page is up
    else:
        b = b_page  # open on the chat already: it learns of A's reply from the check alone
    started = time.monotonic()
    expect(b.locator("#ac-other-writing")).to_contain_text(WRITING, timeout=TIMEOUT_MS)
    seen_after = time.monotonic() - started
    send(b, "question B")
    expect(b.locator("#ac-chat")).to_contain_text("your message goes out as soon as it is done", timeout=TIMEOUT_MS)
    # A's reply ends; B's message goes out after it, and tab A is told B is writing, then shows it.
    expect(a.locator("#ac-other-writing")).to_contain_text(WRITING, timeout=TIMEOUT_MS)
    expect(b.locator("[data-testid=bot]").last).to_contain_text(SLOW_B.strip(), timeout=TIMEOUT_MS)
    expect(a.locator("[data-testid=bot]").last).to_contain_text(SLOW_B.strip(), timeout=TIMEOUT_MS)
    expect(a.locator("#ac-other-writing")).to_be_hidden(timeout=TIMEOUT_MS)
    return b, seen_after


class TestTwoTabs:
    def test_a_send_waits_for_the_other_tabs_reply_and_goes_after_it(self, world, page):
        url, sid = _one_chat_answered(world, page)
        b, seen_after = _race(world, page, f"{url}?session={sid}")
        print(f"the other tab showed the reply being written {seen_after:.2f} s after its page was up")
        assert seen_after < 3.5, "the other tab shows the reply being written within about 3 s"
        store = LocalSessionStore(world["data"])
        assert _contents(store, world["proj"], sid)[-4:] == ["question A", SLOW_A, "question B", SLOW_B]
        assert strict_problem(_history(store, world["proj"], sid)) is None


class TestOtherTabsMessageShown:
    """Guards against the fresh-user trial's tab A, idle and visible on the chat, that still had not
    drawn tab B's message and reply 4 s after B showed them (it never did until a reload): a fast
    reply held its lease between two of A's checks, and the check only drew the list again."""

    def test_b_s_message_shows_in_a_within_3_s(self, world, page):
        url, sid = _one_chat_answered(world, page)
        b = _open_tab(page, f"{url}?session={sid}")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("You said: hello", timeout=TIMEOUT_MS)
        for i in range(3):  # each a fresh chance for the lease to fall between two checks
            send(b, f"from tab B {i}")
            expect(b.locator("[data-testid=bot]").last).to_contain_text(f"You said: from tab B {i}",
                                                                        timeout=TIMEOUT_MS)
            started = time.monotonic()
            # docs/writers.md: another tab's change shows within about 3 s, without a reload
            expect(page.locator("[data-testid=bot]").last).to_contain_text(f"You said: from tab B {i}",
                                                                           timeout=3_000)
            print(f"tab A showed B's reply {time.monotonic() - started:.2f} s after B did")
            expect(page.locator("[data-testid=user]").last).to_have_text(f"from tab B {i}")


class TestSentBehindTheOtherTab:
    """Guards against the fresh-user trial's "tabA third", stored nowhere: tab A sent while its
    view was behind tab B's turn; the send was refused ("changed elsewhere") and its text only put
    back in the box, which was then overwritten. A's page check is paused here so its view is
    behind for certain (as between two checks, or in a hidden tab)."""

    def test_a_new_message_goes_after_b_s_turn_and_a_refused_one_survives_a_reload(self, world, page):
        url, sid = _one_chat_answered(world, page)
        b = _open_tab(page, f"{url}?session={sid}")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("You said: hello", timeout=TIMEOUT_MS)
        page.evaluate("clearInterval(window.acLiveCheck)")  # A does not look until it sends
        send(b, "from tab B")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("You said: from tab B", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-chat")).not_to_contain_text("from tab B")
        send(page, "tabA third")
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: tabA third", timeout=TIMEOUT_MS)
        expect(page.locator(".toast-body")).to_contain_text("yours was sent after them")
        assert [u.inner_text().strip() for u in page.locator("[data-testid=user]").all()] == [
            "hello", "from tab B", "tabA third"]
        expect(page.locator("#ac-input textarea")).to_have_value("")
        store = LocalSessionStore(world["data"])
        assert _contents(store, world["proj"], sid)[-4:] == ["from tab B", "You said: from tab B",
                                                             "tabA third", "You said: tabA third"]
        # Behind a question another process stored without its reply: the send is refused (it
        # would go after someone else's unanswered turn), and its text survives a reload.
        from core.session.keys import SessionKey, project_key

        SessionManager(store).add_messages(SessionKey(project_key(str(world["proj"])), sid),
                                           [{"role": "user", "content": "unanswered elsewhere"}])
        # The reload comes at once after the put-back: CI saw one inside the 300 ms before the
        # page's next look at the box lose the text; the look at pagehide keeps it.
        send(page, "tabA fourth")
        expect(page.locator(".toast-body").filter(has_text="changed elsewhere")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator("#ac-input textarea")).to_have_value("tabA fourth")
        expect(page.locator("[data-testid=user]").last).to_have_text("unanswered elsewhere")
        page.reload()
        expect(page.locator("[data-testid=user]").last).to_have_text("unanswered elsewhere", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-input textarea")).to_have_value("tabA fourth", timeout=5_000)
        page.locator("#ac-input textarea").press("Enter")  # sent now, the draft goes with it
        expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: tabA fourth", timeout=TIMEOUT_MS)
        expect(page.locator("#ac-input textarea")).to_have_value("")
        page.wait_for_function("!Object.keys(localStorage).some((k) => k.startsWith('anycode.draft.'))")
        assert "tabA fourth" in _contents(store, world["proj"], sid)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_on_one_database(kind, world, page, tmp_path):
    """Two app processes on one database: the list follows a chat the other made (no reload), a
    send waits for the other process's reply, and a kill -9 of the process writing a reply leaves
    the chat free for the other within 15 s."""
    if kind == "sqlite":
        spec = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        from tests.support.pg_server import fresh_database_url

        spec = fresh_database_url()
    url_a = world["start_app"]("--store", spec)
    url_b = world["start_app"]("--store", spec)
    page.goto(url_a)
    b = _open_tab(page, url_b)
    send(page, "made in process A")
    expect(page.locator("[data-testid=bot]").last).to_contain_text("You said: made in process A", timeout=TIMEOUT_MS)
    # Process B's open page lists the new chat without a reload, within about 3 s.
    row = b.locator("#ac-list .ac-session").first
    expect(row).to_be_visible(timeout=5_000)
    row.click()
    expect(b.locator("[data-testid=bot]").last).to_contain_text("You said: made in process A", timeout=TIMEOUT_MS)
    _race(world, page, None, b_page=b)
    sid = _session_id(page)
    store = store_from_spec(spec)
    try:
        assert _contents(store, world["proj"], sid)[-4:] == ["question A", SLOW_A, "question B", SLOW_B]

        # kill -9 of the process writing a reply: the other sends within 15 s.
        _post(world["fake"] + "/_script", {"replies": [{"text": SLOW_A, "delay": 0.3, "chunk": 2},
                                                       {"text": "After the crash."}]})
        send(page, "question killed")
        expect(b.locator("#ac-other-writing")).to_contain_text(WRITING, timeout=TIMEOUT_MS)
        world["apps"][0].p.kill()
        world["apps"][0].p.wait(10)
        killed = time.monotonic()
        send(b, "question after the crash")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("After the crash.", timeout=15_000)
        assert time.monotonic() - killed < 15
        history = _history(store, world["proj"], sid)
        # The killed reply was never stored (a round is stored when it completes); nothing waits.
        assert [m["content"] for m in history][-3:] == ["question killed", "question after the crash",
                                                        "After the crash."]
        assert strict_problem(history) is None
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


class TestDeletedInAnotherTab:
    """Guards against the fresh-user trial's D1 (issue 25, "two writers"): tab A deletes the chat
    tab B is streaming a reply in; B lost its message and the partial reply, its box was empty and
    it showed "No session -tmp-proj-…/… was found" with the internal project key."""

    def test_the_delete_warns_and_b_keeps_its_message_and_reply(self, world, page):
        url, sid = _one_chat_answered(world, page)
        b = _open_tab(page, f"{url}?session={sid}")
        expect(b.locator("#ac-chat")).to_contain_text("You said: hello", timeout=TIMEOUT_MS)
        _post(world["fake"] + "/_script", {"replies": [{"text": "x " * 300, "delay": 0.05}]})
        send(b, "my long question for B")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("x x x", timeout=TIMEOUT_MS)
        page.wait_for_timeout(1500)
        # A asks to delete: the question says B's reply is being written there right now.
        page.locator("#ac-delete").click()
        expect(page.locator("#ac-confirm-text")).to_contain_text(
            "A reply is being written in this chat in another tab or window", timeout=TIMEOUT_MS)
        page.locator("#ac-confirm-delete").click()
        expect(page.locator("#ac-chat")).not_to_contain_text("You said: hello", timeout=TIMEOUT_MS)
        # B: its message is back in the box, its reply so far still on screen, a readable sentence.
        expect(b.locator("#ac-input textarea")).to_have_value("my long question for B", timeout=TIMEOUT_MS)
        expect(b.locator("#ac-chat")).to_contain_text("deleted in another tab or window", timeout=TIMEOUT_MS)
        expect(b.locator("#ac-chat")).to_contain_text("my long question for B")
        expect(b.locator("[data-testid=bot]").filter(has_text="x x x x")).to_have_count(1)
        text = b.locator("body").inner_text()
        assert "-tmp-" not in text and "No session" not in text, text[-500:]
        assert "session=" not in b.url, "B shows a new chat, not the deleted one"
        # Sent again, the message starts a new chat that answers it.
        b.locator("#ac-input textarea").press("Enter")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("You said: my long question for B",
                                                                    timeout=TIMEOUT_MS)
        expect(b.locator("#ac-chat")).not_to_contain_text("deleted in another tab")
        assert _session_id(b) != sid
        # A deletes B's new chat while no reply runs: B says so within a few seconds (it showed the
        # chat as live until its next send, trial 7), keeps it on screen, and a send starts anew.
        second = _session_id(b)
        page.goto(f"{url}?session={second}")
        expect(page.locator("#ac-chat")).to_contain_text("You said: my long question for B", timeout=TIMEOUT_MS)
        page.locator("#ac-delete").click()
        page.locator("#ac-confirm-delete").click()
        expect(b.locator("#ac-other-writing")).to_contain_text("What you see here is no longer saved",
                                                                timeout=TIMEOUT_MS)
        expect(b.locator("#ac-chat")).to_contain_text("You said: my long question for B")
        assert "session=" not in b.url
        send(b, "third start")
        expect(b.locator("[data-testid=bot]").last).to_contain_text("You said: third start", timeout=TIMEOUT_MS)
        expect(b.locator("#ac-other-writing")).to_be_hidden(timeout=TIMEOUT_MS)
        assert _session_id(b) not in (sid, second)


def _two_tabs_titled(world, page):
    """Tab A's answered chat, its generated title shown, open in tab B too: ``(session id, tab
    B, A's title field, B's title field)``."""
    url, sid = _one_chat_answered(world, page)
    a_title = page.locator("#ac-title input")
    expect(a_title).not_to_have_value("", timeout=TIMEOUT_MS)  # the generated title arrived
    b = _open_tab(page, f"{url}?session={sid}")
    b_title = b.locator("#ac-title input")
    expect(b_title).to_have_value(a_title.input_value(), timeout=TIMEOUT_MS)
    return sid, b, a_title, b_title


class TestRenamedInAnotherTab:
    """Guards against the fresh-user trial's D6 (issue 25): a rename in tab A updated tab B's
    sidebar row but not B's title field, so B showed the old name (and B's next rename was
    refused as made against it); a name being typed in B must not be overwritten either; and
    against the tag bar under the title not following tags and pins made elsewhere (trial 9);
    and against B's title field, focused and left without typing as A renamed, writing its older
    title back over A's (a full suite run, round 24: the blur ran after B's live check had given
    B's state A's title)."""

    def test_a_field_left_without_typing_keeps_the_other_tabs_name(self, world, page):
        sid, b, a_title, b_title = _two_tabs_titled(world, page)
        held = hold_next(b, "ac-title", "blur", "queue/join")
        b_title.click()
        b.locator("#ac-input textarea").click()  # B's title field focused and left, nothing typed
        wait_held(b, held, "the title field's blur")
        a_title.fill("Named in tab A")
        a_title.press("Enter")
        expect(b_title).to_have_value("Named in tab A", timeout=5_000)  # B's check: B's state has it too
        held[0].continue_()  # B's blur, sent with the older title in the field, reaches the server now
        b.wait_for_timeout(1500)
        from core.session.keys import SessionKey, project_key

        key = SessionKey(project_key(str(world["proj"])), sid)
        assert SessionManager(LocalSessionStore(world["data"])).get(key).title == "Named in tab A"
        expect(b_title).to_have_value("Named in tab A")
        expect(a_title).to_have_value("Named in tab A")
        expect(b.locator("#ac-list .ac-session.active")).to_contain_text("Named in tab A")

    def test_the_title_field_follows_and_a_later_rename_here_is_saved(self, world, page):
        sid, b, a_title, b_title = _two_tabs_titled(world, page)
        a_title.fill("Named in tab A")
        a_title.press("Enter")
        expect(b.locator("#ac-list")).to_contain_text("Named in tab A", timeout=5_000)
        expect(b_title).to_have_value("Named in tab A", timeout=5_000)
        # B's own rename now goes through (it is checked against the title B shows).
        b_title.fill("Named in tab B")
        b_title.press("Enter")
        expect(a_title).to_have_value("Named in tab B", timeout=5_000)
        store = LocalSessionStore(world["data"])
        from core.session.keys import SessionKey, project_key

        assert SessionManager(store).get(SessionKey(project_key(str(world["proj"])), sid)).title == "Named in tab B"
        # A name being typed in B is left alone when A renames meanwhile; B's Enter is refused.
        b_title.fill("Typed in B, not sent")
        a_title.fill("Named in tab A again")
        a_title.press("Enter")
        expect(b.locator("#ac-list")).to_contain_text("Named in tab A again", timeout=5_000)
        b.wait_for_timeout(1500)  # a check or two after the list changed
        expect(b_title).to_have_value("Typed in B, not sent")
        b_title.press("Enter")
        expect(b.locator("body")).to_contain_text("title was changed elsewhere", timeout=TIMEOUT_MS)
        expect(b_title).to_have_value("Named in tab A again")
        # Tagged and pinned elsewhere (another process here): the bar under each tab's title
        # follows, as the sidebar rows do (trial 9: the rows showed the tag, the bars did not).
        SessionManager(store).tag(SessionKey(project_key(str(world["proj"])), sid), add=["urgent"])
        SessionManager(store).pin(SessionKey(project_key(str(world["proj"])), sid))
        for tab in (page, b):
            expect(tab.locator("#ac-tags")).to_contain_text("urgent", timeout=5_000)
            expect(tab.locator("#ac-tags .ac-pin")).to_have_count(1)
