"""Session addressing: :class:`SessionKey` and the collision-free :func:`project_key` encoding.

A project key names the folder that holds one workspace's sessions. The design article's seed
encodes ``/home/user/my-project`` as ``-home-user-my-project`` by replacing ``/`` with ``-``; that
maps ``/a/b-c`` and ``/a/b/c`` to one key and breaks on long or non-Latin paths. Here the readable
slug is kept as a prefix (so a person can still find the folder) and a SHA-256 digest of the whole
normalised path is appended, which makes distinct paths distinct keys.
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid
from dataclasses import dataclass

from core.errors import InvalidSessionKey

# Names we create are ASCII only, so every filesystem (ext4, APFS, NTFS) accepts them and none
# folds two of them together except by case, which the lowercase hex digest keeps apart.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
MAX_NAME_BYTES = 200  # below the 255-byte name limit, leaving room for ".jsonl" and lock suffixes
MAX_SUBPATH_BYTES = 1000  # whole paths stay well below PATH_MAX (4096) under any data dir
SLUG_MAX = 80
DIGEST_CHARS = 16  # 64 bits of SHA-256: collisions need ~4e9 projects on one machine
# Folder names the JSONL store uses inside a project directory; a session id may not take them.
RESERVED_IDS = frozenset({"archive"})
# Windows device names cannot be file names on NTFS, whatever the extension.
_WINDOWS_RESERVED = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?\Z", re.IGNORECASE)


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidSessionKey(f"{what} must be a string, not {type(value).__name__}.")
    if not value:
        raise InvalidSessionKey(f"{what} must not be empty.")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidSessionKey(f"{what} is longer than {MAX_NAME_BYTES} bytes.")
    if not _SAFE_NAME.match(value) or value.endswith(".") or _WINDOWS_RESERVED.match(value):
        # Catches "..", "/", "\\", NUL, control characters, leading dots and Windows-only traps.
        raise InvalidSessionKey(
            f"{what} {value!r} is not a safe name (letters, digits, '.', '_', '-'; "
            "not starting with '.' or '-', not ending with '.')."
        )
    return value


def _check_project_key(value: object) -> str:
    # Project keys start with "-" (the encoded leading "/"), so they get their own pattern.
    if not isinstance(value, str) or not value:
        raise InvalidSessionKey("project key must be a non-empty string.")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidSessionKey(f"project key is longer than {MAX_NAME_BYTES} bytes.")
    if (
        not re.fullmatch(r"[A-Za-z0-9._-]+", value)
        or value.strip(".") == ""
        or value.startswith(".")
        or value.endswith(".")
        or _WINDOWS_RESERVED.match(value)
    ):
        raise InvalidSessionKey(f"project key {value!r} is not a safe folder name.")
    return value


def _check_subpath(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSessionKey("subpath must be a non-empty relative path.")
    if value.startswith("/") or "\\" in value or "\x00" in value or re.match(r"[A-Za-z]:", value):
        raise InvalidSessionKey(f"subpath {value!r} must be relative, with '/' separators.")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_SUBPATH_BYTES:
        raise InvalidSessionKey(f"subpath is longer than {MAX_SUBPATH_BYTES} bytes.")
    for segment in value.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidSessionKey(f"subpath {value!r} has an empty, '.' or '..' segment.")
        _check_name(segment, "subpath segment")
    return value


@dataclass(frozen=True)
class SessionKey:
    """Address of one session record (design article: ``SessionKey``).

    ``project_key``: the workspace's key from :func:`project_key`; ``session_id``: the session's
    id (a uuid4 string for sessions anycode creates); ``subpath``: optional relative path such as
    ``"subagents/agent-1"`` addressing a sub-agent's record under its parent session, kept out of
    the main list. Raises :class:`~core.errors.InvalidSessionKey` (a ``ValueError``) for any part
    that could escape its directory or is not a safe file name.
    """

    project_key: str
    session_id: str
    subpath: str | None = None

    def __post_init__(self) -> None:
        _check_project_key(self.project_key)
        _check_name(self.session_id, "session id")
        if self.session_id.lower() in RESERVED_IDS:
            raise InvalidSessionKey(f"session id {self.session_id!r} is reserved.")
        if self.subpath is not None:
            _check_subpath(self.subpath)

    @property
    def parent(self) -> "SessionKey":
        """The main session's key (itself when ``subpath`` is None)."""
        return self if self.subpath is None else SessionKey(self.project_key, self.session_id)

    def __str__(self) -> str:
        tail = f"/{self.subpath}" if self.subpath else ""
        return f"{self.project_key}/{self.session_id}{tail}"


def new_session_id() -> str:
    """Return a new random session id (a uuid4 string, 36 characters)."""
    return str(uuid.uuid4())


def normalize_path(path: str | os.PathLike[str]) -> str:
    """Return the absolute, lexically normalised form of ``path`` (``..`` resolved, no trailing
    separator). Symlinks are not resolved, so the key does not change when a link is repointed."""
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def project_key(path: str | os.PathLike[str]) -> str:
    """Encode a workspace path as a project key: a single safe directory name.

    Shape: ``<slug>-<digest>``: the slug is the normalised path with every character outside
    ``[A-Za-z0-9._-]`` replaced by ``-`` (the seed's encoding; ``/home/user/my-project`` gives
    ``-home-user-my-project``), cut to 80 characters; the digest is the first 16 hex characters of
    SHA-256 over the full normalised path's UTF-8 bytes (surrogates kept), so two different
    normalised paths never share a key. The result is ASCII, at most 97 bytes, and stable across
    runs and machines. ``/a/b/`` and ``/a/b`` are one project.
    """
    norm = normalize_path(path)
    digest = hashlib.sha256(norm.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    slug = re.sub(r"[^A-Za-z0-9._-]", "-", norm)[:SLUG_MAX].rstrip(".")
    return f"{slug}-{digest}" if slug else digest
