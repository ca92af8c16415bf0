"""Typed errors for anycode, all in one place.

Every error the product raises on purpose derives from :class:`AnycodeError`, so a caller
(the web UI, the command line) can catch one base class and show ``str(err)``, which is always
one readable sentence saying what happened and what to do.
"""
from __future__ import annotations


class AnycodeError(Exception):
    """Base class of every deliberate anycode error; ``str(err)`` is a user-facing sentence."""


# --- sessions and storage -------------------------------------------------------------------


class InvalidSessionKey(AnycodeError, ValueError):
    """A project key, session id or subpath is not a safe single name (could escape its folder)."""


class SessionNotFound(AnycodeError, LookupError):
    """No session exists for the given key or id (neither in the main list nor archived)."""

    def __init__(self, what: str):
        super().__init__(f"No session {what!s} was found.")
        self.what = what


class AmbiguousSessionId(AnycodeError, LookupError):
    """An id prefix matches more than one session; ``candidates`` lists the matching ids."""

    def __init__(self, prefix: str, candidates: list[str]):
        shown = ", ".join(candidates[:10]) + (" …" if len(candidates) > 10 else "")
        super().__init__(
            f"The id prefix {prefix!r} matches {len(candidates)} sessions ({shown}); "
            "type more characters of the id."
        )
        self.prefix = prefix
        self.candidates = list(candidates)


class AmbiguousTitle(AnycodeError, LookupError):
    """A title query (``anycode --resume "words"``, ``sessions show "words"``) matches several
    conversations; ``candidates`` lists them as ``(session id, title)`` pairs, best first."""

    def __init__(self, query: str, candidates: list[tuple[str, str]]):
        super().__init__(
            f"The title words {query!r} match {len(candidates)} conversations; give more words of "
            "the title, or an id."
        )
        self.query = query
        self.candidates = list(candidates)


class SessionConflict(AnycodeError):
    """Someone appended to the session since the caller loaded it (another tab or process).

    ``expected`` is the message count the caller loaded, ``actual`` the count on disk now.
    """

    def __init__(self, expected: int, actual: int):
        super().__init__(
            f"This conversation changed elsewhere (expected {expected} messages, found {actual}); "
            "it has been reloaded, please send again."
        )
        self.expected = expected
        self.actual = actual


class StaleChange(AnycodeError):
    """A title, archive or version change was made against state another tab or process has
    changed since (the ``expected_count`` rule applied to metadata): nothing was written.

    ``what`` names the field ("title", "version", …); ``expected``/``actual`` its values."""

    def __init__(self, what: str, expected: object, actual: object):
        super().__init__(
            f"This conversation's {what} was changed elsewhere; your change was not saved and the "
            "conversation has been reloaded."
        )
        self.what, self.expected, self.actual = what, expected, actual


class SessionExists(AnycodeError):
    """A session with this key already exists where a new one was to be created."""


class ForbiddenProjectFolder(AnycodeError, ValueError):
    """A folder that can never be a project: anycode's data folder or one inside it (the file tools
    would reach every stored conversation). The message is one sentence for people."""


class InvalidTitle(AnycodeError, ValueError):
    """A title is empty, whitespace only, or shows nothing (invisible characters only).

    ``reason``: ``"empty"`` (nothing or whitespace), ``"invisible"`` (only characters that show
    nothing, e.g. zero-width spaces) or ``"not text"``."""

    def __init__(self, message: str, reason: str = "empty"):
        super().__init__(message)
        self.reason = reason


class InvalidTag(AnycodeError, ValueError):
    """A tag that is empty once cleaned, or holds a character tags cannot hold
    (:func:`core.session.entries.clean_tag`), or one too many for a conversation."""


class InvalidMemory(AnycodeError, ValueError):
    """A memory's text is empty, too long, or looks like a secret (never stored)."""


class MemoryNotFound(AnycodeError, LookupError):
    """No memory has this id (or id prefix) in the scopes searched, or the prefix is ambiguous."""


class StoreUnavailable(AnycodeError):
    """A configured store cannot be used (missing optional dependency, unreachable database)."""


class SearchUnavailable(AnycodeError):
    """The store of record has no search index (an S3 or Redis store used as the main store:
    they are mirrors first); ``str()`` says so in one sentence."""


class BackupError(AnycodeError):
    """A backup file that cannot be written or read (not an anycode backup, a damaged member,
    an unwritable folder); ``str()`` is one sentence naming the file or member."""


# --- the model server (OpenAI-compatible chat completions) ----------------------------------


class ModelError(AnycodeError):
    """A request to the chat model failed; the session stays valid and can be resumed."""


class ModelNotConfigured(ModelError):
    """No API key is set and no local OpenAI-compatible server answers."""


class ModelAuthError(ModelError):
    """The server refused the API key (HTTP 401/403)."""


class ModelRateLimited(ModelError):
    """The server is rate limiting or the quota is used up (HTTP 429)."""


class ModelServerError(ModelError):
    """The server failed (HTTP 5xx)."""


class ModelUnreachable(ModelError):
    """The server could not be reached (connection refused, DNS failure)."""


class ModelTimeout(ModelError):
    """The server did not answer within the request timeout."""


