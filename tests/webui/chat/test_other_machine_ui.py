"""The same project on another machine, in the page (issue 26, item 5): machine B opened in its own
checkout of a repository lists, opens and works on the sessions machine A recorded at another path.

Guards against "No sessions yet" on B for a project whose history was pulled from the mirror, and
against A's folder (absent on B) turning the file tools off.
"""
from __future__ import annotations

import os

import pytest

from core import LocalSessionStore, SessionManager
from core.session.rounds import Round
from core.stores.pull import pull_sessions
from tests.support.chat_ctx import make_ctx
from tests.support.machines import checkout, mirrored, shop_checkouts
from tests.support.storage import storage_of
from webui.chat import approvals, handlers, remote


def test_b_lists_opens_and_works_in_its_own_folder(tmp_path, monkeypatch):
    a_dir, b_dir = shop_checkouts(tmp_path)
    machine_a = LocalSessionStore(tmp_path / "a-data")
    chat = SessionManager(machine_a).create(a_dir, title="Checkout bug")
    SessionManager(machine_a).add_messages(chat.key, [{"role": "user", "content": "why does checkout fail?"}])

    b_data = tmp_path / "b-data"
    monkeypatch.setenv("ANYCODE_HOME", str(b_data))
    machine_b = storage_of(LocalSessionStore(b_data))
    ctx = make_ctx(machine_b, b_dir)
    before = handlers.session_list_html(ctx, ctx.project_key)
    assert "Checkout bug" not in before
    pull_sessions(machine_a, machine_b.sessions, aliases=machine_b.aliases, memory_log=machine_b.memory_log,
                  blobs=machine_b.blobs)  # A's store stands in for the shared mirror
    os.rename(a_dir, tmp_path / "a-moved")  # A's path does not exist on B

    listed = handlers.session_list_html(ctx, ctx.project_key)
    assert "Checkout bug" in listed, "B's sidebar lists A's session of the same repository"
    view = handlers.open_session(ctx, ctx.project_key, chat.id)
    assert view.state["session"] == chat.id
    kwargs = approvals.runner_kwargs(ctx, view.state)
    assert kwargs["workspace"].root == os.path.realpath(b_dir), "the tools use B's checkout"
    shown = approvals.view(ctx, view.state)
    assert shown.workspace_problem is None
    from webui.chat import search

    found = search.results_html(ctx, ctx.project_key, "checkout fail")
    assert chat.id in str(found), "B's search of this project finds A's message"


class TestMemoriesOfTheSameProjectElsewhere:
    """Guards against machine B's chats of a project forgetting what machine A learnt about it:
    memories recorded under A's project key (A's path) must be listed in B's Memory panel, sent
    in B's new chats, and editable there — with the history carried by a real S3 mirror (moto)."""

    def test_b_lists_and_uses_as_memories(self, tmp_path, monkeypatch, fake_openai):
        from tests.core.stores.test_mirror import open_mirror
        from tests.support.chat_ctx import run_send
        from tests.support.s3_server import fresh_s3_url
        from webui.chat import memory as memory_panel

        url = fresh_s3_url(monkeypatch)
        a_dir, b_dir = shop_checkouts(tmp_path)
        machine_a = mirrored(tmp_path / "a-data", open_mirror(url))
        try:
            chat = SessionManager(machine_a).create(a_dir, title="Checkout bug")
            SessionManager(machine_a).add_messages(chat.key, [{"role": "user", "content": "hi"}])
            memories_a = storage_of(machine_a).memories
            memories_a.add("Payments go through the sandbox gateway", project_key=chat.key.project_key,
                           session_id=chat.id, message_index=0)
            assert machine_a.flush(15) and memories_a.log.flush(15)
        finally:
            machine_a.close()

        b_data = tmp_path / "b-data"
        monkeypatch.setenv("ANYCODE_HOME", str(b_data))
        machine_b = storage_of(LocalSessionStore(b_data))
        pull_sessions(open_mirror(url), machine_b.sessions, aliases=machine_b.aliases, memory_log=machine_b.memory_log,
                      blobs=machine_b.blobs)
        ctx = make_ctx(machine_b, b_dir, api_key="sk-test", base_url=fake_openai.base_url, max_retries=0)
        assert ctx.project_key != chat.key.project_key
        handlers.session_list_html(ctx, ctx.project_key)  # the page opens: B's folder is this project

        panel = memory_panel.panel_html(ctx, ctx.project_key)
        assert "Payments go through the sandbox gateway" in panel, "B's Memory panel lists A's project memory"
        assert "from Checkout bug" in panel, "its link names A's chat, which B has"

        fake_openai.push({"content": "Noted."})
        run_send(ctx, handlers.new_chat(ctx).state, "what do you know about payments?")
        [request] = fake_openai.chat_requests()
        system = request["messages"][0]["content"]
        assert "Payments go through the sandbox gateway" in system, "B's new chat is sent A's memory"

        [m] = machine_b.memories.list(ctx.project_key, scope="project")
        assert memory_panel.edit_memory(ctx, ctx.project_key, m.id, "Payments go through the live gateway")[1]
        [m2] = machine_b.memories.list(ctx.project_key, scope="project")
        assert m2.text == "Payments go through the live gateway" and m2.project_key == chat.key.project_key


