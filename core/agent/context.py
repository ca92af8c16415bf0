"""How big the model's context window is, and how much of it a session uses.

**The window** (:func:`context_window`), first answer wins:

1. ``ANYCODE_CONTEXT_WINDOW`` (tokens);
2. a window learnt from the server's own ``context_length_exceeded`` message for this (base URL,
   model), remembered in ``<data dir>/context_windows.json`` (0600);
3. the server, where it says: vLLM's ``GET /v1/models`` (``max_model_len``), llama.cpp's
   ``GET /props`` (``n_ctx``, or ``default_generation_settings.n_ctx``), LM Studio's
   ``GET /api/v0/models`` (``loaded_context_length``, else ``max_context_length``), Ollama's
   ``POST /api/show`` (the model's ``<arch>.context_length`` capped by the ``num_ctx`` in effect:
   Ollama silently truncates a longer prompt at ``num_ctx``, and its OpenAI-compatible endpoint
   ignores a per-request ``num_ctx`` (ollama/ollama#5356), so the ``num_ctx`` in effect IS the
   window; :attr:`Window.note` tells the user how to raise it);
4. a table of well-known model families (:data:`FAMILY_WINDOWS`);
5. :data:`DEFAULT_WINDOW` (32,768).

Answers are cached per process for each (base URL, model); probes use a 2-second timeout.

**Usage** (:class:`UsageTracker`, :func:`context_usage`): the real count comes from the server —
each request asks for ``stream_options: {"include_usage": true}`` and the last reply's
``prompt_tokens`` is kept together with how many messages it covered; only what was added since
is estimated. Servers that send no usage are estimated entirely.

**The estimate** (:func:`estimate_tokens`): no tokenizer library works fully offline for every
model (tiktoken downloads its BPE files at run time and only knows OpenAI's models), so anycode
counts characters on the safe side: ASCII text at 3 characters per token (real BPE tokenizers
average about 4 for English and code), every other character as one token (CJK text is about
one token per character or less), plus 4 tokens per message for the chat template. It
over-counts rather than under-counts, so a request estimated to fit does fit.
"""
from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import settings
from core.errors import ModelContextExceeded
from core.stores.whole_file import place_whole

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 32_768
PROBE_TIMEOUT = 2.0
# Tokens kept free for the reply (the output shares the window with the prompt).
REPLY_RESERVE_FRACTION = 0.1
REPLY_RESERVE_MAX = 8_192
# Ollama's num_ctx when neither the model nor the server's settings name one (Ollama >= 0.6).
OLLAMA_DEFAULT_NUM_CTX = 4_096
ASCII_CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 4
WINDOWS_FILE = "context_windows.json"

# Well-known model families (substring of the lower-cased model name → window in tokens), most
# specific first. From the vendors' model cards.
FAMILY_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576), ("gpt-5", 400_000), ("gpt-4o", 128_000), ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768), ("gpt-4", 8_192), ("gpt-3.5-turbo", 16_385), ("o1", 200_000), ("o3", 200_000),
    ("o4-mini", 200_000), ("claude", 200_000), ("gemini", 1_048_576), ("deepseek", 128_000),
    ("qwen3", 32_768), ("qwen2.5", 32_768), ("llama-3.1", 131_072), ("llama3.1", 131_072),
    ("llama-3.2", 131_072), ("llama3.2", 131_072), ("llama-3.3", 131_072), ("llama3.3", 131_072),
    ("llama-3", 8_192), ("llama3", 8_192), ("mistral-large", 128_000), ("mistral-nemo", 128_000),
    ("mixtral", 32_768), ("mistral", 32_768), ("gemma-3", 131_072), ("gemma3", 131_072),
    ("gemma-2", 8_192), ("gemma2", 8_192), ("phi-4", 16_384), ("phi4", 16_384),
)


@dataclass(frozen=True)
class Window:
    """A model's context window: ``tokens``; ``source`` one of ``"env"``, ``"learnt"``,
    ``"server"``, ``"family"``, ``"default"``; ``note`` a sentence for the user when something
    limits it (Ollama's ``num_ctx``), else ""."""

    tokens: int
    source: str
    note: str = ""


_CACHE: dict[tuple[str, str], Window] = {}
_LOCK = threading.Lock()


def _key(base_url: Any, model: str) -> tuple[str, str]:
    return (str(base_url or "").rstrip("/"), str(model))


def forget_windows() -> None:
    """Forget the per-process cache (tests; a server restarted with another window)."""
    with _LOCK:
        _CACHE.clear()


# --- learnt windows, remembered in the data dir --------------------------------------------------


