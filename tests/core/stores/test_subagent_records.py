"""Sub-agent records in every store (JSONL, SQLite, PostgreSQL): found, forked, deleted, archived,
migrated and exported with their parent session (the contract suite's part for sub-agents)."""
from __future__ import annotations

import json


from core import SessionManager
from core.session.entries import header_entry, message_entry
from core.session.export import session_to_jsonl
from core.session.keys import SessionKey, project_key
from core.session.subagents import find_record, record_subpath, subagent_records
from core.stores.jsonl_store import LocalSessionStore
from core.stores.migrate import migrate_sessions

T0 = 1_764_504_000.0
CWD = "/home/user/my-project"


def user(text):
    return {"role": "user", "content": text}


def task_call_message(cid):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "task", "arguments": '{"description":"d","prompt":"p"}'}}]}


def make_parent(store, calls=("call_1", "call_2")):
    """A session with one task call (and its record) per turn; returns (key, messages)."""
    manager = SessionManager(store)
    session = manager.create(CWD)
    key = session.key
    messages = []
    for n, cid in enumerate(calls):
        turn = [user(f"turn {n}"), task_call_message(cid), {"role": "tool", "tool_call_id": cid, "content": f"r{n}"},
                {"role": "assistant", "content": f"answer {n}"}]
        manager.add_messages(key, turn)
        messages += turn
        sub = SessionKey(key.project_key, key.session_id, record_subpath(cid))
        header = header_entry(key.session_id, key.project_key, CWD, created_at=T0)
        header["subagent"] = {"id": cid, "tool_call_id": cid, "description": f"task {n}", "parent": None}
        store.create_whole(sub, [header, message_entry(user(f"sub task {n}"), ts=T0),
                                 message_entry({"role": "assistant", "content": f"sub answer {n}"}, ts=T0 + 1)])
    return key, messages


class TestSubagentRecordsEveryStore:
    """Guards against a store losing, leaking or mis-copying sub-agent records along their parent."""

    def test_listed_and_found_by_call_id(self, store):
        key, _ = make_parent(store)
        assert store.list_subpaths(key) == ["subagents/call_1", "subagents/call_2"]
        rec = find_record(store, key, "call_2")
        assert rec.description == "task 1" and rec.entries[-1]["message"]["content"] == "sub answer 1"
        assert [m.id for m in store.list(key.project_key)] == [key.session_id]

    def test_fork_copies_the_records_of_calls_in_the_prefix(self, store):
        key, messages = make_parent(store)
        manager = SessionManager(store)
        mid = manager.fork(key, messages.index({"role": "assistant", "content": "answer 0"}))
        assert [r.tool_call_id for r in subagent_records(store, mid.key)] == ["call_1"]
        assert find_record(store, mid.key, "call_1").entries == find_record(store, key, "call_1").entries
        before = manager.fork(key, 0)
        assert store.list_subpaths(before.key) == []
        assert store.list_subpaths(key) == ["subagents/call_1", "subagents/call_2"]  # original untouched

    def test_archive_unarchive_delete_carry_them(self, store):
        key, _ = make_parent(store)
        manager = SessionManager(store)
        manager.archive(key)
        assert len(subagent_records(store, key)) == 2
        manager.unarchive(key)
        assert len(subagent_records(store, key)) == 2
        manager.delete(key)
        assert store.list_subpaths(key) == [] and find_record(store, key, "call_1") is None

    def test_cleanup_takes_them(self, store):
        key, _ = make_parent(store)
        removed = SessionManager(store).cleanup(1, now=10 ** 10)
        assert key in removed and store.list_subpaths(key) == []

    def test_migrate_carries_them(self, store, tmp_path):
        key, _ = make_parent(store)
        target = LocalSessionStore(tmp_path / "target")
        report = migrate_sessions(store, target)
        assert report.ok
        assert [(r.tool_call_id, r.entries) for r in subagent_records(target, key)] == \
            [(r.tool_call_id, r.entries) for r in subagent_records(store, key)]


def test_jsonl_export_keeps_records_as_ignored_entries(tmp_path):
    """The JSONL export stays a valid session file: records ride along as entries the fold skips."""
    from core.session.subagents import export_entries

    store = LocalSessionStore(tmp_path / "home")
    key, messages = make_parent(store)
    entries = export_entries(store, key)
    lines = [json.loads(line) for line in session_to_jsonl(entries).decode().splitlines()]
    recs = [e for e in lines if e["type"] == "subagent_record"]
    assert [r["subpath"] for r in recs] == ["subagents/call_1", "subagents/call_2"]
    assert recs[0]["entries"][-1]["message"]["content"] == "sub answer 0"
    copy = SessionKey(project_key("/elsewhere"), key.session_id)
    assert LocalSessionStore(tmp_path / "other").create_whole(copy, lines) == len(messages)


def test_cli_show_subagents_and_exports(tmp_path, anycode_home, monkeypatch, capsys):
    """``sessions show --subagents`` and both export formats carry the sub-agents' runs."""
    from webui.cli.sessions import main

    monkeypatch.delenv("ANYCODE_STORE", raising=False)
    monkeypatch.delenv("ANYCODE_MIRROR", raising=False)
    store = LocalSessionStore(anycode_home)
    key, _ = make_parent(store)
    args = ["--project", CWD]
    assert main(["show", key.session_id, *args]) == 0
    assert "sub answer 0" not in capsys.readouterr().out  # off unless asked for
    assert main(["show", key.session_id, "--subagents", *args]) == 0
    out = capsys.readouterr().out
    assert "## Sub-agent: task 0" in out and "sub answer 1" in out and "`subagents/call_2`" in out
    assert main(["show", key.session_id, "--subagents", "--json", *args]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["tool_call_id"] for s in data["subagents"]] == ["call_1", "call_2"]
    assert data["subagents"][0]["messages"][-1]["content"] == "sub answer 0"
    assert main(["export", key.session_id, *args]) == 0
    assert "sub answer 1" in capsys.readouterr().out
    out_file = tmp_path / "s.jsonl"
    assert main(["export", key.session_id, "--format", "jsonl", "-o", str(out_file), *args]) == 0
    kinds = [json.loads(line)["type"] for line in out_file.read_text().splitlines()]
    assert kinds.count("subagent_record") == 2 and kinds[0] == "header"


def test_mirror_carries_records_and_their_removal(tmp_path):
    """A mirrored store copies sub-agent records, forks of them and their deletion to the mirror."""
    from core.stores.mirror import MirroredSessionStore
    from core.stores.sql_store import SqlSessionStore

    mirror = SqlSessionStore(f"sqlite:///{tmp_path / 'mirror.db'}")
    store = MirroredSessionStore(LocalSessionStore(tmp_path / "home"), mirror, outbox_path=tmp_path / "outbox.sqlite3")
    try:
        key, messages = make_parent(store)
        fork = SessionManager(store).fork(key, messages.index({"role": "assistant", "content": "answer 0"}))
        assert store.flush(20)
        assert mirror.list_subpaths(key) == ["subagents/call_1", "subagents/call_2"]
        assert mirror.list_subpaths(fork.key) == ["subagents/call_1"]
        assert find_record(mirror, key, "call_2").entries == find_record(store, key, "call_2").entries
        SessionManager(store).delete(key)
        assert store.flush(20)
        assert mirror.list_subpaths(key) == [] and mirror.list_subpaths(fork.key) == ["subagents/call_1"]
    finally:
        store.close()
        mirror.close()
