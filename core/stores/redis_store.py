"""Sessions in Redis: ``redis://HOST:PORT/DB`` (or ``rediss://`` for TLS).

Meant as a mirror (``ANYCODE_MIRROR=redis://…``, the design article's external backend), and a
complete :class:`~core.session.store.SessionStore` (it passes the contract suite), so another
machine can list, pull and resume from it. Keys (``anycode:`` prefix)::

    anycode:r:<project key>:<session id>:<subpath or "">   list: the record's entries (JSON text)
    anycode:m:<project key>:<session id>                   string: folded metadata (core.stores.remote_meta)
    anycode:z:<project key>                                sorted set: session id by last activity
    anycode:a:<project key>                                set: archived session ids
    anycode:s:<project key>:<session id>                   set: the session's sub-agent subpaths
    anycode:projects                                       sorted set: project key by last activity
    anycode:mem:<scope> / anycode:meme:<scope>             list / set: memory log entries, their eids
    anycode:b:<sha256>                                     string: a checkpoint blob (zlib), core.stores.blobs
    anycode:bs:<project key>:<session id>                  set: the blobs the session's checkpoints name

- Every write is one optimistic transaction (``WATCH`` the record and its metadata, check
  ``expected_count``/``expected_version`` or the positioned append's overlap, then ``MULTI`` …
  ``EXEC``): two writers racing on a record cannot both pass their checks, and the metadata always
  describes exactly the entries beside it.
- ``list()`` reads the sorted set and the metadata strings only.
- ``ANYCODE_MIRROR_TTL_DAYS`` (optional): every key of a session expires that many days after its
  last write — the backend's own expiry, independent of local cleanup. A listed session whose keys
  expired is dropped from the sorted set when next listed. The checkpoint blobs a session names
  expire with it: each write of the session sets their expiry again (a blob shared by sessions
  lives as long as the longest-lived of them), so an old checkpoint of a chat still in use can be
  rewound on another machine.

redis-py is an optional extra (``pip install -e ".[redis]"``), imported when a store is opened.
Connection failures raise :class:`~core.errors.StoreUnavailable`.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import TYPE_CHECKING, Any, Iterator

from core.errors import SessionConflict, SessionExists, SessionNotFound, StoreUnavailable
from core.session.entries import SessionState, encode_entry
from core.session.keys import SessionKey
from core.session.models import ProjectInfo, SessionMeta
from core.session.store import check_new_record, check_version
from core.stores.blobs import referenced_in
from core.stores.memory_log import check_scope
from core.stores.remote_meta import decode_entries, folded, session_meta, state_of

if TYPE_CHECKING:
    from core.stores.leases import LeaseBoard

log = logging.getLogger(__name__)

NS = "anycode"
_ATTEMPTS = 32

_MEMORY_APPEND = """
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[1], ARGV[i + 1])
    n = n + 1
  end
