"""Checkpoints of what the agent changed in the workspace, and rewinding files with the conversation
(issue 29; Claude Code's ``/rewind``: "code and conversation", "conversation only", "code only").

**Recording.** The runner attaches a :class:`Recorder` to the turn's :class:`Workspace`
(:func:`attach`); ``write_file`` reports every change to it with the old file still open
(:meth:`Recorder.wrote`): the old and new bytes go into the blob store
(:mod:`core.stores.blobs`) before the rename, and each stored round carries one ``checkpoint``
entry of what it changed (:meth:`Recorder.drain`, stored with the round's messages in one append:
:meth:`core.session.manager.SessionManager.store_round`)::

    {"type": "checkpoint", "ts": float, "at": <message count after the round>,
     "files": [{"path": <relative to the workspace>, "before": sha256 hex | null (absent),
                "after": sha256 hex | null, "mode_before": int | null, "mode_after": int | null,
                "kept"?: false}]}

``kept: false``: the old or new bytes were over ``ANYCODE_CHECKPOINT_MAX_BYTES`` (default 10 MiB),
only their hash is recorded and rewinding that file says so. Sub-agents share the parent's
Workspace, so their changes are in the parent's round checkpoint (they are part of its turn).

**Rewind to message N** (:func:`plan_rewind`, :func:`rewind`): the conversation keeps messages
``0..N`` (the cut moved out of a tool round as forks do); each file a checkpoint recorded goes
back to its state as of then: the ``after`` of its last checkpoint at or before that point, else
the ``before`` of its first one (``null``: the file is removed). A file whose bytes are not the
last recorded ``after`` was changed outside anycode since: it is listed as such and left alone
unless the caller chooses it. Each file is written aside and renamed (a kill -9 leaves each file
old or new); the rewind is recorded first, as a checkpoint with ``"rewind": true`` and an ``id``
(its ``before``/``after`` are the files just before and after the rewind), so running it again
finishes a rewind that was killed, and :func:`undo` puts the files back (a checkpoint with
``"undoes": <id>``). A conversation rewind is a new version cut at N
(:meth:`SessionManager.fork` with ``version=True``, as Edit and Regenerate do; nothing is deleted),
or the version that already is that cut (made in use again; none when the session ends at N);
the rewind checkpoint is then appended to both the version (``"from"``: the session it was cut
from) and that session, so either one knows what the files are.
"""
from __future__ import annotations

import hashlib
import logging
import os
import secrets
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from core.agent import tools as _tools
from core.agent.tools import ToolError, Workspace
from core.errors import RewindError
from core.session.keys import SessionKey
from core.session.versions import valid_cut
from core.stores.blobs import BlobStore

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
MODES = ("both", "conversation", "files")


