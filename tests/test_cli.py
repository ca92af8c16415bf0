"""The ``anycode`` launcher: options, refusals, ``--continue``/``--resume`` resolution, and a real
start as a subprocess (URL and data directory printed, expired sessions cleaned, offline page)."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

import pytest

from core.entries import header_entry, message_entry
from core.jsonl_store import LocalSessionStore
from core.keys import SessionKey, new_session_id, project_key
from core.manager import SessionManager
from webui import cli

REPO = Path(__file__).resolve().parents[1]


def args_for(*argv):
    return cli.build_parser().parse_args(list(argv))


class TestExposure:
    """Guards against serving sessions and file tools to a network without a login."""

    @pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
    def test_loopback_needs_no_auth(self, host):
        cli.check_exposure(host, None)

    @pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.org"])
    def test_network_needs_auth(self, host):
        with pytest.raises(cli.CliError, match="--auth"):
            cli.check_exposure(host, None)
        cli.check_exposure(host, ("me", "secret"))

    def test_main_refuses_before_starting(self, capsys, tmp_path):
        code = cli.main(["--host", "0.0.0.0", "--project", str(tmp_path), "--no-browser"])
        assert code == 2
        assert "--auth" in capsys.readouterr().err

    @pytest.mark.parametrize("bad", ["user", ":pw", "user:", ""])
    def test_bad_auth_value(self, bad):
        with pytest.raises(cli.CliError):
            cli.parse_auth(bad)
        assert cli.parse_auth("me:a:b") == ("me", "a:b")


class TestOptions:
    """Guards against defaults drifting from the documented ones."""

    def test_defaults(self):
        a = args_for()
        assert (a.host, a.port, a.project, a.cont, a.resume, a.no_browser) == \
            ("127.0.0.1", 7860, None, False, None, False)

    def test_continue_and_resume_exclusive(self, capsys):
        with pytest.raises(SystemExit):
            args_for("--continue", "--resume", "abc")

    def test_taken_port_moves_on(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            taken = s.getsockname()[1]
            assert cli.find_free_port("127.0.0.1", taken) > taken


class TestInitialSession:
    """Guards against --continue/--resume opening the wrong session or failing without saying
    which sessions exist."""

    @pytest.fixture
    def manager(self, tmp_path):
        return SessionManager(LocalSessionStore(tmp_path / "data"))

    def test_continue_picks_latest(self, manager, tmp_path):
        a = manager.create(tmp_path, title="a")
        b = manager.create(tmp_path, title="b")
        manager.add_messages(a.key, [{"role": "user", "content": "later"}])
        assert cli.initial_session(manager, str(tmp_path), args_for("--continue")) == a.id
        del b

    def test_continue_without_sessions(self, manager, tmp_path, capsys):
        assert cli.initial_session(manager, str(tmp_path), args_for("--continue")) is None
        assert "no session to continue" in capsys.readouterr().err

    def test_resume_prefix_ambiguous_and_missing(self, manager, tmp_path):
        ids = []
        for _ in range(40):  # enough for two ids to share a first hex digit
            ids.append(manager.create(tmp_path, title="t").id)
        one = ids[0]
        assert cli.initial_session(manager, str(tmp_path), args_for("--resume", one[:13])) == one
        prefix = next(i[0] for i in ids if sum(j.startswith(i[0]) for j in ids) > 1)
        with pytest.raises(cli.CliError) as err:
            cli.initial_session(manager, str(tmp_path), args_for("--resume", prefix))
        matching = [i for i in ids if i.startswith(prefix)]
        assert all(i in str(err.value) for i in matching)
        with pytest.raises(cli.CliError) as err:
            cli.initial_session(manager, str(tmp_path), args_for("--resume", "zzzz"))
        msg = str(err.value)
        assert "No session" in msg and "Sessions in this project" in msg
        assert any(i in msg for i in ids)

    def test_resume_finds_other_project(self, manager, tmp_path):
        other = tmp_path / "other"
        other.mkdir()
        s = manager.create(other)
        here = tmp_path / "here"
        here.mkdir()
        assert cli.initial_session(manager, str(here), args_for("--resume", s.id)) == s.id


class TestSubcommand:
    """Guards against `anycode sessions …` being parsed as launcher options."""

    def test_missing_module_is_a_clear_error(self, capsys, monkeypatch):
        monkeypatch.setitem(cli.SUBCOMMANDS, "sessions", "webui._no_such_module_")
        assert cli.main(["sessions", "list"]) == 2
        assert "not available" in capsys.readouterr().err

    def test_dispatch(self, monkeypatch):
        seen = []
        mod = types.ModuleType("webui._fake_sessions_cli")
        mod.main = lambda argv: seen.append(argv) or 0
        monkeypatch.setitem(sys.modules, "webui._fake_sessions_cli", mod)
        monkeypatch.setitem(cli.SUBCOMMANDS, "sessions", "webui._fake_sessions_cli")
        assert cli.main(["sessions", "list", "--all"]) == 0
        assert seen == [["list", "--all"]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ, ANYCODE_HOME=str(home), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "http_proxy", "https_proxy", "HTTP_PROXY",
                "HTTPS_PROXY", "ANYCODE_STORE", "ANYCODE_MIRROR"):
        env.pop(var, None)
    return env


class TestStoreOption:
    """Guards against --store being ignored (sessions silently written as JSONL files), a bad
    spec ending in a traceback, and a store left open when the launcher stops."""

    @pytest.fixture(autouse=True)
    def _no_store_env(self, monkeypatch):
        monkeypatch.delenv("ANYCODE_STORE", raising=False)
        monkeypatch.delenv("ANYCODE_MIRROR", raising=False)

    def test_sqlite_store_receives_sessions_made_in_the_ui(self, tmp_path):
        from core.sql_store import SqlSessionStore
        from webui import handlers
        from webui.context import WebContext

        proj, data, db = tmp_path / "proj", tmp_path / "data", tmp_path / "s.db"
        proj.mkdir()
        store = cli.make_store(args_for("--store", f"sqlite:///{db}", "--data-dir", str(data)))
        try:
            assert isinstance(store, SqlSessionStore)
            assert cli.describe_store(store, None) == f"sqlite:///{db}"
            ctx = WebContext(manager=SessionManager(store), store=store, project_path=str(proj),
                             export_dir=tmp_path / "exports")
            view = handlers.rename(ctx, handlers.tab_state(ctx.project_key), "Kept in SQLite")
            assert view.session_id
        finally:
            store.close()
        again = SqlSessionStore(f"sqlite:///{db}")
        try:
            assert [m.title for m in again.list(project_key(str(proj)))] == ["Kept in SQLite"]
        finally:
            again.close()
        assert not LocalSessionStore(data).list(project_key(str(proj)))  # no JSONL copy

    def test_relative_sqlite_path_lives_in_the_data_dir(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        data = tmp_path / "data"
        store = cli.make_store(args_for("--store", "sqlite:///sessions.db", "--data-dir",
                                        str(data)))
        store.close()
        assert (data / "sessions.db").exists() and not (tmp_path / "sessions.db").exists()

    def test_env_default_and_mirror(self, tmp_path, monkeypatch):
        from core.mirror import MirroredSessionStore
        from core.sql_store import SqlSessionStore

        monkeypatch.setenv("ANYCODE_STORE", f"sqlite:///{tmp_path / 'env.db'}")
        monkeypatch.setenv("ANYCODE_MIRROR", f"jsonl:{tmp_path / 'copy'}")
        store = cli.make_store(args_for("--data-dir", str(tmp_path / "data")))
        try:
            assert isinstance(store, MirroredSessionStore)
            assert isinstance(store.primary, SqlSessionStore)
            label = cli.describe_store(store, None)
            assert str(tmp_path / "env.db") in label and "mirrored to jsonl:" in label
        finally:
            store.close()

    def test_passwords_are_masked(self):
        label = cli.store_spec_label("postgresql+psycopg://me:s3cret@db.example/anycode")
        assert "s3cret" not in label and "db.example" in label

    @pytest.mark.parametrize("spec", ["mysql://x", "nonsense", "://"])
    def test_bad_spec_is_one_sentence_and_exit_2(self, spec, tmp_path, capsys):
        code = cli.main(["--store", spec, "--project", str(tmp_path), "--no-browser"])
        err = capsys.readouterr().err
        assert code == 2
        assert err.startswith("anycode: ") and err.count("\n") == 1, err
        assert "Traceback" not in err

    def test_unreachable_database_is_one_sentence(self, tmp_path, capsys, caplog):
        with socket.socket() as s:  # a port nothing listens on: refused at once
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        code = cli.main(["--store", f"postgresql+psycopg://me:s3cret@127.0.0.1:{port}/db",
                         "--project", str(tmp_path), "--no-browser"])
        err = capsys.readouterr().err
        assert code == 2
        line = [x for x in err.splitlines() if x.startswith("anycode: ")]
        assert len(line) == 1 and "unavailable" in line[0] and "s3cret" not in err
        assert "Traceback" not in err
        assert not [r for r in caplog.records if r.name == "core.sql_store"]  # said once only

    def test_store_closed_when_the_launcher_stops_early(self, tmp_path, monkeypatch, capsys):
        opened = []
        real = cli.make_store

        def spy(args):
            store = real(args)
            close = store.close
            store.close = lambda: (opened.append("closed"), close())
            opened.append(store)
            return store

        monkeypatch.setattr(cli, "make_store", spy)
        code = cli.main(["--store", f"sqlite:///{tmp_path / 's.db'}", "--project", str(tmp_path),
                         "--resume", "zzzz", "--no-browser"])
        assert code == 2 and "No session" in capsys.readouterr().err
        assert opened[-1] == "closed"


class TestLaunch:
    """Guards against a launcher that does not start offline, hides where data lives, or never
    runs the cleanup of expired sessions."""

    def test_start_prints_url_cleans_and_serves_offline(self, tmp_path):
        data, proj = tmp_path / "data", tmp_path / "proj"
        proj.mkdir()
        store = LocalSessionStore(data)
        old_key = SessionKey(project_key(str(proj)), new_session_id())
        old = time.time() - 90 * 86400
        store.append(old_key, [header_entry(old_key.session_id, old_key.project_key, str(proj),
                                            created_at=old),
                               message_entry({"role": "user", "content": "ancient"}, ts=old)])
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project",
             str(proj), "--data-dir", str(data)],
            cwd=tmp_path, env=_env(tmp_path / "unused-home"), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        try:
            deadline = time.time() + 90
            while time.time() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                if "data:" in line:
                    break
            out = "".join(lines)
            assert f"http://127.0.0.1:{port}/" in out, out
            assert str(data) in out
            assert "cleanup removed 1 expired" in out and old_key.session_id in out
            assert not store.exists(old_key)
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
            assert "anycode" in page
            assert not re.search(r"fonts\.googleapis|fonts\.gstatic|cdn\.jsdelivr|unpkg\.com", page)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def test_start_with_sqlite_store(self, tmp_path):
        proj, db = tmp_path / "proj", tmp_path / "db" / "s.db"
        proj.mkdir()
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "webui", "--no-browser", "--port", str(port), "--project",
             str(proj), "--data-dir", str(tmp_path / "data"), "--store", f"sqlite:///{db}"],
            cwd=tmp_path, env=_env(tmp_path / "unused-home"), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        try:
            deadline = time.time() + 90
            while time.time() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
                if "data:" in line:
                    break
            out = "".join(lines)
            assert f"http://127.0.0.1:{port}/" in out, out
            assert f"store:   sqlite:///{db}" in out, out
            assert db.exists()
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
            assert "anycode" in page
            config = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/config",
                                                       timeout=10).read())
            elem_ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
            assert "ac-sidebar" in elem_ids and "ac-mirror" not in elem_ids  # no mirror, no line
        finally:
            proc.terminate()
            try:
                code = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
        assert code == 0, proc.stdout.read()  # SIGTERM stops it cleanly (store closed)

    def test_help_lists_options(self):
        out = subprocess.run([sys.executable, "-m", "webui", "--help"], cwd=REPO, text=True,
                             capture_output=True, env=_env(REPO / "nonexistent"), timeout=60,
                             check=False)
        assert out.returncode == 0
        for opt in ("--project", "--continue", "--resume", "--host", "--port", "--data-dir",
                    "--store", "--model", "--base-url", "--no-browser", "--auth"):
            assert opt in out.stdout
