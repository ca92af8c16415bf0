"""What every importer shares: the imported-session shape, stable ids, and the whole-or-absent write.

An importer (ChatGPT, Claude Code, Codex) turns a foreign file into :class:`ImportedSession`
objects: OpenAI chat messages with their original Unix-second timestamps, a title, the project
folder, sub-agent records and forks. :func:`import_sessions` writes them into any
:class:`~core.session.store.SessionStore`:

- **Idempotent, and a grown source brings what it added.** A session's id is derived from its
  source and source id (UUID v5), and the header records ``"imported_from": {"source", "id",
  "file", "at"}``, so a re-run finds the session already there and writes nothing twice. When the
  source conversation has grown since (Claude Code and Codex sessions go on), the stored messages
  are a prefix of the source's: only the new messages (and compaction entries and notes after
  them, new sub-agent records, a changed title) are appended, under the same id, in one append
  that checks nobody else wrote first. When the conversation was also continued here (both sides
  added different messages after a shared start), nothing of it is touched: the source's history
  becomes a *version* of it (``version_of``, the ``‹ n / m ›`` arrows), with an id derived from
  where the two part, so a later re-import brings that version up to date instead of making
  another.
- **Unique tool-call ids.** Two tool calls sharing one id make a strict server refuse the whole
  chat; they are renamed on import (:func:`core.session.tool_ids.unique_tool_call_ids`).
- **Whole or absent.** Every record is created with ``store.create_whole`` (the JSONL store
  writes it aside and puts it in place at once, the SQL store in one transaction) and read
  back; sub-agent records go first and are removed again if the session fails, so a killed or
  failed import never leaves a half-imported conversation, and a re-run completes it.
- **Original times.** The header's ``created_at`` and each message entry's ``ts`` come from the
  source, so the sidebar orders imported sessions among the others by when they really happened.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from core.errors import AnycodeError, InvalidTitle, os_error_message
from core.session.entries import header_entry, message_entry, title_entry
from core.session.mcp_calls import call_record, split_mcp_name
from core.session.store import SessionStore
from core.session.keys import SessionKey, normalize_path, project_key
from core.session.manager import clean_user_title
from core.session.text import counted, parse_json
from core.session.tool_ids import unique_tool_call_ids

log = logging.getLogger(__name__)

# Namespace of anycode's import ids: uuid5(IMPORT_NAMESPACE, "<source>:<source id>").
IMPORT_NAMESPACE = uuid.UUID("8a6b1f1e-5d0c-4c55-9f43-2f6d8c0a1b7e")
SOURCES = ("chatgpt", "claude-code", "codex")


def import_session_id(source: str, source_id: str) -> str:
    """The anycode session id of an imported session: a UUID v5 of ``"<source>:<source_id>"``, so
    importing the same conversation twice gives the same id (that is what makes re-runs no-ops)."""
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"{source}:{source_id}"))


@dataclass
class ImportedMessage:
    """One OpenAI chat message (``message``, per the chat completions API) and when it was sent
    (``ts``, Unix seconds; None when the source has no time — the session's time is used)."""

    message: dict[str, Any]
    ts: float | None = None


@dataclass
class ImportedSession:
    """A conversation read from another tool, ready to be written as an anycode session.

    ``source``: one of :data:`SOURCES`; ``source_id``: the id the source gives it (a ChatGPT
    conversation id, a Claude Code session id, a Codex rollout id; a fork adds its leaf's id);
    ``file``: where it was read from; ``cwd``: the project folder (None → the importer's default);
    ``created_at``: Unix seconds; ``subagents``: sub-agent records by name (stored at subpath
    ``subagents/<name>``); ``forked_from``: for a branch, ``{"source_id", "message_index"}`` of the
    session it branches from (the index of the last message they share); ``extra_entries``: other
    entries to append after the messages they follow (e.g. compaction entries), as
    ``(message_count_before, entry)`` pairs."""

    source: str
    source_id: str
    file: str
    messages: list[ImportedMessage]
    title: str | None = None
    cwd: str | None = None
    created_at: float | None = None
    subagents: dict[str, list[ImportedMessage]] = field(default_factory=dict)
    forked_from: dict[str, Any] | None = None
    extra_entries: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        """The anycode session id (see :func:`import_session_id`)."""
        return import_session_id(self.source, self.source_id)


@dataclass
class ImportProblem:
    """A record that could not be read: ``file`` and ``line`` (1-based; 0 when the whole file is
    meant) and a one-sentence ``reason``. Only that record is skipped."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.reason}"


@dataclass
class ImportReport:
    """Outcome of :func:`import_sessions`; lists hold session ids or ``(id, reason)`` pairs.

    ``imported``: written now; ``skipped``: already imported earlier (same source id, nothing
    new); ``updated``: imported earlier, the source had grown: its new messages were appended;
    ``versions``: imported earlier and continued here while the source grew too: the source's
    history was written as a version of the conversation (the version's id); ``failed``: could not
    be written (nothing of them is left in the store); ``problems``: unreadable records of the
    source files (skipped); ``messages``: messages written (or, with ``dry_run``, that would be),
    ``appended`` of them to conversations imported earlier (``updated`` and ``versions``)."""

    dry_run: bool = False
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    messages: int = 0
    appended: int = 0
    subagent_records: int = 0

    @property
    def ok(self) -> bool:
        """True when every session read was imported (or already there)."""
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"dry_run": self.dry_run, "imported": self.imported, "skipped": self.skipped,
                "updated": self.updated, "versions": self.versions,
                "failed": [list(f) for f in self.failed], "problems": [str(p) for p in self.problems],
                "messages": self.messages, "appended": self.appended, "subagent_records": self.subagent_records,
                "ok": self.ok}

    def summary(self) -> str:
        """One or two sentences for people (the CLI and the web UI print this)."""
        verb = "Would import" if self.dry_run else "Imported"
        text = (f"{verb} {counted(len(self.imported), 'conversation')} ({counted(self.messages - self.appended, 'message')}"
                + (f", {counted(self.subagent_records, 'sub-agent record')}" if self.subagent_records else "")
                + f"); {len(self.skipped):,} already imported.")
        grown = []
        if self.updated:
            grown.append(f"{counted(len(self.updated), 'conversation')} that had grown "
                         f"{'was' if len(self.updated) == 1 else 'were'} brought up to date")
        if self.versions:
            grown.append(f"{counted(len(self.versions), 'conversation')} went on both here and in the source: "
                         f"the source's history {'was' if len(self.versions) == 1 else 'were'} kept as a version")
        if grown:
            text += " " + ". ".join(grown) + f" ({counted(self.appended, 'new message')})."
        if self.failed:
            text += f" {len(self.failed):,} could not be imported."
        if self.problems:
            text += (f" {counted(len(self.problems), 'unreadable record')} "
                     f"{'was' if len(self.problems) == 1 else 'were'} skipped.")
        return text


def _imported_title(title: Any) -> str | None:
    """An imported conversation's title cleaned by the rename rule (control and bidi characters
    out, whitespace collapsed, 200 characters), or None when nothing visible is left: a title of
    zero-width characters only gave a blank sidebar row that a rename would have refused (trial 9);
    the chat is then named like any untitled one."""
    try:
        return clean_user_title(title) if isinstance(title, str) else None
    except InvalidTitle:
        return None


def _entries_for(imp: ImportedSession, key: SessionKey, cwd: str, fork_ids: dict[str, str]) -> list[dict[str, Any]]:
    times = [m.ts for m in imp.messages if m.ts is not None]
    created = imp.created_at if imp.created_at is not None else (min(times) if times else None)
    forked = None
    if imp.forked_from is not None:
        parent = fork_ids.get(imp.forked_from["source_id"]) or import_session_id(imp.source, imp.forked_from["source_id"])
        forked = {"session_id": parent, "message_index": int(imp.forked_from["message_index"])}
    header = header_entry(key.session_id, key.project_key, cwd, created_at=created, forked_from=forked)
    # "at": when it was imported (Unix seconds); cleanup counts idle time from there, not from the
    # original (often years old) message times.
    header["imported_from"] = {"source": imp.source, "id": imp.source_id, "file": imp.file, "at": time.time()}
    entries = [header]
    title = _imported_title(imp.title)
    if title:
        entries.append(title_entry(title, "llm", ts=created))
    extras = sorted(imp.extra_entries, key=lambda pair: pair[0])
    last_ts = created
    for i, m in enumerate(imp.messages):
        while extras and extras[0][0] <= i:
            entries.append(extras.pop(0)[1])
        ts = m.ts if m.ts is not None else last_ts
        last_ts = ts
        entries.append(message_entry(m.message, ts=ts, mcp=_mcp_record(m.message)))
    entries.extend(e for _, e in extras)
    return entries


def _mcp_record(message: dict[str, Any]) -> dict[str, dict[str, str]] | None:
    """The MCP record of an imported assistant message (:mod:`core.session.mcp_calls`): its calls
    named ``mcp__<server>__<tool>`` (Claude Code names MCP tools so) with the server and tool the
    name gives; None when it has none."""
    calls = {}
    for call in message.get("tool_calls") or () if isinstance(message, dict) else ():
        fn = call.get("function") if isinstance(call, dict) else None
        parts = split_mcp_name(fn.get("name")) if isinstance(fn, dict) else None
        if parts is not None and isinstance(call.get("id"), str):
            calls[call["id"]] = call_record(*parts)
    return calls or None


def _sub_entries(name: str, msgs: list[ImportedMessage], key: SessionKey, cwd: str, created: float | None) -> list[dict[str, Any]]:
    times = [m.ts for m in msgs if m.ts is not None]
    start = min(times) if times else created
    header = header_entry(key.session_id, key.project_key, cwd, created_at=start)
    header["subagent"] = {"name": name}
    out = [header]
    last = start
    for m in msgs:
        last = m.ts if m.ts is not None else last
        out.append(message_entry(m.message, ts=last))
    return out


def _write_whole(store: SessionStore, key: SessionKey, entries: list[dict[str, Any]]) -> None:
    """Write ``entries`` as a new record, whole or absent (``store.create_whole``: written aside
    and put in place at once, so no reader ever sees part of it), then read it back. Raises the
    store's failure; a record that reads back wrong is removed again and reported."""
    store.create_whole(key, entries)
    if store.load(key) != entries:
        store.remove(key)
        raise AnycodeError(f"the record {key} did not read back as written")


def import_sessions(
    store: SessionStore,
    sessions: Iterable[ImportedSession | ImportProblem],
    *,
    default_cwd: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    progress: Callable[[ImportedSession], None] | None = None,
) -> ImportReport:
    """Write every :class:`ImportedSession` of ``sessions`` into ``store`` (rules in the module
    docstring); :class:`ImportProblem` items are collected into the report.

    ``default_cwd``: the project for sessions whose source names none (default: the current
    folder). ``dry_run``: read and count, write nothing. ``progress`` is called once per session.
    Per-session failures are reported, not raised (a racing writer's append is one:
    :class:`~core.errors.SessionConflict`, and a re-run completes the import)."""
    report = ImportReport(dry_run=dry_run)
    fallback_cwd = normalize_path(default_cwd or os.getcwd())
    fork_ids: dict[str, str] = {}
    for item in sessions:
        if isinstance(item, ImportProblem):
            log.warning("skipped: %s", item)
            report.problems.append(item)
            continue
        imp = item
        if progress is not None:
            progress(imp)
        cwd = normalize_path(imp.cwd) if imp.cwd else fallback_cwd
        key = SessionKey(project_key(cwd), imp.session_id)
        fork_ids[imp.source_id] = key.session_id
        if not imp.messages:
            report.problems.append(ImportProblem(imp.file, 0, f"conversation {imp.source_id} has no messages; skipped"))
            continue
        _unique_ids(imp)
        try:
            stored = store.load(key) if store.exists(key) else None
            if stored is None:
                subs = _write_new(store, key, imp, cwd, fork_ids, dry_run=dry_run)
                report.imported.append(key.session_id)
                report.messages += len(imp.messages)
                report.subagent_records += subs
                continue
            outcome, where, added, subs = _write_grown(store, key, stored, imp, cwd, fork_ids, dry_run=dry_run)
        except (AnycodeError, OSError, ValueError) as err:  # SessionExists: a racing import won
            log.info("importing %s from %s failed: %s", imp.source_id, imp.file, err)  # in the report
            why = f"{os_error_message(err)}." if isinstance(err, OSError) else str(err)  # disk full, read-only
            report.failed.append((key.session_id, f"{imp.file}: {why}"))
            continue
        {"same": report.skipped, "appended": report.updated, "version": report.versions}[outcome].append(where)
        report.messages += added
        report.appended += added
        report.subagent_records += subs
    return report


def _unique_ids(imp: ImportedSession) -> None:
    """Rename repeated tool-call ids of ``imp``'s messages and sub-agent records in place."""
    for msgs in (imp.messages, *imp.subagents.values()):
        renamed = unique_tool_call_ids([m.message for m in msgs])
        for m, message in zip(msgs, renamed):
            m.message = message


def _sub_keys(imp: ImportedSession, key: SessionKey) -> list[tuple[SessionKey, str, list[ImportedMessage]]]:
    return [(SessionKey(key.project_key, key.session_id, f"subagents/{name}"), name, msgs)
            for name, msgs in sorted(imp.subagents.items()) if msgs]


def _write_new(store: Any, key: SessionKey, imp: ImportedSession, cwd: str, fork_ids: dict[str, str], *,
               dry_run: bool, header: dict[str, Any] | None = None) -> int:
    """Create the session ``key`` holding ``imp`` (sub-agent records first, removed again if the
    session fails: whole or absent); ``header``: fields added to its header. Returns the number of
    sub-agent records (written, or with ``dry_run`` that would be)."""
    entries = _entries_for(imp, key, cwd, fork_ids)
    entries[0].update(header or {})
    subs = _sub_keys(imp, key)
    if dry_run:
        return len(subs)
    # Sub-agent records first: the main session (what lists) appears only when all is written.
    written: list[SessionKey] = []
    try:
        for sub_key, name, msgs in subs:
            _write_whole(store, sub_key, _sub_entries(name, msgs, sub_key, cwd, entries[0]["created_at"]))
            written.append(sub_key)
        _write_whole(store, key, entries)
    except BaseException:
        for sub_key in written:
            try:
                store.remove(sub_key)
            except Exception:  # noqa: BLE001
                log.exception("could not remove %s", sub_key)
        raise
    return len(subs)


def _messages_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["message"] for e in entries if e.get("type") == "message" and isinstance(e.get("message"), dict)]


