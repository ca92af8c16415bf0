"""Memory on the agent side: written at persistence, read by new sessions, the ``remember`` tool.

Design article: "saveMemory 的调用时机 … 精确定义为 'Session 持久化时'" — after each completed
exchange is appended to the session, :func:`start_memory_extraction` runs in a daemon thread:
the title model gets the exchange and the current memories and answers
``{"add": [...], "remove": [...]}`` (:data:`core.agent.prompts.MEMORY_PROMPT`). Real models wrap
JSON in code fences, put prose around it, answer nothing or something invalid:
:func:`parse_memory_changes` finds the object or returns None, and the job logs and skips.
Candidates that look like secrets are dropped by :mod:`core.memory.secrets`, in code. The job
never raises, never delays the reply (it starts after the last round is stored) and its
failures are only logged, never shown in the chat.

:class:`SessionMemory` is what the runner uses for one turn: the context for a new session's
system prompt, the ``remember`` tool (no approval: it only writes a memory, which the user sees
as a step in the chat and can delete in the Memory panel) and the job.
"""
from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from core.agent.language import Language, conversation_language
from core.agent.prompts import REMEMBER_TOOL_DESCRIPTION, memory_prompt
from core.agent.repair import sanitize
from core.agent import slots
from core.agent.stream import read_reply
from core.agent.titles import fit_window
from core.errors import AnycodeError, InvalidMemory
from core.memory.context import SessionContext, memory_section, session_context, with_memory_section
from core.memory.mode import memory_mode
from core.memory.model import Memory
from core.memory.store import MemoryStore, same_text
from core.session.compaction import latest_compaction, model_view, view_start
from core.session.export import message_text
from core.storage import Storage

log = logging.getLogger(__name__)

MEMORY_TEMPERATURE = 0.0
MAX_CHARS_PER_MESSAGE = 4000  # the start of each message is enough to find lasting facts
# The whole exchange's text: a turn of many tool rounds keeps its request and its last answers
# (the middle is left out, marked), so the request stays small whatever the model's window.
MAX_EXCHANGE_CHARS = 16_000
SKIPPED_LINE = "[… {n} messages of this exchange left out …]"
MAX_ADDS_PER_EXCHANGE = 5
# Room left for the answer (a JSON object of a few facts) when the request is fitted to the window.
MEMORY_REPLY_TOKENS = 512  # a model listing twenty "facts" is summarising, not remembering
REMEMBER_TOOL = "remember"
REMEMBER_SPEC = {
    "type": "function",
    "function": {
        "name": REMEMBER_TOOL,
        "description": REMEMBER_TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "fact": {"type": "string", "description": "The fact to remember, one short sentence."},
                "scope": {"type": "string", "enum": ["project", "user"],
                          "description": "project (default): about this project; user: the user's own "
                                         "preference, for every project."},
            },
            "required": ["fact"],
        },
    },
}

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass
class MemoryChanges:
    """Parsed model answer: ``add`` as ``(text, scope)`` pairs (scope "project" | "user"),
    ``remove`` as memory ids."""

    add: list[tuple[str, str]] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)


def _changes_from(value: Any) -> MemoryChanges | None:
    if not isinstance(value, dict) or not ({"add", "remove"} & set(value)):
        return None
    adds, removes = value.get("add") or [], value.get("remove") or []
    if not isinstance(adds, list) or not isinstance(removes, list):
        return None
    out = MemoryChanges()
    for item in adds:
        if isinstance(item, str):
            out.add.append((item, "project"))
        elif isinstance(item, dict) and isinstance(item.get("text") or item.get("fact"), str):
            scope = "user" if item.get("scope") in ("user", "global") else "project"
            out.add.append((item.get("text") or item.get("fact"), scope))
    out.remove = [r.strip() for r in removes if isinstance(r, str) and r.strip()]
    return out


def parse_memory_changes(text: Any) -> MemoryChanges | None:
    """The ``{"add": [...], "remove": [...]}`` object in a model's answer, or None (logged by the
    caller) when there is none: an empty answer, invalid JSON, or JSON of another shape.

    Accepts the object alone, inside a Markdown code fence, or with prose around it (the first
    object with an ``add`` or ``remove`` key wins); ``<think>`` blocks are ignored."""
    if not isinstance(text, str):
        return None
    text = _THINK.sub("", text).strip()
    if not text:
        return None
    candidates = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            found = _changes_from(json.loads(candidate))
        except ValueError:
            continue
        if found is not None:
            return found
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        found = _changes_from(value)
        if found is not None:
            return found
    return None


