"""Sessions in an S3 bucket (AWS S3, MinIO, Cloudflare R2, any S3 API): ``s3://BUCKET/PREFIX``.

Meant as a mirror (``ANYCODE_MIRROR=s3://…``: the design article's "write locally, then mirror
asynchronously to an external backend"), and a complete :class:`~core.session.store.SessionStore`
(it passes the contract suite), so another machine can list, pull and resume from it.

S3 has no append, so a record is a sequence of objects, one per written batch::

    PREFIX/projects/<project key>/<session id>/main/e/<first entry index, 12 digits>.jsonl
    PREFIX/projects/<project key>/<session id>/sub/<subpath>/e/<first entry index>.jsonl
    PREFIX/projects/<project key>/<session id>/meta.json     folded metadata (core.stores.remote_meta)
    PREFIX/projects/<project key>/<session id>/archived      present while archived
    PREFIX/memory/<scope>/<time ns>-<eid>.json               one memory log entry
    PREFIX/blobs/<sha256>                                    a checkpoint blob (zlib), core.stores.blobs

- **Appends are compare-and-swap on the entry count.** A batch starting at entry ``n`` is written
  with ``If-None-Match: *`` under the name ``n``: of two writers appending at the same point
  exactly one succeeds; the other sees ``PreconditionFailed``, reads again and re-checks its
  ``expected_count``/``expected_version`` (so conflicts are detected as in the JSONL store's lock).
  An outbox retry of a batch already written finds it there, equal, and writes nothing twice.
- **Whole or absent.** ``create_whole`` writes every entry as the one first batch: S3 writes an
  object whole or not at all.
- **list() reads metadata only**: one listing of the project's prefix (grouped so no entry object
  is listed) and the ``meta.json`` of each session.
- Expiry is the bucket's: ``put_lifecycle(days)`` puts an expiration rule on the prefix (``anycode
  mirror lifecycle --days N``), the article's "the mirror is cleaned by the backend's lifecycle policy".

Endpoint from ``ANYCODE_S3_ENDPOINT`` or the standard ``AWS_ENDPOINT_URL``; credentials and region
from the standard AWS chain. boto3 is an optional extra (``pip install -e ".[s3]"``), imported
when a store is opened. Network and service failures raise :class:`~core.errors.StoreUnavailable`.
"""
from __future__ import annotations

import json
import logging
import os
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Iterator

from core.errors import SessionConflict, SessionExists, SessionNotFound, StoreUnavailable
from core.session.entries import SessionState, encode_entry
from core.session.keys import SessionKey
from core.session.models import ProjectInfo, SessionMeta
from core.session.store import check_new_record, check_version
from core.stores.memory_log import check_scope
from core.stores.remote_meta import decode_entries, folded, session_meta, state_of

if TYPE_CHECKING:
    from core.stores.leases import LeaseBoard

log = logging.getLogger(__name__)

_ATTEMPTS = 16  # compare-and-swap rounds before giving up on a record many writers append to at once


def parse_s3_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://BUCKET/PREFIX`` (the prefix ends in ``/`` unless empty).
    Raises StoreUnavailable for anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise StoreUnavailable(f"An S3 mirror is written s3://BUCKET/PREFIX, not {url!r}.")
    prefix = parts.path.strip("/")
    return parts.netloc, (prefix + "/") if prefix else ""


