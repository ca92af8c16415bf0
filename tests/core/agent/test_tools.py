"""Workspace tools: confinement to the workspace, errors as results, the output cap."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.agent.tools import OUTPUT_CAP_BYTES, TOOL_SPECS, Workspace, cap_output, run_tool


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# demo\n")
    return Workspace(root)


def call(ws, name, **args):
    return run_tool(ws, name, json.dumps(args))


class TestToolsWork:
    """Guards against the basic tools not doing what the model asked (wrong listing, lost writes)."""

    def test_list_read_write_round_trip(self, ws):
        text, err = call(ws, "list_files", path=".")
        assert not err and text.splitlines() == ["README.md", "src/"]
        assert run_tool(ws, "list_files", "") == ("README.md\nsrc/", False)  # path defaults to "."
        text, err = call(ws, "write_file", path="docs/new/notes.txt", content="héllo\nworld")
        assert not err and "docs/new/notes.txt" in text
        assert call(ws, "read_file", path="docs/new/notes.txt") == ("héllo\nworld", False)
        with open(os.path.join(ws.root, "docs/new/notes.txt"), encoding="utf-8") as fh:
            assert fh.read() == "héllo\nworld"

    def test_absolute_path_inside_the_workspace_is_allowed(self, ws):
        text, err = call(ws, "read_file", path=os.path.join(ws.root, "src", "main.py"))
        assert (text, err) == ("print('hi')\n", False)

    def test_tool_specs_name_every_tool(self):
        assert [t["function"]["name"] for t in TOOL_SPECS] == ["list_files", "read_file", "write_file"]


class TestEscapesRefused:
    """Guards against the model reading or writing files outside the session's workspace."""

    @pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "..", "../../../../etc/passwd"])
    def test_dotdot(self, ws, path, tmp_path):
        (tmp_path / "secret.txt").write_text("top secret")
        for name, args in (("read_file", {"path": path}), ("list_files", {"path": path}),
                           ("write_file", {"path": path, "content": "x"})):
            text, err = call(ws, name, **args)
            assert err and "outside the workspace" in text and "top secret" not in text
        assert (tmp_path / "secret.txt").read_text() == "top secret"

    def test_absolute_outside(self, ws, tmp_path):
        outside = tmp_path / "elsewhere.txt"
        text, err = call(ws, "write_file", path=str(outside), content="pwned")
        assert err and "outside the workspace" in text
        assert not outside.exists()
        text, err = call(ws, "read_file", path="/etc/hostname")
        assert err and "outside the workspace" in text

    def test_symlinks_pointing_out(self, ws, tmp_path):
        secret_dir = tmp_path / "private"
        secret_dir.mkdir()
        (secret_dir / "key.txt").write_text("secret key")
        os.symlink(secret_dir, os.path.join(ws.root, "linkdir"))
        os.symlink(secret_dir / "key.txt", os.path.join(ws.root, "link.txt"))
        for name, args in (("read_file", {"path": "link.txt"}), ("read_file", {"path": "linkdir/key.txt"}),
                           ("list_files", {"path": "linkdir"}),
                           ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
                           ("write_file", {"path": "link.txt", "content": "overwritten"})):
            text, err = call(ws, name, **args)
            assert err and "outside the workspace" in text, (name, args, text)
            assert "secret key" not in text
        assert (secret_dir / "key.txt").read_text() == "secret key"
        assert not (secret_dir / "new.txt").exists()

    def test_symlink_inside_is_fine(self, ws):
        os.symlink(os.path.join(ws.root, "src"), os.path.join(ws.root, "alias"))
        assert call(ws, "read_file", path="alias/main.py") == ("print('hi')\n", False)


