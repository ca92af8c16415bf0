"""The ``anycode`` command tree (one click group, issue 24): every command says what it does,
every option and argument what it means, ``--help`` works everywhere with exit status 0, and a
wrong option is a usage error (exit status 2) at every level, as with the argparse commands."""
from __future__ import annotations

import click
import pytest

from webui.cli import launcher, options

TREE = options.walk(launcher.cli)
NAMES = [" ".join(("anycode",) + path) for path, _ in TREE]


def test_the_tree_holds_every_command():
    assert set(launcher.SUBCOMMANDS) <= {path[0] for path, _ in TREE if path}
    assert {"anycode sessions list", "anycode sessions move", "anycode memory rm", "anycode import codex",
            "anycode backup", "anycode restore"} <= set(NAMES)


@pytest.mark.parametrize("path,command", TREE, ids=NAMES)
class TestEveryCommand:
    def test_says_what_it_does_and_what_each_option_means(self, path, command):
        assert (command.help or "").strip() and (command.get_short_help_str() or "").strip()
        silent = [p.name for p in command.params if not (getattr(p, "help", None) or "").strip()
                  and p.name != "help"]
        assert not silent, f"no help for {silent}"

    def test_help_exits_0_and_lists_the_options(self, path, command, capsys):
        assert launcher.main([*path, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"Usage: {' '.join(('anycode',) + path)} ")
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.opts[-1] in out, param.opts
            else:
                assert param.make_metavar(click.Context(command)) in out

    def test_a_wrong_option_is_a_usage_error(self, path, command, capsys):
        with pytest.raises(SystemExit) as info:
            launcher.main([*path, "--no-such-option"])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"Usage: {' '.join(('anycode',) + path)} ") and "--no-such-option" in err, err


def test_one_tree_no_argument_parsers():
    """The commands are one click tree: a module of webui/cli building its own ArgumentParser
    would be a command the tree (and this test) does not know."""
    from pathlib import Path

    folder = Path(launcher.__file__).parent
    found = [p.name for p in sorted(folder.glob("*.py")) if "ArgumentParser(" in p.read_text(encoding="utf-8")]
    assert not found, found


def test_the_console_script_runs_the_tree():
    """``anycode`` (pyproject's console script) is the tree's entry: ``main(argv) -> exit status``."""
    import importlib
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    pyproject = tomllib.loads((Path(launcher.__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    module, _, func = pyproject["project"]["scripts"]["anycode"].partition(":")
    assert getattr(importlib.import_module(module), func) is launcher.main