class S3SessionStore:
    """A :class:`~core.session.store.SessionStore` in an S3 bucket (layout in the module docstring).

    ``url``: ``s3://BUCKET/PREFIX``; ``client``: a boto3 S3 client to use (default: one made from
    the environment). Raises :class:`StoreUnavailable` when boto3 is missing."""

    def __init__(self, url: str, *, client: Any = None):
        self.url = url
        self.bucket, self.prefix = parse_s3_url(url)
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as err:
                raise StoreUnavailable('The S3 mirror needs boto3: pip install -e ".[s3]"') from err
            endpoint = os.environ.get("ANYCODE_S3_ENDPOINT", "").strip() or None  # else AWS_ENDPOINT_URL
            client = boto3.client("s3", endpoint_url=endpoint, config=Config(
                connect_timeout=5, read_timeout=15, retries={"max_attempts": 3, "mode": "standard"}))
        self._s3 = client

    def __repr__(self) -> str:
        return f"S3SessionStore({self.url!r})"

    # --- object names ----------------------------------------------------------------------

    def _dir(self, key: SessionKey) -> str:
        return f"{self.prefix}projects/{key.project_key}/{key.session_id}/"

    def _rec(self, key: SessionKey) -> str:
        return self._dir(key) + (f"sub/{key.subpath}/e/" if key.subpath else "main/e/")

    # --- S3 calls, errors as StoreUnavailable ---------------------------------------------

    def _call(self, op: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._s3, op)(Bucket=self.bucket, **kwargs)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound", "PreconditionFailed", "412", "ConditionalRequestConflict",
                        "NoSuchLifecycleConfiguration"):
                raise
            raise StoreUnavailable(f"The S3 bucket {self.bucket} refused {op} ({code or err}).") from err
        except BotoCoreError as err:
            raise StoreUnavailable(f"The S3 endpoint cannot be reached ({err}).") from err

    @staticmethod
    def _code(err: Exception) -> str:
        return getattr(err, "response", {}).get("Error", {}).get("Code", "")

    def _keys(self, prefix: str, delimiter: str | None = None) -> Iterator[tuple[str, bool]]:
        """``(name, is_prefix)`` of every object (and grouped prefix) under ``prefix``."""
        token = None
        while True:
            kwargs: dict[str, Any] = {"Prefix": prefix}
            if delimiter:
                kwargs["Delimiter"] = delimiter
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call("list_objects_v2", **kwargs)
            for obj in page.get("Contents", ()):
                yield obj["Key"], False
            for common in page.get("CommonPrefixes", ()):
                yield common["Prefix"], True
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def _get(self, name: str) -> bytes | None:
        try:
            return self._call("get_object", Key=name)["Body"].read()
        except Exception as err:  # noqa: BLE001 - only "no such key" is expected here
            if self._code(err) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise

    def _put(self, name: str, body: bytes, *, only_new: bool = False) -> bool:
        """Write an object; with ``only_new``, only if none exists (False when one did)."""
        kwargs: dict[str, Any] = {"Key": name, "Body": body}
        if only_new:
            kwargs["IfNoneMatch"] = "*"
        try:
            self._call("put_object", **kwargs)
            return True
        except Exception as err:  # noqa: BLE001
            if only_new and self._code(err) in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            raise

    def _delete_under(self, prefix: str) -> int:
        names = [name for name, _ in self._keys(prefix)]
        for i in range(0, len(names), 1000):
            self._call("delete_objects", Delete={"Objects": [{"Key": n} for n in names[i:i + 1000]], "Quiet": True})
        return len(names)

    # --- records ---------------------------------------------------------------------------

    def _batches(self, key: SessionKey) -> list[tuple[int, str]]:
        """``(first entry index, object name)`` of the record's batches, in order."""
        rec = self._rec(key)
        out = []
        for name, _ in self._keys(rec):
            stem = name[len(rec):].split(".", 1)[0]
            if stem.isdigit():
                out.append((int(stem), name))
        return sorted(out)

    @staticmethod
    def _decode(data: bytes, name: str) -> list[dict[str, Any]]:
        return decode_entries(data.splitlines(), f"s3 object {name}")

    def _read(self, key: SessionKey) -> list[dict[str, Any]] | None:
        batches = self._batches(key)
        if not batches:
            return None
        entries: list[dict[str, Any]] = []
        for first, name in batches:
            if first != len(entries):
                log.warning("s3 record %s: batch %s starts at %d after %d entries", key, name, first, len(entries))
                if first < len(entries):
                    continue  # an overlapping batch (never written by anycode): the first one wins
            data = self._get(name)
            if data is not None:
                entries.extend(self._decode(data, name))
        return entries

    def _count(self, key: SessionKey) -> tuple[int, list[tuple[int, str]]]:
        """The record's entry count and batches (one listing and one read of the last batch)."""
        batches = self._batches(key)
        if not batches:
            return 0, batches
        first, name = batches[-1]
        return first + len(self._decode(self._get(name) or b"", name)), batches

    def _meta(self, key: SessionKey) -> dict[str, Any] | None:
        data = self._get(self._dir(key) + "meta.json")
        try:
            return json.loads(data) if data else None
        except ValueError:
            return None

    def _state(self, key: SessionKey, count: int) -> SessionState:
        """The folded state of a main record holding ``count`` entries (its meta when current)."""
        meta = self._meta(key)
        if meta and meta.get("entries") == count:
            return state_of(meta)
        return SessionState().feed_all(self._read(key) or [])

    def _write_meta(self, key: SessionKey, start: int, new: list[dict[str, Any]]) -> int:
        """Fold ``new`` (written at entry ``start``) into the session's meta; return the record's
        message count (a sub-agent record has no meta: its entries are counted)."""
        if key.subpath is not None:
            return SessionState().feed_all(self._read(key) or []).message_count
        meta = self._meta(key)
        if not (meta and meta.get("entries") == start) and start:
            meta = {"state": SessionState().feed_all((self._read(key) or [])[:start]).to_dict(), "entries": start}
        record = folded(meta, new, start=start)
        self._put(self._dir(key) + "meta.json", json.dumps(record, ensure_ascii=False).encode())
        return int(record["state"].get("message_count", 0))

    def _put_batch(self, key: SessionKey, start: int, lines: list[str]) -> bool:
        body = ("\n".join(lines) + "\n").encode("utf-8")
        return self._put(f"{self._rec(key)}{start:012d}.jsonl", body, only_new=True)

    # --- the SessionStore protocol --------------------------------------------------------

    def append(self, key: SessionKey, entries: list[dict[str, Any]], *, expected_count: int | None = None,
               expected_version: str | None = None) -> int:
        """As :meth:`SessionStore.append`; the checks and the write are one compare-and-swap
        (module docstring)."""
        lines = [encode_entry(e) for e in entries]
        for _ in range(_ATTEMPTS):
            count, _batches = self._count(key)
            if count == 0 and key.subpath is None and entries and entries[0].get("type") != "header":
                raise SessionNotFound(str(key))
            if key.subpath is None and (expected_count is not None or expected_version is not None or not entries):
                state = self._state(key, count)
                if expected_count is not None and state.message_count != expected_count:
                    raise SessionConflict(expected_count, state.message_count)
                if expected_version is not None:
                    check_version(key, expected_version, state.current)
                if not entries:
                    return state.message_count
            elif not entries:
                return 0
            if self._put_batch(key, count, lines):
                return self._write_meta(key, count, list(entries))
        raise StoreUnavailable(f"Too many writers append to {key} at once; try again.")

    def append_at(self, key: SessionKey, entries: list[dict[str, Any]], first_seq: int) -> int:
        """Positioned, idempotent append (what the mirror's outbox uses, as
        :meth:`SqlSessionStore.append_at`): entries the record already holds at those indexes are
        skipped when identical; a gap or a different entry raises :class:`SessionConflict`."""
        lines = [encode_entry(e) for e in entries]
        for _ in range(_ATTEMPTS):
            count, _batches = self._count(key)
            if first_seq > count:
                raise SessionConflict(first_seq, count)
            overlap = min(count - first_seq, len(lines))
            if overlap:
                held = (self._read(key) or [])[first_seq:first_seq + overlap]
                if [encode_entry(e) for e in held] != lines[:overlap]:
                    raise SessionConflict(first_seq, count)
            rest = lines[overlap:]
            if not rest:
                return count
            if count == 0 and key.subpath is None and json.loads(rest[0]).get("type") != "header":
                raise SessionNotFound(str(key))
            if self._put_batch(key, count, rest):
                self._write_meta(key, count, [json.loads(line) for line in rest])
                return count + len(rest)
        raise StoreUnavailable(f"Too many writers append to {key} at once; try again.")

    def entry_count(self, key: SessionKey) -> int:
        """How many entries the record holds (0 when missing)."""
        return self._count(key)[0]

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        """As :meth:`SessionStore.create_whole`: every entry in one object, written only if the
        record has none (S3 writes an object whole or not at all)."""
        check_new_record(key, entries)
        lines = [encode_entry(e) for e in entries]
        if self._batches(key) or not self._put_batch(key, 0, lines):
            raise SessionExists(f"The session {key} already exists; nothing was written.")
        return self._write_meta(key, 0, list(entries))

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """Every entry of the record in order, or None when missing."""
        return self._read(key)

    def exists(self, key: SessionKey) -> bool:
        """Whether the record has any entry."""
        return bool(self._batches(key))

    def _archived(self, key: SessionKey) -> bool:
        return self._get(self._dir(key) + "archived") is not None

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """The project's main sessions (or archived ones) from their metadata objects only, most
        recent activity first."""
        metas = []
        for sid, state in self._sessions(project_key).items():
            if state["archived"] != archived or state["meta"] is None:
                continue
            metas.append(session_meta(SessionKey(project_key, sid), state["meta"], archived=archived))
        metas.sort(key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)
        return metas

    def _sessions(self, project_key: str) -> dict[str, dict[str, Any]]:
        """``{session id: {"meta", "archived"}}`` for the project's main sessions: one listing
        grouped at ``/main/`` and ``/sub/`` (no entry object listed), then each meta.json."""
        base = f"{self.prefix}projects/{project_key}/"
        found: dict[str, dict[str, Any]] = {}
        for name, is_prefix in self._keys(base, delimiter="/e/"):
            rest = name[len(base):]
            sid, _, tail = rest.partition("/")
            entry = found.setdefault(sid, {"meta": None, "archived": False, "main": False})
            if tail == "archived":
                entry["archived"] = True
            elif tail == "meta.json":
                entry["meta"] = True
            elif is_prefix and tail == "main/e/":
                entry["main"] = True
        out = {}
        for sid, entry in found.items():
            if not entry["main"]:
                continue
            key = SessionKey(project_key, sid)
            meta = self._meta(key)
            if meta is None or not meta.get("entries"):
                count, _ = self._count(key)  # a writer died between its batch and its meta: fold
                meta = {"state": SessionState().feed_all(self._read(key) or []).to_dict(), "entries": count}
            out[sid] = {"meta": meta, "archived": entry["archived"]}
        return out

    def project_keys(self) -> list[str]:
        """Every project key in the bucket: one grouped listing of ``PREFIX/projects/`` (no
        metadata object read; what the sidebar's mirror listing asks, :mod:`core.stores.remote_list`)."""
        base = f"{self.prefix}projects/"
        return [name[len(base):].strip("/") for name, is_prefix in self._keys(base, delimiter="/") if is_prefix]

    def project_identity(self, project_key: str) -> str | None:
        """The git identity recorded in the metadata of the project's sessions (the newest one
        naming one), or None."""
        states = [state_of(v["meta"]) for v in self._sessions(project_key).values()]
        states.sort(key=lambda st: st.updated_at(default=st.created_at or 0.0), reverse=True)
        return next((st.identity for st in states if st.identity), None)

    def list_projects(self) -> list[ProjectInfo]:
        """Every project holding a main session, most recently active first."""
        out = []
        for name, is_prefix in self._keys(f"{self.prefix}projects/", delimiter="/"):
            if not is_prefix:
                continue
            pk = name[len(self.prefix) + len("projects/"):].strip("/")
            live, gone = self.list(pk), self.list(pk, archived=True)
            metas = live or gone
            if not metas:
                continue
            out.append(ProjectInfo(pk, next((m.cwd for m in metas if m.cwd), None), len(live),
                                   max(m.updated_at for m in metas)))
        out.sort(key=lambda p: p.updated_at, reverse=True)
        return out

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """The subpaths of the session's sub-agent records, sorted."""
        base = self._dir(key) + "sub/"
        subs = set()
        for name, is_prefix in self._keys(base, delimiter="/e/"):
            if is_prefix and name.endswith("/e/"):
                subs.add(name[len(base):-len("/e/")])
        return sorted(subs)

    def remove(self, key: SessionKey) -> None:
        """Delete a session with its sub-agent records and metadata, or one sub-agent record."""
        if not self.exists(key):
            raise SessionNotFound(str(key))
        self._delete_under(self._dir(key) if key.subpath is None else self._dir(key) + f"sub/{key.subpath}/")

    def archive(self, key: SessionKey) -> None:
        """Mark the session archived (idempotent)."""
        if not self.exists(SessionKey(key.project_key, key.session_id)):
            raise SessionNotFound(str(key))
        self._put(self._dir(key) + "archived", b"")

    def unarchive(self, key: SessionKey) -> None:
        """Mark the session unarchived (idempotent)."""
        if not self.exists(SessionKey(key.project_key, key.session_id)):
            raise SessionNotFound(str(key))
        self._call("delete_object", Key=self._dir(key) + "archived")

    # --- checkpoint blobs (core.stores.blobs: what a mirror carries to other machines) -------

    def has_blob(self, name: str) -> bool:
        """Whether the blob ``name`` (SHA-256 hex) is in the bucket."""
        try:
            self._call("head_object", Key=f"{self.prefix}blobs/{name}")
            return True
        except Exception as err:  # noqa: BLE001 - only "no such key" is expected here
            if self._code(err) in ("NoSuchKey", "404", "NotFound"):
                return False
            raise

    def get_blob(self, name: str) -> bytes | None:
        """The blob's stored (zlib-compressed) bytes, or None."""
        return self._get(f"{self.prefix}blobs/{name}")

    def put_blob(self, name: str, packed: bytes) -> None:
        """Store the blob ``name`` (its zlib-compressed bytes), written once (``If-None-Match``)."""
        self._put(f"{self.prefix}blobs/{name}", packed, only_new=True)

    def memory_log(self) -> "S3MemoryLog":
        """The memory log kept in the same bucket and prefix."""
        return S3MemoryLog(self)

    def describe(self) -> str:
        """The ``s3://BUCKET/PREFIX`` URL (it holds no credentials)."""
        return self.url

    def leases(self) -> LeaseBoard:
        """A new :class:`~core.stores.leases.MemoryLeases`: a bucket offers no atomic
        check-and-set to share reply leases through, so they are this process's (an S3 store is
        a mirror first; as the store of record, ``expected_count`` still catches a racing writer)."""
        from core.stores.leases import MemoryLeases

        return MemoryLeases()

    def close(self) -> None:
        """Close the S3 client's connections."""
        self._s3.close()

    def put_lifecycle(self, days: int) -> dict[str, Any]:
        """Put (replace) the bucket lifecycle rule ``anycode-expire`` that expires every object
        under this store's prefix ``days`` after it was written; returns the rule. The bucket's
        other rules are kept."""
        if int(days) < 1:
            raise ValueError("The mirror's expiry must be at least 1 day.")
        rule = {"ID": "anycode-expire", "Status": "Enabled", "Filter": {"Prefix": self.prefix},
                "Expiration": {"Days": int(days)}}
        try:
            current = self._call("get_bucket_lifecycle_configuration").get("Rules", [])
        except Exception as err:  # noqa: BLE001 - none configured yet
            if self._code(err) not in ("NoSuchLifecycleConfiguration", "404"):
                raise
            current = []
        rules = [r for r in current if r.get("ID") != rule["ID"]] + [rule]
        self._call("put_bucket_lifecycle_configuration", LifecycleConfiguration={"Rules": rules})
        return rule