end
if n > 0 then redis.call('SADD', KEYS[3], KEYS[4]) end
return n
"""


def ttl_seconds() -> int | None:
    """``ANYCODE_MIRROR_TTL_DAYS`` in seconds, or None (no expiry; also for a bad value, logged)."""
    raw = os.environ.get("ANYCODE_MIRROR_TTL_DAYS", "").strip()
    if not raw:
        return None
    try:
        days = float(raw)
    except ValueError:
        log.warning("ANYCODE_MIRROR_TTL_DAYS=%r is not a number; no expiry", raw)
        return None
    return int(days * 86400) if days > 0 else None


class RedisSessionStore:
    """A :class:`~core.session.store.SessionStore` in Redis (layout in the module docstring).

    ``url``: ``redis://HOST:PORT/DB`` or ``rediss://…``; ``client``: a ``redis.Redis`` to use.
    Raises :class:`StoreUnavailable` when redis-py is missing."""

    def __init__(self, url: str, *, client: Any = None):
        self.url = url
        if client is None:
            try:
                import redis
            except ImportError as err:
                raise StoreUnavailable('The Redis mirror needs redis-py: pip install -e ".[redis]"') from err
            client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        self._r = client
        self._memory_script = None

    def __repr__(self) -> str:
        return f"RedisSessionStore({self.url.split('@')[-1]!r})"

    # --- names and errors --------------------------------------------------------------------

    @staticmethod
    def _rec(key: SessionKey) -> str:
        return f"{NS}:r:{key.project_key}:{key.session_id}:{key.subpath or ''}"

    @staticmethod
    def _meta_key(key: SessionKey) -> str:
        return f"{NS}:m:{key.project_key}:{key.session_id}"

    @contextlib.contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        import redis

        try:
            yield
        except redis.exceptions.WatchError:
            raise
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as err:
            raise StoreUnavailable(f"Redis cannot be reached for {op} ({err}).") from err
        except redis.exceptions.RedisError as err:
            raise StoreUnavailable(f"Redis refused {op} ({err}).") from err

    @staticmethod
    def _decode(raw: list[bytes], key: SessionKey) -> list[dict[str, Any]]:
        return decode_entries(raw, f"redis record {key}")

    # --- writes ------------------------------------------------------------------------------

    def _write(self, key: SessionKey, lines: list[str], *, expected_count: int | None = None,
               expected_version: str | None = None, first_seq: int | None = None, new: bool = False) -> int:
        """One optimistic transaction appending ``lines`` to the record (rules in the module
        docstring); returns the record's message count, or with ``first_seq`` its entry count."""
        import redis

        rec, meta_key = self._rec(key), self._meta_key(key)
        main = key.subpath is None
        with self._errors("append"), self._r.pipeline() as p:
            for _ in range(_ATTEMPTS):
                try:
                    p.watch(rec, meta_key)
                    count = p.llen(rec)
                    if new and count:
                        raise SessionExists(f"The session {key} already exists; nothing was written.")
                    todo, start = list(lines), count
                    if first_seq is not None:
                        if first_seq > count:
                            raise SessionConflict(first_seq, count)
                        overlap = min(count - first_seq, len(todo))
                        if overlap and [x.decode() for x in p.lrange(rec, first_seq, first_seq + overlap - 1)] != todo[:overlap]:
                            raise SessionConflict(first_seq, count)
                        todo = todo[overlap:]
                    if count == 0 and main and todo and json.loads(todo[0]).get("type") != "header":
                        raise SessionNotFound(str(key))
                    raw_meta = p.get(meta_key) if main else None
                    meta = json.loads(raw_meta) if raw_meta else None
                    if main and not (meta and meta.get("entries") == count):
                        meta = {"state": SessionState().feed_all(self._decode(p.lrange(rec, 0, -1), key)).to_dict(),
                                "entries": count}  # no meta yet, or one a crash left behind
                    state = state_of(meta) if main else None
                    if expected_count is not None and state is not None and state.message_count != expected_count:
                        raise SessionConflict(expected_count, state.message_count)
                    if expected_version is not None and state is not None:
                        check_version(key, expected_version, state.current)
                    if not todo:
                        p.unwatch()
                        if first_seq is not None:
                            return count
                        return state.message_count if state is not None else self._messages(key)
                    new_entries = [json.loads(x) for x in todo]
                    record = folded(meta, new_entries, start=start) if main else None
                    p.multi()
                    p.rpush(rec, *todo)
                    self._index(p, key, record, referenced_in(new_entries))
                    p.execute()
                    self._keep_blobs(key)
                    if first_seq is not None:
                        return start + len(todo)
                    return int(record["state"]["message_count"]) if record else self._messages(key)
                except redis.exceptions.WatchError:
                    continue
        raise StoreUnavailable(f"Too many writers append to {key} at once; try again.")

    def _index(self, p: Any, key: SessionKey, record: dict[str, Any] | None, blobs: set[str]) -> None:
        """Queue the metadata, list and expiry updates of a write into transaction ``p``; ``blobs``:
        the checkpoint blobs the written entries name (kept in the session's blob set)."""
        pk, sid = key.project_key, key.session_id
        keys = [self._rec(key), self._blob_set(key)]
        if blobs:
            p.sadd(self._blob_set(key), *sorted(blobs))
        if record is not None:
            state = state_of(record)
            when = state.updated_at(default=state.created_at or 0.0)
            p.set(self._meta_key(key), json.dumps(record, ensure_ascii=False))
            p.zadd(f"{NS}:z:{pk}", {sid: when})
            p.zadd(f"{NS}:projects", {pk: when}, gt=True)
            keys.append(self._meta_key(key))
        else:
            p.sadd(f"{NS}:s:{pk}:{sid}", key.subpath)
            keys.append(f"{NS}:s:{pk}:{sid}")
        ttl = ttl_seconds()
        if ttl:
            for name in keys:
                p.expire(name, ttl)

    @staticmethod
    def _blob_set(key: SessionKey) -> str:
        return f"{NS}:bs:{key.project_key}:{key.session_id}"

    def _keep_blobs(self, key: SessionKey) -> None:
        """With ``ANYCODE_MIRROR_TTL_DAYS``, set the expiry of every blob the session names again
        after a write: a blob's own expiry (from its first ``SET``) ran out while the chat that
        named it was still written to, and rewinding that checkpoint elsewhere found no bytes."""
        ttl = ttl_seconds()
        if not ttl:
            return
        names = self._r.smembers(self._blob_set(key))
        if names:
            with self._r.pipeline(transaction=False) as p:
                for name in names:
                    p.expire(f"{NS}:b:{name.decode()}", ttl)
                p.execute()

    def _messages(self, key: SessionKey) -> int:
        return SessionState().feed_all(self.load(key) or []).message_count

    # --- the SessionStore protocol ----------------------------------------------------------

    def append(self, key: SessionKey, entries: list[dict[str, Any]], *, expected_count: int | None = None,
               expected_version: str | None = None) -> int:
        """As :meth:`SessionStore.append` (checks and write in one transaction)."""
        return self._write(key, [encode_entry(e) for e in entries], expected_count=expected_count,
                           expected_version=expected_version)

    def append_at(self, key: SessionKey, entries: list[dict[str, Any]], first_seq: int) -> int:
        """Positioned, idempotent append (the mirror's outbox), as :meth:`SqlSessionStore.append_at`:
        entries already held identically are skipped; a gap or a different entry raises
        :class:`SessionConflict`. Returns the entry count afterwards."""
        return self._write(key, [encode_entry(e) for e in entries], first_seq=first_seq)

    def create_whole(self, key: SessionKey, entries: list[dict[str, Any]]) -> int:
        """As :meth:`SessionStore.create_whole`: one transaction, only if the record is empty."""
        check_new_record(key, entries)
        return self._write(key, [encode_entry(e) for e in entries], new=True)

    def entry_count(self, key: SessionKey) -> int:
        """How many entries the record holds (0 when missing)."""
        with self._errors("count"):
            return int(self._r.llen(self._rec(key)))

    def load(self, key: SessionKey) -> list[dict[str, Any]] | None:
        """Every entry of the record in order, or None when missing."""
        with self._errors("load"):
            raw = self._r.lrange(self._rec(key), 0, -1)
        return self._decode(raw, key) if raw else None

    def exists(self, key: SessionKey) -> bool:
        """Whether the record has any entry."""
        with self._errors("exists"):
            return bool(self._r.exists(self._rec(key)))

    def list(self, project_key: str, *, archived: bool = False) -> list[SessionMeta]:
        """The project's main sessions (or archived ones) from the sorted set and the metadata
        strings only, most recent activity first."""
        with self._errors("list"):
            sids = [s.decode() for s in self._r.zrevrange(f"{NS}:z:{project_key}", 0, -1)]
            if not sids:
                return []
            gone = {s.decode() for s in self._r.smembers(f"{NS}:a:{project_key}")}
            metas = self._r.mget([self._meta_key(SessionKey(project_key, s)) for s in sids])
        out, expired = [], []
        for sid, raw in zip(sids, metas):
            if raw is None:
                expired.append(sid)  # its keys expired (ANYCODE_MIRROR_TTL_DAYS) or it was removed
                continue
            if (sid in gone) != archived:
                continue
            out.append(session_meta(SessionKey(project_key, sid), json.loads(raw), archived=archived))
        if expired:
            with self._errors("list"):
                self._r.zrem(f"{NS}:z:{project_key}", *expired)
        out.sort(key=lambda m: (m.updated_at, m.created_at, m.id), reverse=True)
        return out

    def project_keys(self) -> list[str]:
        """Every project key, from the projects sorted set only."""
        with self._errors("project_keys"):
            return [k.decode() for k in self._r.zrevrange(f"{NS}:projects", 0, -1)]

    def project_identity(self, project_key: str) -> str | None:
        """The git identity in the metadata of the project's newest session, or None."""
        with self._errors("project_identity"):
            sids = [s.decode() for s in self._r.zrevrange(f"{NS}:z:{project_key}", 0, 4)]
            raws = self._r.mget([self._meta_key(SessionKey(project_key, s)) for s in sids]) if sids else []
        return next((st.identity for st in (state_of(json.loads(r)) for r in raws if r) if st.identity), None)

    def list_projects(self) -> list[ProjectInfo]:
        """Every project holding a main session, most recently active first."""
        with self._errors("list_projects"):
            pks = [p.decode() for p in self._r.zrevrange(f"{NS}:projects", 0, -1)]
        out = []
        for pk in pks:
            live, gone = self.list(pk), self.list(pk, archived=True)
            metas = live or gone
            if metas:
                out.append(ProjectInfo(pk, next((m.cwd for m in metas if m.cwd), None), len(live),
                                       max(m.updated_at for m in metas)))
        out.sort(key=lambda p: p.updated_at, reverse=True)
        return out

    def list_subpaths(self, key: SessionKey) -> list[str]:
        """The subpaths of the session's sub-agent records, sorted."""
        with self._errors("list_subpaths"):
            subs = self._r.smembers(f"{NS}:s:{key.project_key}:{key.session_id}")
        return sorted(s.decode() for s in subs if self.exists(SessionKey(key.project_key, key.session_id, s.decode())))

    def remove(self, key: SessionKey) -> None:
        """Delete a session with its sub-agent records, or one sub-agent record."""
        if not self.exists(key):
            raise SessionNotFound(str(key))
        pk, sid = key.project_key, key.session_id
        with self._errors("remove"), self._r.pipeline() as p:
            if key.subpath is not None:
                p.delete(self._rec(key))
                p.srem(f"{NS}:s:{pk}:{sid}", key.subpath)
                p.execute()
                return
            subs = [s.decode() for s in self._r.smembers(f"{NS}:s:{pk}:{sid}")]
            p.delete(self._rec(key), self._meta_key(key), f"{NS}:s:{pk}:{sid}", self._blob_set(key),
                     *(self._rec(SessionKey(pk, sid, s)) for s in subs))
            p.zrem(f"{NS}:z:{pk}", sid)
            p.srem(f"{NS}:a:{pk}", sid)
            p.execute()
            if not self._r.zcard(f"{NS}:z:{pk}"):
                self._r.zrem(f"{NS}:projects", pk)

    def archive(self, key: SessionKey) -> None:
        """Mark the session archived (idempotent)."""
        self._set_archived(key, True)

    def unarchive(self, key: SessionKey) -> None:
        """Mark the session unarchived (idempotent)."""
        self._set_archived(key, False)

    def _set_archived(self, key: SessionKey, archived: bool) -> None:
        main = SessionKey(key.project_key, key.session_id)
        if not self.exists(main):
            raise SessionNotFound(str(key))
        with self._errors("archive"):
            (self._r.sadd if archived else self._r.srem)(f"{NS}:a:{key.project_key}", key.session_id)

    # --- checkpoint blobs (core.stores.blobs: what a mirror carries to other machines) -------

    def has_blob(self, name: str) -> bool:
        """Whether the blob ``name`` (SHA-256 hex) is stored here."""
        with self._errors("has_blob"):
            return bool(self._r.exists(f"{NS}:b:{name}"))

    def get_blob(self, name: str) -> bytes | None:
        """The blob's stored (zlib-compressed) bytes, or None."""
        with self._errors("get_blob"):
            return self._r.get(f"{NS}:b:{name}")

    def put_blob(self, name: str, packed: bytes) -> None:
        """Store the blob ``name`` (its zlib-compressed bytes) once (``SET NX``), expiring with
        ``ANYCODE_MIRROR_TTL_DAYS`` like the records."""
        ttl = ttl_seconds()
        with self._errors("put_blob"):
            self._r.set(f"{NS}:b:{name}", packed, nx=True, ex=ttl or None)

    def memory_log(self) -> "RedisMemoryLog":
        """The memory log kept in the same database."""
        return RedisMemoryLog(self)

    def describe(self) -> str:
        """The Redis URL without its user name and password."""
        scheme, _, rest = self.url.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}"

    def leases(self) -> LeaseBoard:
        """A new :class:`~core.stores.leases.MemoryLeases`: reply leases of this process only
        (a Redis store is a mirror first; as the store of record, ``expected_count`` still
        catches a racing writer)."""
        from core.stores.leases import MemoryLeases

        return MemoryLeases()

    def close(self) -> None:
        """Close the connection pool."""
        self._r.close()