def _windows_path(data_dir: Path | None) -> Path:
    return (data_dir if data_dir is not None else settings.data_dir()) / WINDOWS_FILE


def _read_learnt(data_dir: Path | None) -> dict[str, int]:
    try:
        data = json.loads(_windows_path(data_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int) and v > 0} if isinstance(data, dict) else {}


def learnt_window(base_url: Any, model: str, data_dir: Path | None = None) -> int | None:
    """The window learnt earlier from this server's own error message, or None. ``data_dir``:
    the storage's data folder holding :data:`WINDOWS_FILE` (default :func:`core.settings.data_dir`)."""
    return _read_learnt(data_dir).get(" ".join(_key(base_url, model)))


def remember_window(base_url: Any, model: str, tokens: int, data_dir: Path | None = None) -> None:
    """Remember ``tokens`` as the window of ``model`` at ``base_url`` (``<data_dir>/``:data:`WINDOWS_FILE`,
    0600, written aside and renamed; ``data_dir`` as in :func:`learnt_window`). A failure to write
    is logged, never raised: it only costs a relearn."""
    with _LOCK:
        _CACHE[_key(base_url, model)] = Window(tokens, "learnt")
        data = _read_learnt(data_dir)
        data[" ".join(_key(base_url, model))] = int(tokens)
        path = _windows_path(data_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            place_whole(path, json.dumps(data, indent=1, sort_keys=True).encode(), replace=True)
        except OSError as err:
            log.warning("could not remember the context window in %s: %s", path, err)


# --- asking the server ---------------------------------------------------------------------------


def _get_json(client: Any, url: str, *, body: dict | None = None) -> Any:
    import httpx  # installed with openai

    headers = {}
    key = getattr(client, "api_key", None)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    from core.agent.http import loopback_mounts

    try:
        with httpx.Client(mounts=loopback_mounts(), timeout=PROBE_TIMEOUT) as http:
            resp = http.get(url, headers=headers) if body is None else http.post(url, headers=headers, json=body)
        if resp.status_code != 200:
            return None
        return resp.json()
    except httpx.TransportError as err:
        raise _Unreachable(str(err)) from err
    except (httpx.HTTPError, ValueError):
        return None


class _Unreachable(Exception):
    """The server did not answer at all: no other endpoint will either."""


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _ollama_window(client: Any, root: str, model: str) -> Window | None:
    show = _get_json(client, f"{root}/api/show", body={"model": model})
    if not isinstance(show, dict) or not isinstance(show.get("model_info"), dict):
        return None
    trained = next((_positive(v) for k, v in show["model_info"].items()
                    if k.endswith(".context_length") and _positive(v)), None)
    num_ctx = None
    match = re.search(r"(?m)^\s*num_ctx\s+(\d+)", str(show.get("parameters") or ""))
    if match:
        num_ctx = int(match.group(1))
    running = _get_json(client, f"{root}/api/ps")
    for entry in (running or {}).get("models") or [] if isinstance(running, dict) else []:
        if isinstance(entry, dict) and entry.get("name") in (model, f"{model}:latest"):
            num_ctx = _positive(entry.get("context_length")) or num_ctx
    effective = num_ctx or OLLAMA_DEFAULT_NUM_CTX
    if trained:
        effective = min(effective, trained)
    note = ""
    if trained and effective < trained:
        note = (f"Ollama runs {model} with a {effective:,}-token context (num_ctx) although the model "
                f"takes {trained:,}; longer prompts would be cut silently, so anycode compacts at "
                f"{effective:,}. Raise it with OLLAMA_CONTEXT_LENGTH or `PARAMETER num_ctx` in a Modelfile.")
    return Window(effective, "server", note)


def probe_window(client: Any, model: str) -> Window | None:
    """Ask the server at ``client.base_url`` for ``model``'s window (see the module docstring);
    None when no endpoint says. Never raises: a probe failure only means "unknown" (a server that
    does not answer at all is asked once, not once per endpoint)."""
    try:
        return _probe(client, model)
    except _Unreachable as err:
        log.info("could not ask %s for the context window: %s", client.base_url, err)
        return None


def _probe(client: Any, model: str) -> Window | None:
    base = str(client.base_url).rstrip("/")
    root = re.sub(r"/v1$", "", base)
    listing = _get_json(client, f"{base}/models")
    if isinstance(listing, dict):
        for entry in listing.get("data") or []:
            if isinstance(entry, dict) and entry.get("id") == model:
                for field in ("max_model_len", "context_length", "context_window", "max_context_length"):
                    if _positive(entry.get(field)):
                        return Window(entry[field], "server")
    props = _get_json(client, f"{root}/props")
    if isinstance(props, dict):
        n_ctx = _positive(props.get("n_ctx")) or _positive(
            (props.get("default_generation_settings") or {}).get("n_ctx")
            if isinstance(props.get("default_generation_settings"), dict) else None)
        if n_ctx:
            return Window(n_ctx, "server")
    studio = _get_json(client, f"{root}/api/v0/models")
    if isinstance(studio, dict):
        for entry in studio.get("data") or []:
            if isinstance(entry, dict) and entry.get("id") == model:
                tokens = _positive(entry.get("loaded_context_length")) or _positive(entry.get("max_context_length"))
                if tokens:
                    return Window(tokens, "server")
    return _ollama_window(client, root, model)


def family_window(model: str) -> int | None:
    """The window of a well-known model family by name (:data:`FAMILY_WINDOWS`), or None."""
    name = (model or "").lower()
    for needle, tokens in FAMILY_WINDOWS:
        if needle in name:
            return tokens
    return None


def context_window(client: Any, model: str, *, probe: bool = True, data_dir: Path | None = None) -> Window:
    """The context window of ``model`` at ``client.base_url`` (order in the module docstring).

    ``client`` may be None (nothing to ask). ``probe`` False skips asking the server (the UI's
    first paint). ``data_dir``: where learnt windows are kept (:func:`learnt_window`; a storage's
    ``data_dir``). Cached per process; never raises."""
    override = settings.context_window_override()
    if override:
        return Window(override, "env")
    base = getattr(client, "base_url", "") if client is not None else ""
    key = _key(base, model)
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    learnt = learnt_window(base, model, data_dir)
    window = Window(learnt, "learnt") if learnt else None
    asked = False
    if window is None and client is not None and probe:
        try:
            window, asked = _probe(client, model), True
        except _Unreachable as err:
            log.info("could not ask %s for the context window: %s", base, err)
    if window is None:
        family = family_window(model)
        window = Window(family, "family") if family else Window(DEFAULT_WINDOW, "default")
        if not asked and not learnt:
            return window  # not cached: once the server answers, it is asked
    with _LOCK:
        _CACHE[key] = window
    return window


def reply_reserve(window: int) -> int:
    """Tokens left free for the model's reply: 10% of the window, at most 8,192."""
    return min(REPLY_RESERVE_MAX, int(window * REPLY_RESERVE_FRACTION))


# --- counting ------------------------------------------------------------------------------------


def estimate_text_tokens(text: str) -> int:
    """Tokens of ``text`` by the safe-side estimate (module docstring): ASCII characters / 3,
    every other character 1."""
    if not text:
        return 0
    ascii_chars = len(text.encode("ascii", "ignore"))
    return int((ascii_chars / ASCII_CHARS_PER_TOKEN) + (len(text) - ascii_chars)) + 1


def _message_chars(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    parts = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts += [str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            fn = call.get("function") if isinstance(call.get("function"), dict) else {}
            parts += [str(call.get("id", "")), str(fn.get("name", "")), str(fn.get("arguments", ""))]
    if message.get("tool_call_id"):
        parts.append(str(message["tool_call_id"]))
    return "\n".join(parts)


def estimate_message_tokens(message: Any) -> int:
    """Tokens of one chat message: its text, tool calls and ids, plus the template overhead."""
    return estimate_text_tokens(_message_chars(message)) + MESSAGE_OVERHEAD_TOKENS


def estimate_tokens(messages: list[dict], tools: list[dict] | None = None) -> int:
    """Tokens of a request with ``messages`` and the ``tools`` list (its JSON), estimated."""
    total = sum(estimate_message_tokens(m) for m in messages) + 3
    if tools:
        total += estimate_text_tokens(json.dumps(tools, separators=(",", ":")))
    return total


@dataclass
class Usage:
    """``used`` tokens of ``window``; ``exact`` when ``used`` rests on the server's count
    (then only what was added since is estimated); ``fraction`` = used / window."""

    used: int
    window: int
    exact: bool
    source: str = "default"
    note: str = ""

    @property
    def fraction(self) -> float:
        return self.used / self.window if self.window else 0.0

    def label(self) -> str:
        """``"42k / 128k"`` (``"~42k / 128k"`` when estimated)."""
        return f"{'' if self.exact else '~'}{short_tokens(self.used)} / {short_tokens(self.window)}"


def short_tokens(n: int) -> str:
    """A token count for people: ``950``, ``12k``, ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


class UsageTracker:
    """The server's last count for each session, per process: ``record`` after a reply,
    ``used`` before a request. Keyed by (session id, view start): a compaction changes the view
    start, so a count taken before it is never applied after it."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, int], tuple[int, int]] = {}
        self._lock = threading.Lock()

    def record(self, session_id: str, view_start: int, covered: int, prompt_tokens: Any) -> None:
        """The server counted ``prompt_tokens`` for a request holding the session's messages up to
        index ``covered`` (exclusive), seen from ``view_start``. Ignored when not a positive int."""
        if _positive(prompt_tokens):
            with self._lock:
                self._last[(session_id, view_start)] = (covered, prompt_tokens)

    def used(self, session_id: str, view_start: int, messages: list[dict], view: list[dict],
             tools: list[dict] | None = None) -> tuple[int, bool]:
        """``(tokens, exact)`` of sending ``view`` (the model's view of ``messages``) now: the
        server's last count plus an estimate of the messages added since, when the server
        counted this view; else the estimate of the whole request."""
        with self._lock:
            last = self._last.get((session_id, view_start))
        if last is not None and last[0] <= len(messages):
            covered, tokens = last
            return tokens + sum(estimate_message_tokens(m) for m in messages[covered:]), True
        return estimate_tokens(view, tools), False


TRACKER = UsageTracker()


def context_usage(session: Any, client: Any, model: str, *, tools: list[dict] | None = None,
                  probe: bool = True, tracker: UsageTracker = TRACKER, data_dir: Path | None = None) -> Usage:
    """How much of the model's window the next request of ``session`` (a
    :class:`core.session.models.Session`) would use: the one answer to "used / window"
    (``data_dir`` as in :func:`context_window`)."""
    from core.session.compaction import model_view, view_start

    window = context_window(client, model, probe=probe, data_dir=data_dir)
    view = model_view(session.messages, session.compactions)
    start = view_start(session.messages, session.compactions)
    used, exact = tracker.used(session.id, start, session.messages, view, tools)
    return Usage(used, window.tokens, exact, window.source, window.note)


# --- the server saying the request did not fit ----------------------------------------------------

_OVERFLOW_WORDS = re.compile(
    r"context[_ ](?:length|window|size)|maximum context|n_ctx|too many tokens|prompt is too long|"
    r"exceeds? (?:the )?(?:available )?context|input is too long|reduce the length", re.I)
_WINDOW_PATTERNS = (
    r"maximum context length is (\d+)", r"context window of (\d+)", r"context length of (?:only )?(\d+)",
    r"n_ctx\W{0,4}(\d+)", r"> ?(\d+) maximum", r"context size (?:of |is )?\(?(\d+)",
    r"max(?:imum)?[_ ]model[_ ]len(?:gth)?\W{0,4}(\d+)",
)
_REQUESTED_PATTERNS = (
    r"resulted in (\d+) tokens", r"you requested (\d+) tokens", r"has (\d+) input tokens",
    r"requested tokens \((\d+)\)", r"n_prompt_tokens\W{0,4}(\d+)", r"prompt is too long: (\d+)",
)


def _first_int(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.I)
        if match:
            return int(match.group(1))
    return None


def overflow_error(status: int | None, detail: str, body: Any = None) -> ModelContextExceeded | None:
    """A :class:`ModelContextExceeded` when a server error means "the request did not fit the
    context window", else None: HTTP 400/413/422 with ``code: context_length_exceeded`` (per the
    OpenAI API) or a message saying so (vLLM, llama.cpp, LM Studio, llama-cpp-python), an HTTP 500
    whose text mentions the context, or such an error inside a stream (``status`` None)."""
    err = body.get("error", body) if isinstance(body, dict) else {}
    err = err if isinstance(err, dict) else {}
    code = str(err.get("code") or err.get("type") or "")
    text = " ".join([detail or "", json.dumps(body) if isinstance(body, (dict, list)) else ""])
    if "context_length_exceeded" not in code and "exceed_context_size" not in code \
            and not _OVERFLOW_WORDS.search(text):
        return None
    if status is not None and status not in (400, 413, 422, 500):
        return None
    window = _positive(err.get("n_ctx")) or _first_int(_WINDOW_PATTERNS, text)
    requested = _positive(err.get("n_prompt_tokens")) or _first_int(_REQUESTED_PATTERNS, text)
    size = f" (the model's window is {window:,} tokens)" if window else ""
    return ModelContextExceeded(
        f"The conversation no longer fits the model's context window{size}, even after summarising "
        "older messages; start a new chat or branch from an earlier message, or set "
        "ANYCODE_CONTEXT_WINDOW if the server's window is smaller than anycode thinks.",
        window=window, requested=requested)