class S3MemoryLog:
    """:class:`~core.stores.memory_log.MemoryLog` in the store's bucket: one object per entry,
    named by time and ``eid`` (``If-None-Match``: an entry is written once)."""

    def __init__(self, store: S3SessionStore):
        self.store = store

    def _base(self, scope: str) -> str:
        check_scope(scope)
        return f"{self.store.prefix}memory/{scope.replace(':', '/', 1)}/"

    def _names(self, scope: str) -> list[str]:
        return sorted(name for name, _ in self.store._keys(self._base(scope)))

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        """Write the entries whose ``eid`` the scope lacks; return how many."""
        base = self._base(scope)
        lines = [(e.get("eid"), encode_entry(e)) for e in entries]
        if any(not isinstance(eid, str) or not eid for eid, _ in lines):
            raise ValueError("every memory entry needs an eid")
        have = {n.rsplit("-", 1)[-1][:-len(".json")] for n in self._names(scope)}
        written = 0
        for eid, line in lines:
            if eid in have:
                continue
            if self.store._put(f"{base}{time.time_ns():020d}-{eid}.json", line.encode(), only_new=True):
                written += 1
            have.add(eid)
        return written

    def load(self, scope: str) -> list[dict[str, Any]]:
        """The scope's entries in the order they were written (each eid once)."""
        out, seen = [], set()
        for name in self._names(scope):
            data = self.store._get(name)
            for entry in S3SessionStore._decode(data or b"", name):
                if entry.get("eid") not in seen:
                    seen.add(entry.get("eid"))
                    out.append(entry)
        return out

    def scopes(self) -> list[str]:
        """Every scope holding an entry, sorted."""
        base = f"{self.store.prefix}memory/"
        found = set()
        for name, _ in self.store._keys(base):
            rest = name[len(base):]
            if rest.startswith("user/"):
                found.add("user")
            elif rest.startswith("project/"):
                found.add("project:" + rest[len("project/"):].split("/", 1)[0])
        return sorted(found)