def _shared(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def _write_grown(store: Any, key: SessionKey, stored: list[dict[str, Any]], imp: ImportedSession, cwd: str,
                 fork_ids: dict[str, str], *, dry_run: bool) -> tuple[str, str, int, int]:
    """Bring the earlier import ``key`` (its entries ``stored``) up to date with ``imp``.

    Returns ``(outcome, session id, messages added, sub-agent records added)``; outcome
    ``"same"`` (nothing new: the source's messages are the stored ones, or a prefix of them — the
    chat was continued here), ``"appended"`` (the stored messages are a prefix of the source's:
    the rest appended) or ``"version"`` (both went on: the source's history is a version of the
    conversation, created or itself brought up to date)."""
    have = _messages_of(stored)
    source = [m.message for m in imp.messages]
    shared = _shared(have, source)
    if shared == len(source):
        return "same", key.session_id, 0, 0
    if shared == len(have):
        added_subs = _grow_subagents(store, key, imp, cwd, stored, dry_run=dry_run)
        tail = _tail_entries(imp, stored, shared)
        if not dry_run:
            store.append(key, tail, expected_count=len(have))
        return "appended", key.session_id, len(source) - shared, added_subs
    # Both sides went on from message ``shared``: the source's history is kept beside the chat.
    # Its id names where they part and the source's message there, so a later re-import of the
    # grown source finds this version again and brings it up to date.
    digest = hashlib.sha256(json.dumps(source[shared], sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    vkey = SessionKey(key.project_key, import_session_id(imp.source, f"{imp.source_id}@{shared}:{digest}"))
    if store.exists(vkey):
        vstored = store.load(vkey)
        if vstored is not None:
            outcome, _, added, subs = _write_grown(store, vkey, vstored, imp, cwd, fork_ids, dry_run=dry_run)
            return ("same" if outcome == "same" else "version"), vkey.session_id, added, subs
    root = next((e.get("version_of", {}).get("session_id") for e in stored[:1]
                 if e.get("type") == "header" and isinstance(e.get("version_of"), dict)), None) or key.session_id
    cut = {"session_id": key.session_id, "message_index": shared - 1}
    subs = _write_new(store, vkey, imp, cwd, fork_ids, dry_run=dry_run,
                      header={"forked_from": cut, "version_of": {"session_id": root, "message_index": shared - 1}})
    return "version", vkey.session_id, len(source), subs


def _tail_entries(imp: ImportedSession, stored: list[dict[str, Any]], shared: int) -> list[dict[str, Any]]:
    """The entries a grown source adds after the ``shared`` messages already stored: its new
    messages with the compaction entries and notes placed among them, and its title when it
    changed (a title the user gave here still wins: the fold keeps a ``user`` title)."""
    out: list[dict[str, Any]] = []
    # Extras at the very end of what was stored (a note after the last message) are stored already.
    extras = sorted((pair for pair in imp.extra_entries if pair[0] >= shared and pair[1] not in stored),
                    key=lambda pair: pair[0])
    last_ts = next((e.get("ts") for e in reversed(stored) if e.get("type") == "message"), None)
    for i, m in enumerate(imp.messages[shared:], shared):
        while extras and extras[0][0] <= i:
            out.append(extras.pop(0)[1])
        ts = m.ts if m.ts is not None else last_ts
        last_ts = ts
        out.append(message_entry(m.message, ts=ts))
    out.extend(e for _, e in extras)
    title = _imported_title(imp.title)
    state_title = None
    for e in stored:
        if e.get("type") == "title" and isinstance(e.get("title"), str):
            state_title = e["title"]
    if title and title != state_title:
        out.append(title_entry(title, "llm", ts=last_ts))
    return out


def _grow_subagents(store: Any, key: SessionKey, imp: ImportedSession, cwd: str, stored: list[dict[str, Any]], *,
                    dry_run: bool) -> int:
    """Write the sub-agent records a grown source adds (new ones whole; a stored one whose
    messages are a prefix of the source's gets the rest appended); return how many were new."""
    created = stored[0].get("created_at") if stored and stored[0].get("type") == "header" else None
    new = 0
    for sub_key, name, msgs in _sub_keys(imp, key):
        have = store.load(sub_key)
        if have is None:
            new += 1
            if not dry_run:
                _write_whole(store, sub_key, _sub_entries(name, msgs, sub_key, cwd, created))
            continue
        old = _messages_of(have)
        source = [m.message for m in msgs]
        if len(source) > len(old) and _shared(old, source) == len(old) and not dry_run:
            last = next((e.get("ts") for e in reversed(have) if e.get("type") == "message"), created)
            tail = []
            for m in msgs[len(old):]:
                last = m.ts if m.ts is not None else last
                tail.append(message_entry(m.message, ts=last))
            store.append(sub_key, tail, expected_count=len(old))
    return new


_DRIVE = re.compile(r"[A-Za-z]:")


def unsafe_name(value: Any) -> str | None:
    """Why ``value``, an id or a name read from imported content, cannot be part of a path, or
    None when it can. Refused: anything but non-empty text, a NUL or other control character, an
    absolute path (``/…``, ``\\…``, ``C:…``, ``~…``), a path separator, and ``..`` anywhere.

    Why a rule of its own: the importers build paths from what the files say (Claude Code's
    sub-agent folder is ``<folder>/<sessionId>/subagents``), and a transcript whose ``sessionId``
    was an absolute path made the importer read files from elsewhere on the disk into a chat."""
    if not isinstance(value, str) or not value:
        return "is empty or not text"
    if "\x00" in value:
        return "holds a NUL character"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "holds a control character"
    if value.startswith(("/", "\\", "~")) or _DRIVE.match(value):
        return "is an absolute path"
    if "/" in value or "\\" in value:
        return "holds a path separator"
    if ".." in value:
        return "holds '..'"
    return None


def refused_name(file: str, line: int, what: str, value: Any) -> ImportProblem | None:
    """An :class:`ImportProblem` naming the record when ``value`` (its ``what``, e.g. ``"session id"``)
    is refused by :func:`unsafe_name`; None when it is safe."""
    why = unsafe_name(value)
    if why is None:
        return None
    shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else repr(value[:77] + "...")
    return ImportProblem(file, line, f"its {what} {shown} {why}; the record was not imported "
                                     "(nothing is read outside the import folder)")


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``path``, with every symbolic link resolved, is ``folder`` (resolved too) or lies
    under it: a link inside an import folder that points out of it is not followed."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    try:
        return os.path.commonpath([real, top]) == top
    except ValueError:  # different drives
        return False


def outside_problem(path: str | os.PathLike[str]) -> ImportProblem:
    """The problem for a file of an import folder that resolves (through a link) out of it."""
    return ImportProblem(os.fspath(path), 0, "is a link to a file outside the import folder; it was not read")


def iter_jsonl(path: str) -> Iterator[tuple[int, Any] | ImportProblem]:
    """Each line of a JSONL file as ``(line number, parsed value)``; a line that is not JSON yields
    an :class:`ImportProblem` naming the file and line instead (blank lines are skipped).

    What real files hold besides JSON is tolerated, not lost: a UTF-8 byte-order mark (editors on
    Windows write one before the first record), and runs of NUL bytes — the hole a crash leaves where
    a write was allotted but never made; the record written after it shares its line. Each piece
    between NUL runs is read as a record of that line. A value nested too deeply for the parser
    (e.g. 100,000 ``[``) is named and skipped like any unreadable line."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            for piece in _pieces(raw):
                try:
                    yield lineno, parse_json(piece)
                except ValueError as err:
                    yield ImportProblem(path, lineno, f"not valid JSON ({err})")


_BOM = b"\xef\xbb\xbf"


def _pieces(raw: bytes) -> list[bytes]:
    """The JSON texts of one raw line: without a leading BOM, split at NUL runs, blank ones dropped."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    parts = raw.split(b"\0") if b"\0" in raw else [raw]
    return [part.strip() for part in parts if part.strip()]


def iso_seconds(value: Any) -> float | None:
    """An ISO-8601 timestamp (``2025-12-08T00:37:46.102Z``) or a number as Unix seconds; None
    when it is neither."""
    import datetime as _dt

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.timezone.utc)
    return parsed.timestamp()
