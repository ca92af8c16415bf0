"""Saving a reply's messages when the store may fail mid-way (a database killed, a full disk).

A write that failed with :class:`~core.errors.StoreUnavailable` may or may not have reached the
store (the connection can drop after the database committed). So its outcome is *checked, not
assumed*: before trying again the session is re-read, and if it already ends with exactly these
messages the write counts as done; only if the count is still the one the reply started from is
the write repeated (with that count as ``expected_count``, so it can never land twice or after
someone else's). The store reconnects by itself (SQLAlchemy's ``pool_pre_ping``); this module
retries for :data:`RETRY_SECONDS` with backoff, then gives up, attaching to the error what was not
saved (``err.unsaved``: the messages, ``err.saved_count``: the count they follow) so the caller can
keep them on screen and store them later (:func:`store_pending`).

Disk-full and other ``OSError``\\ s are not retried (space does not come back in seconds) but carry
the same attributes.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from core.errors import SessionConflict, StoreUnavailable
from core.session.keys import SessionKey
from core.session.rounds import Round

log = logging.getLogger(__name__)

RETRY_SECONDS = 6.0  # how long a reply's save is retried while the database is unreachable
RETRY_FIRST_DELAY = 0.25  # seconds; doubled after each failed attempt, up to 2 s


def store_messages(manager: Any, key: SessionKey, messages: list[dict[str, Any]], *, saved_count: int,
                   expected_count: int | None = None, end: str | None = None,
                   retry_seconds: float | None = None, agent: str | None = None,
                   mcp: dict[str, dict[str, str]] | None = None) -> int:
    """:func:`store_round` of a round of just ``messages`` (OpenAI chat messages), ``end``,
    ``agent`` and ``mcp`` (see :class:`~core.session.rounds.Round`); same checks, retries and errors."""
    return store_round(manager, key, Round(list(messages), end=end, agent=agent, mcp=mcp), saved_count=saved_count,
                       expected_count=expected_count, retry_seconds=retry_seconds)


def store_round(manager: Any, key: SessionKey, round: Round, *, saved_count: int,
                expected_count: int | None = None, retry_seconds: float | None = None) -> int:
    """Store ``round`` (its messages, usage, checkpoint and approval in one append:
    :meth:`SessionManager.store_round`) after the session's ``saved_count`` messages; return the
    new message count.

    ``expected_count``: passed to the first attempt (the caller's conflict check; None: none).
    A failed attempt is checked before it is repeated: the round's messages at the session's end
    mean it landed (the append is all or nothing, so its other entries did too). A round of no
    messages cannot be checked that way and is tried once.
    Raises :class:`SessionConflict` (someone else appended), and — after retrying for
    ``retry_seconds`` (default :data:`RETRY_SECONDS`) — the store's ``StoreUnavailable``, or at
    once its ``OSError``, with ``err.unsaved`` (the round's messages) and ``err.saved_count =
    saved_count``."""
    messages = round.messages
    deadline = time.monotonic() + (RETRY_SECONDS if retry_seconds is None else retry_seconds)
    delay = RETRY_FIRST_DELAY
    expected = expected_count
    while True:
        try:
            return manager.store_round(key, round, expected_count=expected)
        except StoreUnavailable as err:
            if not messages:
                raise _with_unsaved(err, messages, saved_count)
            last: BaseException = err
            log.warning("saving %d messages of %s failed: %s", len(messages), key.session_id, err)
        except OSError as err:
            raise _with_unsaved(err, messages, saved_count)
        while True:  # wait, then find out what the failed write did
            if time.monotonic() + delay > deadline:
                raise _with_unsaved(last, messages, saved_count)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            try:
                stored = manager.get(key).messages
                break
            except StoreUnavailable as err:
                last = err
        n = len(stored)
        if n == saved_count + len(messages) and stored[saved_count:] == messages:
            log.info("the failed save of %s had reached the store; not repeated", key.session_id)
            return n
        if n != saved_count:
            raise SessionConflict(saved_count, n)
        expected = saved_count  # it did not land: write it again, exactly once


def store_pending(manager: Any, key: SessionKey, pending: tuple[int, list[dict[str, Any]]]) -> int | None:
    """Store messages a failed save left behind (``pending`` = ``(saved_count, messages)``, from
    a failed :func:`store_messages`) if the session still holds ``saved_count`` messages; return
    the new count, or None when they were dropped (the session moved on; logged). Raises the
    store's errors (still unreachable: keep them pending)."""
    saved_count, messages = pending
    stored = manager.get(key).messages
    if len(stored) == saved_count + len(messages) and stored[saved_count:] == messages:
        return len(stored)  # they reached the store after all
    if len(stored) != saved_count:
        log.warning("dropping %d unsaved messages of %s: the session changed meanwhile",
                    len(messages), key.session_id)
        return None
    return manager.add_messages(key, messages, expected_count=saved_count)


def _with_unsaved(err: BaseException, messages: list[dict[str, Any]], saved_count: int) -> BaseException:
    err.unsaved = list(messages)  # type: ignore[attr-defined]
    err.saved_count = saved_count  # type: ignore[attr-defined]
    return err
