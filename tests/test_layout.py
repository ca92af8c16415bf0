"""The layout of ``core/`` and ``webui/``: wings and layers imported one way only, no import circle.

core: session ← stores ← search, memory ← storage ← agent ← webui; webui: i18n ← text ← render ← chat ← gui ← cli.

Guards against a module quietly reaching "upwards" (a session module importing a store, a store
importing the agent), which would make the wings a folder naming and nothing more.
"""
from __future__ import annotations

import ast
import functools
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# wing -> wings it must never import
FORBIDDEN = {
    "core.session": ("core.stores", "core.importers", "core.search", "core.memory", "core.storage", "core.agent",
                     "webui", "gradio"),
    "core.stores": ("core.importers", "core.search", "core.memory", "core.storage", "core.agent", "webui", "gradio"),
    "core.importers": ("core.storage", "core.agent", "webui", "gradio"),
    "core.search": ("core.storage", "core.agent", "webui", "gradio"),
    "core.memory": ("core.storage", "core.agent", "webui", "gradio"),
    "core.storage": ("core.importers", "core.agent", "webui", "gradio"),
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
        files = sorted(folder.rglob("*.py"))  # a wing's sub-packages (core/agent/mcp/) too
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
            "heavy = [m for m in ('openai', 'sqlalchemy', 'gradio', 'boto3', 'redis', 'mcp', 'mcp_types')\n"
            "         if m in sys.modules]\n"
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


class TestAgentDefinitionsInTheAgentWing:
    """Agent definitions (issue 30) read or parsed outside the agent wing: a second YAML reader
    (or a hand-written parser) in the UI or a store, drifting from core/agent/definitions.py."""

    def test_only_the_definitions_module_reads_yaml(self):
        assert (ROOT / "core" / "agent" / "definitions.py").is_file()
        readers = sorted(str(p.relative_to(ROOT)) for top in ("core", "webui") for p in (ROOT / top).rglob("*.py")
                         if any(name == "yaml" or name.startswith("yaml.") for _, name in _imports(p)))
        assert readers == ["core/agent/definitions.py"], readers

    def test_definitions_are_loaded_through_the_agent_wing(self):
        """Every caller of ``load_definitions`` imports it from core.agent.definitions (no copy)."""
        defining = sorted(str(p.relative_to(ROOT)) for top in ("core", "webui") for p in (ROOT / top).rglob("*.py")
                          if "def load_definitions(" in p.read_text(encoding="utf-8"))
        assert defining == ["core/agent/definitions.py"], defining


class TestTestsMirrorTheCode:
    """The tests stand where the code they test stands (``tests/core/<wing>/``, ``tests/cli/``,
    ``tests/browser/``, ``tests/support/`` for the fake servers and shared set-ups): a test module
    dropped flat into ``tests/`` or into a folder named after no wing is found and moved."""

    TESTS = ROOT / "tests"
    FOLDERS = {"core", "webui", "cli", "browser", "support"}
    # the top holds the shared conftest and the tests of the repository as a whole
    TOP = {"__init__.py", "conftest.py", "test_layout.py", "test_docs.py"}

    def test_only_whole_tree_tests_at_the_top(self):
        flat = sorted(p.name for p in self.TESTS.glob("*.py") if p.name not in self.TOP)
        assert not flat, f"put {flat} into the tests/ folder of what they test"
        folders = {p.name for p in self.TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
        assert folders <= self.FOLDERS, folders - self.FOLDERS

    @pytest.mark.parametrize("package", ["core", "webui"])
    def test_test_folders_are_wings_and_layers(self, package):
        """``tests/core/X/`` tests the wing ``core/X/``, ``tests/webui/X/`` the layer ``webui/X/``;
        every folder is a package (one module name per file)."""
        folders = [p for p in (self.TESTS / package).iterdir() if p.is_dir() and p.name != "__pycache__"]
        assert folders
        missing = [p.name for p in folders if not (ROOT / package / p.name / "__init__.py").is_file()]
        assert not missing, f"tests/{package}/{missing} name no folder of {package}/"
        no_init = [str(p.relative_to(ROOT)) for p in self.TESTS.rglob("*") if p.is_dir()
                   and p.name != "__pycache__" and not (p / "__init__.py").is_file()]
        assert not no_init, no_init

    def test_browser_tests_are_in_the_browser_folder(self):
        stray = [str(p.relative_to(ROOT)) for p in self.TESTS.rglob("test_browser_*.py")
                 if p.parent != self.TESTS / "browser"]
        assert not stray, stray
        # and every test that drives Chromium lives there, whatever its file is called: a browser test
        # among the plain ones is run outside the browser suite's lock and its one-at-a-time rule
        marked = [str(p.relative_to(ROOT)) for p in self.TESTS.rglob("test_*.py")
                  if p.parent != self.TESTS / "browser" and p.name != "test_layout.py"
                  and "pytest.mark.browser" in p.read_text()]
        assert not marked, f"browser-marked tests outside tests/browser/: {marked}"


# --- webui: layers, imported downward only (issue 24) ------------------------------------------

# layer -> the layers it may import besides itself. ``server`` sits beside ``text``; ``cli`` is
# on top of everything. A layer is a folder of webui/ (``i18n`` is a package of one module).
WEBUI_LAYERS = {
    "webui.i18n": (),
    "webui.text": ("webui.i18n",),
    "webui.server": ("webui.i18n",),
    "webui.render": ("webui.text", "webui.i18n"),
    "webui.chat": ("webui.render", "webui.text", "webui.server", "webui.i18n"),
    "webui.gui": ("webui.chat", "webui.render", "webui.text", "webui.server", "webui.i18n"),
    "webui.cli": ("webui.gui", "webui.chat", "webui.render", "webui.text", "webui.server", "webui.i18n"),
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(*tops: str) -> dict[str, pathlib.Path]:
    return {_module_name(p): p for top in tops for p in sorted((ROOT / top).rglob("*.py"))}


def _layer(module: str) -> str | None:
    return next((layer for layer in WEBUI_LAYERS if module == layer or module.startswith(layer + ".")), None)


class TestWebuiLayers:
    """webui/ in folders that show the rule: i18n ← text ← render ← chat ← gui, server beside
    text, cli on top; only gui touches Gradio."""

    def test_every_module_is_in_a_layer(self):
        loose = [m for m in _modules("webui") if _layer(m) is None and m not in ("webui", "webui.__main__")]
        assert not loose, f"webui modules outside the layer folders: {loose}"

    @pytest.mark.parametrize("layer", sorted(WEBUI_LAYERS))
    def test_imports_only_downward(self, layer):
        allowed = (layer, *WEBUI_LAYERS[layer])
        bad = []
        for module, path in _modules("webui").items():
            if _layer(module) != layer:
                continue
            for lineno, name in _imports(path):
                target = _layer(name)
                line = f"{path.relative_to(ROOT)}:{lineno} imports from {target} (above {layer})"
                if name.startswith("webui.") and target is not None and target not in allowed and line not in bad:
                    bad.append(line)
        assert not bad, "\n".join(bad)

    def test_only_webui_gui_imports_gradio(self):
        bad = []
        for module, path in _modules("core", "webui").items():
            if _layer(module) == "webui.gui":
                continue
            bad += [f"{path.relative_to(ROOT)}:{lineno} imports {name}" for lineno, name in _imports(path)
                    if name == "gradio" or name.startswith("gradio.")]
        assert not bad, "\n".join(bad)

    def test_no_gradio_parameter_or_annotation_patch(self):
        """Feature code names Gradio's types itself: no ``gr`` handed in as a parameter (which
        forced ``fn.__annotations__`` patches so Gradio could see ``gr.SelectData``)."""
        bad = []
        for path in _modules("webui").values():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if any(a.arg == "gr" for a in node.args.args + node.args.kwonlyargs):
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}(gr, …)")
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, (ast.Attribute, ast.Subscript)) and "__annotations__" in ast.unparse(t)
                        for t in node.targets):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node.targets[0])} = …")
        # The one wrapper that advertises the parameters of what it wraps (Page.switching).
        bad = [b for b in bad if not b.startswith("webui/gui/app.py") or "run.__annotations__" not in b]
        assert not bad, "\n".join(bad)

    def test_what_follows_the_tab_state_is_one_event(self):
        """Guards against a feature adding its own ``state.change`` listener: each one is a round
        trip after every open, send and switch (eight of them made opening a chat fire ten events,
        issue 32). Features hand theirs to ``listen`` (``webui.gui.state_hub``) instead; the title
        push stays apart because it waits for the title thread and would hold the others up."""
        allowed = {"webui/gui/state_hub.py", "webui/gui/titles.py"}
        bad = []
        for path in _modules("webui").values():
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "change"
                        and "state" in ast.unparse(node.func.value) and rel not in allowed):
                    bad.append(f"{rel}:{node.lineno} {ast.unparse(node.func)}(…)")
        assert not bad, "\n".join(bad)

    def test_webui_chat_runs_without_gradio(self, tmp_path):
        """Every module below gui imports, and a chat is created, renamed, listed and exported,
        with gradio made impossible to import."""
        code = (
            "import importlib, pathlib, pkgutil, sys\n"
            "class NoGradio:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'gradio' or name.startswith('gradio.'):\n"
            "            raise ImportError('gradio is blocked in this test')\n"
            "sys.meta_path.insert(0, NoGradio())\n"
            "import webui\n"
            "for layer in ('i18n', 'text', 'server', 'render', 'chat'):\n"
            "    pkg = importlib.import_module('webui.' + layer)\n"
            "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
            "        importlib.import_module(m.name)\n"
            "from core import LocalSessionStore, SessionManager\n"
            "from core.storage import Storage\n"
            "from webui.chat import handlers\n"
            "from webui.chat.context import WebContext\n"
            "tmp = pathlib.Path(sys.argv[1]); proj = tmp / 'proj'; proj.mkdir()\n"
            "store = LocalSessionStore(tmp / 'data')\n"
            "ctx = WebContext(storage=Storage(store), manager=SessionManager(store), project_path=str(proj),\n"
            "                 export_dir=tmp / 'exports')\n"
            "view = handlers.rename(ctx, handlers.new_chat(ctx).state, 'Layers')\n"
            "assert view.session_id and view.title == 'Layers', view\n"
            "assert 'Layers' in handlers.session_list_html(ctx, view.state['project'])\n"
            "md, jl = handlers.exports(ctx, view.state)\n"
            "assert md.exists() and jl.exists()\n"
            "assert not any(m == 'gradio' or m.startswith('gradio.') for m in sys.modules)\n"
            "print('ok')\n"
        )
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                             timeout=120, env={**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""})
        assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# --- no import circle in core/ or webui/ (issue 24) ------------------------------------------------


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _runtime_imports(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports when it runs, function-level (lazy)
    imports included, ``if TYPE_CHECKING:`` blocks left out (never executed). ``from pkg import
    name`` counts as an import of ``pkg.name`` when that is a module, else of ``pkg``."""
    me = _module_name(path)
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [f"{child.module}.{a.name}" if f"{child.module}.{a.name}" in modules else child.module
                         for a in child.names]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != me:
                    found.add(name)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@functools.lru_cache(maxsize=1)
def _import_circles() -> tuple[list[str], ...]:
    """The circles of the whole core + webui graph (parsed once for both tests)."""
    modules = _modules("core", "webui")
    return tuple(_circles({m: _runtime_imports(p, modules) for m, p in modules.items()}))


class TestNoImportCircles:
    """A circle closed by a function-local import is a layering bug waiting (the helper both
    sides need belongs below both); the packages' own ``__init__`` facades are not modules of
    the graph's cycles because ``from core import settings`` names the module ``core.settings``."""

    @pytest.mark.parametrize("top", ["core", "webui"])
    def test_no_circle(self, top):
        circles = [c for c in _import_circles() if any(m == top or m.startswith(top + ".") for m in c)]
        assert not circles, "import circles (strongly connected components): " + "; ".join(
            " ↔ ".join(c) for c in circles)

    def test_the_circle_finder_finds_one(self):
        assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
        assert _circles({"a": {"b"}, "b": set()}) == []


# --- one writer, typed events ------------------------------------------------------------------

# Where entries may be appended to a store: the session manager (the one writer of sessions), the
# stores themselves (a mirror writing its primary, migrate/backup/restore/pull) and importers
# writing whole sessions.
APPEND_ALLOWED = ("core/session/manager.py", "core/stores/", "core/importers/")


def _class_name_of(node: ast.AST) -> bool:
    """``type(x).__name__`` or ``x.__class__.__name__``: a class recognised by its name."""
    if not (isinstance(node, ast.Attribute) and node.attr == "__name__"):
        return False
    value = node.value
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "type"
            or isinstance(value, ast.Attribute) and value.attr == "__class__")


