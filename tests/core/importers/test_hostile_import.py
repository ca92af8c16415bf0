"""Imports and restores against real-world and hostile files (issue 28, items 6–8, 10–11).

Each class names the failure it guards. The files are written here, byte by byte, in the shapes
that real exports and crashes leave: a byte-order mark, NUL padding where a crash left a hole,
100,000 nested brackets, a zip member that inflates a thousandfold, a manifest of the wrong types.
"""
from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager, run_session
from core.errors import BackupError
from core.importers import chatgpt, claude_code, codex
from core.importers.base import ImportProblem, import_session_id, import_sessions
from core.session.keys import SessionKey, project_key
from core.stores.backup import backup_store, restore_backup

from tests.core.importers.test_import import _cc, _cx, chatgpt_conversation


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


def _claude_lines(cwd: Path) -> list[dict]:
    c = str(cwd)
    return [_cc("user", "u1", None, "First question, the one a BOM used to eat", 1, cwd=c),
            _cc("assistant", "a1", "u1", [{"type": "text", "text": "First answer."}], 2, cwd=c,
                message_extra={"id": "m1"}),
            _cc("user", "u2", "a1", "Second question", 3, cwd=c),
            _cc("assistant", "a2", "u2", [{"type": "text", "text": "Second answer."}], 4, cwd=c,
                message_extra={"id": "m2"})]


def _write_lines(path: Path, lines: list, *, prefix: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = b"\n".join(x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines) + b"\n"
    path.write_bytes(prefix + body)
    return path


def _codex_lines(cwd: Path) -> list[dict]:
    return [_cx("session_meta", {"id": "0199-bom", "timestamp": "2023-11-14T22:13:20.000Z", "cwd": str(cwd)}, 0),
            _cx("response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": "Count the files"}]}, 1),
            _cx("response_item", {"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": "Three."}]}, 2)]


class TestByteOrderMarkAndNulPadding:
    """A BOM before the first record, or a crash's NUL hole before a record, silently drops it
    (Claude Code: the first message; Codex: the session_meta, filing the chat under the wrong project)."""

    def test_claude_code_first_message_survives_a_bom(self, tmp_path, project):
        root = tmp_path / "claude"
        _write_lines(root / "-p" / "11111111-2222-3333-4444-555555555555.jsonl", _claude_lines(project),
                     prefix=b"\xef\xbb\xbf")
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, claude_code.read_sessions(root), default_cwd=tmp_path)
        assert report.ok and not report.problems, report.to_dict()
        msgs = SessionManager(store).get(SessionKey(project_key(project), report.imported[0])).messages
        assert msgs[0]["content"] == "First question, the one a BOM used to eat"
        assert len(msgs) == 4

    def test_codex_meta_survives_a_bom_and_files_under_its_project(self, tmp_path, project):
        root = tmp_path / "codex"
        _write_lines(root / "rollout-bom.jsonl", _codex_lines(project), prefix=b"\xef\xbb\xbf")
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, codex.read_sessions(root), default_cwd=tmp_path / "elsewhere")
        assert report.ok and not report.problems, report.to_dict()
        key = SessionKey(project_key(project), import_session_id("codex", "0199-bom"))
        assert store.exists(key), "the session_meta was lost: the chat went to the default folder"

    @pytest.mark.parametrize("hole", [b"\x00" * 7, b"\x00" * 4096], ids=["short-hole", "page-hole"])
    def test_a_record_after_a_nul_hole_is_read(self, tmp_path, project, hole):
        lines = _claude_lines(project)
        raw = [json.dumps(x).encode() for x in lines]
        # The crash left a hole where line 2 was allotted; the next writer's record follows it on
        # the same line. A torn tail (NULs then a half record) is named, the rest imported.
        raw[1] = hole + raw[1]
        raw.append(hole)
        raw.append(hole + b'{"type": "user", "uuid": "torn')
        root = tmp_path / "claude"
        _write_lines(root / "-p" / "11111111-2222-3333-4444-555555555555.jsonl", raw)
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, claude_code.read_sessions(root), default_cwd=tmp_path)
        assert report.ok and [p.line for p in report.problems] == [6], report.to_dict()
        msgs = SessionManager(store).get(SessionKey(project_key(project), report.imported[0])).messages
        assert [m["content"] for m in msgs][:2] == ["First question, the one a BOM used to eat", "First answer."]