# --- chats only in the mirror (issue 26, item 4) ---------------------------------------------


def _wait_for(fn, timeout=15.0):
    import time

    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


@pytest.fixture(params=["sqlite", "s3", "redis"])
def mirror_url_of_kind(request, tmp_path, monkeypatch):
    from tests.core.stores.test_mirror import mirror_url

    if request.param == "s3":
        from tests.support.s3_server import fresh_s3_url

        return fresh_s3_url(monkeypatch)
    return mirror_url(request.param, tmp_path)


class TestChatsOnlyInTheMirror:
    """Guards against machine B not seeing what A wrote until someone runs ``sessions pull`` by
    hand: with a shared mirror, B's sidebar must list A's chat of the same project (at another
    path) marked "from another machine", opening it must pull it and show its messages, and a
    mirror that hangs or is down must neither hold up the list nor go unsaid."""

    def test_b_lists_a_chat_marked_and_opening_pulls_it(self, tmp_path, monkeypatch, mirror_url_of_kind):
        from tests.core.stores.test_mirror import open_mirror

        url = mirror_url_of_kind
        a_dir, b_dir = shop_checkouts(tmp_path)
        a = mirrored(tmp_path / "a-data", open_mirror(url))
        b = mirrored(tmp_path / "b-data", open_mirror(url))
        try:
            chat = SessionManager(a).create(a_dir, title="Refund flow")
            SessionManager(a).add_messages(chat.key, [{"role": "user", "content": "how do refunds work?"},
                                                      {"role": "assistant", "content": "through the ledger"}])
            version = SessionManager(a).keep_as_version(chat.key, 1, Round([{"role": "assistant", "content": "ask ops"}]))
            assert a.flush(15), a.status()

            monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
            ctx = make_ctx(b, b_dir)
            listed = _wait_for(lambda: (lambda h: h if "Refund flow" in h else "")(
                handlers.session_list_html(ctx, ctx.project_key)))
            assert "Refund flow" in listed, "B lists A's chat of the same repository, before any pull"
            assert listed.count("Refund flow") == 2, "one row (title and tooltip) for the conversation and its version"
            assert "from another machine" in listed and "ac-remote" in listed
            assert not b.exists(chat.key), "listing reads the mirror's metadata; nothing is copied"

            view = handlers.open_session(ctx, ctx.project_key, chat.id)
            assert b.exists(chat.key) and b.exists(version.key), "opening pulled the conversation with its versions"
            assert view.state["session"] in (chat.id, version.id)
            assert any("ask ops" in str(r.get("content")) or "through the ledger" in str(r.get("content"))
                       for r in view.rows)
            after = handlers.session_list_html(ctx, ctx.project_key, active=view.state["session"])
            assert "Refund flow" in after and "from another machine" not in after, "now it is B's own"
        finally:
            a.close()
            b.close()

    def test_a_chat_archived_on_a_is_in_bs_archive_view_and_opens(self, tmp_path, monkeypatch, mirror_url_of_kind):
        """A chat A archived by hand was in none of B's lists (the main list leaves archived chats
        out, the archive view listed only B's own) until a ``sessions pull``: it must be in B's
        archive view, marked, and opening it must bring it here still archived."""
        from tests.core.stores.test_mirror import open_mirror

        a_dir, b_dir = shop_checkouts(tmp_path)
        a = mirrored(tmp_path / "a-data", open_mirror(mirror_url_of_kind))
        b = mirrored(tmp_path / "b-data", open_mirror(mirror_url_of_kind))
        try:
            chat = SessionManager(a).create(a_dir, title="Old invoices")
            SessionManager(a).add_messages(chat.key, [{"role": "user", "content": "the 2024 invoices"}])
            SessionManager(a).archive(chat.key)
            assert a.flush(15), a.status()

            monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
            ctx = make_ctx(b, b_dir)
            shelf = _wait_for(lambda: (lambda h: h if "Old invoices" in h else "")(
                handlers.session_list_html(ctx, ctx.project_key, archived=True)))
            assert "Old invoices" in shelf and "from another machine" in shelf, "B's archive view lists A's archived chat"
            assert "Old invoices" not in handlers.session_list_html(ctx, ctx.project_key), "not in the main list"

            view = handlers.open_session(ctx, ctx.project_key, chat.id)
            assert view.state["session"] == chat.id and b.exists(chat.key), view.notice
            assert any("the 2024 invoices" in str(r.get("content")) for r in view.rows)
            assert view.archived, "it stays archived here, as on A"
            shelf = handlers.session_list_html(ctx, ctx.project_key, archived=True, active=chat.id)
            assert "Old invoices" in shelf and "from another machine" not in shelf, "now it is B's own"
        finally:
            a.close()
            b.close()

    def test_a_bookmark_opens_before_the_sidebar_ever_listed_the_mirror(self, tmp_path, monkeypatch):
        """A link to A's chat opened on B as the page's first action (no listing yet) said "not
        found"; it must be looked up in the mirror, pulled and shown. An id nowhere stays "not found"."""
        from core import SessionNotFound
        from tests.core.stores.test_mirror import mirror_url, open_mirror
        from webui.chat import views

        url = mirror_url("sqlite", tmp_path)
        a_dir, b_dir = shop_checkouts(tmp_path)
        a = mirrored(tmp_path / "a-data", open_mirror(url))
        b = mirrored(tmp_path / "b-data", open_mirror(url))
        try:
            chat = SessionManager(a).create(a_dir, title="Bookmarked")
            SessionManager(a).add_messages(chat.key, [{"role": "user", "content": "the bookmarked question"}])
            assert a.flush(15), a.status()
            monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
            ctx = make_ctx(b, b_dir)
            view = views.initial_view(ctx, {"session": chat.id})  # the link, B's page's first load
            assert view.state["session"] == chat.id and b.exists(chat.key), view.notice
            assert any("the bookmarked question" in str(r.get("content")) for r in view.rows)
            again = handlers.open_session(ctx, ctx.project_key, chat.id)
            assert again.state["session"] == chat.id
            with pytest.raises(SessionNotFound):
                handlers.open_session(ctx, ctx.project_key, "0" * 32)
            assert views.initial_view(ctx, {"session": "0" * 32}).notice  # a sentence, a new chat
        finally:
            a.close()
            b.close()

    def test_a_link_to_a_version_left_out_as_a_copy_opens_its_conversation(self, tmp_path, monkeypatch):
        """A pull leaves out a version whose messages another history of the conversation holds
        (issue 26: no history twice); a link to that version's id must open the conversation
        instead of saying it could not be brought here."""
        from tests.core.stores.test_mirror import mirror_url, open_mirror
        from webui.chat import views

        url = mirror_url("sqlite", tmp_path)
        a_dir, b_dir = shop_checkouts(tmp_path)
        a = mirrored(tmp_path / "a-data", open_mirror(url))
        b = mirrored(tmp_path / "b-data", open_mirror(url))
        try:
            ma = SessionManager(a)
            chat = ma.create(a_dir, title="Twice")
            ma.add_messages(chat.key, [{"role": "user", "content": "the one question"}])
            same = ma.fork(chat.key, 0, version=True)  # the same messages as the conversation itself
            ma.switch_version(chat.key, chat.id)
            assert a.flush(15), a.status()
            monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
            ctx = make_ctx(b, b_dir)
            view = views.initial_view(ctx, {"session": same.id})
            assert view.state["session"] == chat.id and not b.exists(same.key), view.notice
            assert any("the one question" in str(r.get("content")) for r in view.rows)
        finally:
            a.close()
            b.close()

    def test_a_chat_deleted_here_is_not_offered_back_while_the_mirror_catches_up(self, tmp_path, monkeypatch):
        """B deletes a chat while its mirror is slow to take the delete: the chat was listed
        "from another machine" (the mirror still had it) and a click brought it back."""
        import threading

        from tests.core.stores.test_mirror import mirror_url, open_mirror

        url = mirror_url("sqlite", tmp_path)
        b_dir = checkout(tmp_path / "b" / "work" / "shop", "https://example.org/team/shop")
        mirror = open_mirror(url)
        b = mirrored(tmp_path / "b-data", mirror)
        held = threading.Event()
        real_remove = mirror.remove
        monkeypatch.setattr(mirror, "remove", lambda key: (held.wait(30), real_remove(key)))
        try:
            chat = SessionManager(b).create(b_dir, title="Deleted on B")
            SessionManager(b).add_messages(chat.key, [{"role": "user", "content": "soon gone"}])
            assert b.flush(15), b.status()
            monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
            ctx = make_ctx(b, b_dir)
            b.remove(chat.key)  # Delete on B; the mirror's copy goes later
            assert mirror.exists(chat.key)
            handlers.session_list_html(ctx, ctx.project_key)  # the sidebar asks the mirror (in the background)
            _wait_for(lambda: remote.listing(ctx).view([ctx.project_key], None).checked_at)
            listed = handlers.session_list_html(ctx, ctx.project_key)
            assert "Deleted on B" not in listed, "not offered back as a chat from another machine"
            assert remote.pull_if_remote(ctx, chat.id, ctx.project_key) is None and not b.exists(chat.key)
            held.set()
            assert b.flush(15), b.status()
            assert not mirror.exists(chat.key)
        finally:
            held.set()
            b.close()

    def test_a_hung_then_down_mirror_neither_holds_the_list_nor_goes_unsaid(self, tmp_path, monkeypatch):
        import threading

        from core.errors import StoreUnavailable
        from core.stores.mirror import MirroredSessionStore

        release = threading.Event()

        def hung_then_down():
            release.wait(30)
            raise StoreUnavailable("The S3 endpoint cannot be reached (connection refused).")

        b_dir = checkout(tmp_path / "b" / "shop", "https://example.org/team/shop")
        b = MirroredSessionStore(LocalSessionStore(tmp_path / "b-data"), hung_then_down,
                                 outbox_path=tmp_path / "b-data" / "outbox.sqlite3", start=False)
        monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
        ctx = make_ctx(b, b_dir)
        mine = SessionManager(b).create(b_dir, title="Local work")
        done = []
        worker = threading.Thread(target=lambda: done.append(handlers.session_list_html(ctx, ctx.project_key)))
        worker.start()
        worker.join(5)
        assert done, "the list is drawn while the mirror hangs"
        assert "Local work" in done[0] and "cannot be reached" not in done[0]
        release.set()
        noted = _wait_for(lambda: (lambda h: h if "cannot be reached" in h else "")(
            handlers.session_list_html(ctx, ctx.project_key)))
        assert "The mirror cannot be reached, so chats from other machines are not listed" in noted
        assert "Local work" in noted and mine.id in noted
        b.close()


