"""The layout of ``core/``: wings imported one way only (session ← stores ← memory ← agent ← webui).

Guards against a module quietly reaching "upwards" (a session module importing a store, a store
importing the agent), which would make the wings a folder naming and nothing more.
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# wing -> wings it must never import
FORBIDDEN = {
    "core.session": ("core.stores", "core.importers", "core.search", "core.memory", "core.agent", "webui", "gradio"),
    "core.stores": ("core.importers", "core.search", "core.memory", "core.agent", "webui", "gradio"),
    "core.importers": ("core.agent", "webui", "gradio"),
    "core.search": ("core.agent", "webui", "gradio"),
    "core.memory": ("core.agent", "webui", "gradio"),
    "core.agent": ("webui", "gradio"),
}


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


class TestOneWayImports:
    """A wing importing a wing above it (found by reading every import statement, lazy ones too)."""

    @pytest.mark.parametrize("wing", sorted(FORBIDDEN))
    def test_no_upward_import(self, wing):
        folder = ROOT / wing.replace(".", "/")
        files = sorted(folder.glob("*.py"))
        assert files, f"{folder} holds no modules"
        bad = []
        for path in files:
            for lineno, name in _imports(path):
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[wing]):
                    bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
        assert not bad, "\n".join(bad)

    def test_no_relative_imports_in_wings(self):
        """Relative imports hide which wing a name comes from; the wings use absolute ones."""
        bad = []
        for path in sorted((ROOT / "core").rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bad += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and n.level > 0]
        assert not bad, bad


class TestPublicNames:
    """Scripts written against ``import core`` before the wings existed stop working."""

    def test_import_core_stays_light_and_exports_the_public_names(self):
        code = (
            "import sys, core\n"
            "heavy = [m for m in ('openai', 'sqlalchemy', 'gradio') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "names = ['SessionManager', 'LocalSessionStore', 'SessionKey', 'SessionStore', 'run_session',\n"
            "         'run_session_stream', 'generate_title', 'agent_loop', 'open_store', 'SqlSessionStore',\n"
            "         'MirroredSessionStore', 'Workspace', 'TOOL_SPECS', 'ModelConfig', 'message_entry']\n"
            "missing = [n for n in names if getattr(core, n, None) is None]\n"
            "assert not missing, missing\n"
            "print('ok')\n"
        )
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