class TestErrorsComeBackAsResults:
    """Guards against a model mistake crashing the loop instead of being reported to the model."""

    @pytest.mark.parametrize("name,raw,expect", [
        ("read_file", json.dumps({"path": "nope.txt"}), "No such file"),
        ("read_file", json.dumps({"path": "src"}), "is a directory"),
        ("list_files", json.dumps({"path": "README.md"}), "Not a directory"),
        ("read_file", '{"path": "README.md"', "not valid JSON"),
        ("read_file", "[1, 2]", "must be a JSON object"),
        ("read_file", "{}", "Wrong arguments"),
        ("write_file", json.dumps({"path": "a.txt", "content": "x", "mode": "w"}), "Wrong arguments"),
        ("write_file", json.dumps({"path": "a.txt", "content": 5}), "must be a string"),
        ("delete_everything", "{}", "Unknown tool"),
        ("read_file", json.dumps({"path": ""}), "non-empty 'path'"),
    ])
    def test_error_result(self, ws, name, raw, expect):
        text, err = run_tool(ws, name, raw)
        assert err is True
        assert text.startswith("Error: ") and expect in text


class TestOutputCap:
    """Guards against a huge tool output bloating the session file and every later request."""

    def test_huge_file_is_capped_with_original_size(self, ws):
        big = "0123456789abcdef" * 200_000  # 3.2 MB
        with open(os.path.join(ws.root, "big.log"), "w") as fh:
            fh.write(big)
        text, err = call(ws, "read_file", path="big.log")
        assert not err
        assert len(text.encode()) <= OUTPUT_CAP_BYTES
        assert text.startswith("0123456789abcdef")
        assert "truncated" in text and "bytes" in text

    def test_cut_on_character_boundary_and_original_size_reported(self):
        text = "é" * 40_000 + "€" * 10_000  # 2-byte and 3-byte characters
        original = len(text.encode())
        out = cap_output(text)
        data = out.encode("utf-8")
        assert len(data) <= OUTPUT_CAP_BYTES
        assert data.decode("utf-8") == out
        head, note = out.split("\n\n[output truncated", 1)
        assert text.startswith(head) and len(head) > 30_000
        assert f"{original} bytes" in note
        assert f"first {len(head.encode())} bytes" in note

    def test_small_output_untouched(self):
        assert cap_output("short") == "short"
        exact = "a" * OUTPUT_CAP_BYTES
        assert cap_output(exact) == exact

    def test_long_directory_listing_capped(self, ws):
        d = os.path.join(ws.root, "many")
        os.mkdir(d)
        for i in range(1200):
            open(os.path.join(d, f"file_{i:05d}_{'x' * 60}.txt"), "w").close()
        text, err = call(ws, "list_files", path="many")
        assert not err and len(text.encode()) <= OUTPUT_CAP_BYTES
        assert "truncated" in text or "more entries" in text


class TestListedNamesAreUnambiguous:
    """issue 31, trial defect D5: list_files joined names with newlines, so a file named
    "evil\\nname.txt" read as two files ("evil" and "name.txt"), and a U+202E in a name went
    through raw (shown reversed)."""

    def test_a_name_with_a_newline_or_a_bidi_control_is_one_quoted_line(self, ws):
        (Path(ws.root) / "evil\nname.txt").write_text("x")
        (Path(ws.root) / "notes\u202etxt.sh").write_text("x")
        (Path(ws.root) / "odd\x07dir").mkdir()
        text, err = call(ws, "list_files", path=".")
        assert not err
        assert text.splitlines() == ["README.md", '"evil\\nname.txt"', '"notes\\u202etxt.sh"', '"odd\\u0007dir"/',
                                     "src/"]
        assert "\u202e" not in text and "\x07" not in text

    def test_plain_names_are_unchanged(self, ws):
        (Path(ws.root) / 'say "hi".txt').write_text("x")
        (Path(ws.root) / "emoji 🙂 é.txt").write_text("x")
        text, _ = call(ws, "list_files", path=".")
        assert text.splitlines() == ["README.md", "emoji 🙂 é.txt", 'say "hi".txt', "src/"]