class TestContinueConsidersTheMirror:
    """Guards against ``anycode --continue`` on machine B reopening B's older chat when the newest
    one of the project was written on machine A (only in the mirror), and against it opening A's
    folder (absent on B) instead of B's checkout."""

    def test_the_newest_across_local_and_mirror_is_continued(self, tmp_path, monkeypatch):
        import time

        from tests.core.stores.test_mirror import mirror_url, open_mirror
        from webui.cli import launcher

        url = mirror_url("sqlite", tmp_path)
        a_dir, b_dir = shop_checkouts(tmp_path)
        monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
        a, b = mirrored(tmp_path / "a-data", open_mirror(url)), mirrored(tmp_path / "b-data", open_mirror(url))
        try:
            mb = SessionManager(b)
            older = mb.create(b_dir, title="B's older chat")
            mb.add_messages(older.key, [{"role": "user", "content": "old"}])
            time.sleep(0.01)
            newer = SessionManager(a).create(a_dir, title="A's newer chat")
            SessionManager(a).add_messages(newer.key, [{"role": "user", "content": "new on A"}])
            assert a.flush(15)

            args = launcher.parse_args(["--continue"])
            found = launcher.find_initial(storage_of(b), mb, str(b_dir), args)
            assert found == newer.key, "the newest chat of the project, A's, is continued"
            assert b.exists(newer.key), "pulled first"
            assert launcher._same_project(storage_of(b), str(b_dir), newer.key.project_key), "B's folder stays the project"

            time.sleep(0.01)
            mb.add_messages(older.key, [{"role": "user", "content": "B again"}])
            assert launcher.find_initial(storage_of(b), mb, str(b_dir), args) == older.key, "now B's own chat is the newest"
        finally:
            a.close()
            b.close()

    def test_a_mirror_that_does_not_answer_is_said_and_the_local_chat_opens(self, tmp_path, monkeypatch, capsys):
        import threading

        from core.stores.mirror import MirroredSessionStore
        from webui.chat import remote
        from webui.cli import launcher

        monkeypatch.setattr(remote, "CONTINUE_WAIT", 0.5)
        hang = threading.Event()
        b_dir = checkout(tmp_path / "b" / "shop", "https://example.org/team/shop")
        monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
        b = MirroredSessionStore(LocalSessionStore(tmp_path / "b-data"), lambda: hang.wait(30) and None,
                                 outbox_path=tmp_path / "b-data" / "outbox.sqlite3", start=False)
        mb = SessionManager(b)
        mine = mb.create(b_dir, title="local")
        mb.add_messages(mine.key, [{"role": "user", "content": "x"}])
        found = launcher.find_initial(storage_of(b), mb, str(b_dir), launcher.parse_args(["--continue"]))
        hang.set()
        assert found == mine.key
        assert "the mirror did not answer" in capsys.readouterr().err


