"""``anycode sessions move`` (issue 18, item 6): sessions of a renamed or moved project folder
re-filed under the folder's new place, through ``main(argv)``."""
from __future__ import annotations

from core import SessionKey, project_key
from tests.cli.test_sessions_cli import run
from tests.support.storage import storage_of


def _chats(mgr, folder, n):
    keys = []
    for i in range(n):
        s = mgr.create(folder, title=f"Chat {i}")
        mgr.add_messages(s.key, [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}])
        keys.append(s.key)
    return keys


class TestSessionsMove:
    """Guards against sessions of a renamed folder staying stuck under a project whose folder is
    gone, against a move losing a session's id, messages or archived state, and against one bad
    id stopping the others silently."""

    def test_move_ids_to_project(self, capsys, mgr, tmp_path):
        old, new = tmp_path / "api", tmp_path / "api-v2"
        new.mkdir()
        a, b, c = _chats(mgr, old, 3)
        mgr.archive(b)
        code, out, err = run(capsys, "move", a.session_id[:8], b.session_id, "--project", str(new))
        assert code == 0, err
        assert "moved" in out and "Moved 2 conversations to" in out and str(new) in out
        pk = project_key(str(new))
        assert [m.id for m in mgr.list(pk)] == [a.session_id]
        assert [m.id for m in mgr.list(pk, archived=True)] == [b.session_id]
        assert mgr.get(SessionKey(pk, a.session_id)).messages[0]["content"] == "q0"
        assert [m.id for m in mgr.list(a.project_key)] == [c.session_id]  # not named: stays

    def test_all_from_old_path_default_target_is_here(self, capsys, mgr, tmp_path, monkeypatch):
        old, new = tmp_path / "api", tmp_path / "api-v2"
        new.mkdir()
        keys = _chats(mgr, old, 3)
        mgr.archive(keys[0])
        monkeypatch.chdir(new)
        code, out, _ = run(capsys, "move", "--all-from", str(old))
        assert code == 0 and "Moved 3 conversations to" in out
        pk = project_key(str(new))
        assert {m.id for m in mgr.list(pk) + mgr.list(pk, archived=True)} == {k.session_id for k in keys}
        assert mgr.list(keys[0].project_key) == [] and mgr.list(keys[0].project_key, archived=True) == []
        code, out, _ = run(capsys, "move", "--all-from", str(old))  # nothing left: a no-op
        assert code == 0 and "Moved 0 conversations" in out

    def test_one_conversation_is_singular_and_versions_move_along(self, capsys, mgr, tmp_path):
        old, new = tmp_path / "api", tmp_path / "api-v2"
        new.mkdir()
        [a] = _chats(mgr, old, 1)
        mgr.fork(a, 0, version=True)
        code, out, _ = run(capsys, "move", a.session_id, "--project", str(new))
        assert code == 0 and "(with 1 version)" in out and "Moved 1 conversation to" in out
        assert len(mgr.list(project_key(str(new)))) == 2

    def test_bad_target_unknown_id_and_usage(self, capsys, mgr, tmp_path):
        old = tmp_path / "api"
        [a] = _chats(mgr, old, 1)
        code, _, err = run(capsys, "move", a.session_id, "--project", str(tmp_path / "nowhere"))
        assert code == 1 and "does not exist; nothing was moved" in err
        new = tmp_path / "api-v2"
        new.mkdir()
        code, _, err = run(capsys, "move", "ffffffff", "--project", str(new))
        assert code == 1 and "ffffffff" in err
        code, _, err = run(capsys, "move", "--project", str(new))
        assert code == 2 and "--all-from" in err
        assert mgr.get(a).messages[0]["content"] == "q0"


class TestExpertSessionsMove:
    """Guards against an expert agent's session (issue 30) left behind when a project's sessions
    are re-filed under its new folder."""

    def test_all_from_takes_the_experts_session(self, capsys, mgr, tmp_path):
        from core.agent.definitions import AgentDefinition
        from core.agent.experts import Consultation
        from core.session.experts import expert_key

        old, new = tmp_path / "api", tmp_path / "api-v2"
        new.mkdir()
        [chat] = _chats(mgr, old, 1)
        arch = AgentDefinition("architect", "d", "You are the architect.", mode="expert")
        with Consultation.open(storage_of(mgr.store), chat.project_key, arch, str(old), "sys") as c:
            c.ask("where?")
        code, out, err = run(capsys, "move", "--all-from", str(old), "--project", str(new))
        assert code == 0, err
        pk = project_key(str(new))
        assert [m.id for m in mgr.experts(pk)] == ["expert-architect"]
        assert mgr.get(expert_key(pk, "architect")).messages[-1]["content"] == "where?"
        assert mgr.experts(chat.project_key) == [] and [m.id for m in mgr.list(pk)] == [chat.session_id]
