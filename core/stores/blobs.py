"""Content-addressed blobs: the file bytes checkpoints refer to (issue 29).

A blob is named by the SHA-256 of its bytes and lives at ``<data dir>/blobs/<2 hex>/<62 hex>``,
shared by every session of the data dir (one copy however many checkpoints name it). The file holds
the bytes zlib-compressed (a checkpoint of a 100 KiB source file edited a thousand times is mostly
text). Files are 0600, folders 0700; a blob is written beside its name, fsynced and renamed into
place, so a reader never sees half a blob and two writers of the same bytes both succeed (the
second rename replaces identical bytes). Reading checks the hash: a damaged blob reads as missing.

Where: :class:`core.storage.Storage` keeps one :class:`BlobStore` per storage (``storage.blobs``):
``<folder>/blobs`` of a JSONL store's own folder, else ``<data dir>/blobs`` (a database, S3 or Redis
store of record: the bytes stay on this machine). A store that is a mirror carries the blobs its
records name in its own place (:class:`~core.session.store.CarriesBlobs`: S3 ``PREFIX/blobs/``, Redis
``anycode:b:``, the SQL ``anycode_blobs`` table, a JSONL mirror's ``<folder>/blobs``), seen here
through :class:`BlobCarrier`; :func:`carry_blobs` copies between the two.

Which blobs may go is decided by :func:`collect_unreferenced` (run after
:meth:`core.session.manager.SessionManager.cleanup`): a blob no checkpoint of any session names,
older than :data:`GRACE_SECONDS` (a blob written for a round not yet stored is not referenced yet).
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import time
import zlib
from pathlib import Path
from typing import Iterable, Iterator, Protocol

from core.session.store import CarriesBlobs, SessionStore, carries_blobs
from core.stores.whole_file import place_whole

log = logging.getLogger(__name__)

#: A blob younger than this (seconds) is never collected: its checkpoint may not be stored yet.
GRACE_SECONDS = 3600.0
_HEX = re.compile(r"^[0-9a-f]{64}$")


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` as 64 lowercase hex digits (a blob's name)."""
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    """The blobs under ``root`` (``<data dir>/blobs``). Raises OSError on a file system failure."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"BlobStore({str(self.root)!r})"

    def path_of(self, digest: str) -> Path:
        """Where the blob ``digest`` lives. Raises ValueError for a name that is not 64 hex digits."""
        if not isinstance(digest, str) or not _HEX.match(digest):
            raise ValueError(f"not a blob name: {digest!r}")
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        """Whether the blob is stored (its bytes are not checked)."""
        try:
            return self.path_of(digest).is_file()
        except ValueError:
            return False

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` (once: an existing blob is kept) and return its SHA-256 hex name.
        ``digest``: the hash when the caller already computed it."""
        digest = digest or sha256_hex(data)
        path = self.path_of(digest)
        if path.is_file():
            return digest
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        # whole or not at all, 0600; two writers of one blob write the same bytes, so the later wins
        place_whole(path, zlib.compress(data, 1), replace=True)
        return digest

    def get(self, digest: str) -> bytes | None:
        """The blob's bytes, or None when it is missing or damaged (its hash does not match)."""
        try:
            raw = self.path_of(digest).read_bytes()
            data = zlib.decompress(raw)
        except (OSError, ValueError, zlib.error):
            return None
        if sha256_hex(data) != digest:
            log.warning("blob %s is damaged (its hash does not match); treated as missing", digest)
            return None
        return data

    def names(self) -> Iterator[str]:
        """Every stored blob's name (unordered)."""
        if not self.root.is_dir():
            return
        for sub in self.root.iterdir():
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            for f in sub.iterdir():
                name = sub.name + f.name
                if _HEX.match(name):
                    yield name

    def size_on_disk(self) -> int:
        """Bytes the blob files take (compressed), for the benchmark and status."""
        return sum(self.path_of(n).stat().st_size for n in self.names())

    def get_packed(self, digest: str) -> bytes | None:
        """The blob file's (zlib-compressed) bytes as stored, checked like :meth:`get`; None when
        missing or damaged. What a mirror is sent."""
        try:
            raw = self.path_of(digest).read_bytes()
            ok = sha256_hex(zlib.decompress(raw)) == digest
        except (OSError, ValueError, zlib.error):
            return None
        return raw if ok else None

    def put_packed(self, digest: str, packed: bytes) -> bool:
        """Store a blob received as stored elsewhere (zlib-compressed), once; False (nothing
        written) when its bytes do not decompress to ``digest``'s content."""
        try:
            data = zlib.decompress(packed)
        except zlib.error:
            return False
        if sha256_hex(data) != digest:
            log.warning("a received blob does not match its name %s; not stored", digest)
            return False
        self.put(data, digest)
        return True

    def remove(self, digest: str) -> bool:
        """Delete one blob; False when it was not there."""
        try:
            os.unlink(self.path_of(digest))
            return True
        except FileNotFoundError:
            return False


