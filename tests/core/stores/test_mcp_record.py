"""The record of which MCP server and tool a call went to (the message entry's ``"mcp"`` key,
core.session.mcp_calls) through what moves sessions between stores: a backup and its restore, a
mirror's copy, a migration."""
from __future__ import annotations

from core.session.manager import SessionManager
from core.stores.backup import backup_store, restore_backup
from core.stores.jsonl_store import LocalSessionStore
from core.stores.migrate import migrate_sessions
from core.stores.mirror import MirroredSessionStore
from core.stores.sql_store import SqlSessionStore

RECORD = {"c1": {"server": "tracker", "tool": "create_issue"}}
ROUND = [{"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "mcp__tracker__create_issue", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "issue #7"}]


def _chat(store, tmp_path):
    (tmp_path / "ws").mkdir(exist_ok=True)
    manager = SessionManager(store)
    key = manager.create(tmp_path / "ws").key
    manager.add_messages(key, [{"role": "user", "content": "file it"}])
    manager.add_messages(key, ROUND, mcp=RECORD)
    return key


class TestTheRecordMoves:
    """Guards against a copy of a conversation keeping its MCP calls but not which server served them."""

    def test_backup_restore_mirror_and_migration(self, tmp_path):
        source = LocalSessionStore(tmp_path / "a", fsync=False)
        key = _chat(source, tmp_path)

        backup_store(source, tmp_path / "backup.zip")
        restored = LocalSessionStore(tmp_path / "restored", fsync=False)
        restore_backup(tmp_path / "backup.zip", restored)
        assert SessionManager(restored).get(key).mcp_calls == RECORD

        database = SqlSessionStore(f"sqlite:///{tmp_path / 'sessions.db'}")
        try:
            migrate_sessions(source, database)
            assert SessionManager(database).get(key).mcp_calls == RECORD
        finally:
            database.close()

        mirror = LocalSessionStore(tmp_path / "mirror", fsync=False)
        mirrored = MirroredSessionStore(LocalSessionStore(tmp_path / "primary", fsync=False), mirror,
                                        outbox_path=tmp_path / "outbox.sqlite3")
        try:
            copied = _chat(mirrored, tmp_path)
            assert mirrored.flush(10)
        finally:
            mirrored.close()
        assert SessionManager(mirror).get(copied).mcp_calls == RECORD