class TestAPageOpenedAsksTheMirrorAgain:
    """Guards against the fresh-user trial's D4 (real Redis): a page opened within 30 s of the last
    listing showed that listing — without the chat the other machine made since — until the next
    scheduled refresh (~46 s on the trial), and a listing that came back before the page's first
    live check was never drawn."""

    def test_the_page_load_token_and_the_first_checks_show_the_new_chat(self, tmp_path, monkeypatch):
        import time

        from tests.core.stores.test_mirror import open_mirror
        from tests.support.redis_server import fresh_redis_url
        from webui.chat import live

        url = fresh_redis_url()
        a_dir, b_dir = shop_checkouts(tmp_path)
        a = mirrored(tmp_path / "a-data", open_mirror(url))
        b = mirrored(tmp_path / "b-data", open_mirror(url))
        try:
            monkeypatch.setenv("ANYCODE_HOME", str(tmp_path / "b-data"))
            ctx = make_ctx(b, b_dir)
            first = remote.listing(ctx).refresh(*remote._ask(ctx, ctx.project_key))  # an earlier page's
            assert first.state == "ok" and first.rows == []
            chat = SessionManager(a).create(a_dir, title="Made on machine A")
            SessionManager(a).add_messages(chat.key, [{"role": "user", "content": "hello from A"}])
            assert a.flush(15), a.status()
            time.sleep(remote.OPEN_MAX_AGE)  # the earlier listing is a moment old, well within its 30 s

            # A page opens: its start token, then its list; then its live checks, once a second.
            known = live.start_token(ctx, ctx.project_key)
            shown = handlers.session_list_html(ctx, ctx.project_key)
            state = handlers.new_chat(ctx).state
            for _ in range(3):
                if "Made on machine A" in shown:
                    break
                time.sleep(live.CHECK_SECONDS)
                found = live.check(ctx, state, "tab", known)
                if found.list_changed:
                    shown = handlers.session_list_html(ctx, ctx.project_key)
                known = found.token or known
            assert "Made on machine A" in shown and "from another machine" in shown
        finally:
            a.close()
            b.close()

