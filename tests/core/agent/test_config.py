"""Model configuration, local-server discovery, model listing and the errors a user sees."""
from __future__ import annotations

import socket

import openai
import pytest

from core import SessionManager
from core.agent.config import (DEFAULT_MODEL, ModelConfig, describe_api_error, list_models, make_client,
                         pick_model, probe_server)
from core.errors import (ModelAuthError, ModelBadRequest, ModelError, ModelNotConfigured, ModelRateLimited,
                         ModelServerError, ModelTimeout, ModelUnreachable)
from core.agent.runner import run_session_stream
from core.agent.events import TitleStarted


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


class TestModelConfig:
    """Guards against env settings being ignored or misread (wrong model, wrong server)."""

    def test_defaults(self):
        cfg = ModelConfig.from_env({})
        assert (cfg.api_key, cfg.base_url, cfg.model, cfg.effective_title_model) == (None, None, DEFAULT_MODEL,
                                                                                      DEFAULT_MODEL)
        assert cfg.timeout > 0 and cfg.max_retries >= 0

    def test_env_and_overrides(self):
        env = {"OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://h/v1", "ANYCODE_MODEL": "llama3",
               "ANYCODE_TITLE_MODEL": "", "ANYCODE_TIMEOUT": "5", "ANYCODE_MAX_RETRIES": "0"}
        cfg = ModelConfig.from_env(env, title_model="tiny")
        assert (cfg.api_key, cfg.base_url, cfg.model, cfg.title_model, cfg.timeout, cfg.max_retries) == \
            ("sk-1", "http://h/v1", "llama3", "tiny", 5.0, 0)
        assert ModelConfig.from_env(env).effective_title_model == "llama3"
        with pytest.raises(TypeError):
            ModelConfig.from_env(env, modle="typo")
        with pytest.raises(ValueError, match="ANYCODE_TIMEOUT must be a number"):
            ModelConfig.from_env({"ANYCODE_TIMEOUT": "soon"})

    def test_probe_ignores_proxy_settings(self, fake_openai, monkeypatch):
        monkeypatch.setenv("http_proxy", closed_port_url().removesuffix("/v1"))
        monkeypatch.setenv("HTTP_PROXY", closed_port_url().removesuffix("/v1"))
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        assert probe_server(fake_openai.base_url) == fake_openai.models