class Carrier(Protocol):
    """Where blobs can be copied from and to: a :class:`BlobStore` or a :class:`BlobCarrier`."""

    def has(self, digest: str) -> bool:
        """Whether the blob is there."""
        ...

    def get_packed(self, digest: str) -> bytes | None:
        """The blob's stored (compressed) bytes, hash checked; None when missing or damaged."""
        ...

    def put_packed(self, digest: str, packed: bytes) -> bool:
        """Store the compressed bytes; False when they do not match ``digest``."""
        ...


class BlobCarrier:
    """A store's own blob methods (:class:`~core.session.store.CarriesBlobs`) seen as a
    :class:`Carrier`: what a mirror and a pull carry checkpoint bytes through. The backends'
    errors (:class:`~core.errors.StoreUnavailable`, ``OSError``) pass through."""

    def __init__(self, store: CarriesBlobs):
        self.store = store

    def __repr__(self) -> str:
        return f"BlobCarrier({self.store!r})"

    @classmethod
    def of(cls, store: SessionStore) -> "BlobCarrier | None":
        """The carrier of ``store``, or None for a store that keeps no blobs (nothing is carried)."""
        return cls(store) if carries_blobs(store) else None

    def has(self, digest: str) -> bool:
        return bool(self.store.has_blob(digest))

    def get_packed(self, digest: str) -> bytes | None:
        packed = self.store.get_blob(digest)
        if packed is None:
            return None
        try:
            ok = sha256_hex(zlib.decompress(packed)) == digest
        except zlib.error:
            ok = False
        if not ok:
            log.warning("the mirror's blob %s is damaged (its hash does not match); treated as missing", digest)
        return packed if ok else None

    def put_packed(self, digest: str, packed: bytes) -> bool:
        self.store.put_blob(digest, packed)
        return True


def carry_blobs(names: Iterable[str], source: Carrier | None, target: Carrier | None) -> int:
    """Copy the blobs ``names`` that ``target`` lacks from ``source``; a blob ``source`` does not
    have (over the size cap on the machine that wrote it, collected, never stored) is skipped — a
    rewind then says so. Nothing when either side is None (keeps no blobs). Returns how many were
    copied. Raises the backends' errors (the caller retries: an outbox item stays queued, a pull
    reports it)."""
    if source is None or target is None:
        return 0
    copied = 0
    for name in sorted(set(names)):
        if target.has(name):
            continue
        packed = source.get_packed(name)
        if packed is None:
            continue
        if target.put_packed(name, packed):
            copied += 1
    return copied


def referenced_in(entries: Iterable[object]) -> set[str]:
    """The blob names the checkpoint entries among ``entries`` refer to (before and after)."""
    names: set[str] = set()
    for e in entries:
        if isinstance(e, dict) and e.get("type") == "checkpoint" and isinstance(e.get("files"), list):
            for f in e["files"]:
                if isinstance(f, dict):
                    for k in ("before", "after"):
                        if isinstance(f.get(k), str) and _HEX.match(f[k]):
                            names.add(f[k])
    return names


def referenced_by_store(store: SessionStore) -> set[str]:
    """Every blob name a checkpoint of any session of ``store`` refers to (archived ones too)."""
    names: set[str] = set()
    for project in store.list_projects():
        for archived in (False, True):
            for meta in store.list(project.project_key, archived=archived):
                names |= referenced_in(store.load(meta.key) or [])
    return names


def collect_unreferenced(store: SessionStore, blobs: BlobStore, *, now: float | None = None) -> list[str]:
    """Delete the blobs of ``blobs`` (the storage's, beside ``store``) that no session of ``store``
    refers to and that are older than :data:`GRACE_SECONDS`; return their names. Runs after
    cleanup deleted sessions."""
    if not blobs.root.is_dir():
        return []
    keep = referenced_by_store(store)
    cutoff = (time.time() if now is None else now) - GRACE_SECONDS
    removed = []
    for name in list(blobs.names()):
        if name in keep:
            continue
        try:
            if blobs.path_of(name).stat().st_mtime > cutoff:
                continue
        except FileNotFoundError:
            continue
        if blobs.remove(name):
            removed.append(name)
    if removed:
        log.info("removed %d checkpoint blobs no session refers to", len(removed))
    return removed


def copy_blobs(src: BlobStore, dst: BlobStore) -> int:
    """Copy the checkpoint blobs of ``src`` that ``dst`` lacks (``anycode sessions migrate``: the
    source storage's blobs to the target's); returns how many. Nothing when both are one folder.
    Raises OSError."""
    if os.path.realpath(src.root) == os.path.realpath(dst.root):
        return 0
    copied = 0
    for name in src.names():
        if dst.has(name):
            continue
        data = src.get(name)
        if data is not None:
            dst.put(data, name)
            copied += 1
    return copied
