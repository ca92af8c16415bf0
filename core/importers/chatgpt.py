"""Read a ChatGPT data export (``conversations.json``, or the export ``.zip`` holding it).

The export is a JSON array of conversations. Each has ``id``/``conversation_id``, ``title``,
``create_time``/``update_time`` (Unix seconds), ``current_node`` and ``mapping``: a tree of nodes
``{id, parent, children: [...], message}`` whose ``message`` has ``author.role``
(system/user/assistant/tool), ``create_time`` and ``content`` (``content_type`` text,
multimodal_text, code, execution_output, … with ``parts`` or ``text``).

The path from the root to ``current_node`` (the branch the user last saw) becomes the session.
Every other leaf of the tree (an edited message or a regenerated reply in ChatGPT) becomes a
fork of it: a session holding the path to that leaf, whose header says where it branched off
(``forked_from``), exactly like a "Branch from here" in anycode. Non-text parts (images, files,
code interpreter output, browsing) become readable placeholders naming what was there; hidden
system messages and empty nodes are left out.
"""
from __future__ import annotations

import logging
import os
import zipfile
from typing import Any, Iterator

from core.importers.base import ImportedMessage, ImportedSession, ImportProblem, refused_name
from core.session.text import parse_json
from core.stores.zip_limits import read_member

log = logging.getLogger(__name__)

SOURCE = "chatgpt"
MAX_EXPORT_BYTES = 2 * 1024**3  # a conversations.json larger than this is refused, not read into memory


def read_export(path: str | os.PathLike[str]) -> Iterator[ImportedSession | ImportProblem]:
    """Yield the sessions of a ChatGPT export file (``conversations.json`` or the ``.zip``).

    A file that cannot be read at all yields one :class:`ImportProblem`; a conversation that
    cannot be read yields a problem naming it (its position in the array as the "line") and the
    others are still imported."""
    path = os.fspath(path)
    try:
        data = _load(path)
    except (OSError, ValueError, zipfile.BadZipFile, KeyError) as err:
        yield ImportProblem(path, 0, f"not a ChatGPT export ({_reason(err)})")
        return
    if isinstance(data, dict) and isinstance(data.get("mapping"), dict):
        data = [data]  # a single conversation (e.g. from a per-conversation export)
    if not isinstance(data, list):
        yield ImportProblem(path, 0, "not a ChatGPT export (expected a JSON array of conversations)")
        return
    for position, conv in enumerate(data, 1):
        try:
            for item in conversation_sessions(conv, path):
                if isinstance(item, ImportProblem):
                    item.line = position
                yield item
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            yield ImportProblem(path, position, f"conversation {position} could not be read ({_reason(err)})")
        except RecursionError:
            yield ImportProblem(path, position, f"conversation {position} is nested too deeply to read")


def _reason(err: BaseException) -> str:
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


def _load(path: str) -> Any:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == "conversations.json"]
            if not names:
                raise KeyError("the zip holds no conversations.json")
            info = zf.getinfo(min(names, key=len))
            if info.file_size > MAX_EXPORT_BYTES:
                raise ValueError(f"conversations.json is {info.file_size} bytes")
            # Refused by name before inflating (a zip bomb), then read once and parsed: peak memory
            # is the text plus what it parses to, never a second copy.
            return parse_json(read_member(zf, info.filename)[0])
    if os.path.getsize(path) > MAX_EXPORT_BYTES:
        raise ValueError("the file is too large")
    with open(path, "rb") as fh:
        return parse_json(fh.read())


