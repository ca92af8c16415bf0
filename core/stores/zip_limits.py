"""Limits on what a zip member may expand to, for every reader of an untrusted zip (a restore, a
ChatGPT export): a zip bomb is refused by name before it is inflated, not after memory runs out.

A member is refused when it declares more than ``max_bytes`` (``ANYCODE_ZIP_MAX_BYTES``, default
2 GiB) or, above 1 MiB, when it expands more than :data:`MAX_RATIO` times its compressed size
(text of chats compresses 3–20×; bombs expand 1,000× and more). A member whose header lies about
its size is cut off while it is read (:func:`read_member` never holds more than it declared).
"""
from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from typing import IO

log = logging.getLogger(__name__)

MAX_RATIO = 200
_SMALL = 1 << 20  # below 1 MiB any ratio is harmless
_CHUNK = 1 << 20


def max_bytes() -> int:
    """The largest uncompressed member accepted, in bytes (``ANYCODE_ZIP_MAX_BYTES``; default 2 GiB)."""
    try:
        return max(1, int(os.environ.get("ANYCODE_ZIP_MAX_BYTES", "") or 2 * 1024**3))
    except ValueError:
        return 2 * 1024**3


def refusal(info: zipfile.ZipInfo) -> str | None:
    """Why ``info`` is refused (one sentence), or None when it may be read."""
    if info.file_size > max_bytes():
        return (f"the member {info.filename} would expand to {info.file_size:,} bytes, more than the "
                f"{max_bytes():,} allowed (ANYCODE_ZIP_MAX_BYTES)")
    if info.file_size > _SMALL and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        ratio = info.file_size // max(info.compress_size, 1)
        return (f"the member {info.filename} expands {ratio:,} times ({info.compress_size:,} to "
                f"{info.file_size:,} bytes), as a zip bomb does; it was not read")
    return None


def read_member(zf: zipfile.ZipFile, name: str, *, keep: bool = True) -> tuple[bytes, str]:
    """The bytes of member ``name`` (empty when ``keep`` is False) and their SHA-256 hex digest,
    read in 1 MiB chunks. Raises ValueError with a sentence when the member is refused
    (:func:`refusal`) or holds more than its header declared; KeyError when there is none."""
    info = zf.getinfo(name)
    why = refusal(info)
    if why:
        raise ValueError(why)
    digest, parts, total = hashlib.sha256(), [], 0
    with zf.open(info) as fh:
        while chunk := fh.read(_CHUNK):
            total += len(chunk)
            if total > info.file_size:
                raise ValueError(f"the member {name} holds more than the {info.file_size:,} bytes it declares")
            digest.update(chunk)
            if keep:
                parts.append(chunk)
    return b"".join(parts), digest.hexdigest()


def open_member(zf: zipfile.ZipFile, name: str) -> IO[bytes]:
    """``zf.open(name)`` after :func:`refusal` has let it through (ValueError otherwise)."""
    info = zf.getinfo(name)
    why = refusal(info)
    if why:
        raise ValueError(why)
    return zf.open(info)