def max_bytes() -> int:
    """``$ANYCODE_CHECKPOINT_MAX_BYTES`` (default 10 MiB): the largest file whose bytes a checkpoint
    keeps; an unparsable or negative value is logged and the default used."""
    raw = os.environ.get("ANYCODE_CHECKPOINT_MAX_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        log.warning("ANYCODE_CHECKPOINT_MAX_BYTES=%r is not a byte count; using %d", raw, DEFAULT_MAX_BYTES)
        return DEFAULT_MAX_BYTES


def _hash_fd(fd: int, cap: int) -> tuple[str, bytes | None]:
    """SHA-256 of the whole file ``fd`` (from offset 0) and its bytes when at most ``cap``."""
    h = hashlib.sha256()
    chunks: list[bytes] | None = []
    size = 0
    offset = 0
    while True:
        piece = os.pread(fd, 1 << 20, offset)
        if not piece:
            break
        offset += len(piece)
        h.update(piece)
        size += len(piece)
        if chunks is not None:
            chunks.append(piece)
            if size > cap:
                chunks = None
    return h.hexdigest(), (b"".join(chunks) if chunks is not None else None)


class Recorder:
    """Collects the file changes of one turn (thread-safe: tools run in worker threads) and
    stores them as checkpoint entries. ``blobs``: where the bytes go."""

    def __init__(self, blobs: BlobStore, *, cap: int | None = None):
        self.blobs = blobs
        self.cap = max_bytes() if cap is None else cap
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, Any]] = {}  # path -> file record (first before, last after)

    def wrote(self, path: str, old_fd: int | None, old_mode: int | None, data: bytes, mode: int) -> None:
        """``path`` (workspace-relative) is about to become ``data`` with ``mode``; ``old_fd``: the
        current file opened for reading (None: it does not exist). Stores the bytes (within the cap)
        before returning. Raises OSError when the blob store cannot be written."""
        before = None
        kept = True
        if old_fd is not None:
            before, old_bytes = _hash_fd(old_fd, self.cap)
            if old_bytes is None:
                kept = False
            else:
                self.blobs.put(old_bytes, before)
        after = hashlib.sha256(data).hexdigest()
        if len(data) > self.cap:
            kept = False
        else:
            self.blobs.put(data, after)
        with self._lock:
            rec = self._pending.get(path)
            if rec is None:
                rec = self._pending[path] = {"path": path, "before": before, "mode_before": old_mode}
            rec["after"], rec["mode_after"] = after, mode
            if not kept:
                rec["kept"] = False

    def drain(self) -> list[dict[str, Any]]:
        """The changes recorded since the last drain (file records, in first-change order)."""
        with self._lock:
            files, self._pending = list(self._pending.values()), {}
        return [f for f in files if f["before"] != f["after"] or f["mode_before"] != f["mode_after"]]

    def give_back(self, files: list[dict[str, Any]]) -> None:
        """Return ``files`` (from :meth:`drain`) that could not be stored with their round, so
        the next drain has them again: a path changed since keeps its first ``before`` (theirs)
        and its last ``after`` (the newer one)."""
        with self._lock:
            merged = {f["path"]: dict(f) for f in files}
            for path, newer in self._pending.items():
                if path in merged:
                    merged[path].update(after=newer["after"], mode_after=newer["mode_after"])
                    if newer.get("kept") is False:
                        merged[path]["kept"] = False
                else:
                    merged[path] = newer
            self._pending = merged


def attach(workspace: Workspace | None, blobs: BlobStore) -> Recorder | None:
    """Give ``workspace`` a fresh recorder writing into ``blobs`` (the storage's); None without a
    workspace."""
    if workspace is None:
        return None
    recorder = Recorder(blobs)
    object.__setattr__(workspace, "recorder", recorder)
    return recorder


