"""The file tools under attack (issue 10, defects 5-7): symlink races, hard links, FIFOs, a full
disk, a size limit — with real files, real processes and a real tmpfs where the machine allows."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core.agent.tools import STOPPED_RESULT, Tool, ToolRegistry, Workspace, run_tool

REPO = Path(__file__).resolve().parents[3]
TRIES = 5000


def call(ws, name, **args):
    return run_tool(ws, name, json.dumps(args))


@pytest.fixture
def world(tmp_path):
    ws_dir = tmp_path / "project"
    ws_dir.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    return Workspace(ws_dir), ws_dir, outside


# A separate process flips a name between a regular file (or folder) inside the workspace and a
# symlink to the outside, as fast as it can, until its stop file appears.
FLIP_FILE = textwrap.dedent("""
    import os, sys
    target, outside_file, stop = sys.argv[1:4]
    d = os.path.dirname(target)
    n = 0
    while not os.path.exists(stop):
        n += 1
        try:
            os.symlink(outside_file, os.path.join(d, ".flip-l"))
            os.replace(os.path.join(d, ".flip-l"), target)
            with open(os.path.join(d, ".flip-f"), "w") as fh:
                fh.write("inside")
            os.replace(os.path.join(d, ".flip-f"), target)
        except OSError:
            for name in (".flip-l", ".flip-f"):
                try:
                    os.unlink(os.path.join(d, name))
                except OSError:
                    pass
    print(n)
""")

FLIP_DIR = textwrap.dedent("""
    import os, shutil, sys
    target, outside_dir, stop = sys.argv[1:4]
    spare = target + ".real"
    n = 0
    while not os.path.exists(stop):
        n += 1
        try:
            os.rename(target, spare)           # the real folder steps aside
            os.symlink(outside_dir, target)    # a link to the outside takes its name
            os.unlink(target)
            os.rename(spare, target)           # and the real folder comes back
        except OSError:
            try:
                if os.path.islink(target):
                    os.unlink(target)
                elif os.path.isdir(target) and os.path.isdir(spare):
                    shutil.rmtree(target, ignore_errors=True)   # a folder the tool made meanwhile
                if os.path.isdir(spare) and not os.path.exists(target):
                    os.rename(spare, target)
            except OSError:
                pass
    print(n)
""")


class Flipper:
    def __init__(self, script: str, target: Path, outside: Path, stop: Path):
        self.stop_file = stop
        self.p = subprocess.Popen([sys.executable, "-c", script, str(target), str(outside), str(stop)],
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)

    def stop(self) -> int:
        self.stop_file.write_text("stop")
        out, _ = self.p.communicate(timeout=30)
        return int(out.strip() or 0)


@pytest.mark.slow
class TestSymlinkRaces:
    """Guards against a file or a parent folder flipped to a symlink between the tool's check and
    its open sending a read or a write outside the workspace (hundreds of escapes in 20,000 tries
    before the fix)."""

    def test_file_flipped_under_write(self, world, tmp_path):
        ws, ws_dir, outside = world
        (ws_dir / "target").write_text("inside")
        flip = Flipper(FLIP_FILE, ws_dir / "target", outside / "secret.txt", tmp_path / "stop")
        try:
            escapes = 0
            for i in range(TRIES):
                call(ws, "write_file", path="target", content=f"written {i}")
                if (outside / "secret.txt").read_text() != "SECRET":
                    escapes += 1
                    (outside / "secret.txt").write_text("SECRET")
        finally:
            flips = flip.stop()
        assert flips > 100, "the flipper did not run"
        assert escapes == 0

    def test_file_flipped_under_read(self, world, tmp_path):
        ws, ws_dir, outside = world
        (ws_dir / "target").write_text("inside")
        flip = Flipper(FLIP_FILE, ws_dir / "target", outside / "secret.txt", tmp_path / "stop")
        try:
            leaks = sum("SECRET" in call(ws, "read_file", path="target")[0] for _ in range(TRIES))
        finally:
            flips = flip.stop()
        assert flips > 100
        assert leaks == 0

    def test_parent_folder_flipped_under_write_and_read(self, world, tmp_path):
        ws, ws_dir, outside = world
        (ws_dir / "sub").mkdir()
        (ws_dir / "sub" / "secret.txt").write_text("inside")
        flip = Flipper(FLIP_DIR, ws_dir / "sub", outside, tmp_path / "stop")
        try:
            leaks = 0
            for i in range(TRIES // 2):
                call(ws, "write_file", path="sub/new.txt", content="x")
                leaks += "SECRET" in call(ws, "read_file", path="sub/secret.txt")[0]
        finally:
            flips = flip.stop()
        assert flips > 100
        assert leaks == 0
        assert sorted(os.listdir(outside)) == ["secret.txt"]
        assert (outside / "secret.txt").read_text() == "SECRET"


class TestHardLinks:
    """Guards against a hard link planted in the project reaching a file outside it (the same
    inode: reading leaks it, writing in place would change it)."""

    def test_hard_link_refused(self, world):
        ws, ws_dir, outside = world
        os.link(outside / "secret.txt", ws_dir / "innocent.txt")
        text, err = call(ws, "read_file", path="innocent.txt")
        assert err and "hard link" in text and "SECRET" not in text
        text, err = call(ws, "write_file", path="innocent.txt", content="pwned")
        assert err and "hard link" in text
        assert (outside / "secret.txt").read_text() == "SECRET"


class TestFilesThatAreNotFiles:
    """Guards against a FIFO (or a tool stuck in the kernel) blocking the agent turn forever, with
    Stop unable to end it."""

    def test_fifo_read_and_write_refused_at_once(self, world):
        ws, ws_dir, _ = world
        os.mkfifo(ws_dir / "pipe")
        results: list = []
        worker = threading.Thread(target=lambda: results.extend(
            [call(ws, "read_file", path="pipe"), call(ws, "write_file", path="pipe", content="x")]),
            daemon=True)
        worker.start()
        worker.join(5)
        try:
            assert not worker.is_alive(), "read_file/write_file on a FIFO blocked"
            assert all(err and "not a regular file" in text for text, err in results)
            assert (ws_dir / "pipe").is_fifo()
        finally:
            if worker.is_alive():  # release the old code's blocked open
                fd = os.open(ws_dir / "pipe", os.O_RDWR | os.O_NONBLOCK)
                os.close(fd)

    def test_blocking_tool_ended_by_stop_and_by_time_limit(self, world):
        ws, _, _ = world
        release = threading.Event()
        registry = ToolRegistry([Tool("wait_forever", "blocks", {"type": "object", "properties": {}},
                                      lambda workspace: str(release.wait(600)))])
        try:
            cancel = threading.Event()
            threading.Timer(0.3, cancel.set).start()
            start = time.monotonic()
            text, err = run_tool(ws, "wait_forever", "{}", registry=registry, cancel=cancel)
            assert err and text == STOPPED_RESULT and time.monotonic() - start < 3
            start = time.monotonic()
            text, err = run_tool(ws, "wait_forever", "{}", registry=registry, timeout=0.5)
            assert err and "did not finish within 0.5 seconds" in text and time.monotonic() - start < 3
        finally:
            release.set()

    def test_fifo_in_the_agent_loop_stopped(self, world, fake_openai, monkeypatch):
        """The whole turn: the model reads a FIFO; the turn ends within seconds of Stop."""
        from core.agent.loop import AgentRun
        from core.agent.events import ToolCallFinished

        ws, ws_dir, _ = world
        os.mkfifo(ws_dir / "pipe")
        fake_openai.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "pipe"}, "id": "c1"}]},
                         {"text": "ok"})
        cancel = threading.Event()
        events: list = []
        run = AgentRun([{"role": "user", "content": "read the pipe"}], client=fake_openai.client(),
                       model="gpt-4o-mini", tools=None, cancel=cancel, workspace=ws)
        worker = threading.Thread(target=lambda: events.extend(run.events()), daemon=True)
        worker.start()
        worker.join(8)
        if worker.is_alive():
            cancel.set()
            worker.join(3)
        try:
            assert not worker.is_alive(), "the turn could not be ended"
            finished = [e for e in events if isinstance(e, ToolCallFinished)]
            assert finished and finished[0].is_error and "not a regular file" in finished[0].result
        finally:
            if worker.is_alive():
                os.close(os.open(ws_dir / "pipe", os.O_RDWR | os.O_NONBLOCK))


WRITE_UNDER_LIMIT = textwrap.dedent("""
    import json, resource, signal, sys
    sys.path.insert(0, sys.argv[3])
    from core.agent.tools import Workspace, run_tool
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    print(json.dumps(run_tool(Workspace(sys.argv[1]), "write_file",
                              json.dumps({"path": sys.argv[2], "content": "N" * 100000}))))
