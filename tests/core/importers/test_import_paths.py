"""Every path an import builds from what a file says stays inside the folder it was given.

Guards against an import reading files from elsewhere on the disk: a Claude Code transcript whose
``sessionId`` was an absolute path made the importer read "sub-agent" files from that path and store
their text in the imported chat (a secret planted elsewhere became part of a conversation). Each
importer gets ids that are absolute paths, hold ``..``, a NUL or a separator, and files that are
links out of the folder; the record is refused with a sentence naming it, the rest is imported, and
no text from outside reaches the store.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager
from core.importers import chatgpt, claude_code, codex
from core.importers.base import import_session_id, import_sessions
from core.session.keys import SessionKey, project_key
from core.stores.backup import backup_store, restore_backup

from tests.core.importers.test_import import _cc, _cx, chatgpt_conversation

PLANTED = "PLANTED-SECRET-7f3a"  # text that lives outside the import folder
SID = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A folder outside every import folder, holding what a hostile id points at: a Claude Code
    sub-agent file, and files at paths the ids name."""
    out = tmp_path / "elsewhere"
    (out / "subagents").mkdir(parents=True)
    _lines(out / "subagents" / "agent-evil.jsonl", [
        _cc("user", "e1", None, f"the key is {PLANTED}", 1, isSidechain=True, agentId="evil"),
        _cc("assistant", "e2", "e1", [{"type": "text", "text": PLANTED}], 2, isSidechain=True, agentId="evil",
            message_extra={"id": "m_e"})])
    return out


def _lines(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _claude_session(folder: Path, cwd: Path, sid: str, name: str = SID) -> Path:
    c = str(cwd)
    return _lines(folder / f"{name}.jsonl", [
        _cc("user", "u1", None, "What does main.py do?", 1, sid=sid, cwd=c),
        _cc("assistant", "a1", "u1", [{"type": "text", "text": "It starts the server."}], 2, sid=sid, cwd=c,
            message_extra={"id": "m1"})])


def _stored_text(home: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in home.rglob("*.jsonl"))


class TestClaudeCodeIds:
    def _hostile(self, elsewhere: Path, kind: str) -> str:
        return {"absolute": str(elsewhere),
                "dotdot": f"../../{elsewhere.name}",
                "nul": f"{SID}\x00x",
                "separator": f"x/{SID}"}[kind]

    @pytest.mark.parametrize("kind", ["absolute", "dotdot", "nul", "separator"])
    def test_a_session_id_that_is_a_path_is_refused_by_name(self, tmp_path, project, elsewhere, kind):
        root = tmp_path / "claude"
        hostile = self._hostile(elsewhere, kind)
        bad = _claude_session(root / "-proj-a", project, hostile)
        _claude_session(root / "-proj-b", project, "22222222-2222-3333-4444-555555555555",
                        "22222222-2222-3333-4444-555555555555")
        home = tmp_path / "home"
        report = import_sessions(LocalSessionStore(home), claude_code.read_sessions(root), default_cwd=tmp_path)
        assert len(report.imported) == 1, report.to_dict()  # the good one
        [problem] = report.problems
        assert problem.file == str(bad) and problem.line == 1
        assert "session id" in problem.reason and "not imported" in problem.reason
        assert PLANTED not in _stored_text(home)

    def test_the_reported_repro_reads_nothing_outside(self, tmp_path, project, elsewhere):
        """The sessionId is the absolute path of a folder holding ``subagents/agent-*.jsonl``."""
        root = tmp_path / "claude"
        _claude_session(root / "-proj", project, str(elsewhere))
        home = tmp_path / "home"
        report = import_sessions(LocalSessionStore(home), claude_code.read_sessions(root), default_cwd=tmp_path)
        assert not report.imported and report.problems
        assert PLANTED not in _stored_text(home)

    def test_an_uploaded_file_alone_is_held_to_its_own_folder(self, tmp_path, project, elsewhere):
        """The page's upload reads one file (``read_session``), in a temporary folder."""
        upload = _claude_session(tmp_path / "upload", project, str(elsewhere))
        home = tmp_path / "home"
        report = import_sessions(LocalSessionStore(home), claude_code.read_session(upload), default_cwd=tmp_path)
        assert not report.imported and "session id" in report.problems[0].reason
        assert PLANTED not in _stored_text(home)

    def test_a_sidechain_agent_id_that_is_a_path_is_refused(self, tmp_path, project):
        root = tmp_path / "claude"
        path = _claude_session(root / "-proj", project, SID)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(_cc("user", "s1", None, "side question", 1.5, cwd=str(project), isSidechain=True,
                                    agentId="../../etc")) + "\n")
        report = import_sessions(LocalSessionStore(tmp_path / "home"), claude_code.read_sessions(root),
                                 default_cwd=tmp_path)
        assert len(report.imported) == 1 and report.subagent_records == 0
        assert [("sub-agent id" in p.reason) for p in report.problems] == [True]

    def test_links_out_of_the_folder_are_not_followed(self, tmp_path, project, elsewhere):
        root = tmp_path / "claude"
        _claude_session(root / "-proj", project, SID)
        subs = root / "-proj" / SID / "subagents"
        subs.mkdir(parents=True)
        (subs / "agent-link.jsonl").symlink_to(elsewhere / "subagents" / "agent-evil.jsonl")
        (root / "-proj" / "agent-old.jsonl").symlink_to(elsewhere / "subagents" / "agent-evil.jsonl")
        outside_session = _claude_session(elsewhere, project, "33333333-2222-3333-4444-555555555555",
                                          "33333333-2222-3333-4444-555555555555")
        (root / "-proj" / outside_session.name).symlink_to(outside_session)
        home = tmp_path / "home"
        report = import_sessions(LocalSessionStore(home), claude_code.read_sessions(root), default_cwd=tmp_path)
        assert len(report.imported) == 1 and report.subagent_records == 0, report.to_dict()
        assert sorted(Path(p.file).name for p in report.problems) == ["33333333-2222-3333-4444-555555555555.jsonl",
                                                                       "agent-link.jsonl"]
        assert all("outside the import folder" in p.reason for p in report.problems)
        assert PLANTED not in _stored_text(home)


