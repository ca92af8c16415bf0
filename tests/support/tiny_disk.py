"""A tiny filesystem for disk-full tests: a tmpfs of a few hundred KiB mounted in the test.

``mount -t tmpfs`` needs root (or CAP_SYS_ADMIN); where it is refused the caller is skipped with
the reason. A ``TinyDisk`` can be filled to the last byte (:meth:`TinyDisk.fill`) and emptied
again (:meth:`TinyDisk.free`), so a test sees the app on a full disk and after space is freed.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

FILLER = ".filler"


class TinyDisk:
    """A mounted tmpfs at ``path`` of ``size_kib`` KiB."""

    def __init__(self, path: Path, size_kib: int = 1024):
        self.path = Path(path)
        self.size_kib = size_kib

    def mount(self) -> "TinyDisk":
        """Mount it; ``pytest.skip`` with the reason when mounting is not permitted here."""
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_kib}k,mode=0700",
                                   "tmpfs", str(self.path)], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"cannot mount a tmpfs for the disk-full tests: {exc}")
        if done.returncode != 0:
            pytest.skip("cannot mount a tmpfs for the disk-full tests (needs root or "
                        f"CAP_SYS_ADMIN): {done.stderr.strip() or done.returncode}")
        return self

    def unmount(self) -> None:
        """Unmount (lazily, so a file still open elsewhere cannot keep it mounted)."""
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=30)

    def read_only(self, on: bool = True) -> None:
        """Remount read-only (every write fails with EROFS, even for root) or writable again.

        The kernel refuses a read-only remount ("mount point is busy", exit 32) while any file on
        it is open for writing. After a reply the title and memory jobs write for a moment, so
        under load the remount can land inside one of their writes (CI, round 5). A disk that
        really turns read-only does not wait for anyone; here we try again until the write in
        flight has ended (at most 30 s), then raise with mount's own message."""
        deadline = time.monotonic() + 30
        while True:
            done = subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(self.path)],
                                  capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                return
            if "busy" not in done.stderr or time.monotonic() > deadline:
                raise RuntimeError(f"cannot remount {self.path}: {done.stderr.strip()}")
            time.sleep(0.02)

    def fill(self) -> None:
        """Write a filler file until the filesystem has no byte left."""
        fd = os.open(self.path / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (65536, 4096, 1):  # big chunks first, then the last partial page
                try:
                    while os.write(fd, b"\0" * size):
                        pass
                except OSError:
                    continue
        finally:
            os.close(fd)

    def free(self) -> None:
        """Remove the filler: space is back."""
        (self.path / FILLER).unlink(missing_ok=True)

    def files(self) -> list[str]:
        """Every file below the mount (paths relative to it), except the filler and lock files."""
        out = []
        for dirpath, _dirs, names in os.walk(self.path):
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), self.path)
                if rel != FILLER and not rel.endswith(".lock"):
                    out.append(rel)
        return sorted(out)


def mounted(tmp_path_factory, name: str, size_kib: int = 1024):
    """Generator for a module-scoped fixture: a :class:`TinyDisk` mounted under a fresh temporary
    folder, unmounted afterwards (``yield from mounted(tmp_path_factory, "x")``)."""
    disk = TinyDisk(tmp_path_factory.mktemp(name) / "mnt", size_kib=size_kib).mount()
    try:
        yield disk
    finally:
        disk.unmount()
