"""Resume on another machine (issue 26, item 4): two data dirs ("machines") sharing one mirror.

Guards against a machine seeing only its own history: B must get A's chats (forks, titles,
sub-agent records, memories) from the mirror, A must get B's turns back, and when both wrote in
the same chat neither history may be overwritten.
"""
from __future__ import annotations

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, message_entry
from core.stores.mirror import MirroredSessionStore
from tests.core.stores.test_mirror import mirror_url, open_mirror
from tests.support.storage import pull_into, storage_of


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


@pytest.fixture(params=["sqlite", "postgresql", "s3", "redis"])
def shared(request, tmp_path):
    """(machine A's store, machine B's store, the mirror) — A and B each a JSONL data dir mirrored
    to the same backend, B's project at another path."""
    if request.param == "postgresql":
        from tests.support.pg_server import fresh_database_url

        url = fresh_database_url()
    else:
        url = mirror_url(request.param, tmp_path)
    made = []

    def machine(name):
        store = MirroredSessionStore(LocalSessionStore(tmp_path / name, fsync=False), open_mirror(url),
                                     outbox_path=tmp_path / name / "outbox.sqlite3", retry_initial=0.02,
                                     retry_max=0.1, poll_interval=0.05)
        made.append(store)
        return store

    a, b = machine("a"), machine("b")
    yield a, b, open_mirror(url)
    for store in made:
        store.close()


def test_b_gets_everything_a_did_and_a_gets_b_back(shared, tmp_path):
    a, b, mirror = shared
    ma = SessionManager(a)
    chat = ma.create(tmp_path / "proj-on-a")
    ma.add_messages(chat.key, [user("plan the migration"), assistant("step one: back up")])
    ma.rename(chat.key, "Database migration")
    fork = ma.fork(chat.key, 0)
    a.append(SessionKey(chat.key.project_key, chat.key.session_id, "subagents/call_1"),
             [message_entry(user("look at the schema"))])
    memories_a = storage_of(a).memories
    memories_a.add("Migrations run with alembic", project_key=chat.key.project_key)
    assert a.flush(15), a.status()
    assert memories_a.log.flush(15)  # the mirrored memory log's own outbox

    report = pull_into(mirror, b)
    assert report.ok, report.to_dict()
    mb = SessionManager(b)
    got = mb.get(chat.key)
    assert got.title == "Database migration" and [m["content"] for m in got.messages] == ["plan the migration", "step one: back up"]
    assert b.exists(fork.key)
    assert b.load(SessionKey(chat.key.project_key, chat.key.session_id, "subagents/call_1"))
    assert [m.text for m in storage_of(b).memories.list(chat.key.project_key)] == ["Migrations run with alembic"]
    assert pull_into(mirror, b).copied == []  # a second pull copies nothing

    # B carries on; A pulls B's turn.
    mb.add_messages(chat.key, [user("now step two"), assistant("step two: migrate")])
    assert b.flush(15), b.status()
    back = pull_into(mirror, a)
    assert str(chat.key) in back.extended, back.to_dict()
    assert [m["content"] for m in ma.get(chat.key).messages][-1] == "step two: migrate"


def test_a_pulled_chats_tags_are_searched(shared, tmp_path):
    """Issue 31, item 14: a chat pulled from the mirror must be found by a word of its tags on
    the machine that pulled it, and no longer once the other machine removed the tag."""
    a, b, mirror = shared
    ma = SessionManager(a)
    chat = ma.create(tmp_path / "proj")
    ma.add_messages(chat.key, [user("q1"), assistant("a1")])
    ma.tag(chat.key, add=["gazebo-build"])
    assert a.flush(15), a.status()
    assert pull_into(mirror, b).ok
    hits = storage_of(b).search.search("gazebo", project_keys=[chat.key.project_key])
    assert [(h.session_id, h.role) for h in hits] == [(chat.key.session_id, "tag")]
    ma.tag(chat.key, remove=["gazebo-build"])
    assert a.flush(15), a.status()
    assert str(chat.key) in pull_into(mirror, b).extended
    assert storage_of(b).search.search("gazebo", project_keys=[chat.key.project_key]) == []


