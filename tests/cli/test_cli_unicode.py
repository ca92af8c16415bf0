"""The command line keeps English output but prints any Unicode title (issue 20): Chinese and
Japanese titles with emoji through ``anycode sessions list|show|export|search|versions|rename``
and the launcher, as real subprocesses under ``LANG=C.UTF-8``, ``LANG=C``, a POSIX locale without
Python's UTF-8 mode, and a Latin-1 terminal."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import LocalSessionStore, SessionManager

ROOT = Path(__file__).resolve().parents[2]
CHINESE = "解析CSV文件的方法 🚀"
JAPANESE = "日本語のタイトル（テスト）"

LOCALES = {
    "C.UTF-8": {"LANG": "C.UTF-8"},
    "C": {"LANG": "C"},
    # No locale coercion and no UTF-8 mode: stdout is plain ASCII (a minimal container, cron).
    "POSIX-no-utf8": {"LC_ALL": "POSIX", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"},
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("unicode-cli")
    home, proj = base / "home", base / "proj"
    proj.mkdir()
    mgr = SessionManager(LocalSessionStore(home))
    ids = {}
    for title in (CHINESE, JAPANESE, "Plain title"):
        s = mgr.create(proj, title=title)
        mgr.add_messages(s.key, [{"role": "user", "content": f"问题：{title} parse_csv"},
                                 {"role": "assistant", "content": "用 csv 模块。✅"}])
        ids[title] = s.id
    mgr.fork(mgr.find(mgr.list(mgr.list_projects()[0].project_key)[0].project_key, ids[CHINESE]), 0)
    return {"home": home, "proj": proj, "ids": ids}


def _run(world, locale: dict, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING",
                                                            "PYTHONUTF8", "PYTHONCOERCECLOCALE")}
    env.update(locale, ANYCODE_HOME=str(world["home"]), PYTHONPATH=str(ROOT))
    env.pop("ANYCODE_STORE", None)
    return subprocess.run([sys.executable, "-m", "webui", *argv], cwd=cwd or world["proj"], env=env,
                          capture_output=True, timeout=120)


def _ok(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0 and "Traceback" not in err, err
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize("locale", sorted(LOCALES))
class TestTitlesInAnyLocale:
    """Guards against a Chinese or Japanese title (or an emoji) crashing a command with a
    UnicodeEncodeError, coming out as mojibake, or breaking the table's columns."""

    def test_list_search_show_export_versions(self, world, locale):
        env = LOCALES[locale]
        out = _ok(_run(world, env, "sessions", "list"))
        assert CHINESE in out and JAPANESE in out and "ID" in out and "TITLE" in out  # English headings
        rows = [line for line in out.splitlines() if line[:8] in {i[:8] for i in world["ids"].values()}]
        assert len(rows) == 3
        title_col = out.splitlines()[0].index("TITLE")
        for row in rows:  # the fixed columns line up whatever the titles: the title comes last
            assert row[title_col:].split(" [")[0] in (CHINESE, JAPANESE, "Plain title"), row
        listed = json.loads(_ok(_run(world, env, "sessions", "list", "--json")))
        assert {d["title"] for d in listed} >= {CHINESE, JAPANESE}
        cid = world["ids"][CHINESE]
        assert CHINESE in _ok(_run(world, env, "sessions", "show", cid[:8]))
        assert "用 csv 模块。✅" in _ok(_run(world, env, "sessions", "export", cid[:8]))
        found = _ok(_run(world, env, "sessions", "search", "模块"))
        assert CHINESE in found and "[模块]" in found
        assert "(the conversation)" in _ok(_run(world, env, "sessions", "versions", cid[:8]))

    def test_rename_takes_the_title_as_typed(self, world, locale):
        jid = world["ids"][JAPANESE]
        new = f"新しい題名 ✨ {locale}"
        out = _ok(_run(world, LOCALES[locale], "sessions", "rename", jid[:8], new))
        assert new in out
        got = SessionManager(LocalSessionStore(world["home"])).list(
            SessionManager(LocalSessionStore(world["home"])).list_projects()[0].project_key)
        assert new in {m.title for m in got}

    def test_launcher_lists_unicode_candidates(self, world, locale):
        done = _run(world, LOCALES[locale], "--resume", "zzzz", "--no-browser")
        err = done.stderr.decode("utf-8")
        assert done.returncode == 2 and "Traceback" not in err, err
        assert "zzzz" in err and CHINESE in err  # the project's sessions, titles intact


class TestTerminalThatCannotShowIt:
    """Guards against a Latin-1 (or explicitly ASCII) terminal crashing on a title, and against
    scripts reading ``--json`` there losing characters."""

    @pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
    def test_replaced_on_screen_exact_in_json(self, world, encoding):
        env = {"LANG": "C.UTF-8", "PYTHONIOENCODING": encoding}
        out = _run(world, env, "sessions", "list")
        text = out.stdout.decode(encoding)
        assert out.returncode == 0 and "Traceback" not in out.stderr.decode("utf-8", "replace")
        assert "Plain title" in text and "?" in text
        listed = json.loads(_run(world, env, "sessions", "list", "--json").stdout.decode(encoding))
        assert CHINESE in {d["title"] for d in listed}
        hits = json.loads(_run(world, env, "sessions", "search", "模块", "--json").stdout.decode(encoding))
        assert hits and all("模块" in h["snippet"] for h in hits)