def _class_name_checks(tree: ast.AST) -> list[ast.AST]:
    """Comparisons of a class name (``==``, ``!=``, ``in``…), and class names kept in a variable or
    matched on (to be compared later); a class name written into a message is none of these."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(map(_class_name_of, [node.left, *node.comparators])):
            found.append(node)
        elif isinstance(node, ast.Match) and _class_name_of(node.subject):
            found.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _class_name_of(node.value):
            found.append(node)
    return found


def _store_appends(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``.append`` on something named a store (``store``, ``self.store``, ``ctx.store``,
    ``manager.store``, ``primary_store``…)."""
    def named_store(node: ast.AST) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return name.lower().endswith("store")

    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append" and named_store(node.func.value)]


class TestOneWriterAndTypedEvents:
    """Guards against a second writer of sessions (a round stored in parts, each with its own lock,
    fsync and mirror copy, by code that knows one rule and misses the others) and against events
    recognised by their class name (renaming one silently stopped the page's streaming)."""

    def test_no_class_name_comparison(self):
        bad = [f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)[:100]}"
               for path in _modules("core", "webui").values()
               for node in _class_name_checks(ast.parse(path.read_text(encoding="utf-8")))]
        assert not bad, "match the class (isinstance, `case TextDelta(...)`), not its name:\n" + "\n".join(bad)

    def test_only_the_manager_appends_to_a_store(self):
        bad = []
        for path in _modules("core", "webui").values():
            rel = str(path.relative_to(ROOT))
            if not rel.startswith(APPEND_ALLOWED):
                bad += [f"{rel}:{node.lineno} {ast.unparse(node.func)}(…)"
                        for node in _store_appends(ast.parse(path.read_text(encoding="utf-8")))]
        assert not bad, "append through core.session.manager.SessionManager:\n" + "\n".join(bad)

    def test_the_checks_find_what_they_guard_against(self):
        sample = ast.parse(
            "if type(event).__name__ == 'TextDelta': pass\n"
            "if type(event).__name__ in ('A', 'B'): pass\n"
            "kind = event.__class__.__name__\n"
            "log.warning(f'{type(err).__name__}: {err}')\n"
            "entry = reply_error_entry(type(err).__name__, str(err))\n")
        assert sorted(n.lineno for n in _class_name_checks(sample)) == [1, 2, 3]
        sample = ast.parse("ctx.store.append(k, e)\nmanager.store.append(k, e)\nstore.append(k, e)\n"
                           "rows.append(r)\nself.log.append(s, e)\n")
        assert sorted(n.lineno for n in _store_appends(sample)) == [1, 2, 3]

    def test_no_function_in_the_runner_over_80_lines(self):
        path = ROOT / "core" / "agent" / "runner.py"
        long = [f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80]
        assert not long, "split the turn into named phases: " + ", ".join(long)

    def test_the_events_import_without_openai(self):
        code = (
            "import sys\n"
            "class NoOpenAI:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'openai' or name.startswith('openai.'):\n"
            "            raise ImportError('openai is blocked in this test')\n"
            "sys.meta_path.insert(0, NoOpenAI())\n"
            "import typing\n"
            "from core.agent import events\n"
            "names = {t.__name__ for t in typing.get_args(events.TurnEvent)}\n"
            "assert {'TextDelta', 'RoundCompleted', 'SubagentEvent', 'CompactionFinished', 'TitleStarted'} <= names\n"
            "assert 'openai' not in sys.modules\n"
            "print('ok')\n"
        )
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