def test_both_machines_wrote_the_mirror_history_becomes_a_version(shared, tmp_path):
    a, b, mirror = shared
    ma, mb = SessionManager(a), SessionManager(b)
    chat = ma.create(tmp_path / "proj")
    ma.add_messages(chat.key, [user("q1"), assistant("a1")])
    assert a.flush(15)
    pull_into(mirror, b)
    mb.add_messages(chat.key, [user("from B"), assistant("B's answer")])
    assert b.flush(15)
    ma.add_messages(chat.key, [user("from A"), assistant("A's answer")])  # A wrote too, offline from B
    report = pull_into(mirror, a)
    assert len(report.versions) == 1, report.to_dict()
    mine = [m["content"] for m in ma.get(chat.key).messages]
    assert mine == ["q1", "a1", "from A", "A's answer"]  # never overwritten
    version = ma.get(SessionKey(chat.key.project_key, report.versions[0][1]))
    assert [m["content"] for m in version.messages] == ["q1", "a1", "from B", "B's answer"]
    assert version.version_of["session_id"] == chat.key.session_id


class TestCheckpointBlobsTravel:
    """Guards against a rewind on machine B that cannot restore A's files: the checkpoint entries
    arrive with the history but the bytes they name must come too — through every mirror kind
    and ``sessions pull`` — or B's rewind says "missing" instead of putting the files back."""

    def test_b_rewinds_a_chat_pulled_from_the_mirror_byte_for_byte(self, shared, tmp_path, fake_openai, monkeypatch):
        import shutil

        from core.agent import checkpoints
        from core.agent.runner import run_session
        from core.agent.tools import Workspace
        from core.stores.blobs import BlobCarrier, sha256_hex

        monkeypatch.setenv("ANYCODE_APPROVAL", "auto")
        monkeypatch.setenv("ANYCODE_MEMORY", "off")
        a, b, mirror = shared
        old = b"print('app')\n# \xe2\x9c\x93 byte for byte\r\n"
        on_a = tmp_path / "on-a" / "shop"
        on_a.mkdir(parents=True)
        (on_a / "app.py").write_bytes(old)
        chat = SessionManager(a).create(on_a)
        fake_openai.push({"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# n\n"}}]},
                         {"tool_calls": [{"name": "write_file", "arguments": {"path": "app.py", "content": "new\n"}}]},
                         {"text": "Done."})
        run_session(chat.key, a, "change the files", client=fake_openai.client(), model="gpt-4o-mini",
                    wait_for_title=10, storage=storage_of(a))
        assert a.flush(15), a.status()
        assert BlobCarrier.of(mirror).has(sha256_hex(old)), "the mirror holds the old bytes A's checkpoint names"

        on_b = tmp_path / "on-b" / "shop"  # B's copy of the folder, as A left it
        shutil.copytree(on_a, on_b)
        report = pull_into(mirror, b)
        assert report.ok and report.blobs >= 1, report.to_dict()
        assert storage_of(b).blobs.get(sha256_hex(old)) == old
        result = checkpoints.rewind(SessionManager(b), chat.key, 0, Workspace(on_b), mode="files",
                                    blobs=storage_of(b).blobs)
        assert not result.left, result
        assert (on_b / "app.py").read_bytes() == old and not (on_b / "notes.md").exists()
        assert pull_into(mirror, b).blobs == 0  # nothing twice


def histories(manager, key):
    """``{session id: [message contents]}`` of every member of ``key``'s conversation."""
    return {m.id: [msg["content"] for msg in manager.get(m.key).messages] for m in manager.family(key)}


