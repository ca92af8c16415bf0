"""A mirror with a second writer (issue 25, item 2): machine A writes JSONL mirrored to a real
PostgreSQL; machine B uses that PostgreSQL as its primary and writes in the same chat. The mirror
never holds an out-of-order copy — every record in it is, entry by entry, one writer's history —
and A's history goes there as a version, named by status(). Also: local cleanup and auto-archive
leave the mirror's copy alone (item 3)."""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionKey, SessionManager
from core.stores.mirror import MirroredSessionStore
from core.stores.sql_store import SqlSessionStore
from tests.core.agent.test_two_writers import strict_problem


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


@pytest.fixture(params=["postgres", "s3", "redis"])
def mirror_url(request):
    """A fresh mirror of each backend, on a real server on 127.0.0.1 (issue 26: one contract)."""
    if request.param == "postgres":
        from tests.support.pg_server import fresh_database_url

        return fresh_database_url()
    if request.param == "s3":
        from tests.support.s3_server import fresh_s3_url

        return fresh_s3_url()
    from tests.support.redis_server import fresh_redis_url

    return fresh_redis_url()


def _open(url):
    from core.stores.factory import store_from_spec

    return SqlSessionStore(url, fsync=False) if url.startswith("postgresql") else store_from_spec(url)


@pytest.fixture
def machines(tmp_path, mirror_url):
    """(A's mirrored store, B's store on the mirror backend, the mirror as A's store sees it)."""
    mirror = _open(mirror_url)
    a = MirroredSessionStore(LocalSessionStore(tmp_path / "a", fsync=False), mirror,
                             outbox_path=tmp_path / "outbox.sqlite3", retry_initial=0.02, retry_max=0.1,
                             poll_interval=0.05)
    b = _open(mirror_url)
    yield a, b, mirror
    a.close()
    close = getattr(b, "close", None)
    if callable(close):
        close()


def messages_of(entries):
    return [e["message"] for e in entries if e.get("type") == "message"]


def test_second_writer_on_the_mirror_gets_a_version_never_out_of_order(machines, tmp_path):
    a, b, mirror = machines
    (tmp_path / "ws").mkdir()
    ma, mb = SessionManager(a), SessionManager(b)
    s = ma.create(tmp_path / "ws", title="Plan")
    ma.add_messages(s.key, [user("a1"), assistant("r1")])
    assert a.flush(10)
    assert mirror.load(s.key) == a.primary.load(s.key)

    # Machine B continues the chat in the mirror database (its primary).
    mb.add_messages(s.key, [user("b1"), assistant("rb1")])
    b_history = b.load(s.key)
    # Machine A, which has not seen B's turn, goes on locally.
    ma.add_messages(s.key, [user("a2"), assistant("r2")])
    assert a.flush(10)

    # B's record is exactly B's history: nothing of A's went in after B's entries.
    assert mirror.load(s.key) == b_history
    diverged = a.status()["diverged"]
    assert [d.key for d in diverged] == [s.key]
    version = SessionKey(s.project_key, diverged[0].target)
    local = a.primary.load(s.key)
    held = mirror.load(version)
    assert held[1:] == local[1:], "A's whole history, entry by entry"
    assert held[0]["version_of"] == {"session_id": s.id, "message_index": 1}
    assert held[0]["id"] == version.session_id
    # The conversation in the mirror: B's root and A's version, with arrows at message 2.
    family = mb.family(s.key)
    assert {m.id for m in family} == {s.id, version.session_id}
    assert mb.version_points(s.key)[0]["index"] == 2

    # A's later messages follow its version; B's record gets none of them, only A's rename
    # (metadata is merged: B shows the conversation under the newer title).
    ma.add_messages(s.key, [user("a3"), assistant("r3")])
    ma.rename(s.key, "Plan, A's way")
    assert a.flush(10)
    renamed = mirror.load(s.key)
    assert renamed[:len(b_history)] == b_history
    assert [(e["type"], e.get("title")) for e in renamed[len(b_history):]] == [("title", "Plan, A's way")]
    assert mb.get(s.key).title == "Plan, A's way"
    b_history = renamed
    assert mirror.load(version)[1:] == a.primary.load(s.key)[1:]
    for key in (s.key, version):
        assert strict_problem(messages_of(mirror.load(key))) is None
    assert any(kind == "diverged" and s.id in text for _, kind, text in a.outbox.events())


def test_a_writer_racing_the_copy_is_caught(machines, tmp_path):
    """B appends between A's check of the mirror's copy and A's write: append_at refuses to skip
    B's entry, A looks again and keeps its history as a version."""
    a, b, mirror = machines
    (tmp_path / "ws").mkdir()
    ma, mb = SessionManager(a), SessionManager(b)
    s = ma.create(tmp_path / "ws")
    ma.add_messages(s.key, [user("a1"), assistant("r1")])
    assert a.flush(10)
    real = mirror.append_at
    raced = []

    def racing_append_at(key, entries, first_seq):
        if not raced:
            raced.append(True)
            mb.add_messages(s.key, [user("b sneaks in")])
        return real(key, entries, first_seq)

    mirror.append_at = racing_append_at
    ma.add_messages(s.key, [user("a2"), assistant("r2")])
    assert a.flush(10)
    assert raced
    root = messages_of(mirror.load(s.key))
    assert root == [user("a1"), assistant("r1"), user("b sneaks in")]
    (copy,) = a.status()["diverged"]
    assert messages_of(mirror.load(SessionKey(s.project_key, copy.target))) == messages_of(a.primary.load(s.key))