class TestCodexOrphansAndNames:
    """A Codex tool output with no matching call imported as an orphan ``tool`` message (the resumed
    chat is refused by strict servers), and the thread name newer rollouts record ignored."""

    def _rollout(self, root: Path, cwd: Path) -> Path:
        return _write_lines(root / "rollout-orphan.jsonl", [
            _cx("session_meta", {"id": "0199-orphan", "timestamp": "2023-11-14T22:13:20.000Z", "cwd": str(cwd)}, 0),
            _cx("response_item", {"type": "function_call_output", "call_id": "call_lost", "output": "before any call"}, 1),
            _cx("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files"}]}, 2),
            _cx("event_msg", {"type": "thread_name_updated", "thread_id": "0199-orphan", "thread_name": "Old name"}, 2),
            _cx("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "call_a"}, 3),
            _cx("response_item", {"type": "function_call_output", "call_id": "call_a", "output": "a.py"}, 4),
            _cx("response_item", {"type": "function_call_output", "call_id": "call_a", "output": "again"}, 4),
            _cx("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One file."}]}, 5),
            _cx("response_item", {"type": "function_call_output", "call_id": "call_b", "output": "after the answer"}, 6),
            _cx("event_msg", {"type": "thread_name_updated", "thread_id": "0199-orphan", "thread_name": "Listing the repo"}, 7),
        ])

    def test_orphans_are_named_and_the_chat_resumes_on_a_strict_server(self, tmp_path, project, fake_openai):
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, codex.read_sessions(self._rollout(tmp_path / "codex", project)))
        assert report.ok and len(report.imported) == 1, report.to_dict()
        assert sorted(p.line for p in report.problems) == [2, 7, 9]
        assert all("answers no earlier call" in p.reason for p in report.problems)
        key = SessionKey(project_key(project), report.imported[0])
        msgs = SessionManager(store).get(key).messages
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
        fake_openai.push({"text": "Carrying on."})
        result = run_session(key, store, "and now?", client=fake_openai.client(), model="gpt-test", wait_for_title=0)
        assert result.messages[-1]["content"] == "Carrying on."
        assert fake_openai.rejected() == []

    def test_the_latest_thread_name_is_the_title(self, tmp_path, project):
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, codex.read_sessions(self._rollout(tmp_path / "codex", project)))
        meta = store.list(project_key(project))[0]
        assert meta.title == "Listing the repo"


class TestDeeplyNestedJson:
    """A line of 100,000 ``[`` (or a ChatGPT file nested as deep) ends the import with a traceback."""

    def test_a_deep_line_is_named_and_the_rest_imported(self, tmp_path, project):
        lines = _claude_lines(project)
        lines.insert(2, b"[" * 100_000)
        root = tmp_path / "claude"
        _write_lines(root / "-p" / "11111111-2222-3333-4444-555555555555.jsonl", lines)
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, claude_code.read_sessions(root), default_cwd=tmp_path)
        assert report.ok and len(report.imported) == 1
        assert [(p.line, "nested too deeply" in p.reason) for p in report.problems] == [(3, True)]

    def test_a_deep_chatgpt_file_is_one_sentence(self, tmp_path):
        path = tmp_path / "conversations.json"
        path.write_text("[" * 100_000 + "]" * 100_000)
        items = list(chatgpt.read_export(path))
        assert len(items) == 1 and isinstance(items[0], ImportProblem)
        assert "nested too deeply" in items[0].reason


