"""What every importer shares: the imported-session shape, stable ids, and the whole-or-absent write.

An importer (ChatGPT, Claude Code, Codex) turns a foreign file into :class:`ImportedSession`
objects: OpenAI chat messages with their original Unix-second timestamps, a title, the project
folder, sub-agent records and forks. :func:`import_sessions` writes them into any
:class:`~core.session.store.SessionStore`:

- **Idempotent.** A session's id is derived from its source and source id (UUID v5), and the
  header records ``"imported_from": {"source", "id", "file", "at"}``, so a re-run finds the session
  already there (``store.exists``) and writes nothing twice.
- **Whole or absent.** Every record is created with ``store.create_whole`` (the JSONL store
  writes it aside and puts it in place at once, the SQL store in one transaction) and read
  back; sub-agent records go first and are removed again if the session fails, so a killed or
  failed import never leaves a half-imported conversation, and a re-run completes it.
- **Original times.** The header's ``created_at`` and each message entry's ``ts`` come from the
  source, so the sidebar orders imported sessions among the others by when they really happened.
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from core.errors import AnycodeError, InvalidTitle, os_error_message
from core.session.entries import header_entry, message_entry, title_entry
from core.session.store import SessionStore
from core.session.keys import SessionKey, normalize_path, project_key
from core.session.manager import clean_user_title
from core.session.text import counted, parse_json

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

    ``imported``: written now; ``skipped``: already imported earlier (same source id);
    ``failed``: could not be written (nothing of them is left in the store); ``problems``:
    unreadable records of the source files (skipped); ``messages``: messages written (or, with
    ``dry_run``, that would be)."""

    dry_run: bool = False
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    messages: int = 0
    subagent_records: int = 0

    @property
    def ok(self) -> bool:
        """True when every session read was imported (or already there)."""
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"dry_run": self.dry_run, "imported": self.imported, "skipped": self.skipped,
                "failed": [list(f) for f in self.failed], "problems": [str(p) for p in self.problems],
                "messages": self.messages, "subagent_records": self.subagent_records, "ok": self.ok}

    def summary(self) -> str:
        """One or two sentences for people (the CLI and the web UI print this)."""
        verb = "Would import" if self.dry_run else "Imported"
        text = (f"{verb} {counted(len(self.imported), 'conversation')} ({counted(self.messages, 'message')}"
                + (f", {counted(self.subagent_records, 'sub-agent record')}" if self.subagent_records else "")
                + f"); {len(self.skipped):,} already imported.")
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
        entries.append(message_entry(m.message, ts=ts))
    entries.extend(e for _, e in extras)
    return entries


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
    Per-session failures are reported, not raised."""
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
        try:
            if store.exists(key):
                report.skipped.append(key.session_id)
                continue
            entries = _entries_for(imp, key, cwd, fork_ids)
            subs = [(SessionKey(key.project_key, key.session_id, f"subagents/{name}"), name, msgs)
                    for name, msgs in sorted(imp.subagents.items()) if msgs]
            if dry_run:
                report.imported.append(key.session_id)
                report.messages += len(imp.messages)
                report.subagent_records += len(subs)
                continue
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
        except (AnycodeError, OSError, ValueError) as err:  # SessionExists: a racing import won
            log.info("importing %s from %s failed: %s", imp.source_id, imp.file, err)  # in the report
            why = f"{os_error_message(err)}." if isinstance(err, OSError) else str(err)  # disk full, read-only
            report.failed.append((key.session_id, f"{imp.file}: {why}"))
            continue
        report.imported.append(key.session_id)
        report.messages += len(imp.messages)
        report.subagent_records += len(subs)
    return report


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
