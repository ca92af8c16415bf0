"""Files that appear whole or not at all: write aside, then link (or rename) into place.

A multi-entry creation (a fork of 40,000 messages, an import, a restore, a migrated record) and
a file written for the user (``sessions export -o``) must never be seen half-written: a process
killed mid-write or a full disk would otherwise leave a short file that reads as a normal one.
:func:`place_whole` writes the bytes to a hidden temporary file in the target's folder (same
filesystem, so the final step is atomic), ``fsync``\\ s it, then

- ``os.link``\\ s it to the target name, which fails when the name exists (a creation never
  clobbers a record another writer made meanwhile), or
- ``os.replace``\\ s the target (``replace=True``: an export overwriting an older one),

and removes the temporary name on every outcome. A reader therefore sees the old state or the
whole new file. What a kill can leave is a hidden ``.<name>.<random>.part`` file, never listed;
:func:`sweep_stale` removes those whose writer is gone (the writer holds an advisory ``flock``
on its temporary file while it exists, and a part must also be older than
:data:`STALE_SECONDS`, so a live writer's file is never taken).
"""
from __future__ import annotations

import errno
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Iterable

try:  # POSIX; on Windows the age rule alone decides what is stale
    import fcntl
except ImportError:  # pragma: no cover - not on Linux
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

PART_SUFFIX = ".part"
STALE_SECONDS = 60.0  # a temporary file untouched this long, with no writer holding it, is debris


def part_prefix(name: str) -> str:
    """The prefix of ``name``'s temporary files (hidden, so no listing ever shows them)."""
    return f".{name}."


def is_part(name: str) -> bool:
    """True for a temporary file name made by :func:`place_whole` (or an index being written)."""
    return name.startswith(".") and (name.endswith(PART_SUFFIX) or name.endswith(".tmp"))


def place_whole(path: str | os.PathLike[str], payload: bytes, *, fsync: bool = True,
                replace: bool = False, mode: int = 0o600) -> None:
    """Make ``path`` hold exactly ``payload`` (bytes), whole or not at all.

    ``replace=False``: ``path`` must not exist; raises ``FileExistsError`` (nothing written)
    when it does. ``replace=True``: an existing file is atomically replaced. ``fsync``: the data
    and the folder entry are made durable. The file gets ``mode`` (default 0600: conversation
    text is private). Raises ``OSError`` (disk full, no permission, a missing folder, a name too
    long); whatever happens, no temporary file is left behind by a process that is not killed."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=part_prefix(target.name)[: 100], suffix=PART_SUFFIX,
                               dir=target.parent)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "a writer is alive" for sweep_stale
        if mode != 0o600:
            os.fchmod(fd, mode)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
        if replace:
            os.replace(tmp, target)
        else:
            _link_or_fail(tmp, target)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    else:
        if not replace:
            _unlink_quietly(tmp)
    finally:
        os.close(fd)
    if fsync:
        fsync_dir(target.parent)


def _link_or_fail(tmp: str, target: Path) -> None:
    """Give the finished file its name without clobbering one that exists."""
    try:
        os.link(tmp, target)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        # A filesystem without hard links (FAT, some FUSE mounts): check and rename. Callers
        # hold the record's lock, so nobody creates the name between the two steps.
        if target.exists():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from None
        os.rename(tmp, target)


def link_whole(tmp: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Give the finished file ``tmp`` (same folder) the name ``target`` without clobbering an
    existing one: raises ``FileExistsError`` when ``target`` exists (``tmp`` is left for the
    caller to remove). For files written as a stream (a backup zip) rather than one payload."""
    _link_or_fail(os.fspath(tmp), Path(target))


def sweep_stale(directory: str | os.PathLike[str], names: Iterable[str], now: float | None = None) -> int:
    """Remove the temporary files ``names`` (found in ``directory`` by a listing) whose writer
    is gone: untouched for :data:`STALE_SECONDS` and not ``flock``-ed. Returns how many were
    removed; failures are logged, never raised (sweeping is housekeeping)."""
    now = time.time() if now is None else now
    removed = 0
    for name in names:
        if not is_part(name):
            continue
        path = os.path.join(directory, name)
        try:
            if now - os.stat(path).st_mtime < STALE_SECONDS:
                continue
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a writer still holds it
            os.unlink(path)
            removed += 1
            log.info("%s: removed an unfinished temporary file left by a stopped process", path)
        except OSError as exc:
            log.warning("%s: cannot remove this unfinished temporary file (%s)", path, exc)
        finally:
            os.close(fd)
    return removed


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a new or renamed entry of folder ``path`` durable (POSIX); a no-op where folders
    cannot be opened (Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
