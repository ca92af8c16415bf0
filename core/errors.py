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


class SessionExists(AnycodeError):
    """A session with this key already exists where a new one was to be created."""


class InvalidTitle(AnycodeError, ValueError):
    """A title is empty or whitespace only."""


class InvalidMemory(AnycodeError, ValueError):
    """A memory's text is empty, too long, or looks like a secret (never stored)."""


class MemoryNotFound(AnycodeError, LookupError):
    """No memory has this id (or id prefix) in the scopes searched, or the prefix is ambiguous."""


class StoreUnavailable(AnycodeError):
    """A configured store cannot be used (missing optional dependency, unreachable database)."""


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