class ModelBadRequest(ModelError):
    """The server rejected the request (HTTP 400/404/422), e.g. an unknown model name."""


class ModelContextExceeded(ModelBadRequest):
    """The request did not fit the model's context window (HTTP 400 ``context_length_exceeded``
    per the OpenAI API, or a local server saying so in a 500 or a stream error).

    ``window``: the window in tokens when the server's message named it (else None);
    ``requested``: the request's size in tokens when named."""

    def __init__(self, message: str, window: int | None = None, requested: int | None = None):
        super().__init__(message)
        self.window = window
        self.requested = requested


class CompactionFailed(ModelError):
    """Summarising the earlier messages failed (the summary request failed or came back empty);
    nothing was changed and the user's message is kept. ``str(err)`` says why."""


class ModelEmptyReply(ModelError):
    """The model answered with no text and no tool call (nothing to save); ``str(err)`` says why
    (its output limit spent on reasoning, a content filter, a stream that just stopped) and that
    the user can retry. ``end`` is how the reply ended (see ``core.agent.stream.Reply.end``)."""

    def __init__(self, message: str, end: str = "complete"):
        super().__init__(message)
        self.end = end


# --- operating-system failures (disk full, permissions, bad paths) ------------------------------

_DISK_FULL_ERRNOS = {28, 122}  # ENOSPC, EDQUOT (Linux): no space left, quota exceeded


def is_disk_full(err: BaseException) -> bool:
    """True when ``err`` is an ``OSError`` saying the disk (or the user's quota) is full."""
    return isinstance(err, OSError) and err.errno in _DISK_FULL_ERRNOS


def os_error_message(err: OSError, path: str | None = None) -> str:
    """What went wrong, as the start of one user-facing sentence without a final period, e.g.
    ``"The disk is full"`` or ``"The folder /x does not exist"``; callers add what it means
    (``": nothing was saved."``). ``path``: the file the user named, when ``err`` does not carry
    it (``err.filename`` wins). Covers the errors a write can meet (POSIX errno names)."""
    import errno as e

    where = err.filename if isinstance(getattr(err, "filename", None), str) else path
    shown = f" {where}" if where else ""
    code = err.errno
    if code in _DISK_FULL_ERRNOS:
        return "The disk is full"
    if code == e.EFBIG:
        return "The file size limit was reached"
    if code in (e.EACCES, e.EPERM):
        return f"There is no permission to write{shown or ' there'}"
    if code == e.EROFS:
        return f"The filesystem of{shown or ' this path'} is read-only"
    if code == e.ENOENT:
        import os

        folder = os.path.dirname(where) if where else ""
        return f"The folder {folder} does not exist" if folder else f"The path{shown} does not exist"
    if code == e.EISDIR:
        return f"{where} is a folder, not a file" if where else "The path is a folder, not a file"
    if code == e.ENOTDIR:
        return f"A part of the path{shown} is not a folder"
    if code == e.ENAMETOOLONG:
        return f"The file name{shown[:120]} is too long"
    reason = err.strerror or type(err).__name__
    return f"{reason}{f' ({where})' if where else ''}"


class RewindError(AnycodeError):
    """A rewind (or its undo) cannot be done as asked: no such message, nothing to undo, no workspace.
    The message is one sentence for the user (core.agent.checkpoints)."""


# --- agent definitions (issue 30) -----------------------------------------------------------


class InvalidAgentDefinition(AnycodeError, ValueError):
    """An agent definition file (``.anycode/agents/*.md``, ``<data dir>/agents/*.md``,
    ``.claude/agents/*.md``) cannot be used; ``str(err)`` names the file and why, in one sentence."""


class AgentNotFound(AnycodeError, LookupError):
    """No agent definition has this name (core.agent.definitions)."""


class ExpertSessionReadOnly(AnycodeError):
    """A chat view was asked for an expert agent's own session (``expert-<name>``, issue 30):
    it is written only by the agent's consultations, so a link or ``--resume`` to it opens
    nothing writable (the page's Agents section shows it read-only; webui.chat.views)."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"This is the expert agent {name!r}'s own session: only its consultations write it. "
                         "Read it in the sidebar's Agents section.")


class ExpertBusy(AnycodeError):
    """An expert agent's session is answering another consultation (another chat, window or
    process) and did not come free in time, or the caller stopped waiting (core.agent.experts)."""

    def __init__(self, name: str, waited: float):
        self.name, self.waited = name, waited
        super().__init__(f"The expert {name!r} is answering another consultation (in another chat or "
                         f"window); it did not come free within {waited:.0f} s. Ask again when it is done.")


# --- MCP servers (core.agent.mcp) -------------------------------------------------------------


class McpConfigError(AnycodeError, ValueError):
    """An MCP configuration file cannot be read or changed as asked (broken JSON, an unknown
    scope, a server name already used or not found, a bad field); ``str(err)`` says which and
    what to do."""


class McpServerError(AnycodeError):
    """An MCP server could not be used: it is not configured, its project's configuration is not
    approved, it did not start, or it failed while answering; ``str(err)`` says which (never a
    secret of its configuration)."""