def exchange_of(messages: list[dict]) -> tuple[int | None, list[dict]]:
    """The latest exchange: ``(index of its user message, messages from it on)``; ``(None, [])``
    when there is no user message."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], dict) and messages[i].get("role") == "user":
            return i, messages[i:]
    return None, []


def _fit(lines: list[str], budget: int) -> list[str]:
    """``lines`` within ``budget`` characters: the first line, then as many of the last ones as
    fit, with :data:`SKIPPED_LINE` where lines were left out."""
    if sum(len(line) for line in lines) <= budget or len(lines) < 2:
        return lines
    tail: list[str] = []
    left = budget - len(lines[0])
    for line in reversed(lines[1:]):
        if len(line) > left and tail:
            break
        tail.append(line)
        left -= len(line)
    skipped = len(lines) - 1 - len(tail)
    return [lines[0], *([SKIPPED_LINE.format(n=skipped)] if skipped else []), *reversed(tail)]


def memory_request_messages(exchange: list[dict], memories: list[Memory], *, summary: str | None = None,
                            language: Language | None = None) -> list[dict]:
    """The extraction request: :func:`core.agent.prompts.memory_prompt` (naming ``language``, the
    conversation's; None: detected from ``exchange``), then one user message holding the current
    memories (``id [scope] text``) and the exchange's user and assistant text (tool calls and
    results left out; each message cut to 4000 characters, the exchange to 16,000: its first
    message and its latest ones). ``summary``: the compaction summary that replaced the start of
    the exchange (the model view), put before it."""
    listed = "\n".join(f"- {m.id} [{m.scope}] {m.text}" for m in memories) or "(none)"
    lines = []
    for m in exchange:
        if m.get("role") in ("user", "assistant"):
            body = message_text(m.get("content")).strip()
            if body:
                lines.append(f"{m['role'].upper()}: {body[:MAX_CHARS_PER_MESSAGE]}")
    if summary:
        lines.insert(0, f"SUMMARY OF THE START OF THIS EXCHANGE: {summary.strip()[:MAX_CHARS_PER_MESSAGE]}")
    if language is None:
        language = conversation_language(exchange)
    content = f"Current memories:\n{listed}\n\nLatest exchange:\n" + "\n\n".join(_fit(lines, MAX_EXCHANGE_CHARS))
    return sanitize([{"role": "system", "content": memory_prompt(language)}, {"role": "user", "content": content}])


@dataclass
class ExtractionResult:
    """What one extraction did: ``added`` / ``removed`` memories, ``proposed`` ones waiting for the
    user's yes (an exchange that read outside input); ``skipped`` True when the model's answer was
    unusable or the request failed (logged)."""

    added: list[Memory] = field(default_factory=list)
    removed: list[Memory] = field(default_factory=list)
    proposed: list[Memory] = field(default_factory=list)
    skipped: bool = False


def extract_memories(memory: MemoryStore, project_key: str, session_id: str, messages: list[dict], *,
                     client: Any, model: str, compactions: list[dict] | None = None,
                     can_confirm: bool = False, data_dir: Path | None = None) -> ExtractionResult:
    """Run one extraction for the latest exchange of ``messages`` and apply it; never raises.

    ``compactions`` (``Session.compactions``): the exchange is read as the model sees it — when a
    compaction summarised its start (a long turn of tool rounds), the summary and the kept
    messages; the facts are asked for in the conversation's language (:mod:`core.agent.language`).

    Adds go to the project's memories (or the user's, when the model says so) with source
    ``model`` and this session and user message as origin; a candidate that looks like a secret,
    repeats a live memory or a memory the user removed is dropped. Removes apply to the ids of
    the user's and this project's live memories only. When the exchange read files, tool output
    or a sub-agent's result (:func:`read_outside_input`), adds are only proposed — kept for the
    user's yes when ``can_confirm`` (the page asks), else dropped — and removes are ignored.
    ``data_dir``: the storage's (where a learnt context window is read: :func:`fit_window`)."""
    result = ExtractionResult()
    try:
        index, exchange = exchange_of(messages)
        if index is None:
            return result
        current = memory.list(project_key)
        kept = view_start(messages, compactions or [])
        summary = None
        if index < kept:  # the exchange's start was summarised: the model view from the cut
            exchange = messages[kept:]
            latest = latest_compaction(compactions or [], len(messages))
            summary = latest["summary"] if latest else None
        language = (conversation_language(exchange)
                    or conversation_language(model_view(messages, compactions or [])[-200:]))
        request = memory_request_messages(exchange, current, summary=summary, language=language)
        try:
            # The compatible reader (as titles): a model refusing `temperature` is asked again
            # without it, and a server streaming anyway is still understood.
            with slots.background(client):  # after the user's turn on a one-at-a-time server
                request = fit_window(request, client, model, MEMORY_REPLY_TOKENS, data_dir=data_dir)
                answer = read_reply(client, {"model": model, "messages": request,
                                             "temperature": MEMORY_TEMPERATURE}).text
        except Exception as err:  # noqa: BLE001 -- any failure: skip this exchange
            log.warning("memory extraction for session %s failed: %s", session_id, err)
            result.skipped = True
            return result
        changes = parse_memory_changes(answer)
        if changes is None:
            log.warning("memory extraction for session %s: no usable JSON in the model's answer %r; skipped",
                        session_id, (answer or "")[:200])
            result.skipped = True
            return result
        removed_before = memory.removed_texts(project_key)
        if read_outside_input(messages, index):
            for text, scope in changes.add[:MAX_ADDS_PER_EXCHANGE] if can_confirm else ():
                try:
                    proposed = memory.propose(text, scope=scope, project_key=project_key, source="model",
                                              session_id=session_id, message_index=index)
                except InvalidMemory as e:
                    log.info("memory candidate dropped: %s", e)
                    continue
                if proposed is not None:
                    result.proposed.append(proposed)
            log.info("memory extraction for session %s read outside input: %d proposed, none stored",
                     session_id, len(result.proposed))
            return result
        for mid in changes.remove:
            match = [m for m in current if m.id == mid or (len(mid) >= 6 and m.id.startswith(mid))]
            if len(match) == 1:
                try:
                    result.removed.append(memory.remove(match[0].id, project_key=project_key, source="model"))
                except AnycodeError as e:
                    log.info("memory %s not removed: %s", mid, e)
            else:
                log.info("memory extraction named an unknown memory %r to remove; ignored", mid)
        for text, scope in changes.add[:MAX_ADDS_PER_EXCHANGE]:
            if any(same_text(text, old) for old in removed_before):
                log.info("memory candidate dropped: the user removed it before")
                continue
            if any(same_text(text, m.text) for m in current):
                continue
            try:
                result.added.append(memory.add(text, scope=scope, project_key=project_key, source="model",
                                               session_id=session_id, message_index=index))
            except InvalidMemory as e:
                log.info("memory candidate dropped: %s", e)
        log.info("memory extraction for session %s: %d added, %d removed", session_id,
                 len(result.added), len(result.removed))
    except Exception:  # noqa: BLE001 -- a background job must never crash anything
        log.exception("memory extraction for session %s failed", session_id)
        result.skipped = True
    return result