def checkpoint_entry(at: int, files: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A checkpoint entry (shape in the module docstring); ``extra``: rewind, id, to, from, undoes."""
    return {"type": "checkpoint", "ts": time.time(), "at": int(at), "files": files, **extra}


def checkpoints_of(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """The well-formed checkpoint entries of a session, in order."""
    return [e for e in entries if isinstance(e, dict) and e.get("type") == "checkpoint"
            and isinstance(e.get("at"), int) and isinstance(e.get("files"), list)]


# --- the workspace side -----------------------------------------------------------------------


def _state(ws: Workspace, rel: str) -> tuple[str | None, int | None, bytes | None]:
    """``(sha256, mode, bytes)`` of the workspace file ``rel`` now; ``(None, None, None)`` when absent.
    Raises ToolError (a directory, a link out of the workspace), OSError."""
    with _tools._Opened() as opened:
        try:
            dir_fd, name, got = ws._walk(rel, opened, final=lambda d, n: _tools._open_regular(d, n, rel, must_exist=False))
        except ToolError as err:
            if str(err).startswith("No such directory"):
                return None, None, None
            raise
        if got is None:
            return None, None, None
        fd, st = got
        opened.add(fd)
        digest, data = _hash_fd(fd, 1 << 62)
        return digest, stat.S_IMODE(st.st_mode), data


def _put(ws: Workspace, rel: str, data: bytes | None, mode: int | None) -> None:
    """Make ``rel`` hold ``data`` with ``mode`` (written aside, fsynced, renamed) or, for None,
    remove it. Raises ToolError, OSError."""
    with _tools._Opened() as opened:
        final = lambda d, n: _tools._open_regular(d, n, rel, must_exist=False)  # noqa: E731
        if data is None:
            try:
                dir_fd, name, got = ws._walk(rel, opened, final=final)
            except ToolError as err:
                if str(err).startswith("No such directory"):
                    return
                raise
            if got is not None:
                opened.add(got[0])
                ws._check_inside(dir_fd, rel)
                os.unlink(name, dir_fd=dir_fd)
                try:
                    os.fsync(dir_fd)
                except OSError:
                    pass
            return
        dir_fd, name, got = ws._walk(rel, opened, create_dirs=True, final=final)
        if got is not None:
            opened.add(got[0])
        ws._check_inside(dir_fd, rel)
        _tools._replace(dir_fd, name, data, mode if mode is not None else _tools._NEW_FILE_MODE)


# --- planning -----------------------------------------------------------------------------------


@dataclass
class FileChange:
    """One file of a rewind plan. ``status``: ``"restore"`` (will go back), ``"same"`` (already
    as of then), ``"outside"`` (changed outside anycode since its last checkpoint: left alone
    unless chosen), ``"not_kept"`` (its old bytes were over the size cap: only the hash is known,
    it cannot be restored), ``"missing"`` (its blob is gone). ``current``/``target``: sha256 or None
    (absent); ``target_bytes``/``current_bytes`` for a diff."""

    path: str
    status: str
    current: str | None
    target: str | None
    mode_current: int | None = None
    mode_target: int | None = None
    current_bytes: bytes | None = None
    target_bytes: bytes | None = None
    interrupted: bool = False  # finishing a rewind that was killed (already recorded)

    @property
    def action(self) -> str:
        """``"remove"``, ``"create"`` or ``"change"``: what restoring does to the file."""
        if self.target is None:
            return "remove"
        return "create" if self.current is None else "change"

    def sentence(self) -> str:
        """One line for the CLI and the card."""
        what = {"remove": "removed (created after that point)", "create": "created again",
                "change": "old contents back"}[self.action]
        return {"restore": f"{self.path}: {what}",
                "same": f"{self.path}: already as it was",
                "outside": f"{self.path}: changed outside anycode since; left alone unless chosen ({what})",
                "not_kept": f"{self.path}: cannot be restored: it was over the checkpoint size limit, only its hash was kept",
                "missing": f"{self.path}: cannot be restored: its saved copy is missing"}[self.status]

    def diff(self, limit: int = 200_000) -> str:
        """A unified diff from the current file to what it becomes (text; binary files say so)."""
        import difflib

        def text(b: bytes | None) -> list[str] | None:
            if b is None:
                return []
            if b"\x00" in b[:8192]:
                return None
            return b.decode("utf-8", errors="replace").splitlines(keepends=True)

        old, new = text(self.current_bytes), text(self.target_bytes)
        if old is None or new is None:
            return f"{self.path}: binary file ({self.action})\n"
        body = "".join(difflib.unified_diff(old, new, fromfile=f"a/{self.path}" if self.current else "/dev/null",
                                            tofile=f"b/{self.path}" if self.target else "/dev/null"))
        return body[:limit] + ("\n[diff cut]\n" if len(body) > limit else "")


@dataclass
class RewindPlan:
    """What :func:`rewind` would do: ``keep`` messages stay (0..keep-1), ``files`` as planned."""

    key: SessionKey
    keep: int
    mode: str
    files: list[FileChange] = field(default_factory=list)

    def changes(self, chosen: Iterable[str] = ()) -> list[FileChange]:
        """The files that will be written: every ``restore`` plus the ``outside`` ones in ``chosen``."""
        chosen = set(chosen)
        return [f for f in self.files if f.status == "restore" or (f.status == "outside" and f.path in chosen)]


def _targets(cps: list[dict[str, Any]], keep: int) -> dict[str, tuple[str | None, int | None]]:
    """Each recorded path's ``(hash, mode)`` as of message count ``keep`` (rules in the module docstring)."""
    targets: dict[str, tuple[str | None, int | None]] = {}
    for cp in cps:
        if cp.get("rewind"):
            continue
        for f in cp["files"]:
            if not isinstance(f, dict) or not isinstance(f.get("path"), str):
                continue
            if cp["at"] <= keep:
                targets[f["path"]] = (f.get("after"), f.get("mode_after"))
            elif f["path"] not in targets:
                targets[f["path"]] = (f.get("before"), f.get("mode_before"))
    return targets


def _last_after(cps: list[dict[str, Any]]) -> dict[str, tuple[str | None, dict[str, Any], dict[str, Any]]]:
    """Each path's last recorded ``after`` with its file record and checkpoint."""
    last: dict[str, tuple[str | None, dict[str, Any], dict[str, Any]]] = {}
    for cp in cps:
        for f in cp["files"]:
            if isinstance(f, dict) and isinstance(f.get("path"), str):
                last[f["path"]] = (f.get("after"), f, cp)
    return last


def _not_kept(cps: list[dict[str, Any]]) -> set[str]:
    """The hashes of records marked ``kept: false`` (their bytes may never have been stored)."""
    return {h for cp in cps for f in cp["files"] if isinstance(f, dict) and f.get("kept") is False
            for h in (f.get("before"), f.get("after")) if isinstance(h, str)}


def _change(ws: Workspace, blobs: BlobStore, path: str, target: str | None, mode: int | None,
            last: tuple[str | None, dict[str, Any], dict[str, Any]] | None,
            _unkept: set[str] = frozenset()) -> FileChange:  # type: ignore[assignment]
    try:
        current, cur_mode, cur_bytes = _state(ws, path)
    except (ToolError, OSError) as err:
        log.warning("rewind: %s cannot be read (%s); treated as changed outside", path, err)
        current, cur_mode, cur_bytes = "unreadable", None, None
    change = FileChange(path, "restore", current, target, cur_mode, mode, cur_bytes)
    if current == target and (target is None or mode is None or cur_mode == mode):
        change.status = "same"
        return change
    if target is not None:
        change.target_bytes = blobs.get(target)
        if change.target_bytes is None:
            change.status = "not_kept" if target in _unkept else "missing"
            return change
    if last is not None and current != last[0]:
        after, rec, cp = last
        # A rewind killed before it reached this file: the file is still its recorded "before".
        if cp.get("rewind") and current == rec.get("before"):
            change.interrupted = True
        else:
            change.status = "outside"
    return change


def plan_rewind(manager: Any, key: SessionKey, message_index: int, ws: Workspace | None, *, blobs: BlobStore,
                mode: str = "both") -> RewindPlan:
    """What rewinding ``key`` to message ``message_index`` (kept, 0-based) would do in ``mode``
    (``"both"``, ``"conversation"``, ``"files"``), the recorded bytes read from ``blobs`` (the
    storage's). Reads the workspace, writes nothing.
    Raises RewindError (no such message, files asked without a workspace), SessionNotFound."""
    if mode not in MODES:
        raise RewindError(f"Unknown rewind mode {mode!r}; one of {', '.join(MODES)}.")
    entries = manager.store.load(key)
    if entries is None:
        from core.errors import SessionNotFound
        raise SessionNotFound(key.session_id)
    session = manager.get(key, entries=entries)  # the entries just read: one load (a query on SQL)
    if not 0 <= message_index < len(session.messages):
        raise RewindError(f"There is no message {message_index} (the session has {len(session.messages)}, "
                          f"numbered from 0).")
    keep = valid_cut(session.messages, message_index) + 1
    plan = RewindPlan(key, keep, mode)
    if mode == "conversation":
        return plan
    if ws is None:
        raise RewindError("The session's project folder is not available, so its files cannot be rewound.")
    cps = checkpoints_of(entries)
    last, unkept = _last_after(cps), _not_kept(cps)
    for path, (target, tmode) in _targets(cps, keep).items():
        plan.files.append(_change(ws, blobs, path, target, tmode, last.get(path), unkept))
    return plan


def _apply(ws: Workspace, changes: list[FileChange]) -> None:
    for change in changes:
        _restore_one(ws, change)


def _restore_one(ws: Workspace, change: FileChange) -> None:
    # One file: written aside and renamed, so a kill leaves it whole, old or new.
    _put(ws, change.path, change.target_bytes if change.target is not None else None, change.mode_target)


def _record(changes: list[FileChange]) -> list[dict[str, Any]]:
    return [{"path": c.path, "before": c.current, "after": c.target,
             "mode_before": c.mode_current, "mode_after": c.mode_target} for c in changes]


def _session_count(manager: Any, key: SessionKey) -> int:
    return len(manager.get(key).messages)


@dataclass
class RewindResult:
    """What :func:`rewind` / :func:`undo` did: ``key`` is the session to show now (the new
    version after a conversation rewind), ``files`` the files written, ``left`` the ones left alone
    (changed outside, not kept, missing), ``id`` the rewind checkpoint's id (None: no file changed)."""

    key: SessionKey
    files: list[FileChange]
    left: list[FileChange]
    id: str | None = None


def _conversation_at(manager: Any, key: SessionKey, keep: int) -> SessionKey:
    """The version of ``key``'s conversation that holds exactly ``key``'s first ``keep`` messages,
    made the version in use: ``key`` itself when it ends there, an existing version that is that
    cut (a rewind to the same message made before), else a new one (:meth:`SessionManager.fork`).
    Rewinding twice to one message made two identical versions (trial 7)."""
    messages = manager.get(key).messages
    if keep >= len(messages):
        return key  # nothing of the conversation to take back
    wanted = messages[:keep]
    for meta in manager.family(key):
        if meta.id != key.session_id and meta.message_count == keep:  # metadata first: few are read
            other = SessionKey(key.project_key, meta.id)
            if manager.get(other).messages == wanted:
                return manager.switch_version(key, meta.id)
    return manager.fork(key, keep - 1, version=True).key


def rewind(manager: Any, key: SessionKey, message_index: int, ws: Workspace | None, *, blobs: BlobStore,
           mode: str = "both", chosen: Iterable[str] = ()) -> RewindResult:
    """Rewind ``key`` to message ``message_index`` (see :func:`plan_rewind`; ``chosen``: paths
    changed outside to restore anyway). The checkpoint is appended before any file is touched;
    running the same rewind again after a kill finishes it. Raises RewindError, SessionNotFound,
    ToolError/OSError when a file cannot be written (the files before it are done and recorded)."""
    plan = plan_rewind(manager, key, message_index, ws, blobs=blobs, mode=mode)
    finished, cp = finish_interrupted(manager, key, ws, blobs=blobs)
    if finished and cp is not None and cp.get("to") == plan.keep and not cp.get("undoes"):
        # The same rewind, killed part way: it is finished, not made again (no second version).
        version = SessionKey(key.project_key, cp["version"]) if cp.get("version") else key
        return RewindResult(version, finished, [], cp.get("id"))
    if finished:
        plan = plan_rewind(manager, key, message_index, ws, blobs=blobs, mode=mode)
    changes = plan.changes(chosen) if mode != "conversation" else []
    left = [f for f in plan.files if f.status not in ("same", "restore") and f not in changes]
    fresh = [c for c in changes if not c.interrupted]
    target_key = key
    if mode != "files":
        target_key = _conversation_at(manager, key, plan.keep)
    rid = None
    if fresh:
        rid = secrets.token_hex(8)
        extra: dict[str, Any] = {"rewind": True, "id": rid, "to": plan.keep}
        if target_key != key:
            extra["from"] = key.session_id
            extra["version"] = target_key.session_id
        # Recorded in both the version and the session it was cut from: the files changed for both.
        for k in dict.fromkeys([target_key, key]):
            manager.add_checkpoint(k, checkpoint_entry(_session_count(manager, k), _record(fresh), **extra))
    if ws is not None:
        _apply(ws, changes)
    log.info("rewound %s to message %d (%s): %d files", key.session_id, plan.keep - 1, mode, len(changes))
    return RewindResult(target_key, changes, left, rid)


def finish_interrupted(manager: Any, key: SessionKey, ws: Workspace | None, *, blobs: BlobStore
                       ) -> tuple[list[FileChange], dict[str, Any] | None]:
    """Finish a rewind or undo that was killed part way: when ``key``'s last checkpoint is one,
    each of its files still holding its recorded ``before`` gets its ``after``. Returns the files
    written and that checkpoint (``([], None)`` when the last checkpoint is not a rewind)."""
    cps = checkpoints_of(manager.store.load(key) or [])
    if not cps or not cps[-1].get("rewind") or ws is None:
        return [], None
    cp = cps[-1]
    done = []
    for f in cp["files"]:
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or f.get("before") == f.get("after"):
            continue
        try:
            current, mode, data = _state(ws, f["path"])
        except (ToolError, OSError):
            continue
        if current != f.get("before"):
            continue  # done, or changed since: never overwritten here
        change = FileChange(f["path"], "restore", current, f.get("after"), mode, f.get("mode_after"), data)
        if change.target is not None:
            change.target_bytes = blobs.get(change.target)
            if change.target_bytes is None:
                continue
        _restore_one(ws, change)
        done.append(change)
    if done:
        log.info("finished an interrupted rewind of %s: %d files", key.session_id, len(done))
    return done, cp


def last_rewind(entries: Iterable[Any]) -> dict[str, Any] | None:
    """The latest rewind checkpoint not undone yet (None: nothing to undo)."""
    cps = checkpoints_of(entries)
    undone = {cp.get("undoes") for cp in cps if cp.get("undoes")}
    for cp in reversed(cps):
        if cp.get("rewind") and not cp.get("undoes") and cp.get("id") not in undone:
            return cp
    return None


def plan_undo(manager: Any, key: SessionKey, ws: Workspace | None, *, blobs: BlobStore
              ) -> tuple[dict[str, Any], list[FileChange]]:
    """The last rewind of ``key`` and what undoing it would do to each of its files (statuses as
    in :class:`FileChange`). Raises RewindError when there is nothing to undo or no workspace."""
    entries = manager.store.load(key) or []
    cp = last_rewind(entries)
    if cp is None:
        raise RewindError("There is no rewind to undo in this session.")
    if ws is None:
        raise RewindError("The session's project folder is not available, so its files cannot be put back.")
    cps = checkpoints_of(entries)
    last, unkept = _last_after(cps), _not_kept(cps)
    changes = [_change(ws, blobs, f["path"], f.get("before"), f.get("mode_before"), last.get(f["path"]), unkept)
               for f in cp["files"] if isinstance(f, dict) and isinstance(f.get("path"), str)]
    return cp, changes


def undo(manager: Any, key: SessionKey, ws: Workspace | None, *, blobs: BlobStore,
         chosen: Iterable[str] = ()) -> RewindResult:
    """Undo the last rewind of ``key``: its files get back what they were just before it (files
    changed outside since are left alone unless in ``chosen``), recorded as a checkpoint with
    ``"undoes"``; a conversation rewind's session becomes the version in use again and is the
    returned ``key``. Raises RewindError, ToolError/OSError."""
    finished, last = finish_interrupted(manager, key, ws, blobs=blobs)
    if finished and last is not None and last.get("undoes"):
        return RewindResult(key, finished, [], last.get("id"))  # an undo killed part way, finished
    cp, plan = plan_undo(manager, key, ws, blobs=blobs)
    chosen = set(chosen)
    changes = [c for c in plan if c.status == "restore" or (c.status == "outside" and c.path in chosen)]
    left = [c for c in plan if c.status not in ("same", "restore") and c not in changes]
    back = key
    sessions = [key]
    if cp.get("from") and cp.get("from") != key.session_id:
        back = SessionKey(key.project_key, cp["from"])
        sessions.append(back)
    elif cp.get("version") and cp.get("version") != key.session_id:
        sessions.append(SessionKey(key.project_key, cp["version"]))
    fresh = [c for c in changes if not c.interrupted]
    rid = secrets.token_hex(8)
    for k in sessions:
        try:
            manager.add_checkpoint(k, checkpoint_entry(_session_count(manager, k), _record(fresh), rewind=True,
                                                       id=rid, undoes=cp.get("id")))
        except Exception as err:  # noqa: BLE001 -- the other session may be deleted; the files matter
            if k == key:
                raise
            log.warning("undo: could not record in %s: %s", k.session_id, err)
    _apply(ws, changes)
    if back != key:
        try:
            manager.switch_version(key, back.session_id)
        except Exception as err:  # noqa: BLE001 -- the files are back; the version stays a click away
            log.warning("undo: could not switch back to %s: %s", back.session_id, err)
            back = key
    return RewindResult(back, changes, left, rid)
