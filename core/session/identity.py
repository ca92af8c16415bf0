"""A project known beyond its path (issue 26, item 5): the git remote it is a checkout of.

A project key comes from the folder's absolute path, so the same repository cloned at
``/home/ann/src/app`` on one machine and ``/Users/ann/work/app`` on another has two keys, and a
session started on the first is "not this project" on the second (anthropics/claude-code #51337).
A folder inside a git checkout is therefore also known by its **identity**: the normalised URL of
the checkout's ``origin`` remote plus the folder's path inside the checkout —
``git:github.com/ann/app`` or ``git:github.com/ann/app/services/api``. ``git@github.com:ann/app.git``,
``https://github.com/ann/app`` and ``ssh://git@github.com:22/ann/app.git`` are the same identity.

New sessions record it in their header (``project_identity``); stored project keys never change:
sessions of the same identity under other keys are that project's *aliases*
(:mod:`core.stores.aliases`). A folder outside a checkout, or a checkout without remotes, has no
identity and keeps today's path key only. Read from the files git keeps (``.git`` folder or
``gitdir:`` file, ``commondir``, ``config``): no ``git`` process is started, nothing leaves the machine.
"""
from __future__ import annotations

import configparser
import logging
import os
import re
import urllib.parse

log = logging.getLogger(__name__)

PREFIX = "git:"
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?!//)(?P<path>.+)$")  # git@host:owner/repo.git


def normalize_remote(url: str) -> str | None:
    """``host/path`` of a git remote URL, or None when it names no host (a local path).

    The host is lower-cased, user names, passwords and ports dropped, a trailing ``.git`` and
    slashes removed: ``git@GitHub.com:a/b.git``, ``https://github.com/a/b/`` and
    ``ssh://git@github.com:22/a/b.git`` all give ``github.com/a/b``."""
    url = (url or "").strip()
    if not url:
        return None
    if "://" in url:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "file" or not parts.hostname:
            return None
        host, path = parts.hostname, parts.path
    else:
        m = _SCP.match(url)
        if not m or url.startswith(("/", ".")):
            return None
        host, path = m.group("host"), m.group("path")
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    path = path.strip("/")
    if not path:
        return None
    return f"{host.lower()}/{path}"


def _git_dirs(folder: str) -> tuple[str, str] | None:
    """``(work tree root, git dir holding config)`` of the checkout containing ``folder``."""
    current = os.path.abspath(folder)
    while True:
        dot = os.path.join(current, ".git")
        if os.path.isdir(dot):
            return current, dot
        if os.path.isfile(dot):  # a worktree or submodule: "gitdir: <path>"
            try:
                with open(dot, encoding="utf-8") as fh:
                    line = fh.read(4096).strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            gitdir = os.path.normpath(os.path.join(current, line[len("gitdir:"):].strip()))
            common = os.path.join(gitdir, "commondir")
            if os.path.isfile(common):  # linked worktree: config lives in the main git dir
                try:
                    with open(common, encoding="utf-8") as fh:
                        gitdir = os.path.normpath(os.path.join(gitdir, fh.read(4096).strip()))
                except OSError:
                    pass
            return current, gitdir
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _remote_url(gitdir: str) -> str | None:
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(os.path.join(gitdir, "config"), encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError) as err:
        log.info("cannot read the git config in %s: %s", gitdir, err)
        return None
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    ordered = sorted(remotes, key=lambda s: (s != 'remote "origin"', s))  # origin first, then by name
    for section in ordered:
        url = parser.get(section, "url", fallback=None)
        if url:
            return url
    return None


def project_identity(folder: str | os.PathLike[str]) -> str | None:
    """The identity of project ``folder`` (module docstring), or None outside a checkout with a
    remote. Never raises for a folder that cannot be read."""
    try:
        found = _git_dirs(os.fspath(folder))
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    root, gitdir = found
    remote = normalize_remote(_remote_url(gitdir) or "")
    if remote is None:
        return None
    inside = os.path.relpath(os.path.abspath(os.fspath(folder)), root).replace(os.sep, "/")
    return PREFIX + remote + ("" if inside in (".", "") else "/" + inside)
