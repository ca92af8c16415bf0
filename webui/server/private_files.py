"""The web UI's private temp folder: where export downloads, uploads and Gradio's file cache live.

Files holding conversation text must be readable by their owner only (``0600``) in a folder of
their own (``0700``), and gone when no longer needed. Gradio keeps its files under
``$GRADIO_TEMP_DIR`` (default ``<system temp>/gradio``, shared, ``0755``) and copies every file a
component shows there, one copy per content, never removed. The launcher instead points
``GRADIO_TEMP_DIR`` at a fresh ``0700`` folder of this process (:func:`make_root`,
:func:`use_for_gradio`), writes the
exports inside it (so Gradio serves them where they are and copies nothing), and removes the whole
folder when it stops; a folder left by a killed run is removed at the next start
(:func:`sweep_stale`).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "anycode-web-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")


GRADIO_TEMP_DIR = "GRADIO_TEMP_DIR"


def gradio_temp_dir() -> str | None:
    """The folder the user gave Gradio for its files (``$GRADIO_TEMP_DIR``), None when unset: where
    :func:`make_root` makes this run's folder."""
    return os.environ.get(GRADIO_TEMP_DIR) or None


def use_for_gradio(root: Path) -> None:
    """Make ``root`` the folder Gradio keeps uploads, its file cache and served files in.

    ``GRADIO_TEMP_DIR`` is Gradio's own setting, not anycode's: Gradio 6.31 reads it from the
    environment wherever it needs the folder (``gradio.utils.get_upload_folder`` when each component
    and the app are built, ``route_utils``' and ``mcp``'s module constants) and takes it from nowhere
    else — no ``launch`` or ``Blocks`` parameter sets it. So this is the one place anycode writes an
    environment variable, before the app is built. (anycode's own settings are passed as arguments:
    the data folder travels in :class:`core.storage.Storage`.)"""
    os.environ[GRADIO_TEMP_DIR] = str(root)


def make_root(base: str | os.PathLike[str] | None = None) -> Path:
    """A new ``0700`` folder ``<base>/anycode-web-<pid>-<random>`` (``base``: the system temp
    folder when None); folders of dead earlier runs under ``base`` are removed first.
    Raises ``OSError`` when it cannot be created."""
    if base is not None:  # a folder the user named: created if missing, never re-moded
        Path(base).mkdir(mode=0o700, parents=True, exist_ok=True)
    sweep_stale(base)
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))  # mkdtemp: 0700
    os.chmod(root, 0o700)
    return root


def sweep_stale(base: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove this user's ``anycode-web-<pid>-*`` folders under ``base`` whose process is gone;
    return them. Errors are logged, never raised (a start must not fail over old temp files)."""
    removed: list[Path] = []
    folder = Path(base) if base is not None else Path(tempfile.gettempdir())
    try:
        entries = list(os.scandir(folder))
    except OSError as err:
        log.debug("cannot list %s: %s", folder, err)
        return removed
    for entry in entries:
        m = _NAME.match(entry.name)
        if not m:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or st.st_uid != os.getuid() \
                    or _alive(int(m.group(1))):
                continue
            shutil.rmtree(entry.path)
            removed.append(Path(entry.path))
        except OSError as err:
            log.warning("could not remove the old temp folder %s: %s", entry.path, err)
    if removed:
        log.info("removed %d temp folder(s) of earlier runs", len(removed))
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone's process exists
        return True
    return True


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) as ``0700`` folders; an existing ``path`` is made
    ``0700``. Returns ``path``."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def tighten(root: Path) -> None:
    """Make every folder under ``root`` ``0700`` and every file ``0600`` (Gradio creates its upload
    and cache folders with the process umask, typically ``0755``). Raises ``OSError``."""
    for folder, _dirs, files in os.walk(root):
        _chmod(folder, 0o700)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                _chmod(path, 0o600)


def _chmod(path: str, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except FileNotFoundError:  # removed meanwhile (an import consumed its upload)
        pass


def write_private(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` as a ``0600`` file that appears whole: written aside in the same
    folder (created ``0600`` from the start, never readable by others), then renamed over
    ``path``. Raises ``OSError`` (the aside file is removed)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mkstemp: 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
