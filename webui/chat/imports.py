"""The sidebar's "Import…" button: upload a ChatGPT export (``conversations.json`` or the
``.zip``), a Claude Code session or a Codex rollout (``.jsonl``) and get a one-line summary.

Thin over :mod:`core.importers`: :func:`import_upload` is a plain function (tested without a
browser); :mod:`webui.gui.imports` places the button and wires it.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import AnycodeError
from webui.i18n import Msg, t, tn
from core.importers import chatgpt, claude_code, codex
from core.importers.base import ImportReport, import_sessions

if TYPE_CHECKING:
    from webui.chat.context import WebContext

log = logging.getLogger(__name__)

FILE_TYPES = [".json", ".zip", ".jsonl"]
UNKNOWN_FORMAT = Msg("import_unknown_format")


def detect_format(path: str | os.PathLike[str]) -> str | None:
    """``"chatgpt"``, ``"claude-code"``, ``"codex"`` or None, from the file's name and first
    records (a ``.json``/``.zip`` is a ChatGPT export; a ``.jsonl`` is told apart by its fields:
    Codex lines carry ``payload``/``session_meta``, Claude Code lines ``sessionId``/``parentUuid``)."""
    name = os.fspath(path).lower()
    if name.endswith((".json", ".zip")):
        return "chatgpt"
    try:
        with open(path, "rb") as fh:
            for _ in range(50):
                raw = fh.readline()
                if not raw:
                    break
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(rec, dict):
                    continue
                if "payload" in rec or rec.get("type") == "session_meta" or "instructions" in rec:
                    return "codex"
                if "sessionId" in rec or "parentUuid" in rec or rec.get("type") == "summary":
                    return "claude-code"
    except OSError:
        return None
    return None


def import_upload(ctx: WebContext, path: str | os.PathLike[str] | None, default_cwd: str) -> tuple[str, ImportReport | None]:
    """Import the uploaded file at ``path`` into the app's sessions; return ``(one-sentence summary,
    report)``. Conversations whose source names no project (ChatGPT) go to ``default_cwd``; the
    uploaded copy is removed afterwards (it holds conversation text)."""
    if not path:
        return t("import_no_file"), None
    try:
        kind = detect_format(path)
        if kind is None:
            return t(UNKNOWN_FORMAT), None
        reader = {"chatgpt": chatgpt.read_export, "claude-code": claude_code.read_session,
                  "codex": codex.read_rollout}[kind]
        try:
            report = import_sessions(ctx.storage.sessions, reader(path), default_cwd=default_cwd)
        except AnycodeError as err:
            return t("import_stopped", error=err), None
        written = report.imported or report.skipped or report.updated or report.versions
        if not written and any(p.line == 0 for p in report.problems):
            return t("import_nothing", reason=report.problems[0].reason), report
        if not (written or report.failed):
            return t("import_empty"), report
        return import_summary(report), report
    finally:
        try:
            Path(path).unlink()
        except OSError:
            pass


def import_summary(report: Any) -> str:
    """``core.importers`` ``ImportReport.summary()`` in the request's language, with plurals:
    "Imported 1 conversation (3 messages); 0 already imported." """
    details = [tn("import_messages", report.messages - report.appended)]
    if report.subagent_records:
        details.append(tn("import_subagents", report.subagent_records))
    text = t("import_summary", imported=tn("import_imported", len(report.imported)),
             details=t("list_separator").join(details), already=tn("import_already", len(report.skipped)))
    if report.updated:
        text = t("sentence_join", first=text, second=tn("import_updated", len(report.updated)))
    if report.versions:
        text = t("sentence_join", first=text, second=tn("import_versions", len(report.versions)))
    if report.failed:
        text = t("sentence_join", first=text, second=tn("import_failed", len(report.failed)))
    if report.problems:
        text = t("sentence_join", first=text, second=tn("import_problems", len(report.problems)))
    return text