def test_mirror_ahead_then_local_append(machines, tmp_path):
    """The mirror holds A's entries and more: nothing to copy (not a divergence yet); A's next
    append is kept as a version."""
    a, b, mirror = machines
    (tmp_path / "ws").mkdir()
    ma, mb = SessionManager(a), SessionManager(b)
    s = ma.create(tmp_path / "ws")
    ma.add_messages(s.key, [user("a1")])
    assert a.flush(10)
    mb.add_messages(s.key, [assistant("answered on B")])
    a.outbox.add("append", s.key, 0, ready=True)  # a redelivery finds the mirror ahead
    assert a.flush(10)
    assert a.status()["diverged"] == [] and len(mirror.load(s.key)) == 3
    ma.add_messages(s.key, [assistant("answered on A")])
    assert a.flush(10)
    assert messages_of(mirror.load(s.key)) == [user("a1"), assistant("answered on B")]
    (copy,) = a.status()["diverged"]
    assert messages_of(mirror.load(SessionKey(s.project_key, copy.target))) == [user("a1"), assistant("answered on A")]


DAY = 86400.0


def test_local_cleanup_and_auto_archive_leave_the_mirror_copy(machines, tmp_path):
    """Item 3: expiring or auto-archiving the local copy leaves the mirror's; the mirror's own
    retention (cleanup --mirror, ANYCODE_MIRROR_RETENTION_DAYS) removes it, archived copies kept."""
    import time

    a, b, mirror = machines
    (tmp_path / "ws").mkdir()
    ma = SessionManager(a)
    old, archived = ma.create(tmp_path / "ws"), ma.create(tmp_path / "ws")
    for s in (old, archived):
        ma.add_messages(s.key, [user("q"), assistant("a")])
    assert a.flush(10)
    later = time.time() + 40 * DAY
    assert ma.auto_archive(20, now=later) and ma.cleanup(30, now=later) == []  # archived: kept by cleanup
    ma.unarchive(old.key)
    assert a.flush(10)
    assert ma.cleanup(30, now=later) == [old.key]
    assert a.flush(10)
    assert not a.primary.exists(old.key)
    assert mirror.load(old.key) is not None, "local cleanup left the mirror's copy"
    assert {m.id for m in mirror.list(old.project_key)} == {old.id, archived.id}, \
        "auto-archive archived the local copy only"
    assert a.expire_mirror(None, now=later) == []  # ANYCODE_MIRROR_RETENTION_DAYS unset: keep
    assert [m.id for m in a.expire_mirror(30, now=later, dry_run=True)] in ([old.id, archived.id],
                                                                           [archived.id, old.id])
    gone = a.expire_mirror(30, now=later)
    assert {m.id for m in gone} == {old.id, archived.id}
    assert mirror.load(old.key) is None and mirror.load(archived.key) is None
    assert a.primary.exists(archived.key), "the mirror's retention never touches the local copy"
    assert any(kind == "expired" for _, kind, _text in a.outbox.events())


@pytest.fixture
def pg_url():
    from tests.support.pg_server import fresh_database_url

    return fresh_database_url()


def test_sessions_mirror_and_the_sidebar_name_the_diverged_conversation(tmp_path, pg_url, monkeypatch, capsys):
    """`anycode sessions mirror` shows status, lag, the diverged conversation and the log; the
    sidebar says it in words; `sessions cleanup --mirror` removes expired mirror copies only."""
    import json as _json

    from core import header_entry, message_entry
    from core.storage import open_store
    from webui.chat.handlers import mirror_status_html
    from webui.cli.sessions import main

    home = tmp_path / "home"
    monkeypatch.setenv("ANYCODE_HOME", str(home))
    monkeypatch.setenv("ANYCODE_MIRROR", pg_url)
    monkeypatch.delenv("ANYCODE_STORE", raising=False)
    storage = open_store()
    a = storage.mirror
    b = SqlSessionStore(pg_url, fsync=False)
    try:
        (tmp_path / "ws").mkdir()
        ma = SessionManager(a)
        s = ma.create(tmp_path / "ws", title="Shared plan")
        ma.add_messages(s.key, [user("a1"), assistant("r1")])
        assert a.flush(10)
        SessionManager(b).add_messages(s.key, [user("b1"), assistant("rb1")])
        ma.add_messages(s.key, [user("a2"), assistant("r2")])
        # An old imported chat: idle for 100 days by its own times.
        old = SessionKey(s.project_key, "old-chat")
        a.create_whole(old, [header_entry("old-chat", s.project_key, str(tmp_path / "ws"), created_at=1_000_000.0),
                             message_entry(user("long ago"), ts=1_000_001.0)])
        assert a.flush(10)
        html = mirror_status_html(a.status())
        assert "Mirror: 1 conversation had changes from elsewhere; yours were kept as a version" in html
    finally:
        a.close()
        b.close()
    assert main(["mirror"]) == 0
    out = capsys.readouterr().out
    assert "up to date" in out and "1 conversation had changes from elsewhere" in out and s.id in out
    assert "diverged:" in out, "the log"
    assert main(["mirror", "--json"]) == 0
    data = _json.loads(capsys.readouterr().out)
    assert data["diverged"][0]["session"] == s.id and data["lag_seconds"] is None
    assert main(["cleanup", "--mirror"]) == 0
    assert "keeps every copy" in capsys.readouterr().out
    assert main(["cleanup", "--mirror", "--days", "30"]) == 0
    out = capsys.readouterr().out
    assert "old-chat" in out and "Deleted 1 mirror copy" in out
    check = SqlSessionStore(pg_url)
    try:
        assert check.load(old) is None and check.load(s.key) is not None
    finally:
        check.close()
    assert LocalSessionStore(home).load(old) is not None, "the local copy stays"
