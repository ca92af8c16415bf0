"""What every ``anycode`` command shares, defined once: the store options (``--store``,
``--data-dir``, ``-v``) and the storage they open (:func:`open_storage`), ``--project``, ``--json``,
typed-text arguments, arguments with help, and how a command runs (:func:`run`: exit statuses,
usage errors, Unicode output).

The command tree is built with click (installed with Gradio, via typer): the launcher group
(:mod:`webui.cli.launcher`) with ``sessions`` (:mod:`webui.cli.sessions`), ``memory``
(:mod:`webui.cli.memory`), ``import``, ``backup`` and ``restore`` (:mod:`webui.cli.transfer`).
A command's callback gets its options merged from the root down (:func:`args_of`), as the
``argparse.Namespace`` the command bodies were written for: an option given nearer the command wins,
so ``anycode sessions --store URL list`` and ``anycode sessions list --store URL`` mean the same.

Exit statuses (unchanged from the argparse commands): 0 done, 1 the command failed (one sentence
on stderr), 2 bad usage. A usage error prints click's usage line and message on stderr and raises
``SystemExit(2)``, as ``argparse`` did; :func:`run` returns the command's own status.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import click
from click.core import ParameterSource

from webui.cli import console

if TYPE_CHECKING:
    from core.storage import Storage

log = logging.getLogger(__name__)

# Where the same option means the same thing everywhere, its words are here once.
STORE_HELP = ("session store: jsonl (default), jsonl:FOLDER or a database URL such as sqlite:///sessions.db or "
              "postgresql+psycopg://… (default: $ANYCODE_STORE or jsonl)")
DATA_DIR_HELP = ("data directory: JSONL sessions, relative SQLite paths, the mirror's outbox "
                 "(default: $ANYCODE_HOME or the user data directory)")
VERBOSE_HELP = "log what happens (debug details)"
JSON_HELP = "machine-readable output (a JSON array)"
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class TypedText(click.ParamType):
    """Text typed as an argument (a title, a search query, a memory): read as the UTF-8 the
    terminal sent (:func:`webui.cli.console.text_arg`). Never for paths."""

    name = "text"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return console.text_arg(value) if isinstance(value, str) else value


TYPED_TEXT = TypedText()


class Group(click.Group):
    """A group of commands (``anycode``, ``anycode sessions`` ...). ``lazy`` maps a command name
    to ``"module:attribute"`` (default attribute ``cli``), imported when that command runs or
    ``--help`` lists it: starting the web UI never imports what only ``anycode sessions`` needs
    (click's documented way of loading subcommands lazily)."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy if lazy is not None else {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            return _load(cmd_name, self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)


class CommandUnavailable(click.ClickException):
    """A command of the tree whose module is not installed (exit status 2, one sentence)."""

    exit_code = 2


def _load(name: str, target: str) -> click.Command:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        raise CommandUnavailable(f"the '{name}' command is not available in this version.") from None
    command = getattr(module, attr or "cli")
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


def _add(decorators: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def apply(f: Any) -> Any:
        for decorator in reversed(decorators):
            f = decorator(f)
        return f
    return apply


def store_options(f: Any) -> Any:
    """``--store SPEC``, ``--data-dir DIR``, ``-v/--verbose``: which store a command opens."""
    return _add([
        click.option("--store", metavar="SPEC", default=None, help=STORE_HELP),
        click.option("--data-dir", metavar="DIR", default=None, help=DATA_DIR_HELP),
        click.option("-v", "--verbose", is_flag=True, default=False, help=VERBOSE_HELP),
    ])(f)


def data_dir_of(args: argparse.Namespace) -> Path:
    """The data folder ``--data-dir`` names (made absolute), else ``$ANYCODE_HOME`` or the user data
    directory (:func:`core.settings.data_dir`)."""
    from core import settings

    given = getattr(args, "data_dir", None)
    return Path(given).expanduser().resolve() if given else settings.data_dir()


def open_storage(args: argparse.Namespace) -> Storage:
    """The storage the store options name (``--store``, ``--data-dir``; ``$ANYCODE_STORE``,
    ``$ANYCODE_MIRROR``): every command opens its :class:`~core.storage.Storage` here and uses it
    in a ``with`` block (leaving it closes the storage: database pools, the mirror's last writes).

    Raises :class:`~core.errors.StoreUnavailable` (one sentence) when it cannot be opened: an
    unknown spec, the ``anycode[sql]`` extra missing, an unreachable database, an unusable folder.
    The SQL store's own "open failed" warning (driver details) shows with ``-v`` only."""
    from core.errors import StoreUnavailable
    from core.storage import open_store
    from core.stores.factory import DEFAULT_SPEC, describe, effective_spec

    sql_log = logging.getLogger("core.stores.sql_store")
    level = sql_log.level
    if not getattr(args, "verbose", False):
        sql_log.setLevel(logging.ERROR)
    try:
        return open_store(args.store, data_dir_of(args))
    except OSError as err:
        label = describe(effective_spec(args.store) or DEFAULT_SPEC)
        raise StoreUnavailable(f"The session store {label} cannot be opened ({err.strerror or err}).") from err
    finally:
        sql_log.setLevel(level)


def project_option(help: str, **kwargs: Any) -> Callable[[Any], Any]:  # noqa: A002
    """``--project PATH`` (default None: the current folder). Its ``help`` says what the project
    is to this command (whose sessions, where imports go, the target of a move ...)."""
    return click.option("--project", metavar="PATH", default=None, help=help, **kwargs)


def json_option(help: str = JSON_HELP) -> Callable[[Any], Any]:  # noqa: A002
    return click.option("--json", "json", is_flag=True, default=False, help=help)


def argument(name: str, help: str, **kwargs: Any) -> Callable[[Any], Any]:  # noqa: A002
    """A positional argument with ``help`` (listed under "Positional arguments" in ``--help``, as
    argparse listed them; click >= 8.5); ``metavar`` defaults to the name in capitals."""
    kwargs.setdefault("metavar", name.upper())
    return click.argument(name, help=help, **kwargs)


def exclusive_with(*others: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """An option callback refusing the option together with any of ``others`` (parameter names):
    a usage error (exit status 2) whichever comes first on the command line."""
    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value:
            for other in others:
                if ctx.params.get(other):
                    names = {p.name: p.opts[0] for p in ctx.command.params}
                    raise click.UsageError(f"{param.opts[0]} cannot be used with {names.get(other, other)}.", ctx)
        return value
    return check


def args_of(ctx: click.Context, **extra: Any) -> argparse.Namespace:
    """The options and arguments of ``ctx``'s command and of the groups above it, as one
    namespace (the names argparse gave them): a value given nearer the command wins; a default
    never hides a value given above. ``command`` is the command's name; ``extra`` is added."""
    chain = []
    c: click.Context | None = ctx
    while c is not None:
        chain.append(c)
        c = c.parent
    merged: dict[str, Any] = {}
    for c in reversed(chain):
        for name, value in c.params.items():
            given = c.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)
            if name not in merged or given:
                merged[name] = value
    merged["command"] = ctx.info_name
    merged.update(extra)
    return argparse.Namespace(**merged)


def run(command: click.Command, argv: Sequence[str] | None, prog: str) -> int:
    """Run ``command`` (a group or a leaf) with ``argv`` as ``prog``; the exit status.

    Usage errors print click's message and raise ``SystemExit(2)`` (as argparse did); ``--help``
    returns 0; a command that is not installed prints one sentence and returns 2."""
    console.setup_stdio()  # titles and folder names print whatever the locale (issue 20)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = command.main(args=args, prog_name=prog, standalone_mode=False)
    except CommandUnavailable as err:
        print(f"anycode: {err.message}", file=sys.stderr)
        return err.exit_code
    except click.ClickException as err:
        err.show()
        raise SystemExit(err.exit_code) from None
    except click.Abort:  # Ctrl+C or end of input at a click prompt
        print(f"{prog}: stopped.", file=sys.stderr)
        return 130
    return int(result or 0)


def walk(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command of the tree under ``command`` (itself first) with its path of names;
    lazy commands are loaded."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                found += walk(sub, path + (name,))
    return found
