"""Two "machines" for the tests of history that follows the user (issue 26): real git checkouts
of one repository at different paths, and data dirs mirrored to one shared store."""
from __future__ import annotations

import subprocess
from pathlib import Path

from core.stores.jsonl_store import LocalSessionStore
from core.stores.mirror import MirroredSessionStore


def checkout(path: Path, remote: str) -> Path:
    """A real git checkout at ``path`` (created) whose ``origin`` is ``remote``."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


def shop_checkouts(tmp_path: Path) -> tuple[Path, Path]:
    """Machine A's and machine B's checkouts of one repository: other paths, the remote spelt
    two ways (ssh on A, https on B), so only the project identity makes them one project."""
    return (checkout(tmp_path / "a" / "src" / "shop", "git@example.org:team/shop.git"),
            checkout(tmp_path / "b" / "work" / "shop", "https://example.org/team/shop"))


def mirrored(data_dir: Path, mirror) -> MirroredSessionStore:
    """A machine's primary JSONL store in ``data_dir`` mirrored to ``mirror`` (a store shared by
    the machines), with a fast outbox so a test's ``flush`` returns in milliseconds."""
    return MirroredSessionStore(LocalSessionStore(data_dir), mirror, outbox_path=data_dir / "outbox.sqlite3",
                                retry_initial=0.02, retry_max=0.1, poll_interval=0.05)
