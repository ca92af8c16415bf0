"""Model server configuration: which OpenAI-compatible endpoint and model to talk to.

Any chat-completions endpoint works (OpenAI, Ollama, vLLM, LM Studio, llama.cpp server). The client
is built here and passed explicitly to the agent and the title generator; there is no global client.
Environment variables:

``OPENAI_API_KEY``        API key (optional for local servers)
``OPENAI_BASE_URL``       endpoint, e.g. ``http://127.0.0.1:8000/v1`` (default: OpenAI's)
``ANYCODE_MODEL``         chat model (default ``gpt-4o-mini``)
``ANYCODE_TITLE_MODEL``   model for conversation titles (default: the chat model)
``ANYCODE_TIMEOUT``       request timeout in seconds (default 60)
``ANYCODE_MAX_RETRIES``   the openai client's own retries on 429/5xx/connection errors (default 2)
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import urllib.request
from dataclasses import dataclass

import openai

from core.agent.http import loopback_mounts
from core.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelNotConfigured,
    ModelRateLimited,
    ModelServerError,
    ModelTimeout,
    ModelUnreachable,
)

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
# Ollama's OpenAI-compatible endpoint at its default address: used without any configuration when
# no API key is set and it answers, so a user with a local model needs no setup.
OLLAMA_URL = "http://127.0.0.1:11434/v1"
PROBE_TIMEOUT = 0.5
# Local servers ignore the key, but the openai client insists on having one.
LOCAL_PLACEHOLDER_KEY = "not-needed"


# A streamed reply whose connection broke (core.agent.loop retries it once when a background
# request overlapped it on a one-request-at-a-time server).
BROKEN_REPLY = "The connection to the model server broke in the middle of the reply; try again."

NOT_CONFIGURED_MESSAGE = (
    "No model is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI server), "
    f"or start a local OpenAI-compatible server such as Ollama at {OLLAMA_URL.removesuffix('/v1')}."
)


@dataclass(frozen=True)
class ModelConfig:
    """Where and how to reach the chat model.

    ``api_key``/``base_url`` may be None (no key: a local server is looked for; no base URL: the
    openai client's default, api.openai.com). ``timeout`` is seconds per request, ``max_retries``
    the openai client's retries. ``title_model`` None means "use ``model``" (see
    :attr:`effective_title_model`).
    """

    api_key: str | None = None
    base_url: str | None = None
    model: str = DEFAULT_MODEL
    title_model: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES

    @property
    def effective_title_model(self) -> str:
        """The model used for titles: ``title_model`` or, when unset, the chat model."""
        return self.title_model or self.model

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "ModelConfig":
        """Read the configuration from ``env`` (default ``os.environ``); ``overrides`` win.

        Empty variables count as unset. Raises ValueError (one readable sentence) for a timeout or
        retry count that is not a non-negative number.
        """
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = (env.get(name) or "").strip()
            return value or None

        def number(name: str, kind: type, default: float) -> float:
            raw = get(name)
            try:
                value = kind(raw) if raw is not None else default
            except ValueError:
                raise ValueError(f"{name} must be a number, not {raw!r}.") from None
            if value < 0:
                raise ValueError(f"{name} cannot be negative ({raw}).")
            return value

        values = {
            "api_key": get("OPENAI_API_KEY"),
            "base_url": get("OPENAI_BASE_URL"),
            "model": get("ANYCODE_MODEL") or DEFAULT_MODEL,
            "title_model": get("ANYCODE_TITLE_MODEL"),
            "timeout": number("ANYCODE_TIMEOUT", float, DEFAULT_TIMEOUT),
            "max_retries": number("ANYCODE_MAX_RETRIES", int, DEFAULT_MAX_RETRIES),
        }
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"unknown ModelConfig fields: {sorted(unknown)}")
        values.update(overrides)
        return cls(**values)


def probe_server(base_url: str, timeout: float = PROBE_TIMEOUT) -> list[str] | None:
    """GET ``<base_url>/models`` quickly; the model ids when an OpenAI-compatible server answers.

    Returns None when nothing answers in ``timeout`` seconds or the answer is not a model list.
    Never raises.
    """
    url = base_url.rstrip("/") + "/models"
    try:
        # No proxy: a proxy set for the internet must not swallow a probe of a local server.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=timeout) as resp:
            data = json.load(resp)
        return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
    except (OSError, ValueError, AttributeError, TypeError, KeyError) as err:
        log.debug("no OpenAI-compatible server at %s: %s", base_url, err)
        return None


def make_client(config: ModelConfig, *, local_url: str = OLLAMA_URL) -> openai.OpenAI:
    """Build the openai client for ``config``.

    With an API key: a client for ``config.base_url`` (or OpenAI). Without one: a client for
    ``config.base_url`` if set (local servers such as vLLM or LM Studio need no key), else for
    ``local_url`` (Ollama's default address) if a quick probe there answers. A server on this
    machine is reached without the environment's proxy (:mod:`core.agent.http`). Raises
    ModelNotConfigured when there is no key, no base URL, and no local server.
    """
    kwargs = {"timeout": config.timeout, "max_retries": config.max_retries,
              "http_client": openai.DefaultHttpxClient(mounts=loopback_mounts())}
    if config.api_key:
        return openai.OpenAI(api_key=config.api_key, base_url=config.base_url, **kwargs)
    if config.base_url:
        return openai.OpenAI(api_key=LOCAL_PLACEHOLDER_KEY, base_url=config.base_url, **kwargs)
    if probe_server(local_url) is not None:
        log.info("no OPENAI_API_KEY set; using the local server at %s", local_url)
        return openai.OpenAI(api_key=LOCAL_PLACEHOLDER_KEY, base_url=local_url, **kwargs)
    raise ModelNotConfigured(NOT_CONFIGURED_MESSAGE)


def list_models(client: openai.OpenAI, fallback: str) -> list[str]:
    """Model ids from the server's ``GET /v1/models``, sorted, for the UI's model picker.

    On any error (the endpoint missing, auth, network) or an empty list: ``[fallback]``.
    """
    try:
        ids = sorted({m.id for m in client.models.list()})
    except Exception as err:  # noqa: BLE001 -- a picker must never break the UI
        log.info("could not list models (%s); offering %s only", err, fallback)
        return [fallback]
    return ids or [fallback]


def pick_model(client: openai.OpenAI, config: ModelConfig) -> str:
    """The chat model to use by default: ``config.model`` unless it is the built-in default and
    the server does not offer it (e.g. a local Ollama), in which case the server's first model.

    An explicitly configured model is always kept. Never raises.
    """
    if config.model != DEFAULT_MODEL:
        return config.model
    available = list_models(client, config.model)
    return config.model if config.model in available else available[0]


def _server_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"].strip()
        if isinstance(body.get("message"), str):
            return body["message"].strip()
    return (exc.message or "").strip()


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_api_error(exc: BaseException, *, mid_reply: bool = False) -> ModelError:
    """Map an exception from the openai client to a typed ModelError whose ``str`` is one sentence
    saying what happened and what to do.

    401/403 → ModelAuthError, 429 → ModelRateLimited, 5xx → ModelServerError, connection refused /
    DNS → ModelUnreachable, timeout → ModelTimeout, other 4xx → ModelBadRequest (with the server's
    own message, e.g. an unknown model). A ModelError passes through unchanged; anything else
    becomes ModelServerError. ``mid_reply``: the failure happened while a streamed reply was
    arriving, so a lost connection is reported as the server dropping the reply
    (ModelServerError), not as an unreachable server. The result carries ``status_code`` (int or None) and ``detail`` (the
    server's message) attributes. Status meanings per the OpenAI API error-code reference.
    """
    if isinstance(exc, ModelError):
        return exc
    status: int | None = getattr(exc, "status_code", None)
    detail = ""
    if isinstance(exc, openai.APITimeoutError):
        err: ModelError = ModelTimeout(
            "The model server did not answer in time; try again, or raise ANYCODE_TIMEOUT if the model is slow.")
    elif isinstance(exc, openai.APIConnectionError) and mid_reply:
        err = ModelServerError(BROKEN_REPLY)
    elif isinstance(exc, openai.APIConnectionError):
        url = ""
        request = getattr(exc, "request", None)
        if request is not None:
            url = f" at {request.url.scheme}://{request.url.host}:{request.url.port or ''}".rstrip(":")
        err = ModelUnreachable(
            f"Could not reach the model server{url}; check that it is running and that OPENAI_BASE_URL is right.")
    elif isinstance(exc, openai.APIStatusError):
        detail = _server_detail(exc)
        from core.agent.context import overflow_error  # lazy: context imports settings only

        overflow = overflow_error(status, detail, exc.body)
        if overflow is not None:
            err = overflow
        elif status in (401, 403):
            err = ModelAuthError(
                f"The model server refused the API key (HTTP {status}); check OPENAI_API_KEY.")
        elif status == 429:
            err = ModelRateLimited(
                "The model server is rate limiting requests or the quota is used up (HTTP 429); "
                "wait a moment and try again, or check your plan and billing.")
        elif status is not None and status >= 500:
            err = ModelServerError(
                f"The model server had an internal error (HTTP {status}); try again in a moment.")
        else:
            why = f": {_short(detail)}" if detail else ""
            err = ModelBadRequest(
                f"The model server rejected the request (HTTP {status}{why}); check the model name and settings.")
    elif isinstance(exc, openai.APIError):
        # An error event inside a stream, or an answer that is not valid JSON.
        detail = getattr(exc, "message", "") or ""
        why = f" ({_short(detail)})" if detail else ""
        err = ModelServerError(f"The model server failed while answering{why}; try again in a moment.")
    else:
        err = ModelServerError(
            f"Talking to the model server failed unexpectedly ({type(exc).__name__}); try again in a moment.")
    err.status_code = status  # type: ignore[attr-defined]
    err.detail = detail  # type: ignore[attr-defined]
    return err
