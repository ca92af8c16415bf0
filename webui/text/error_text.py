"""The user-facing sentence of a core error in the request's language.

core/ writes its errors' ``str()`` in English (the CLI and logs read them, and core knows no UI
language); the web UI shows the common ones through the catalogue instead, picked by the error's
type and fields (``StaleChange.what``, ``status_code``, ``detail``). An error this module does
not know keeps its own English sentence.
"""
from __future__ import annotations

import errno
import os
import re

from core import errors as E
from core.errors import is_disk_full, os_error_message
from core.memory.secrets import hide_secrets
from webui.i18n import t

_AT_URL = re.compile(r" at (\S+?);")
_STALE = {"title": "err_stale_title", "archive state": "err_stale_archive"}
_TITLE = {"invisible": "invisible_title_notice"}  # InvalidTitle.reason -> its sentence (else: empty)


def describe(err: BaseException) -> str:
    """``err`` as a sentence for the page (``str(err)`` for errors without a translation)."""
    status = getattr(err, "status_code", None)
    detail = str(getattr(err, "detail", "") or "").strip()
    text: str | None = None
    if isinstance(err, E.SessionNotFound):
        found = re.match(r"No session (.*) was found\.$", str(err))
        if found and "/" in found.group(1) and not found.group(1).startswith("with "):
            # A store names the session by its internal key ("<project key>/<id>"): never shown;
            # a chat the page had open is gone because another tab or process deleted it. (An id
            # the user gave is quoted after "with id": a link's "../x" was not found, not deleted.)
            text = t("err_chat_deleted")
        else:
            text = t("err_session_not_found", what=found.group(1)) if found else None
    elif isinstance(err, E.StaleChange):
        text = t(_STALE.get(str(getattr(err, "what", "")), "err_stale_other"))
    elif isinstance(err, E.InvalidTitle):
        text = t(_TITLE.get(getattr(err, "reason", ""), "empty_title_notice"))
    elif isinstance(err, E.InvalidTag):
        text = t("err_invalid_tag")
    elif isinstance(err, E.ExpertSessionReadOnly):
        text = t("err_expert_read_only", name=err.name)
    elif isinstance(err, E.SessionConflict):
        text = t("err_session_conflict")
    elif isinstance(err, E.ModelNotConfigured):
        text = t("err_model_not_configured")
    elif isinstance(err, E.ModelTimeout):
        text = t("err_model_timeout")
    elif isinstance(err, E.ModelUnreachable):
        found = _AT_URL.search(str(err))
        text = t("err_model_unreachable", where=t("err_model_unreachable_at", url=found.group(1)) if found else "")
    elif isinstance(err, E.ModelAuthError) and status:
        text = t("err_model_auth", status=status)
    elif isinstance(err, E.ModelRateLimited):
        text = t("err_model_rate_limited")
    elif isinstance(err, E.ModelContextExceeded) or isinstance(err, E.ModelEmptyReply):
        text = None  # their sentences carry numbers and reasons of their own
    elif isinstance(err, E.ModelBadRequest) and status:
        text = t("err_model_bad_request", status=status)
        if detail:
            text = t("err_server_said", text=text, detail=_short(detail))
    elif isinstance(err, E.ModelServerError):
        if status and status >= 500:
            text = t("err_model_server", status=status)
        elif "broke in the middle" in str(err):
            text = t("err_model_broke")
        elif str(err).startswith("The model server failed while answering"):
            text = t("err_model_failed")
            inner = re.search(r"answering \((.*)\); try again", str(err))
            detail = detail or (inner.group(1) if inner else "")
            if detail:
                text = t("err_server_said", text=text, detail=_short(detail))
    text = text if text is not None else str(err)
    # A model server's message can echo a key ("Incorrect API key provided: sk-…") or a URL with
    # one: never on the page, never in the session (core hides them in what it stores too).
    return hide_secrets(text) if isinstance(err, E.ModelError) else text


def describe_stored(record: dict) -> str:
    """The sentence for a stored reply_error entry (``Session.reply_error``, written by
    :mod:`core.agent.runner` when a turn failed at the model): the same sentence :func:`describe`
    gave the error live, in the request's language, secrets hidden. An error class this version
    does not know keeps the stored (English) reason."""
    reason = hide_secrets(str(record.get("reason") or ""))
    cls = getattr(E, str(record.get("error") or ""), None)
    if not (isinstance(cls, type) and issubclass(cls, E.ModelError)):
        return reason
    err = cls.__new__(cls)  # rebuilt from its sentence: the classes' own constructors differ
    Exception.__init__(err, reason)
    status = record.get("status")
    err.status_code = status if isinstance(status, int) and not isinstance(status, bool) else None
    err.detail = str(record.get("detail") or "")
    return describe(err)


def _short(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def os_text(err: OSError, path: str | None = None) -> str:
    """``core.errors.os_error_message`` in the request's language: the start of a sentence
    without a final period ("The disk is full", "The folder /x does not exist")."""
    where = err.filename if isinstance(getattr(err, "filename", None), str) else path
    code = err.errno
    if is_disk_full(err):
        return t("disk_full")
    if code == errno.EFBIG:
        return t("os_file_too_big")
    if code in (errno.EACCES, errno.EPERM):
        return t("os_no_permission", where=where) if where else t("os_no_permission_here")
    if code == errno.EROFS:
        return t("os_read_only", where=where) if where else t("os_read_only_here")
    if code == errno.ENOENT:
        folder = os.path.dirname(where) if where else ""
        return t("os_no_folder", where=folder) if folder else t("os_no_path")
    if code == errno.EISDIR and where:
        return t("os_is_folder", where=where)
    if code == errno.ENOTDIR and where:
        return t("os_not_folder", where=where)
    if code == errno.ENAMETOOLONG:
        return t("os_name_too_long")
    return os_error_message(err, path)
