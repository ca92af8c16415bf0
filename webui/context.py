"""What every handler needs, built once by the launcher: the session manager, the default project,
the model configuration and the per-tab Stop flags.

This is one object per running app, passed to ``build_app``; nothing here is module-level state.
"""
from __future__ import annotations

import logging
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ModelError
from core.keys import normalize_path, project_key

log = logging.getLogger(__name__)


@dataclass
class WebContext:
    """Shared, read-mostly configuration of one running web UI.

    ``manager``: a ``core.manager.SessionManager``; ``store``: its ``SessionStore`` (exports read
    raw entries); ``project_path``: the default project's real path; ``data_dir``: where sessions
    live (shown at start); ``model_overrides``: ``ModelConfig.from_env`` keyword overrides from
    the command line (``model``, ``base_url``); ``initial_session``: a session id to open in a tab
    whose URL names none (``--continue`` / ``--resume``).
    """

    manager: Any
    store: Any
    project_path: str
    data_dir: Path | None = None
    model_overrides: dict[str, Any] = field(default_factory=dict)
    initial_session: str | None = None
    export_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="anycode-export-")))
    # Stop flags by tab token: the Stop button runs in another request than the streaming send,
    # so the send registers its Event here and Stop sets it. Keyed per tab, guarded by a lock.
    _cancel: dict[str, threading.Event] = field(default_factory=dict, repr=False)
    _cancel_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _model_cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.project_path = normalize_path(self.project_path)

    @property
    def project_key(self) -> str:
        """The default project's key (``core.keys.project_key(project_path)``)."""
        return project_key(self.project_path)

    # --- model ------------------------------------------------------------------------------

    def model_config(self) -> Any:
        """The ``core.config.ModelConfig`` from the environment plus command-line overrides."""
        if "config" not in self._model_cache:
            from core.config import ModelConfig

            self._model_cache["config"] = ModelConfig.from_env(**self.model_overrides)
        return self._model_cache["config"]

    def client(self) -> Any | None:
        """An ``openai.OpenAI`` client, or None when no model is configured (no API key)."""
        if "client" not in self._model_cache:
            from core.config import make_client

            try:
                self._model_cache["client"] = make_client(self.model_config())
            except ModelError as err:
                log.warning("no model client: %s", err)
                self._model_cache["client"] = None
                self._model_cache["client_error"] = str(err)
        return self._model_cache["client"]

    def client_error(self) -> str | None:
        """Why there is no client (one sentence), or None when there is one."""
        self.client()
        return self._model_cache.get("client_error")

    # --- Stop -------------------------------------------------------------------------------

    def cancel_flag(self, tab: str) -> threading.Event:
        """A fresh Stop flag for the run starting in tab ``tab`` (replaces an older one)."""
        event = threading.Event()
        with self._cancel_lock:
            self._cancel[tab] = event
        return event

    def release_cancel_flag(self, tab: str, event: threading.Event) -> None:
        """Forget ``tab``'s flag once its run ended (only if it is still that run's flag)."""
        with self._cancel_lock:
            if self._cancel.get(tab) is event:
                del self._cancel[tab]

    def request_stop(self, tab: str) -> bool:
        """Set the Stop flag of ``tab``'s running reply; False when nothing runs there."""
        with self._cancel_lock:
            event = self._cancel.get(tab)
        if event is None:
            return False
        event.set()
        return True
