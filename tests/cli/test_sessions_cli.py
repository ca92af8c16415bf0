"""``anycode sessions …`` through ``main(argv)`` and as a real subprocess."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionKey, SessionManager, header_entry, project_key
from core.stores.sql_store import SqlSessionStore
from core.session.export import session_label
from webui.cli.sessions import main

ROOT = Path(__file__).resolve().parents[2]
DAY = 86400.0


@pytest.fixture
def two(mgr, proj):
    """Two sessions in ``proj``: "First chat" (2 messages) and an untitled one (1 message)."""
    a = mgr.create(proj, title="First chat")
    mgr.add_messages(a.key, [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi!"}])
    b = mgr.create(proj)
    mgr.add_messages(b.key, [{"role": "user", "content": "question"}])
    return a, b


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class TestReadCommands:
    """Guards against the listing, show and export commands missing sessions, showing the wrong
    project, or exporting something that differs from what is stored."""

    def test_list_table_and_json(self, capsys, two, proj):
        a, b = two
        code, out, _ = run(capsys, "list", "--project", str(proj))
        assert code == 0 and "First chat" in out and a.id[:8] in out and b.id[:8] in out
        # The untitled one reads as the sidebar shows it, by its creation time, not "New chat".
        assert session_label(None, b.created_at) in out and "New chat" not in out
        code, out, _ = run(capsys, "list", "--project", str(proj), "--json")
        data = json.loads(out)
        assert [d["id"] for d in data] == [b.id, a.id]
        assert data[1]["title"] == "First chat" and data[1]["message_count"] == 2

    def test_list_current_folder_other_project_and_all(self, capsys, two, proj, tmp_path, monkeypatch, mgr):
        other = mgr.create(tmp_path / "elsewhere", title="Elsewhere")
        monkeypatch.chdir(proj)
        _, out, _ = run(capsys, "list", "--json")
        assert {d["id"] for d in json.loads(out)} == {two[0].id, two[1].id}
        _, out, _ = run(capsys, "list", "--all-projects", "--json")
        assert {d["id"] for d in json.loads(out)} == {two[0].id, two[1].id, other.id}
        _, out, _ = run(capsys, "list", "--all-projects")
        assert str(tmp_path / "elsewhere") in out and str(proj) in out
        assert "(1 session)" in out and "(2 sessions)" in out  # not "1 sessions"

    def test_show_by_prefix_from_another_folder(self, capsys, two, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)  # not the project: the id is looked up in every project
        code, out, _ = run(capsys, "show", two[0].id[:6])
        assert code == 0 and out.startswith("# First chat") and "hello" in out and "hi!" in out
        code, out, _ = run(capsys, "show", two[0].id, "--json")
        assert json.loads(out)["messages"][1] == {"role": "assistant", "content": "hi!"}
        assert "system_at" not in json.loads(out)  # the web view's index is not the session's data

    def test_ambiguous_and_missing_ids(self, capsys, mgr, proj):
        ids = set()
        while True:  # two sessions sharing a first character
            s = mgr.create(proj)
            if s.id[0] in ids:
                prefix = s.id[0]
                break
            ids.add(s.id[0])
        code, _, err = run(capsys, "show", prefix, "--project", str(proj))
        assert code == 1 and "matches" in err
        code, _, err = run(capsys, "show", "zzzz", "--project", str(proj))
        assert code == 1 and "No session" in err

    def test_export_md_and_jsonl(self, capsys, two, proj, tmp_path, mgr):
        a = two[0]
        out_md = tmp_path / "a.md"
        assert run(capsys, "export", a.id[:8], "--project", str(proj), "--format", "md", "-o", str(out_md))[0] == 0
        assert out_md.read_text(encoding="utf-8").startswith("# First chat")
        # typed HTML is text in the Markdown (trial: it was live HTML in other viewers), code stays
        mgr.add_messages(a.key, [{"role": "user", "content": "try <img src=x onerror=alert(1)> or `<b>`"}])
        assert run(capsys, "export", a.id[:8], "--project", str(proj), "--format", "md", "-o", str(out_md))[0] == 0
        assert "try &lt;img src=x onerror=alert(1)> or `<b>`" in out_md.read_text(encoding="utf-8")
        code, out, _ = run(capsys, "export", a.id[:8], "--project", str(proj), "--format", "jsonl")
        assert code == 0
        assert [json.loads(line) for line in out.splitlines()] == mgr.store.load(a.key)
        # The JSONL export is a valid session file: byte-identical to the stored one.
        out_jl = tmp_path / "a.jsonl"
        run(capsys, "export", a.id, "--project", str(proj), "--format", "jsonl", "-o", str(out_jl))
        stored = next(mgr.store.base_dir.rglob(f"{a.id}.jsonl"))
        assert out_jl.read_bytes() == stored.read_bytes()


class TestWriteCommands:
    """Guards against the changing commands acting on the wrong session, deleting without
    consent, or cleanup deleting what it should keep."""

    def test_fork_rename_archive_unarchive(self, capsys, two, proj, mgr):
        a = two[0]
        code, out, _ = run(capsys, "fork", a.id[:8], "--at", "0", "--project", str(proj))
        assert code == 0 and "Forked into" in out
        new_id = out.split()[2]
        forked = mgr.get(SessionKey(project_key(proj), new_id))
        assert forked.messages == [{"role": "user", "content": "hello"}] and forked.title == "First chat (branch)"
        assert run(capsys, "fork", a.id[:8], "--at", "9", "--project", str(proj))[0] == 1
        assert run(capsys, "rename", a.id[:8], "  New   name ", "--project", str(proj))[0] == 0
        assert mgr.get(a.key).title == "New name"
        assert run(capsys, "rename", a.id[:8], "   ", "--project", str(proj))[0] == 1
        assert run(capsys, "archive", a.id[:8], "--project", str(proj))[0] == 0
        assert a.id not in {m.id for m in mgr.list(a.project_key)}
        _, out, _ = run(capsys, "list", "--archived", "--project", str(proj), "--json")
        assert [d["id"] for d in json.loads(out)] == [a.id]
        assert run(capsys, "unarchive", a.id[:8], "--project", str(proj))[0] == 0
        assert a.id in {m.id for m in mgr.list(a.project_key)}

    def test_rename_says_when_a_title_is_cut_or_refused(self, capsys, two, proj, mgr):
        # Trial: a 250-character title was cut to 200 and one of only invisible characters
        # stored, both without a word.
        a = two[0]
        code, out, err = run(capsys, "rename", a.id[:8], "x" * 250, "--project", str(proj))
        assert code == 0 and mgr.get(a.key).title == "x" * 200
        assert err == "anycode sessions: Titles are at most 200 characters; yours was shortened.\n"
        assert out.startswith(f"Renamed {a.id} to: xxx")
        for ghost in ("\u200b\u200b", "\U000e0041", "\u2800"):
            code, out, err = run(capsys, "rename", a.id[:8], ghost, "--project", str(proj))
            assert (code, out) == (1, "")
            assert err == "anycode sessions: That title has no visible characters; the title was kept.\n"
            assert mgr.get(a.key).title == "x" * 200
        code, _, err = run(capsys, "rename", a.id[:8], "   ", "--project", str(proj))
        assert code == 1 and err == "anycode sessions: A title cannot be empty; the title was kept.\n"
        code, _, err = run(capsys, "rename", a.id[:8], "Fine", "--project", str(proj))
        assert code == 0 and err == "" and mgr.get(a.key).title == "Fine"

    def test_rm_asks_unless_yes(self, capsys, two, proj, mgr, monkeypatch):
        a, b = two
        monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
        code, _, err = run(capsys, "rm", a.id[:8], "--project", str(proj))
        assert code == 1 and "Not deleted" in err and mgr.store.exists(a.key)
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal, no answer: keep it
        assert run(capsys, "rm", a.id[:8], "--project", str(proj))[0] == 1 and mgr.store.exists(a.key)
        monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
        assert run(capsys, "rm", a.id[:8], "--project", str(proj))[0] == 0
        assert not mgr.store.exists(a.key)
        assert run(capsys, "rm", b.id, "--yes", "--project", str(proj))[0] == 0
        assert not mgr.store.exists(b.key)

    def test_cleanup_dry_run_then_real(self, capsys, mgr, proj):
        pk = project_key(proj)
        old = SessionKey(pk, "old-session")
        mgr.store.append(old, [header_entry(old.session_id, pk, str(proj), created_at=time.time() - 40 * DAY)])
        archived_old = SessionKey(pk, "archived-old")
        mgr.store.append(archived_old, [header_entry(archived_old.session_id, pk, str(proj),
                                                     created_at=time.time() - 40 * DAY)])
        mgr.archive(archived_old)
        long_ago = time.time() - 40 * DAY  # untouched that long, as a really idle session is
        os.utime(mgr.store._locate(old), (long_ago, long_ago))
        fresh = mgr.create(proj)
        code, out, _ = run(capsys, "cleanup", "--dry-run")
        assert code == 0 and "would delete old-session" in out and "1 session idle" in out
        assert mgr.store.exists(old)
        assert "disabled" in run(capsys, "cleanup", "--days", "0")[1] and mgr.store.exists(old)
        code, out, _ = run(capsys, "cleanup", "--days", "30")
        assert code == 0 and "Deleted 1 session idle" in out
        assert not mgr.store.exists(old) and mgr.store.exists(archived_old) and mgr.store.exists(fresh.key)


class TestStoresAndMigrate:
    """Guards against --store/ANYCODE_STORE being ignored and against migrate not copying, not
    verifying, or not being safe to re-run."""

    def test_migrate_then_use_the_sql_store(self, capsys, two, proj, tmp_path, mgr):
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
        code, out, _ = run(capsys, "migrate", "--to", url, "--no-progress")
        assert code == 0 and "2 copied" in out and "Verified" in out
        code, out, _ = run(capsys, "migrate", "--to", url, "--no-progress", "--json")
        report = json.loads(out)
        assert code == 0 and report["ok"] and len(report["identical"]) == 2
        _, out, _ = run(capsys, "--store", url, "list", "--project", str(proj), "--json")
        assert {d["id"] for d in json.loads(out)} == {two[0].id, two[1].id}
        sql = SqlSessionStore(url)
        assert sql.load(two[0].key) == mgr.store.load(two[0].key)
        sql.close()

    def test_conflicting_migration_fails(self, capsys, two, tmp_path):
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
        sql = SqlSessionStore(url)
        sql.append(two[0].key, [header_entry(two[0].id, two[0].project_key, "/somewhere/else")])
        sql.close()
        code, out, _ = run(capsys, "migrate", "--to", url, "--no-progress")
        assert code == 1 and "conflict:" in out

    def test_unreachable_store_is_one_sentence(self, capsys):
        code, out, err = run(capsys, "--store", "postgresql+psycopg://x:pw@127.0.0.1:1/none", "list")
        assert code == 1 and err.startswith("anycode sessions: ") and "Traceback" not in err and "pw" not in err

    def test_data_dir_option(self, capsys, tmp_path, proj):
        other = SessionManager(LocalSessionStore(tmp_path / "other-data"))
        s = other.create(proj, title="Kept elsewhere")
        _, out, _ = run(capsys, "--data-dir", str(tmp_path / "other-data"), "list", "--project", str(proj), "--json")
        assert [d["id"] for d in json.loads(out)] == [s.id]
        _, out, _ = run(capsys, "list", "--project", str(proj), "--json")
        assert json.loads(out) == []

    def test_bad_usage_exits_2(self, capsys):
        with pytest.raises(SystemExit) as info:
            main(["export", "abc", "--format", "pdf"])
        assert info.value.code == 2


class TestSubprocess:
    """Guards against the command failing outside pytest (imports, entry point, exit status,
    progress bar on stderr only) and against it importing Gradio."""

    def test_real_process(self, two, proj, tmp_path, anycode_home):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANYCODE_HOME": str(anycode_home)}
        env.pop("ANYCODE_STORE", None)
        env.pop("ANYCODE_MIRROR", None)
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
        done = subprocess.run([sys.executable, "-m", "webui.cli.sessions", "migrate", "--to", url],
                              cwd=proj, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "Verified" in done.stdout and "migrating" in done.stderr  # tqdm bar goes to stderr
        listed = subprocess.run([sys.executable, "-m", "webui.cli.sessions", "list", "--json"],
                                cwd=proj, env={**env, "ANYCODE_STORE": url}, capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and {d["id"] for d in json.loads(listed.stdout)} == {two[0].id, two[1].id}
        probe = subprocess.run([sys.executable, "-c", "import sys, webui.cli.sessions; print('gradio' in sys.modules)"],
                               env=env, capture_output=True, text=True, timeout=60)
        assert probe.stdout.strip() == "False"


class TestVersionsCommand:
    """`anycode sessions versions ID` must list every version of the conversation (whichever
    member's id is given) and mark the one the web UI opens; the export names a version as such."""

    def test_versions_lists_the_family_and_marks_the_current(self, capsys, two, proj, mgr):
        a = two[0]
        v = mgr.fork(a.key, 0, version=True)
        mgr.add_messages(v.key, [{"role": "user", "content": "hello again"}])
        code, out, _ = run(capsys, "versions", v.id[:8], "--project", str(proj))
        lines = out.splitlines()
        assert code == 0 and len(lines) == 3
        assert lines[1].startswith("   1  " + a.id[:8]) and "(the conversation)" in lines[1]
        assert lines[2].startswith("*  2  " + v.id[:8]) and f"message 0 of {a.id[:8]}" in lines[2]
        mgr.switch_version(a.key, a.id)
        _, out, _ = run(capsys, "versions", a.id[:8], "--project", str(proj), "--json")
        data = json.loads(out)
        assert [(d["id"], d["current"]) for d in data] == [(a.id, True), (v.id, False)]
        _, out, _ = run(capsys, "list", "--project", str(proj))
        assert f"[version of {a.id[:8]}]" in out
        _, md, _ = run(capsys, "export", v.id[:8], "--project", str(proj))
        assert f"- Version of `{a.id}`" in md and "hello again" in md
        assert "- Version 2 of 2 (not the one in use;" in md

    def test_show_and_export_of_a_conversation_follow_the_version_in_use(self, capsys, two, proj, mgr):
        a = two[0]
        v = mgr.fork(a.key, 0, version=True)  # an edit of the first message, now in use
        mgr.add_messages(v.key, [{"role": "user", "content": "hello again"}])
        _, md, _ = run(capsys, "show", a.id[:8], "--project", str(proj))
        assert "hello again" in md and "hi!" not in md and f"- Session: `{v.id}`" in md
        assert "- Version 2 of 2 (the one in use;" in md
        _, out, _ = run(capsys, "show", a.id[:8], "--project", str(proj), "--json")
        data = json.loads(out)
        assert data["id"] == v.id and data["version"] == {"n": 2, "of": 2, "in_use": True}
        mgr.switch_version(a.key, a.id)  # back to the first version: show and export follow
        _, md, _ = run(capsys, "export", a.id[:8], "--project", str(proj))
        assert "hi!" in md and "hello again" not in md and "- Version 1 of 2 (the one in use;" in md
        _, md, _ = run(capsys, "show", two[1].id[:8], "--project", str(proj))
        assert "- Version" not in md  # a conversation without versions says nothing about them


class TestRenameAVersionedConversation:
    """issue 31, item 1: ``sessions rename`` renamed only the root; a conversation's versions
    kept their old title. One conversation has one title, whichever id is named."""

    def test_rename_by_root_or_version_id_shows_on_every_version(self, capsys, two, proj, mgr):
        a, _ = two
        version = mgr.fork(a.key, 0, version=True)
        assert run(capsys, "rename", a.id[:8], "Root rename", "--project", str(proj))[0] == 0
        assert mgr.get(version.key).title == "Root rename"
        code, out, _ = run(capsys, "show", version.id, "--project", str(proj))
        assert code == 0 and "Root rename" in out
        assert run(capsys, "rename", version.id, "Version rename", "--project", str(proj))[0] == 0
        assert mgr.get(a.key).title == "Version rename" == mgr.get(version.key).title
        code, out, _ = run(capsys, "list", "--project", str(proj))
        assert "Version rename" in out and "Root rename" not in out