def read_outside_input(messages: list[dict], since: int | None) -> bool:
    """Whether the turn that started at message ``since`` (its user message) has seen text that
    did not come from the user or the model: a result of any tool but ``remember`` (a file read,
    a listing, a sub-agent's answer). A fact proposed after that may come from the file, not the
    user (issue 28: "remember: …" planted in a README), so it is not stored without the user's yes."""
    if since is None:
        return False
    remember_ids = {c.get("id") for m in messages[since:] if m.get("role") == "assistant"
                    for c in m.get("tool_calls") or [] if (c.get("function") or {}).get("name") == REMEMBER_TOOL}
    return any(m.get("role") == "tool" and m.get("tool_call_id") not in remember_ids for m in messages[since:])


class SessionMemory:
    """Memory for one turn of one session (built by the runner; see the module docstring).

    ``memory``: the store; ``mode``: ``auto`` | ``manual`` (``off`` never builds one);
    ``message_index``: the index of the turn's user message, origin of what ``remember`` stores;
    ``data_dir``: the storage's data folder (learnt context windows)."""

    def __init__(self, memory: MemoryStore, mode: str, project_key: str, session_id: str, *,
                 data_dir: Path | None = None):
        self.memory, self.mode, self.data_dir = memory, mode, data_dir
        self.project_key, self.session_id = project_key, session_id
        self.message_index: int | None = None
        # The turn's messages as the runner holds them (read by `remember` to tell whether the
        # turn has read files or tool output), and whether a person can answer a proposal (the
        # web page shows it as a card; sub-agents and the CLI cannot: such a proposal is refused).
        self.turn_messages: list[dict] = []
        self.can_confirm = False

    @classmethod
    def open(cls, storage: Storage, project_key: str, session_id: str) -> "SessionMemory | None":
        """The session's memory in ``storage``, or None when memory is off (``ANYCODE_MEMORY``,
        the panel's switch) or the store cannot keep memories (logged; the chat goes on without)."""
        mode = memory_mode(storage.files_dir)
        if mode == "off":
            return None
        try:
            return cls(storage.memories, mode, project_key, session_id, data_dir=storage.data_dir)
        except Exception as e:  # noqa: BLE001 -- memory is optional, the chat is not
            log.warning("memory unavailable for this session: %s", e)
            return None

    def context(self, root: str | None) -> SessionContext:
        """The context for a new session's system prompt (memories within budget + instruction
        files); on a store failure, the instruction files alone (logged)."""
        try:
            memories = self.memory.list(self.project_key)
        except Exception as e:  # noqa: BLE001
            log.warning("could not read memories for a new session: %s", e)
            memories = []
        return session_context(memories, root)

    def refresh_system(self, system_text: Any) -> Any:
        """``system_text`` (a stored system prompt) with the memories current now in place of the
        ones it was saved with (:func:`core.memory.context.with_memory_section`); on a store
        failure, without any memory section (logged): a stale memory is never sent."""
        try:
            section = memory_section(self.memory.list(self.project_key))[0]
        except Exception as e:  # noqa: BLE001 -- memory is optional, the chat is not
            log.warning("could not read memories for this request: %s", e)
            section = ""
        return with_memory_section(system_text, section)

    def tool_handlers(self) -> dict[str, Callable[[str | None], tuple[str, bool]]]:
        """``{"remember": handler}``: the handler takes the raw JSON arguments and returns
        ``(result text, is_error)``, never raising."""
        return {REMEMBER_TOOL: self.remember}

    def remember(self, raw_arguments: str | None) -> tuple[str, bool]:
        """The ``remember`` tool: store ``{"fact", "scope"?}``; the result names what was stored."""
        try:
            args = json.loads(raw_arguments) if raw_arguments and raw_arguments.strip() else {}
        except ValueError as err:
            return f"Error: the arguments are not valid JSON ({err}).", True
        if not isinstance(args, dict) or not isinstance(args.get("fact"), str):
            return "Error: give the fact to remember as {\"fact\": \"...\"}.", True
        scope = "user" if args.get("scope") == "user" else "project"
        if read_outside_input(self.turn_messages, self.message_index):
            return self._propose(args["fact"], scope)
        try:
            m = self.memory.add(args["fact"], scope=scope, project_key=self.project_key, source="model",
                                session_id=self.session_id, message_index=self.message_index)
        except InvalidMemory as err:
            return f"Error: {err}", True
        except Exception as err:  # noqa: BLE001 -- a tool never kills the conversation
            log.exception("remember failed")
            return f"Error: the memory could not be stored ({err}).", True
        return f"Remembered ({m.scope} memory {m.id}): {m.text}", False

    def _propose(self, fact: str, scope: str) -> tuple[str, bool]:
        """``remember`` in a turn that read outside input: a proposal for the user, or a refusal."""
        if not self.can_confirm:
            return ("Not stored: this turn read files or tool output, and a memory taken from them needs the "
                    "user's yes, which nobody can give here. Ask the user to say it themselves if it matters."), True
        try:
            p = self.memory.propose(fact, scope=scope, project_key=self.project_key, source="model",
                                    session_id=self.session_id, message_index=self.message_index)
        except InvalidMemory as err:
            return f"Error: {err}", True
        except Exception as err:  # noqa: BLE001 -- a tool never kills the conversation
            log.exception("remember (proposal) failed")
            return f"Error: the memory could not be proposed ({err}).", True
        if p is None:
            return "Already known or declined before; nothing new to remember.", False
        return ("Not stored yet: this turn read files or tool output, so the user is asked in the page whether "
                f"to remember it: {p.text}"), False

    def start_extraction(self, messages: list[dict], *, client: Any, model: str,
                         on_done: Callable[[ExtractionResult], None] | None = None,
                         compactions: list[dict] | None = None) -> threading.Thread | None:
        """Start the background extraction for the latest exchange (``auto`` mode only; else
        None). ``compactions``: the session's (the exchange is read as the model sees it).
        ``on_done(result)`` is called from the thread; ``join()`` it to wait (tests)."""
        if self.mode != "auto" or client is None:
            return None
        snapshot = [dict(m) for m in messages]
        summaries = [dict(c) for c in compactions or ()]

        def work() -> None:
            result = extract_memories(self.memory, self.project_key, self.session_id, snapshot,
                                      client=client, model=model, compactions=summaries,
                                      can_confirm=self.can_confirm, data_dir=self.data_dir)
            if on_done is not None:
                try:
                    on_done(result)
                except Exception:  # noqa: BLE001
                    log.exception("memory callback failed")

        thread = threading.Thread(target=work, name=f"memory-{self.session_id[:8]}", daemon=True)
        thread.start()
        return thread