# --- one storage object --------------------------------------------------------------------------

# Names a store (or the storage holding one) goes by in core/ and webui/: a getattr/hasattr on
# one of them is a probe of what the store can do, which only the type guards of
# core/session/store.py may make.
STORE_NAMES = {"store", "stores", "sessions", "storage", "source", "target", "remote", "mirror", "mirror_db",
               "primary", "local", "backend"}
GUARDS = "core/session/store.py"
PRIMARY_OWNERS = {"core/stores/mirror.py", "core/stores/memory_log.py"}
# The environment variables the product writes: Gradio's and huggingface_hub's own settings, which
# they read from the environment only (each function's docstring says why); never one of anycode's.
ENV_WRITERS = {("webui/server/private_files.py", "use_for_gradio"), ("webui/server/offline.py", "apply")}


def _product_trees() -> list[tuple[str, ast.AST]]:
    return [(str(p.relative_to(ROOT)), ast.parse(p.read_text(encoding="utf-8")))
            for top in ("core", "webui") for p in sorted((ROOT / top).rglob("*.py"))]


def _names_a_store(node: ast.AST) -> bool:
    """``store``, ``self.store``, ``ctx.storage.sessions``, ``self._local`` …: the last name of
    the expression, without leading underscores, is one of :data:`STORE_NAMES`."""
    if isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Name):
        name = node.id
    else:
        return False
    return name.lstrip("_") in STORE_NAMES