class RedisMemoryLog:
    """:class:`~core.stores.memory_log.MemoryLog` in Redis: a list per scope and a set of its eids,
    appended by one script (an entry is written once, whoever retries)."""

    def __init__(self, store: RedisSessionStore):
        self.store = store

    def append(self, scope: str, entries: list[dict[str, Any]]) -> int:
        """Write the entries whose ``eid`` the scope lacks; return how many."""
        check_scope(scope)
        args: list[str] = []
        for e in entries:
            if not isinstance(e.get("eid"), str) or not e["eid"]:
                raise ValueError("every memory entry needs an eid")
            args += [e["eid"], encode_entry(e)]
        if not args:
            return 0
        with self.store._errors("memory append"):
            if self.store._memory_script is None:
                self.store._memory_script = self.store._r.register_script(_MEMORY_APPEND)
            return int(self.store._memory_script(
                keys=[f"{NS}:mem:{scope}", f"{NS}:meme:{scope}", f"{NS}:memscopes", scope], args=args))

    def load(self, scope: str) -> list[dict[str, Any]]:
        """The scope's entries in append order."""
        check_scope(scope)
        with self.store._errors("memory load"):
            raw = self.store._r.lrange(f"{NS}:mem:{scope}", 0, -1)
        return [json.loads(x) for x in raw]

    def scopes(self) -> list[str]:
        """Every scope holding an entry, sorted."""
        with self.store._errors("memory scopes"):
            return sorted(s.decode() for s in self.store._r.smembers(f"{NS}:memscopes"))