def _bomb_zip(path: Path, name: str, size: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open(name, "w", force_zip64=True) as fh:
            chunk = b"[" + b" " * (1 << 20)
            for _ in range(size // len(chunk)):
                fh.write(chunk)
    return path


class TestZipBombs:
    """A small zip that inflates to gigabytes takes the app's memory (restore and ChatGPT import
    read whole members)."""

    def test_chatgpt_zip_bomb_is_refused_by_name_without_inflating(self, tmp_path):
        zpath = _bomb_zip(tmp_path / "export.zip", "conversations.json", 64 << 20)
        assert zpath.stat().st_size < 1 << 20
        tracemalloc.start()
        items = list(chatgpt.read_export(zpath))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(items) == 1 and isinstance(items[0], ImportProblem)
        assert "conversations.json" in items[0].reason and "zip bomb" in items[0].reason
        assert peak < 16 << 20, f"peak {peak:,} bytes: the member was inflated"

    def test_restore_refuses_a_bomb_member_by_name_and_restores_the_rest(self, tmp_path, project):
        src = LocalSessionStore(tmp_path / "src")
        _two_sessions(src, project)
        zpath = tmp_path / "b.zip"
        backup_store(src, zpath)
        _replace_member(zpath, 0, b"x" * 0, bomb=64 << 20)
        dst = LocalSessionStore(tmp_path / "dst")
        report = restore_backup(zpath, dst)
        assert len(report.errors) == 1 and "zip bomb" in report.errors[0][1], report.errors
        assert len(dst.list(project_key(project))) == 1


def _two_sessions(store, project: Path) -> list[SessionKey]:
    mgr = SessionManager(store)
    keys = []
    for text in ("first chat", "second chat"):
        s = mgr.create(str(project))
        mgr.add_messages(s.key, [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
        keys.append(s.key)
    return keys


def _replace_member(zpath: Path, index: int, data: bytes, *, bomb: int = 0, keep_sum: bool = False) -> str:
    """Rewrite the backup with record ``index``'s member replaced by ``data`` (or a bomb of ``bomb``
    bytes); the manifest's checksum is updated to match when ``keep_sum``. Returns the member name."""
    import hashlib

    with zipfile.ZipFile(zpath) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    name = manifest["records"][index]["path"]
    if keep_sum:
        manifest["records"][index]["sha256"] = hashlib.sha256(data).hexdigest()
        manifest["records"][index]["bytes"] = len(data)
    members["manifest.json"] = json.dumps(manifest).encode()
    zpath.unlink()
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for n, body in members.items():
            if n == name and bomb:
                with zf.open(n, "w", force_zip64=True) as fh:
                    for _ in range(bomb >> 20):
                        fh.write(b"{" + b" " * ((1 << 20) - 1))
            else:
                zf.writestr(n, data if n == name else body)
    return name


class TestRestoreOfBadBackups:
    """One bad member or a malformed manifest stops the whole restore with a traceback."""

    def test_a_member_with_a_good_checksum_and_a_bad_line_is_named(self, tmp_path, project):
        src = LocalSessionStore(tmp_path / "src")
        _two_sessions(src, project)
        zpath = tmp_path / "b.zip"
        backup_store(src, zpath)
        name = _replace_member(zpath, 0, b'{"type": "header"}\nthis is not json\n', keep_sum=True)
        dst = LocalSessionStore(tmp_path / "dst")
        report = restore_backup(zpath, dst)
        assert any(name in why and "not JSON (line 2" in why for _, why in report.errors), report.errors
        assert len(dst.list(project_key(project))) == 1

    @pytest.mark.parametrize("manifest", [
        {"format": "anycode-backup", "version": 1, "records": "nope"},
        {"format": "anycode-backup", "version": 1, "records": [{"path": "x"}, 5, None]},
        {"format": "anycode-backup", "version": 1, "records": [{"path": 1, "sha256": [], "project_key": {}, "session_id": 2}]},
        {"format": "anycode-backup", "version": 1, "records": [], "memory": [{"scope": 5}]},
    ])
    def test_malformed_manifests_are_named_not_raised(self, tmp_path, manifest):
        zpath = tmp_path / "m.zip"
        with zipfile.ZipFile(zpath, "w") as zf:
            zf.writestr("manifest.json", json.dumps(manifest))
        report = restore_backup(zpath, LocalSessionStore(tmp_path / "dst"))
        assert report.errors and all(k.startswith("manifest:") for k, _ in report.errors), report.errors

    def test_a_deeply_nested_manifest_is_one_sentence(self, tmp_path):
        zpath = tmp_path / "deep.zip"
        with zipfile.ZipFile(zpath, "w") as zf:
            zf.writestr("manifest.json", "[" * 100_000)
        with pytest.raises(BackupError, match="not an anycode backup.*nested too deeply"):
            restore_backup(zpath, LocalSessionStore(tmp_path / "dst"))


class TestInvisibleTitles:
    """Guards against trial 9's blank sidebar row: an export whose title is only zero-width
    characters (or bidi controls) was imported with that title, one a rename would refuse."""

    @pytest.mark.parametrize("title", ["\u200b\u200b", "\u202e\u2066 \u200d", "  \n "])
    def test_an_invisible_title_is_left_out_and_a_real_one_cleaned(self, tmp_path, title):
        export = tmp_path / "conversations.json"
        export.write_text(json.dumps([chatgpt_conversation("c-blank", title),
                                      chatgpt_conversation("c-named", "Fixing\u202e the\n parser")]))
        store = LocalSessionStore(tmp_path / "home")
        report = import_sessions(store, chatgpt.read_export(export), default_cwd=tmp_path)
        assert report.ok and not report.failed  # each conversation with its versions
        titles = {m.id: m.title for m in store.list(project_key(tmp_path))}
        assert titles[import_session_id("chatgpt", "c-blank")] is None, "named like any untitled chat"
        assert titles[import_session_id("chatgpt", "c-named")] == "Fixing the parser"