def conversation_sessions(conv: dict[str, Any], file: str) -> Iterator[ImportedSession | ImportProblem]:
    """The sessions of one exported conversation: the current branch, then one fork per other
    leaf (each with ``forked_from`` naming the current branch and the last shared message). An id
    that is a path (absolute, ``..``, separators, NUL: :func:`core.importers.base.unsafe_name`)
    refuses its conversation, or its branch, with a problem naming it."""
    mapping: dict[str, Any] = conv["mapping"]
    conv_id = conv.get("conversation_id") or conv.get("id") or ""
    conv_id = str(conv_id) if isinstance(conv_id, int) else conv_id  # a number: an id all the same
    if not conv_id:
        raise ValueError("the conversation has no id")
    refused = refused_name(file, 0, "conversation id", conv_id)
    if refused is not None:
        yield refused
        return
    title = conv.get("title") if isinstance(conv.get("title"), str) else None
    created = _num(conv.get("create_time"))

    def path_to(node_id: str) -> list[str]:
        path, seen = [], set()
        while node_id and node_id in mapping and node_id not in seen:
            seen.add(node_id)
            path.append(node_id)
            node_id = mapping[node_id].get("parent")
        return path[::-1]

    leaves = [nid for nid, node in mapping.items() if not [c for c in node.get("children") or [] if c in mapping]]
    current = conv.get("current_node")
    if current not in mapping:
        # No current node recorded: the most recently written leaf is what the user saw last.
        current = max(leaves, key=lambda n: _num((mapping[n].get("message") or {}).get("create_time")) or 0.0,
                      default=None)
    if current is None:
        return
    main_nodes = path_to(current)
    main_messages, main_index = _messages(main_nodes, mapping)
    yield ImportedSession(SOURCE, conv_id, file, main_messages, title=title, created_at=created)

    on_main = set(main_nodes)
    for leaf in sorted(leaves):
        if leaf in on_main:
            continue
        refused = refused_name(file, 0, f"branch id (conversation {conv_id})", leaf)
        if refused is not None:
            yield refused
            continue
        nodes = path_to(leaf)
        shared = 0
        while shared < len(nodes) and nodes[shared] in on_main:
            shared += 1
        messages, _ = _messages(nodes, mapping)
        # message_index: the last main-branch message the fork shares (-1: none shared).
        last_shared = max((main_index[n] for n in nodes[:shared] if n in main_index), default=-1)
        if len(messages) <= last_shared + 1:
            continue  # the branch only differs by hidden/empty nodes: nothing to keep
        yield ImportedSession(
            SOURCE, f"{conv_id}:{leaf}", file, messages,
            title=f"{title} (branch)" if title else None, created_at=created,
            # A branch that shares no message (the first message was edited) is not a fork of it.
            forked_from={"source_id": conv_id, "message_index": last_shared} if last_shared >= 0 else None,
        )


def _messages(nodes: list[str], mapping: dict[str, Any]) -> tuple[list[ImportedMessage], dict[str, int]]:
    out: list[ImportedMessage] = []
    index: dict[str, int] = {}
    for nid in nodes:
        msg = mapping[nid].get("message")
        converted = _message(msg) if isinstance(msg, dict) else None
        if converted is None:
            continue
        index[nid] = len(out)
        out.append(ImportedMessage(converted, _num(msg.get("create_time"))))
    return out, index


def _message(msg: dict[str, Any]) -> dict[str, Any] | None:
    author = msg.get("author") or {}
    role = author.get("role")
    meta = msg.get("metadata") or {}
    if meta.get("is_visually_hidden_from_conversation") or meta.get("is_user_system_message"):
        return None
    text = content_text(msg.get("content") or {})
    if role == "system":
        return None  # ChatGPT's own system messages were never shown; anycode adds its own prompt
    if role == "tool":
        # A ChatGPT tool (browsing, code interpreter, DALL·E) ran on OpenAI's side; there is no
        # OpenAI tool call to pair it with, so it is kept as readable assistant text.
        name = author.get("name") or "a tool"
        return {"role": "assistant", "content": f"[{name} output]\n{text}"} if text.strip() else None
    if role not in ("user", "assistant"):
        return None
    if not text.strip():
        return None
    if role == "assistant" and msg.get("recipient") not in (None, "all"):
        # The model addressing a tool (code to run, a search query): show it as such.
        text = f"[to {msg.get('recipient')}]\n{text}"
    return {"role": role, "content": text}


def content_text(content: dict[str, Any]) -> str:
    """The readable text of a ChatGPT message ``content``; non-text parts become placeholders
    such as ``[image: file-abc.png]`` or ``[code interpreter output]``."""
    kind = content.get("content_type")
    if kind in ("code", "execution_output", "tether_quote", "system_error"):
        label = {"code": "code", "execution_output": "code interpreter output",
                 "tether_quote": "quote", "system_error": "error"}[kind]
        body = content.get("text") or content.get("result") or ""
        return f"[{label}]\n{body}" if body else f"[{label}]"
    if kind == "tether_browsing_display":
        body = content.get("result") or content.get("summary") or ""
        return f"[browsing]\n{body}" if body else "[browsing]"
    if kind in ("thoughts", "reasoning_recap", "model_editable_context", "user_editable_context"):
        return ""  # the model's hidden reasoning and memory context were never part of the chat
    parts = content.get("parts")
    if not isinstance(parts, list):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            out.append(_part_placeholder(part))
    return "\n".join(p for p in out if p)


def _part_placeholder(part: dict[str, Any]) -> str:
    kind = part.get("content_type") or part.get("type") or "attachment"
    if "image" in kind:
        pointer = str(part.get("asset_pointer") or "").rsplit("/", 1)[-1]
        return f"[image: {pointer}]" if pointer else "[image]"
    if "audio" in kind:
        return "[audio]"
    if isinstance(part.get("text"), str):
        return part["text"]
    name = part.get("name") or part.get("file_name")
    return f"[{kind}: {name}]" if name else f"[{kind}]"


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