class TestMakeClient:
    """Guards against a user with a local model needing setup, or a user with nothing getting a cryptic error."""

    def test_no_key_no_local_server_is_not_configured(self):
        with pytest.raises(ModelNotConfigured) as info:
            make_client(ModelConfig(), local_url=closed_port_url())
        message = str(info.value)
        assert "OPENAI_API_KEY" in message and "Ollama" in message and "\n" not in message

    def test_no_key_uses_local_server_when_it_answers(self, fake_openai):
        client = make_client(ModelConfig(max_retries=0), local_url=fake_openai.base_url)
        assert str(client.base_url).rstrip("/") == fake_openai.base_url
        reply = client.chat.completions.create(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "You said: hi"

    def test_key_and_base_url(self, fake_openai):
        fake_openai.api_key = "sk-right"
        client = make_client(ModelConfig(api_key="sk-right", base_url=fake_openai.base_url, max_retries=0))
        assert list_models(client, "x") == sorted(fake_openai.models)

    def test_a_proxy_for_the_internet_does_not_swallow_a_local_server(self, fake_openai, monkeypatch):
        """An ``HTTP_PROXY`` set for the internet (no ``NO_PROXY``: anycode writes none) must not
        stand between the app and a model server on this machine: the client goes there directly."""
        proxy = closed_port_url().removesuffix("/v1")
        for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
            monkeypatch.setenv(name, proxy)
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        fake_openai.api_key = "sk-right"
        client = make_client(ModelConfig(api_key="sk-right", base_url=fake_openai.base_url, max_retries=0))
        reply = client.chat.completions.create(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "You said: hi"
        assert list_models(client, "x") == sorted(fake_openai.models)

    def test_base_url_without_key_for_local_servers(self, fake_openai):
        client = make_client(ModelConfig(base_url=fake_openai.base_url), local_url=closed_port_url())
        assert list_models(client, "x") == sorted(fake_openai.models)


class TestListModels:
    """Guards against the model picker breaking when /v1/models is missing, refused or unreachable."""

    def test_fallback_on_errors(self, fake_openai):
        fake_openai.api_key = "sk-right"
        assert list_models(fake_openai.client(api_key="wrong"), "my-model") == ["my-model"]
        unreachable = openai.OpenAI(api_key="k", base_url=closed_port_url(), max_retries=0, timeout=2)
        assert list_models(unreachable, "my-model") == ["my-model"]

    def test_pick_model_for_a_local_server(self, fake_openai):
        fake_openai.models = ["qwen2.5:7b", "llama3.2:3b"]
        client = fake_openai.client()
        assert pick_model(client, ModelConfig()) == "llama3.2:3b"  # default model not offered: take one
        assert pick_model(client, ModelConfig(model="qwen2.5:7b")) == "qwen2.5:7b"
        fake_openai.models = ["gpt-4o-mini", "gpt-4o"]
        assert pick_model(client, ModelConfig()) == "gpt-4o-mini"


def drain(stream):
    for event in stream:
        if isinstance(event, TitleStarted):
            event.thread.join(10)


class TestErrorsTheUserSees:
    """Guards against raw library errors reaching the user, or a failure leaving the session broken."""

    @pytest.mark.parametrize("reply,error,words", [
        ({"error": 401}, ModelAuthError, "OPENAI_API_KEY"),
        ({"error": 403}, ModelAuthError, "API key"),
        ({"error": 429}, ModelRateLimited, "try again"),
        ({"error": 500}, ModelServerError, "HTTP 500"),
        ({"error": 503}, ModelServerError, "HTTP 503"),
        ({"error": 404, "message": "The model `nope` does not exist"}, ModelBadRequest, "does not exist"),
        ({"wait": 1.5, "text": "too late"}, ModelTimeout, "ANYCODE_TIMEOUT"),
    ])
    def test_http_failure_then_retry(self, fake_openai, store, session, reply, error, words):
        fake_openai.push(reply)
        client = fake_openai.client(timeout=0.5)
        with pytest.raises(error) as info:
            drain(run_session_stream(session.key, store, "hello", client=client, model="gpt-4o-mini"))
        message = str(info.value)
        assert words in message and message.endswith(".") and "\n" not in message and len(message) < 300
        # the session still loads, keeps the user's message, and a retry works
        assert SessionManager(store).get(session.key).messages[-1] == {"role": "user", "content": "hello"}
        drain(run_session_stream(session.key, store, None, client=fake_openai.client(), model="gpt-4o-mini"))
        messages = SessionManager(store).get(session.key).messages
        assert messages[-1] == {"role": "assistant", "content": "You said: hello"}
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]

    def test_connection_refused_then_retry(self, fake_openai, store, session):
        down = openai.OpenAI(api_key="k", base_url=closed_port_url(), max_retries=0, timeout=2)
        with pytest.raises(ModelUnreachable) as info:
            drain(run_session_stream(session.key, store, "hello", client=down, model="gpt-4o-mini"))
        assert "Could not reach the model server at http://127.0.0.1:" in str(info.value)
        assert "OPENAI_BASE_URL" in str(info.value)
        drain(run_session_stream(session.key, store, "hello again", client=fake_openai.client(),
                                 model="gpt-4o-mini"))
        messages = SessionManager(store).get(session.key).messages
        assert [m["role"] for m in messages] == ["system", "user", "user", "assistant"]

    def test_describe_passes_model_errors_and_wraps_unknown(self):
        err = ModelRateLimited("x.")
        assert describe_api_error(err) is err
        wrapped = describe_api_error(RuntimeError("boom"))
        assert isinstance(wrapped, ModelServerError) and isinstance(wrapped, ModelError)
        assert "RuntimeError" in str(wrapped)
