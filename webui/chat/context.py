"""What every handler needs, built once by the launcher: the storage, the session manager, the default
project, the model configuration and the runs of each browser tab (Stop, switching conversations).

This is one object per running app, passed to ``build_app``; nothing here is module-level state.
"""
from __future__ import annotations

import itertools
import logging
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agent.approval import Grants
from core.errors import ModelError
from core.session.keys import normalize_path, project_key
from core.session.manager import SessionManager
from core.storage import Storage
from webui.chat.titles import TitleThreads

log = logging.getLogger(__name__)


@dataclass
class WebContext:
    """Shared, read-mostly configuration of one running web UI.

    ``storage``: the app's :class:`~core.storage.Storage` (its ``sessions``, leases, search, memories,
    blobs, mirror); ``manager``: the :class:`~core.session.manager.SessionManager` over
    ``storage.sessions`` (ValueError otherwise), shared by every handler so a chat is folded once;
    ``project_path``: the default project's real path; ``model_overrides``: ``ModelConfig.from_env``
    keyword overrides from the command line (``model``, ``base_url``); ``initial_session``: a
    session id to open in a tab whose URL names none (``--continue`` / ``--resume``).
    """

    storage: Storage
    manager: SessionManager
    project_path: str
    model_overrides: dict[str, Any] = field(default_factory=dict)
    initial_session: str | None = None
    export_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="anycode-export-")))
    # The runs of each tab (keyed by tab token): a message handed over by the input box until its
    # reply ended. The Stop button, the streaming send and the conversation switches run as
    # separate requests and meet here. Guarded by a lock.
    _tabs: dict[str, _TabRuns] = field(default_factory=dict, repr=False)
    _cancel_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _run_ids: Any = field(default_factory=lambda: itertools.count(1), repr=False)
    _model_cache: dict[str, Any] = field(default_factory=dict, repr=False)
    # Messages of a reply the store could not save (database down, disk full), by session key:
    # (message count they follow, messages); stored before that session's next send.
    unsaved: dict[Any, tuple[int, list[dict[str, Any]]]] = field(default_factory=dict, repr=False)
    # What the user allowed in this running app (approvals "for this chat", chosen workspaces).
    grants: Grants = field(default_factory=Grants, repr=False)
    # Title threads of sends, taken by the tab that waits for the title (webui.chat.titles).
    titles: TitleThreads = field(default_factory=TitleThreads, repr=False)
    # Each tab's page load, once the page has its answer (by tab key): (done, the state it
    # showed). A message sent before that waits for it (:meth:`wait_page_loaded`).
    _loads: dict[str, tuple[threading.Event, list[Any]]] = field(default_factory=dict, repr=False)
    # The app's MCP servers (core.agent.mcp.hub.McpHub), made on first use (:attr:`mcp`) and
    # stopped by :meth:`close`.
    _mcp: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.manager.store is not self.storage.sessions:
            raise ValueError("the manager of a WebContext works on its storage's sessions")
        self.project_path = normalize_path(self.project_path)

    @property
    def project_key(self) -> str:
        """The default project's key (``core.session.keys.project_key(project_path)``)."""
        return project_key(self.project_path)

    # --- the project beyond its path (issue 26) -------------------------------------------------

    def identity(self) -> str | None:
        """The opened project's identity (its git remote; :mod:`core.session.identity`), recorded
        once in the data dir's alias registry so other machines' sessions of it are found here."""
        if "identity" not in self._model_cache:
            from core.session.identity import project_identity

            ident = project_identity(self.project_path)
            self._model_cache["identity"] = ident
            try:
                self.storage.aliases.record(ident, self.project_key, self.project_path)
            except OSError as err:
                log.warning("cannot record this project's identity: %s", err)
        return self._model_cache["identity"]

    def alias_keys(self, project: str) -> list[str]:
        """Other project keys that are the same project as ``project`` (the same git remote and
        path inside the checkout, e.g. its sessions from another machine); [] for none. Only the
        opened project has aliases here: its sessions elsewhere are listed and opened with it."""
        if project != self.project_key or not self.identity():
            return []
        return sorted(k for k in self.storage.aliases.keys_for(self.identity()) if k != project)

    # --- model ------------------------------------------------------------------------------

    def model_config(self) -> Any:
        """The ``core.agent.config.ModelConfig`` from the environment plus command-line overrides."""
        if "config" not in self._model_cache:
            from core.agent.config import ModelConfig

            self._model_cache["config"] = ModelConfig.from_env(**self.model_overrides)
        return self._model_cache["config"]

    def client(self) -> Any | None:
        """An ``openai.OpenAI`` client, or None when no model is configured (no API key)."""
        if "client" not in self._model_cache:
            from core.agent.config import make_client

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

    # --- MCP servers -----------------------------------------------------------------------

    @property
    def mcp(self) -> Any:
        """The app's :class:`core.agent.mcp.hub.McpHub` (one per running app: servers started
        for a turn are reused by every tab and chat), made on first use."""
        with self._cancel_lock:
            if self._mcp is None:
                from core.agent.mcp.hub import McpHub

                self._mcp = McpHub(self.storage.data_dir)
            return self._mcp

    def close(self) -> None:
        """The app is stopping: stop what this context started (its MCP servers)."""
        with self._cancel_lock:
            hub, self._mcp = self._mcp, None
        if hub is not None:
            hub.close()

    # --- runs and Stop ---------------------------------------------------------------------

    def _tab(self, tab: str) -> _TabRuns:
        # under _cancel_lock
        record = self._tabs.get(tab)
        if record is None:
            record = self._tabs[tab] = _TabRuns()
            if len(self._tabs) > MAX_TABS:  # forget idle tabs of long-closed pages
                for old in [t for t, r in self._tabs.items() if not r.runs and t != tab]:
                    del self._tabs[old]
                    if len(self._tabs) <= MAX_TABS // 2:
                        break
        return record

    def begin_run(self, tab: str, text: str | None) -> Run:
        """Register a message handed over in tab ``tab`` (``text`` None: a retry)."""
        run = Run(id=next(self._run_ids), text=text)
        with self._cancel_lock:
            record = self._tab(tab)
            _drop_orphans(record)
            record.runs.append(run)
        return run

    def repeated_take(self, tab: str, text: str | None, within: float) -> bool:
        """True when ``tab``'s newest run is still running, carries ``text``, was handed over
        less than ``within`` seconds ago and not stopped (a double click / double Enter).

        A run that has ended never counts: the same text sent after its reply, or after it was
        refused and put back in the box ("changed elsewhere", archived, a failed write), is a
        message the user sent on purpose (CI, stop 35: counting ended runs swallowed those).
        A double Enter the server takes only after a fast reply ended is told by the page's
        own clock instead (``assets/js/shortcuts.js``, ``repeatSend``)."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            if not record or not record.runs:
                return False
            last = record.runs[-1]
            return (last.text == text and not last.cancel.is_set()
                    and time.monotonic() - last.created < within)

    def busy(self, tab: str) -> bool:
        """True while a reply is being written in ``tab`` and the user has not stopped it."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            if record:
                _drop_orphans(record)
            return bool(record and any(not r.cancel.is_set() for r in record.runs))

    def running(self, tab: str) -> bool:
        """True while any run of ``tab`` (stopped or not) has not ended yet."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            if record:
                _drop_orphans(record)
            return bool(record and record.runs)

    def claim_run(self, tab: str, run_id: Any) -> Run | None:
        """The registered, not yet started run ``run_id`` of ``tab`` (None if unknown)."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            for run in (record.runs if record else []):
                if run.id == run_id and not run.started:
                    run.started = True
                    return run
        return None

    def wait_for_earlier(self, tab: str, run: Run, timeout: float) -> None:
        """Wait until the runs of ``tab`` registered before ``run`` have ended (a message sent
        right after Stop goes out once the stopped reply is stored)."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            # a run never started is not waited for: it may never be (its send was lost)
            earlier = [r for r in (record.runs if record else []) if r.id < run.id and r.started]
        deadline = time.monotonic() + timeout
        for other in earlier:
            other.done.wait(max(0.0, deadline - time.monotonic()))

    def last_state(self, tab: str) -> dict[str, Any] | None:
        """The tab state the last finished run of ``tab`` ended with (None after a switch)."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            return dict(record.last_state) if record and record.last_state else None

    def note_state(self, tab: str, state: dict[str, Any]) -> None:
        """The page of ``tab`` re-read its conversation and shows ``state`` now (another tab's
        reply appeared there, issue 25): a later send of the tab continues from it, not from the
        state its own last run ended with."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            last = record.last_state if record else None
            if last and last.get("session") == state.get("session"):
                record.last_state = dict(state)

    def end_run(self, tab: str, run: Run, state: dict[str, Any] | None) -> None:
        """``run`` ended with tab state ``state``; wake whoever waits for it."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            if record is not None:
                if run in record.runs:
                    record.runs.remove(run)
                if state is not None and not run.superseded:
                    record.last_state = dict(state)
                if state is not None and run.superseded and state.get("session"):
                    # The tab left this chat while the run wrote in it: the run's end (its partial
                    # reply stored) is newer than anything the page was shown there (stale_view).
                    record.left.pop(state["session"], None)  # newest last: the oldest goes first
                    record.left[state["session"]] = (int(state.get("count") or 0), time.monotonic())
                    while len(record.left) > MAX_LEFT:
                        record.left.pop(next(iter(record.left)))
                if run.restore_text is not None:
                    record.restore[run.id] = run.restore_text
        run.done.set()

    def stale_view(self, tab: str, state: dict[str, Any] | None) -> bool:
        """True when ``state`` (what the page of ``tab`` sent with an event) shows a chat the tab
        has since left while a reply of its was being written there, as it was before that reply
        ended: the page sent it before the switch's answer arrived. A re-read of that chat must
        not be drawn then, or it repaints the pane the switch just emptied (CI, stop 36: the once-
        a-second check, fired between the switch and its answer, brought the left chat back over
        the new one). A state of the same chat shown again later (opened anew) holds at least
        the count the reply ended with, and is not stale.

        Only for ``STALE_SECONDS`` after that reply ended: a state sent before the switch's answer
        reaches the server within moments, and a tab must never stop following a chat for good
        (CI, stop 37: a reply stopped by mistake left the page's state below its count, and the
        tab then ignored every check of that chat, a deletion elsewhere included)."""
        st = state or {}
        if not st.get("session"):
            return False
        with self._cancel_lock:
            record = self._tabs.get(tab)
            ended = record.left.get(st["session"]) if record else None
        if ended is None or time.monotonic() - ended[1] > STALE_SECONDS:
            return False
        return int(st.get("count") or 0) < ended[0]

    def forget_deleted(self, tab: str, session: str) -> bool:
        """The live check found ``tab``'s open chat ``session`` deleted in another tab or process:
        the tab's next send must not continue that chat's last state, so it is forgotten. Returns
        True when the tab is to show the deletion now; False, changing nothing, while a run of
        the tab is registered: its message was handed over after the page sent the check's state,
        and its own answer says what became of the chat. Such a run is never stopped here (CI,
        stop 37: the check stopped a new chat's reply mid-stream, because it ran with the page's
        state from before that send, and the tab then ignored every later check of the chat)."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            if record is None:
                return True
            _drop_orphans(record)
            if record.runs:
                return False
            if record.last_state and record.last_state.get("session") == session:
                record.last_state = None
            return True

    def pop_restore(self, tab: str, run_id: Any) -> str | None:
        """The text run ``run_id`` of ``tab`` gave back (refused send), once; else None."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            return record.restore.pop(run_id, None) if record else None

    def supersede(self, tab: str, timeout: float = 0.0) -> None:
        """The tab opens another conversation: stop its runs (their partial text is stored) and
        make sure none of them repaints the pane. Waits up to ``timeout`` seconds for them to
        end, so the old conversation is complete when it is shown again."""
        with self._cancel_lock:
            record = self._tabs.get(tab)
            runs = list(record.runs) if record else []
            if record is not None:
                record.last_state = None
            for run in runs:
                run.superseded = True
                run.cancel.set()
        deadline = time.monotonic() + timeout
        for run in runs:
            if not run.done.wait(max(0.0, deadline - time.monotonic())):
                log.warning("run %s of tab %s still ending after a switch", run.id, tab)
                break

    def _load_of(self, tab: str) -> tuple[threading.Event, list[Any]]:
        with self._cancel_lock:
            found = self._loads.get(tab)
            if found is None:
                if len(self._loads) >= MAX_TABS:  # forget the loads of long-closed pages
                    for old in [t for t, (done, _) in self._loads.items() if done.is_set()][: MAX_TABS // 2]:
                        del self._loads[old]
                found = self._loads[tab] = (threading.Event(), [None])
            return found

    def page_loaded(self, tab: str, state: dict[str, Any] | None) -> None:
        """``tab``'s page has the answer of its load event, showing tab state ``state``."""
        done, shown = self._load_of(tab)
        shown[0] = dict(state) if isinstance(state, dict) else None
        done.set()

    def wait_page_loaded(self, tab: str, timeout: float) -> dict[str, Any] | None:
        """The tab state ``tab``'s page load showed, waiting up to ``timeout`` seconds for it
        (None when it did not come). A message typed and sent before the page's load answered
        (a slow machine) went out with no tab state — to a new chat, not the ``?session=`` one
        — and the load's answer then blanked the chat it was being sent in."""
        done, shown = self._load_of(tab)
        if not done.wait(timeout):
            log.warning("tab %s: a message was sent before the page loaded; sent without waiting more", tab)
            return None
        return dict(shown[0]) if shown[0] else None

    def request_stop(self, tab: str, withdrawn: list[str] | None = None, upto: Any = None) -> bool:
        """Set the Stop flag of ``tab``'s running reply; False when nothing runs there. Messages
        handed over but not started yet are withdrawn (Stop always leaves the tab idle): their
        texts are added to ``withdrawn``, for the input box.

        ``upto``: the run id the page showed Stop for (its ``pending`` run); runs handed over
        after it are left alone. The Stop click and a message sent right after it are separate
        requests that a busy server may take in either order: without this, the later message
        was withdrawn (or stopped) by the earlier click and never sent."""
        withdrawn = [] if withdrawn is None else withdrawn
        with self._cancel_lock:
            record = self._tabs.get(tab)
            runs = [r for r in (record.runs if record else []) if not r.done.is_set()
                    and (not isinstance(upto, int) or r.id <= upto)]
            for run in runs:
                run.cancel.set()
                if not run.started:
                    record.runs.remove(run)
                    run.done.set()
                    if run.text:
                        withdrawn.append(run.text)
        return bool(runs)


MAX_TABS = 2000  # tab records kept (an idle record is a few ids; closed pages never say goodbye)
MAX_LEFT = 16  # chats per tab remembered as left mid-reply (stale_view)
STALE_SECONDS = 15.0  # how long after such a reply ended a state older than it is ignored


ORPHAN_SECONDS = 120.0  # a handed-over message whose send never started this long is dropped


def _drop_orphans(record: _TabRuns) -> None:
    """Forget runs of ``record`` handed over long ago whose send never started (under the lock)."""
    now = time.monotonic()
    for run in [r for r in record.runs if not r.started and now - r.created > ORPHAN_SECONDS]:
        log.warning("dropping run %s: its send never started", run.id)
        record.runs.remove(run)
        run.done.set()


@dataclass(eq=False)
class Run:
    """One message handed over by a tab's input box (``text`` None: a retry of the last one),
    until its reply has ended. ``cancel`` is its Stop flag; ``superseded``: the tab has opened
    another conversation since, so the run must not paint the pane any more."""

    id: int
    text: str | None
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    superseded: bool = False
    restore_text: str | None = None  # given back to the input box when the send was refused
    created: float = field(default_factory=time.monotonic)


@dataclass
class _TabRuns:
    runs: list[Run] = field(default_factory=list)
    last_state: dict[str, Any] | None = None
    restore: dict[int, str] = field(default_factory=dict)
    # chats the tab left while a run wrote there → (the message count that run ended with, when)
    left: dict[str, tuple[int, float]] = field(default_factory=dict)