""")


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


class TestFailedOverwrite:
    """Guards against write_file destroying the original when the write fails half way (a full
    disk, a file size limit): the old file must stay whole, with its mode, and no temp file left."""

    def test_file_size_limit(self, tmp_path):
        ws_dir = tmp_path / "project"
        ws_dir.mkdir()
        original = "original content\n" * 10
        (ws_dir / "keep.txt").write_text(original)
        os.chmod(ws_dir / "keep.txt", 0o640)
        out = subprocess.run([sys.executable, "-c", WRITE_UNDER_LIMIT, str(ws_dir), "keep.txt", str(REPO)],
                             capture_output=True, text=True, timeout=60)
        text, err = json.loads(out.stdout)
        assert err, text
        assert (ws_dir / "keep.txt").read_text() == original
        assert (ws_dir / "keep.txt").stat().st_mode & 0o777 == 0o640
        assert os.listdir(ws_dir) == ["keep.txt"]

    def test_full_disk(self, tmp_path):
        ws_dir = tmp_path / "small"
        if not _tmpfs(ws_dir, "64k"):
            pytest.skip("cannot mount a tmpfs here (needs root); the size-limit test covers the kind")
        try:
            original = "original content\n" * 100
            (ws_dir / "keep.txt").write_text(original)
            os.chmod(ws_dir / "keep.txt", 0o600)
            text, err = call(Workspace(ws_dir), "write_file", path="keep.txt", content="N" * 200_000)
            assert err and "No space left" in text
            assert (ws_dir / "keep.txt").read_text() == original
            assert (ws_dir / "keep.txt").stat().st_mode & 0o777 == 0o600
            assert os.listdir(ws_dir) == ["keep.txt"]
            # and a write that fits goes through, keeping the mode
            text, err = call(Workspace(ws_dir), "write_file", path="keep.txt", content="new")
            assert not err and (ws_dir / "keep.txt").read_text() == "new"
            assert (ws_dir / "keep.txt").stat().st_mode & 0o777 == 0o600
        finally:
            subprocess.run(["umount", str(ws_dir)], capture_output=True, timeout=10)

    def test_mode_kept_on_success(self, world):
        ws, ws_dir, _ = world
        (ws_dir / "run.sh").write_text("echo old\n")
        os.chmod(ws_dir / "run.sh", 0o755)
        text, err = call(ws, "write_file", path="run.sh", content="echo new\n")
        assert not err
        assert (ws_dir / "run.sh").stat().st_mode & 0o777 == 0o755
        assert (ws_dir / "run.sh").read_text() == "echo new\n"