def _enclosing_functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Every node of ``tree`` -> the name of the module-level function or class it is in ("" at
    module level)."""
    owner: dict[ast.AST, str] = {}
    for top in getattr(tree, "body", []):
        name = getattr(top, "name", "")
        for node in ast.walk(top):
            owner[node] = name
    return owner


class TestOneStorageObject:
    """Guards against each feature reaching storage its own way again: asking a store what it can
    do with ``getattr``/``hasattr`` instead of a type guard, reaching through a mirror to its
    primary, a module-level lookup or cache keyed by a store object beside the
    :class:`core.storage.Storage` that holds each service once, and a setting the product passes to
    itself through ``os.environ``."""

    def test_no_probe_on_a_store_outside_the_type_guards(self):
        bad = []
        for rel, tree in _product_trees():
            if rel == GUARDS:
                continue
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("getattr", "hasattr") and node.args and _names_a_store(node.args[0])):
                    bad.append(f"{rel}:{node.lineno} {ast.unparse(node)[:80]}")
        assert not bad, "ask with a type guard of core/session/store.py instead:\n" + "\n".join(bad)

    def test_the_probe_finder_finds_one(self):
        found = [n for n in ast.walk(ast.parse("getattr(ctx.storage.sessions, 'x', None); hasattr(self._local, 'y')"))
                 if isinstance(n, ast.Call) and n.args and _names_a_store(n.args[0])]
        assert len(found) == 2
        assert not _names_a_store(ast.parse("getattr(err, 'x')").body[0].value.args[0])

    def test_primary_only_inside_the_mirror(self):
        def reaches(node: ast.AST) -> bool:  # x.primary, or getattr(x, "primary"[, …])
            return (isinstance(node, ast.Attribute) and node.attr == "primary") or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "primary")

        bad = [f"{rel}:{node.lineno}" for rel, tree in _product_trees() if rel not in PRIMARY_OWNERS
               for node in ast.walk(tree) if reaches(node)]
        assert not bad, "a mirrored store's primary is the mirror's own business:\n" + "\n".join(bad)

    def test_no_module_level_cache_or_lookup_keyed_by_a_store(self):
        bad = []
        for rel, tree in _product_trees():
            for top in tree.body:
                value = top.value if isinstance(top, (ast.Assign, ast.AnnAssign)) else None
                if rel.startswith("core/") and isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(
                        ".", 1)[-1] in ("WeakKeyDictionary", "WeakValueDictionary"):
                    bad.append(f"{rel}:{top.lineno} a module-level weak cache (keyed by objects such as stores)")
                if isinstance(top, ast.FunctionDef) and top.name.endswith("_for") and top.args.args and (
                        top.args.args[0].arg.lstrip("_") in STORE_NAMES):
                    bad.append(f"{rel}:{top.lineno} {top.name}({top.args.args[0].arg}): a lookup keyed by a store")
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"
                        and node.args and _names_a_store(node.args[0])):
                    bad.append(f"{rel}:{node.lineno} keyed by id() of a store")
        assert not bad, "a service belongs to its Storage (core/storage), built once there:\n" + "\n".join(bad)

    def test_the_product_writes_no_setting_of_its_own_into_the_environment(self):
        bad = []
        for rel, tree in _product_trees():
            owner = _enclosing_functions(tree)
            for node in ast.walk(tree):
                target = None
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                    target = next((t for t in targets if isinstance(t, ast.Subscript)
                                   and ast.unparse(t.value) == "os.environ"), None)
                elif isinstance(node, ast.Call) and ast.unparse(node.func) in (
                        "os.environ.update", "os.environ.setdefault", "os.environ.pop", "os.putenv", "os.unsetenv"):
                    target = node
                if target is not None and (rel, owner.get(node, "")) not in ENV_WRITERS:
                    bad.append(f"{rel}:{node.lineno} {ast.unparse(node)[:80]}")
        assert not bad, ("pass the setting as an argument (the data dir travels in the Storage); only "
                         "Gradio's own settings are written, in webui/server:\n" + "\n".join(bad))

    def test_the_allowed_environment_writers_say_why(self):
        for rel, name in ENV_WRITERS:
            tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
            doc = ast.get_docstring(fn) or ""
            assert "Gradio" in doc and "own" in doc, f"{rel}:{name} must say whose setting it writes"
