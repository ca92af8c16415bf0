"""Chat content printed on a terminal (``anycode sessions show|list``, ``search``, ``memory list``):
guards against a message or title that drives the terminal (an ESC sequence retitling or clearing
it) or reorders what it shows (U+202E makes "evil" read "live"), while a pipe or file still gets
the text exactly as stored."""
from __future__ import annotations

import io
import os
import select
import subprocess
import sys

from core import SessionManager
from tests.support.cli import ROOT
from webui.cli.console import terminal_text
from tests.support.storage import storage_of


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_on_a_terminal(home, *args, cwd) -> str:
    """``python -m webui ARGS`` with its stdout on a pseudo-terminal; what it printed."""
    leader, follower = os.openpty()
    env = dict(os.environ, ANYCODE_HOME=str(home), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "webui", *args], cwd=cwd, env=env, stdout=follower,
                            stderr=subprocess.PIPE)
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 0, proc.stderr.read()
    return out.decode("utf-8")


class TestTerminalText:
    def test_controls_become_labels_on_a_terminal_only(self):
        text = "evil \u202eevil\u202c \x1b]0;pwned\x07 tab\tand\nnewline 中文"
        shown = terminal_text(text, _Tty())
        assert shown == "evil \u27e8U+202E\u27e9evil\u27e8U+202C\u27e9 \u27e8U+001B\u27e9]0;pwned\u27e8U+0007\u27e9 tab\tand\nnewline 中文"
        assert terminal_text(text, io.StringIO()) == text  # a pipe or a file: exactly as stored


class TestCommandsOnATerminal:
    def test_show_list_search_and_memory(self, anycode_home, tmp_path):
        proj = tmp_path / "proj"
        proj.mkdir()
        mgr = SessionManager(__import__("core").LocalSessionStore(anycode_home))
        s = mgr.create(proj, title="Title \u202eevil")
        mgr.add_messages(s.key, [{"role": "user", "content": "clear it \x1b[2J\x1b]0;pwned\x07 now \u202eevil"},
                                 {"role": "assistant", "content": "ok"}])
        storage_of(mgr.store).memories.add("prefers \u202etabs", scope="project", project_key=s.key.project_key)
        for args in (["sessions", "show", s.id[:8]], ["sessions", "list"], ["sessions", "search", "clear"],
                     ["memory", "list"]):
            out = run_on_a_terminal(anycode_home, *args, cwd=proj)
            assert "\x1b" not in out and "\u202e" not in out, (args, out)
            if args[-1] != "list" or args[0] == "memory":  # (a title never keeps a bidi control)
                assert "\u27e8U+202E\u27e9" in out, (args, out)
        piped = subprocess.run([sys.executable, "-m", "webui", "sessions", "show", s.id[:8]], cwd=proj,
                               env=dict(os.environ, ANYCODE_HOME=str(anycode_home), PYTHONPATH=str(ROOT)),
                               capture_output=True, text=True, timeout=60)
        assert "\x1b[2J" in piped.stdout  # exactly as stored when it is not a terminal