class TestCodexIds:
    @pytest.mark.parametrize("hostile", ["/etc/passwd", "../../rollout", "a\x00b", "2025/12/rollout"])
    def test_a_session_id_that_is_a_path_is_refused(self, tmp_path, project, hostile):
        root = tmp_path / "codex"
        for name, sid in (("rollout-bad.jsonl", hostile), ("rollout-good.jsonl", "0199-good")):
            _lines(root / name, [
                _cx("session_meta", {"id": sid, "timestamp": "2023-11-14T22:13:20.000Z", "cwd": str(project)}, 0),
                _cx("response_item", {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": "hello"}]}, 1)])
        report = import_sessions(LocalSessionStore(tmp_path / "home"), codex.read_sessions(root))
        assert report.imported == [import_session_id("codex", "0199-good")], report.to_dict()
        [problem] = report.problems
        assert problem.file.endswith("rollout-bad.jsonl") and problem.line == 1 and "session id" in problem.reason

    def test_a_rollout_linked_from_outside_is_not_read(self, tmp_path, project, elsewhere):
        root = tmp_path / "codex"
        root.mkdir()
        outside = _lines(elsewhere / "rollout-x.jsonl", [
            _cx("session_meta", {"id": "0199-x", "timestamp": "2023-11-14T22:13:20.000Z", "cwd": str(project)}, 0),
            _cx("response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": PLANTED}]}, 1)])
        (root / "rollout-x.jsonl").symlink_to(outside)
        home = tmp_path / "home"
        report = import_sessions(LocalSessionStore(home), codex.read_sessions(root))
        assert not report.imported and "outside the import folder" in report.problems[0].reason
        assert PLANTED not in _stored_text(home)


class TestChatGPTIds:
    @pytest.mark.parametrize("hostile", ["/home/user/.ssh/id_rsa", "../..", "c\x00d", "a\\b"])
    def test_a_conversation_id_that_is_a_path_is_refused(self, tmp_path, hostile):
        export = tmp_path / "conversations.json"
        export.write_text(json.dumps([chatgpt_conversation(hostile, "Bad"), chatgpt_conversation("c-ok", "Good")]))
        report = import_sessions(LocalSessionStore(tmp_path / "home"), chatgpt.read_export(export),
                                 default_cwd=tmp_path)
        assert import_session_id("chatgpt", "c-ok") in report.imported
        assert not any(i == import_session_id("chatgpt", hostile) for i in report.imported)
        [problem] = report.problems
        assert problem.line == 1 and "conversation id" in problem.reason

    def test_a_branch_id_that_is_a_path_is_refused_and_the_rest_kept(self, tmp_path):
        conv = chatgpt_conversation("c-branchy", "Branchy")
        mapping = conv["mapping"]
        node = mapping.pop("a2x")
        node["id"] = "../../a2x"
        mapping["../../a2x"] = node
        mapping["u2"]["children"] = ["../../a2x", "a2"]
        export = tmp_path / "conversations.json"
        export.write_text(json.dumps([conv]))
        report = import_sessions(LocalSessionStore(tmp_path / "home"), chatgpt.read_export(export),
                                 default_cwd=tmp_path)
        assert len(report.imported) == 2, report.to_dict()  # the current branch and the other, good one
        [problem] = report.problems
        assert "branch id" in problem.reason and "../../a2x" in problem.reason


class TestBackupNames:
    def _backup(self, tmp_path: Path, project: Path) -> Path:
        src = LocalSessionStore(tmp_path / "src")
        mgr = SessionManager(src)
        for text in ("first chat", "second chat"):
            s = mgr.create(str(project))
            mgr.add_messages(s.key, [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
        zpath = tmp_path / "b.zip"
        backup_store(src, zpath)
        return zpath

    def _rewrite(self, zpath: Path, change) -> None:
        with zipfile.ZipFile(zpath) as zf:
            members = {n: zf.read(n) for n in zf.namelist()}
        manifest = json.loads(members["manifest.json"])
        change(manifest, members)
        members["manifest.json"] = json.dumps(manifest).encode()
        zpath.unlink()
        with zipfile.ZipFile(zpath, "w") as zf:
            for n, body in members.items():
                zf.writestr(n, body)

    @pytest.mark.parametrize("field, value", [("session_id", "../../../escaped"), ("session_id", "/tmp/abs"),
                                              ("project_key", "../.."), ("subpath", "subagents/../../x"),
                                              ("session_id", "a\x00b")])
    def test_a_record_named_by_a_path_is_refused_and_the_rest_restored(self, tmp_path, project, field, value):
        zpath = self._backup(tmp_path, project)

        def change(manifest, _members):
            manifest["records"][0][field] = value

        self._rewrite(zpath, change)
        dst = tmp_path / "dst"
        report = restore_backup(zpath, LocalSessionStore(dst))
        assert any(k.startswith("manifest:") and "unsafely" in why for k, why in report.errors), report.errors
        assert len(LocalSessionStore(dst).list(project_key(project))) == 1
        assert not (tmp_path / "escaped.jsonl").exists() and not list(tmp_path.glob("**/escaped*"))

    def test_a_memory_scope_named_by_a_path_is_refused(self, tmp_path, project):
        zpath = self._backup(tmp_path, project)
        body = json.dumps({"op": "add", "eid": "e1", "id": "m1", "ts": 1.0, "text": "x", "source": "user"}).encode() + b"\n"

        def change(manifest, members):
            members["memory/evil.jsonl"] = body
            manifest["memory"] = [{"scope": "project:../../evil", "path": "memory/evil.jsonl", "entries": 1,
                                   "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}]

        self._rewrite(zpath, change)
        report = restore_backup(zpath, LocalSessionStore(tmp_path / "dst"))
        assert any(k == "manifest:memory/evil.jsonl" for k, _ in report.errors), report.errors
        assert not list(tmp_path.glob("evil*")) and not list((tmp_path / "dst").rglob("evil*"))
        assert len(LocalSessionStore(tmp_path / "dst").list(project_key(project))) == 2

    def test_a_member_path_outside_the_backup_is_refused(self, tmp_path, project):
        zpath = self._backup(tmp_path, project)

        def change(manifest, _members):
            manifest["records"][0]["path"] = "../" + manifest["records"][0]["path"]

        self._rewrite(zpath, change)
        report = restore_backup(zpath, LocalSessionStore(tmp_path / "dst"))
        assert any("not a plain path inside the backup" in why for _, why in report.errors), report.errors
        assert os.path.exists(zpath)