class TestBothMachinesWroteInOneChat:
    """Guards against the fresh-user trial of issue 26: A and B both wrote in one chat, so the
    mirror kept A's history as a version of B's. A pull on A then brought A's own history back a
    second time (copied from that version record), kept B's history as a version *and made it the
    one in use* on A, and every repeat pull (and B's) added another copy."""

    A_SIDE = ["q1", "a1", "from A", "A's answer"]
    B_SIDE = ["q1", "a1", "from B", "B's answer"]

    def diverge(self, shared, tmp_path):
        """A chats, B pulls; B writes and is mirrored first, then A writes: A's history goes to the
        mirror as a version (issue 25). Returns (A's manager, B's manager, the chat's key)."""
        a, b, mirror = shared
        ma, mb = SessionManager(a), SessionManager(b)
        chat = ma.create(tmp_path / "proj")
        ma.add_messages(chat.key, [user("q1"), assistant("a1")])
        assert a.flush(15), a.status()
        assert pull_into(mirror, b).ok
        mb.add_messages(chat.key, [user("from B"), assistant("B's answer")])
        assert b.flush(15), b.status()
        ma.add_messages(chat.key, [user("from A"), assistant("A's answer")])
        assert a.flush(15), a.status()
        assert [c.key for c in a.outbox.diverged()] == [chat.key]  # the trial's set-up: A's history is a version there
        return ma, mb, chat.key

    def test_pull_on_a_gives_two_histories_and_keeps_a_on_its_own(self, shared, tmp_path):
        a, b, mirror = shared
        ma, mb, key = self.diverge(shared, tmp_path)

        report = pull_into(mirror, a)
        assert report.ok, report.to_dict()
        got = histories(ma, key)
        assert sorted(got.values()) == sorted([self.A_SIDE, self.B_SIDE]), got  # no third copy of A's
        assert got[key.session_id] == self.A_SIDE and ma.current_version(key) == key  # still A's own in use
        assert [k for k, _ in report.versions] == [str(key)]
        kept = ma.get(SessionKey(key.project_key, report.versions[0][1]))
        assert [m["content"] for m in kept.messages] == self.B_SIDE and kept.version_of["session_id"] == key.session_id
        assert report.already_here, report.to_dict()  # the mirror's copy of A's own history

        assert a.flush(15), a.status()  # the kept version reaches the mirror too
        again = pull_into(mirror, a)
        assert again.ok and not (again.copied or again.extended or again.versions), again.to_dict()
        assert again.summary().startswith("Nothing new to pull;") and "of 0" not in again.summary(), again.summary()
        assert histories(ma, key) == got and ma.current_version(key) == key

        # B sees both too: its own and A's, once each — not A's copy of B's history.
        on_b = pull_into(mirror, b)
        assert on_b.ok, on_b.to_dict()
        seen = histories(mb, key)
        assert sorted(seen.values()) == sorted([self.A_SIDE, self.B_SIDE]), seen
        assert seen[key.session_id] == self.B_SIDE and mb.current_version(key) == key
        assert b.flush(15), b.status()
        assert not pull_into(mirror, b).copied and histories(mb, key) == seen
        assert not pull_into(mirror, a).copied and histories(ma, key) == got

    def test_b_carries_on_and_a_pull_extends_the_kept_version(self, shared, tmp_path):
        a, b, mirror = shared
        ma, mb, key = self.diverge(shared, tmp_path)
        kept = pull_into(mirror, a).versions[0][1]
        mb.add_messages(key, [user("B goes on"), assistant("B's second answer")])
        assert b.flush(15), b.status()

        report = pull_into(mirror, a)
        assert report.ok and not report.versions, report.to_dict()
        assert str(SessionKey(key.project_key, kept)) in report.extended
        assert histories(ma, key) == {key.session_id: self.A_SIDE,
                                      kept: self.B_SIDE + ["B goes on", "B's second answer"]}
        assert ma.current_version(key) == key

    def test_a_version_that_is_a_prefix_still_arrives(self, shared, tmp_path):
        # A rewind (or an Edit whose reply never came) leaves a version holding the start of the
        # conversation: a machine without it must still get it — only copies are left out.
        a, b, mirror = shared
        ma = SessionManager(a)
        chat = ma.create(tmp_path / "proj")
        ma.add_messages(chat.key, [user("q1"), assistant("a1"), user("q2"), assistant("a2")])
        rewound = ma.fork(chat.key, 1, version=True)
        assert a.flush(15), a.status()
        report = pull_into(mirror, b)
        assert report.ok and not report.already_here, report.to_dict()
        mb = SessionManager(b)
        assert histories(mb, chat.key) == {chat.id: ["q1", "a1", "q2", "a2"], rewound.id: ["q1", "a1"]}
        assert mb.current_version(chat.key) == rewound.key


def test_the_summary_names_only_what_was_pulled():
    """Guards against trial 11's "Pulled 0 new record(s) and the new part of 0": a pull that
    brought nothing says so, and one that did names only what came."""
    from core.stores.pull import PullReport

    assert PullReport(identical=["p/a", "p/b"]).summary() == "Nothing new to pull; 2 already up to date here."
    assert PullReport().summary() == "Nothing new to pull."
    assert PullReport(copied=["p/a"], identical=["p/b"]).summary() == (
        "Pulled 1 new record(s); 1 already up to date here.")
    assert PullReport(extended=["p/a"]).summary() == "Pulled the new messages of 1 record(s)."
    assert PullReport(copied=["p/a"], extended=["p/b", "p/c"]).summary() == (
        "Pulled 1 new record(s) and the new messages of 2 record(s).")
