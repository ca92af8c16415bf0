"""What the user approved about MCP servers, kept in ``<data dir>/mcp/trust.json`` (0600).

- A project's MCP configuration (its ``.mcp.json`` and ``.anycode/mcp.json``) runs only once the
  user approved it: the approval is kept per project key with the configuration's digest
  (:attr:`core.agent.mcp.config.McpConfig.project_digest`), so any change to what those files
  define asks again. A file cloned with a repository never starts a process by itself.
- "Always allow" an MCP tool in a project: kept per project key and offered tool name, with the
  digest of the server's entry at the time, so the grant lapses when that server's definition
  changes (the same name could then run something else).
- Whether read-only marks are trusted (the ``readOnly`` key of a configuration, a tool's
  ``readOnlyHint`` annotation): off by default; the Tools panel's switch, or
  ``$ANYCODE_MCP_TRUST_READONLY`` (``1``/``0``, which wins over the switch).

Two writers (two tabs, two processes) are normal: each change re-reads the file under a lock
(filelock) and writes it aside and renames it into place, so neither drops the other's change.
The file holds no secret (digests, names, paths) and never decides anything for a session file:
only the running app reads it.

Shape::

    {"version": 1, "trust_read_only": false,
     "projects": {"<project key>": {"root": "/path", "digest": "<sha256>", "approved_at": 1764504000.0,
                                    "tools": {"mcp__tracker__create_issue": "<server entry digest>"}}}}
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from core.settings import data_dir

log = logging.getLogger(__name__)

FILE_VERSION = 1
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class McpTrust:
    """The trust file of the data folder ``base_dir`` (default :func:`core.settings.data_dir`).

    Reads are fresh each time (another process may have approved since); writes are
    read-modify-write under a lock. Raises ``OSError`` only on writes (disk full, no permission)."""

    def __init__(self, base_dir: str | os.PathLike[str] | None = None):
        self.folder = Path(base_dir) / "mcp" if base_dir is not None else data_dir() / "mcp"
        self.path = self.folder / "trust.json"

    # --- reading ----------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            # A damaged file approves nothing: every project asks again (and the next write
            # replaces it whole).
            log.warning("the MCP trust file %s cannot be read (%s); nothing is approved", self.path, err)
            return {}
        return data if isinstance(data, dict) else {}

    def _project(self, data: dict[str, Any], project: str) -> dict[str, Any]:
        projects = data.get("projects")
        entry = projects.get(project) if isinstance(projects, dict) else None
        return entry if isinstance(entry, dict) else {}

    def approved(self, project: str, digest: str | None) -> bool:
        """Whether the user approved the project ``project``'s MCP configuration with ``digest``
        (None: the project defines no server, nothing to approve)."""
        if digest is None:
            return True
        return self._project(self._read(), project).get("digest") == digest

    def approved_digest(self, project: str) -> str | None:
        """The digest last approved for ``project`` (None: never approved)."""
        value = self._project(self._read(), project).get("digest")
        return value if isinstance(value, str) else None

    def always_allowed(self, project: str) -> dict[str, str]:
        """``{offered tool name: server entry digest}`` of the tools allowed "always" in ``project``."""
        tools = self._project(self._read(), project).get("tools")
        return {k: v for k, v in tools.items() if isinstance(k, str) and isinstance(v, str)} \
            if isinstance(tools, dict) else {}

    def trusts_read_only(self) -> bool:
        """Whether read-only marks let a tool run without asking: ``$ANYCODE_MCP_TRUST_READONLY``
        when set to a yes/no word, else the saved switch (default no)."""
        raw = os.environ.get("ANYCODE_MCP_TRUST_READONLY", "").strip().lower()
        if raw in _TRUE:
            return True
        if raw in _FALSE:
            return False
        if raw:
            log.warning("ANYCODE_MCP_TRUST_READONLY=%r is not yes or no; using the saved switch", raw)
        return self._read().get("trust_read_only") is True

    def read_only_from_env(self) -> bool:
        """True when ``$ANYCODE_MCP_TRUST_READONLY`` decides (the panel's switch cannot)."""
        return os.environ.get("ANYCODE_MCP_TRUST_READONLY", "").strip().lower() in _TRUE | _FALSE

    # --- writing ----------------------------------------------------------------------------

    def _change(self, change: Any) -> None:
        from filelock import FileLock

        from core.stores.whole_file import place_whole

        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with FileLock(str(self.folder / ".trust.lock"), timeout=10):
            data = self._read()
            data["version"] = FILE_VERSION
            change(data)
            payload = (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            place_whole(self.path, payload, replace=True, mode=0o600)

    def _edit_project(self, project: str, edit: Any) -> None:
        def change(data: dict[str, Any]) -> None:
            projects = data.get("projects")
            if not isinstance(projects, dict):
                projects = data["projects"] = {}
            entry = projects.get(project)
            if not isinstance(entry, dict):
                entry = projects[project] = {}
            edit(entry)
        self._change(change)

    def approve(self, project: str, root: str | None, digest: str) -> None:
        """Record the user's approval of ``project``'s MCP configuration ``digest`` (at ``root``)."""
        def edit(entry: dict[str, Any]) -> None:
            entry.update({"root": root, "digest": digest, "approved_at": time.time()})
        self._edit_project(project, edit)
        log.info("MCP configuration of project %s approved (%s)", project, digest[:12])

    def revoke(self, project: str) -> None:
        """Forget the approval of ``project``'s configuration (its servers stop being started)."""
        self._edit_project(project, lambda entry: entry.pop("digest", None))

    def allow_always(self, project: str, tool: str, server_digest: str) -> None:
        """"Always allow" the offered tool ``tool`` in ``project`` while its server's entry has
        ``server_digest``."""
        def edit(entry: dict[str, Any]) -> None:
            tools = entry.get("tools")
            if not isinstance(tools, dict):
                tools = entry["tools"] = {}
            tools[tool] = server_digest
        self._edit_project(project, edit)
        log.info("MCP tool %s always allowed in project %s", tool, project)

    def set_trust_read_only(self, on: bool) -> None:
        """Save the read-only switch (``$ANYCODE_MCP_TRUST_READONLY``, when set, still wins)."""
        self._change(lambda data: data.__setitem__("trust_read_only", bool(on)))
