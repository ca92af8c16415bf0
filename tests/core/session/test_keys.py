"""Session addressing: project keys must never collide or escape, and never change between versions."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import InvalidSessionKey, LocalSessionStore, SessionKey, message_entry, new_session_id, project_key
from core.session.keys import normalize_path

ROOT = Path(__file__).resolve().parents[3]

# Path segments a workspace can have: ASCII, separators look-alikes, non-Latin, emoji, spaces,
# and lone surrogates (undecodable bytes in a file name, as os.fsdecode gives them).
segment = st.text(
    alphabet=st.one_of(
        st.sampled_from("abcXYZ019-_. ~@#%+=,;'\"()[]{}!$&é中文🎉\t"),
        st.characters(codec=None, exclude_characters="/\x00"),
    ),
    min_size=1,
    max_size=40,
)
paths = st.lists(segment, min_size=0, max_size=12).map(lambda parts: "/" + "/".join(parts))
deep_paths = st.lists(st.sampled_from(["a", "node_modules", "中文目录", "x" * 60, "b-c", "b", "c"]),
                      min_size=1, max_size=120).map(lambda parts: "/" + "/".join(parts))

KNOWN = "-home-user-my-project-c7e2f75b53b97886"


def assert_safe_name(key: str) -> None:
    assert key.isascii()
    assert not any(c in key for c in "/\\\x00:")
    assert key not in (".", "..")
    assert 0 < len(key.encode()) <= 255
    SessionKey(key, "probe")  # the store accepts it


@pytest.fixture(scope="module")
def mkdir_root():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


class TestProjectKeyProperties:
    """Two workspaces sharing one folder of sessions (the seed's "/a/b-c" == "/a/b/c") or a key
    the file system refuses would mix up or lose conversations."""

    @settings(max_examples=100, deadline=None)
    @given(a=paths, b=paths)
    def test_injective(self, a, b):
        if normalize_path(a) != normalize_path(b):
            assert project_key(a) != project_key(b)
        else:
            assert project_key(a) == project_key(b)

    @settings(max_examples=100, deadline=None)
    @given(p=paths)
    def test_injective_on_near_misses(self, p):
        # The slug maps many paths to one string; the key must still tell them apart.
        variants = {p, p.replace("/", "-"), p.replace("-", "/"), p.replace(" ", "-"), p.replace("_", "-"),
                    p.upper(), p.lower(), p + "/x", p + "-x", p + "/", p + "/.", "/" + "y" * 80 + p,
                    "/" + "y" * 80 + p + "z"}
        by_norm = {normalize_path(v): project_key(v) for v in variants}
        assert len(set(by_norm.values())) == len(by_norm)

    @pytest.mark.parametrize("a,b", [
        ("/a/b-c", "/a/b/c"),
        ("/a/b c", "/a/b-c"),
        ("/a/b.c", "/a/b/c"),
        ("/home/user/中文", "/home/user/日本"),
        ("/p/é", "/p/è"),
        ("/Proj", "/proj"),
        ("/" + "x" * 100 + "/one", "/" + "x" * 100 + "/two"),  # same 80-character slug
        ("/a/b", "/a/b\udcff"),
    ])
    def test_known_seed_collisions_are_distinct(self, a, b):
        assert project_key(a) != project_key(b)

    @pytest.mark.parametrize("same", ["/a/b/", "/a/b", "/a//b", "/a/./b", "/a/c/../b", "/a/b/."])
    def test_same_folder_same_key(self, same):
        assert project_key(same) == project_key("/a/b")

    def test_relative_path_is_made_absolute(self):
        assert project_key("some/dir") == project_key(os.path.join(os.getcwd(), "some/dir"))
        assert project_key(Path("/a/b")) == project_key("/a/b")

    @settings(max_examples=100, deadline=None)
    @given(p=st.one_of(paths, deep_paths))
    def test_safe_single_directory_name(self, p, mkdir_root):
        key = project_key(p)
        assert_safe_name(key)
        d = mkdir_root / key
        d.mkdir(exist_ok=True)  # actually creatable
        assert d.is_dir() and d.parent == mkdir_root
        d.rmdir()

    def test_deep_and_huge_path(self, mkdir_root):
        p = "/" + "/".join(["very-long-directory-name-" * 4] * 200)
        key = project_key(p)
        assert_safe_name(key)
        assert len(key) <= 97
        (mkdir_root / key).mkdir()

    def test_stable_known_value(self):
        assert project_key("/home/user/my-project") == KNOWN
        assert KNOWN.endswith(hashlib.sha256(b"/home/user/my-project").hexdigest()[:16])

    def test_stable_across_processes(self):
        paths_ = ["/home/user/my-project", "/srv/中文/🎉 x", "/a/b-c"]
        code = "import sys; from core import project_key; print('\\n'.join(project_key(p) for p in sys.argv[1:]))"
        out = subprocess.run([sys.executable, "-c", code, *paths_], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": "12345"}, check=True).stdout.split()
        assert out == [project_key(p) for p in paths_]
        assert out[0] == KNOWN

    @pytest.mark.parametrize("path,slug", [
        ("/home/user/my-project", "-home-user-my-project"),
        ("/srv/app_1.2", "-srv-app_1.2"),
        ("/home/user/my project", "-home-user-my-project"),
    ])
    def test_seed_slug_prefix(self, path, slug):
        key = project_key(path)
        assert key.startswith(slug + "-")

    def test_non_ascii_path_keeps_readable_parts(self):
        key = project_key("/home/用户/my-project")
        assert key.startswith("-home-") and "my-project" in key
        assert_safe_name(key)


class TestKeyValidation:
    """A crafted id (from a URL, a CLI argument or a copied file) must not reach outside the data dir."""

    @pytest.mark.parametrize("bad", [
        "", ".", "..", "../x", "a/b", "/abs", "a\\b", "..\\x", "a\x00b", "x" * 201, ".hidden",
        "a\n", "café", "C:", "con", "NUL", "trailing.",
    ])
    def test_bad_project_keys(self, bad):
        with pytest.raises(ValueError):
            SessionKey(bad, "s1")
        with pytest.raises(InvalidSessionKey):
            SessionKey(bad, "s1")

    @pytest.mark.parametrize("bad", [
        "", ".", "..", "../x", "x/..", "a/b", "/etc/passwd", "a\\b", "a\x00", "\x00", "x" * 201,
        ".hidden", "-dash-first", "a b", "a\n", "中文", "archive", "ARCHIVE", "aux", "com1", "lpt9.txt", "end.",
    ])
    def test_bad_session_ids(self, bad):
        with pytest.raises(ValueError):
            SessionKey("-proj-abc", bad)

    @pytest.mark.parametrize("bad", [
        "", "/abs/path", "/", "..", "../up", "a/../../b", "a/..", "./a", "a/./b", "a//b", "a/", "a\\b",
        "a/\x00", "C:/x", "c:x", "a/" + "x" * 201, "a/.hidden", "a/con",
    ])
    def test_bad_subpaths(self, bad):
        with pytest.raises(ValueError):
            SessionKey("-proj-abc", "s1", bad)

    def test_over_long_subpath_refused(self, tmp_path):
        # Every segment is short, but the whole path is beyond what any file system can open
        # (PATH_MAX 4096): refused up front as a ValueError, not an OSError from deep in a write.
        with pytest.raises(ValueError):
            SessionKey("-proj-abc", "s1", "/".join(["agent"] * 1000))

    @pytest.mark.parametrize("bad", [None, 5, b"bytes", ["a"]])
    def test_non_strings(self, bad):
        with pytest.raises(ValueError):
            SessionKey(bad, "s1")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            SessionKey("-proj-abc", bad)  # type: ignore[arg-type]

    def test_good_keys(self):
        sid = new_session_id()
        key = SessionKey(project_key("/a"), sid, "subagents/agent-1")
        assert key.parent == SessionKey(project_key("/a"), sid)
        assert str(key).endswith(f"/{sid}/subagents/agent-1")
        SessionKey("-proj-abc", "x" * 200)
        SessionKey("-proj-abc", "s1", "a/b/c.d_e-f")

    def test_store_refuses_escaping_project_keys(self, tmp_path):
        store = LocalSessionStore(tmp_path / "home")
        for bad in ("..", "../..", "a/b", "/tmp"):
            with pytest.raises(ValueError):
                store.list(bad)
            with pytest.raises(ValueError):
                store.list(bad, archived=True)
        assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.jsonl"))

    def test_written_files_stay_inside_base_dir(self, tmp_path):
        base = tmp_path / "home"
        store = LocalSessionStore(base)
        key = SessionKey(project_key("/a/../../etc"), new_session_id(), "sub/agent-1")
        store.append(key, [message_entry({"role": "user", "content": "x"})])
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert files and all(base in p.parents for p in files)
