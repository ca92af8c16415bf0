"""The ``anycode`` command (also ``python -m webui``): start the web UI on localhost.

``anycode [--project PATH] [--continue | --resume ID|TITLE] [--host H] [--port N] [--auth USER:PASS]
[--data-dir DIR] [--store SPEC] [--model NAME] [--base-url URL] [--no-browser]``.

One click command tree (:data:`cli`): this group runs the launcher when no command follows its
options; ``anycode sessions|memory|import|backup|restore|agents|mcp …`` are its commands, loaded from
:data:`SUBCOMMANDS` only when used. Options every command shares are in :mod:`webui.cli.options`.
"""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import shutil
import signal
import sys
import threading
import time
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click
from click.core import ParameterSource

from webui.cli import options

if TYPE_CHECKING:
    from core.storage import Storage

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
PORT_SCAN = 100  # how many ports after --port to try when it is taken
CLOSE_GRACE = 1.5  # seconds open browser tabs get to let go when stopping
# The launcher's commands: name -> "module:click command" ("module" alone: its ``cli``), imported
# when the command runs or ``--help`` lists it (starting the web UI imports none of them).
SUBCOMMANDS = {
    "sessions": "webui.cli.sessions",
    "import": "webui.cli.transfer:import_cli",
    "backup": "webui.cli.transfer:backup_cli",
    "restore": "webui.cli.transfer:restore_cli",
    "memory": "webui.cli.memory",
    "agents": "webui.cli.agents",
    "mcp": "webui.cli.mcp",
    "projects": "webui.cli.machines:projects_cli",
    "mirror": "webui.cli.machines:mirror_cli",
}
# Options that mean the same to every command: given before a command's name, they are its own.
SHARED = ("store", "data_dir", "project", "verbose")


class CliError(Exception):
    """A command-line problem to print as one sentence (exit status 2), never a traceback."""


@click.group("anycode", cls=options.Group, lazy=SUBCOMMANDS, invoke_without_command=True,
             context_settings=options.CONTEXT,
             help="anycode: a local chat agent with a ChatGPT-like web UI. Conversations are saved as "
                  "sessions you can resume, branch, archive and export. Without a command: start the web UI.",
             epilog="Model: set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server). "
                    "Sessions: JSONL files under --data-dir (default $ANYCODE_HOME or the user data directory), "
                    "or the store chosen with --store; set ANYCODE_MIRROR to a database URL to copy every write "
                    "there in the background. 'anycode sessions --help' manages sessions from the shell; "
                    "'anycode import --help' brings in ChatGPT, Claude Code and Codex history; 'anycode backup "
                    "FILE.zip' and 'anycode restore FILE.zip' save and bring back everything.")
@options.project_option("the project (workspace) directory; default: the current directory")
@click.option("--continue", "cont", is_flag=True, callback=options.exclusive_with("resume"),
              help="open the project's most recently active session")
@click.option("--resume", metavar="ID", default=None, callback=options.exclusive_with("cont"),
              help="open this session (a unique prefix of its id, or words of its title, are enough)")
@click.option("--host", metavar="HOST", default=DEFAULT_HOST,
              help="interface to listen on (default 127.0.0.1; others require --auth)")
@click.option("--port", metavar="N", type=int, default=DEFAULT_PORT,
              help="port (default 7860; the next free one is used when it is taken)")
@click.option("--allowed-host", metavar="NAME", multiple=True,
              help="also answer requests made to this host name (repeatable; default: localhost, 127.0.0.1, "
                   "[::1] and --host; also $ANYCODE_ALLOWED_HOSTS)")
@click.option("--auth", metavar="USER:PASSWORD", default=None,
              help="require this login (mandatory when --host is not a loopback address)")
@options.store_options
@click.option("--model", metavar="NAME", default=None,
              help="chat model name (default: $ANYCODE_MODEL or gpt-4o-mini)")
@click.option("--base-url", metavar="URL", default=None,
              help="OpenAI-compatible API base URL (default: $OPENAI_BASE_URL)")
@click.option("--no-browser", is_flag=True, help="do not open a browser tab")
@click.pass_context
def cli(ctx: click.Context, **_: Any) -> int | None:
    """The launcher, or the group above a command (which then runs with the shared options)."""
    if ctx.invoked_subcommand is not None:
        wrong = [p.opts[0] for p in ctx.command.params if p.name not in SHARED
                 and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE]
        if wrong:
            raise click.UsageError(f"{', '.join(wrong)} {'goes' if len(wrong) == 1 else 'go'} only with "
                                   f"starting the web UI, not with 'anycode {ctx.invoked_subcommand}'.", ctx)
        return None
    return launch(options.args_of(ctx))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The launcher's options for ``argv`` (the names argparse gave them: ``cont`` for
    ``--continue`` ...), nothing run. A usage error prints click's message and raises
    ``SystemExit(2)``."""
    try:
        ctx = cli.make_context("anycode", list(argv))
    except click.ClickException as err:
        err.show()
        raise SystemExit(err.exit_code) from None
    return options.args_of(ctx)


# --- checks --------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_auth(value: str | None) -> tuple[str, str] | None:
    """``"user:password"`` -> ``("user", "password")`` (the password may contain ``:``).

    Raises :class:`CliError` for a missing user or password."""
    if value is None:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise CliError("--auth must look like USER:PASSWORD (both non-empty).")
    return user, password


def check_exposure(host: str, auth: tuple[str, str] | None) -> None:
    """Refuse to serve sessions and file tools to a network without a login (:class:`CliError`)."""
    if not is_loopback(host) and auth is None:
        raise CliError(
            f"Listening on {host} would expose your sessions and project files to the network; "
            "add --auth USER:PASSWORD, or use the default --host 127.0.0.1."
        )


def check_port(port: int) -> None:
    """Raise :class:`CliError` unless ``port`` is a valid TCP port number."""
    if not 0 < port < 65536:
        raise CliError(f"--port {port} is not a valid port number (1-65535).")


def check_host(host: str) -> None:
    """Raise :class:`CliError` when ``host`` is empty, does not resolve, or is not an address of
    this machine (checked before the store is opened)."""
    from webui.server import preflight

    if not host.strip():
        raise CliError("--host needs an address or host name, such as 127.0.0.1.")
    try:
        preflight.try_bind(host, 0)  # port 0: any free one; only the address is in question
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise CliError(f"--host {host} cannot be used: {reason[:1].lower() + reason[1:]}.") \
            from err


def find_free_port(host: str, start: int, tries: int = PORT_SCAN) -> int:
    """The first port from ``start`` on that can be bound on ``host`` the way the server binds it
    (SO_REUSEADDR on POSIX: a restart keeps its port while old connections sit in TIME_WAIT).
    Raises :class:`CliError`."""
    from webui.server import preflight

    check_port(start)
    for port in range(start, min(start + tries, 65536)):
        try:
            preflight.try_bind(host, port)
        except OSError as err:
            if preflight.port_in_use(err):
                continue
            reason = getattr(err, "strerror", None) or str(err)
            raise CliError(f"Cannot listen on {preflight.url_host(host)} port {port}: "
                           f"{reason[:1].lower() + reason[1:]}.") from err
        return port
    raise CliError(f"No free port between {start} and {min(start + tries, 65536) - 1} on {host}.")


def check_data_dir(args: argparse.Namespace, data_dir: Path) -> None:
    """For the JSONL store, make sure its folder can be created and written now, not at the
    first message (a database store is checked by opening it). Raises :class:`CliError`."""
    from core.stores.factory import DEFAULT_SPEC, effective_spec
    from webui.server import preflight

    spec = effective_spec(args.store)
    if spec in ("", DEFAULT_SPEC):
        folder, what, fix = data_dir, "the data directory", "set ANYCODE_HOME or --data-dir"
    elif spec.startswith("jsonl:") and "://" not in spec:
        folder = Path(spec[len("jsonl:"):]).expanduser()
        what, fix = "the session folder", "choose another with --store jsonl:FOLDER"
    else:
        return
    problem = preflight.data_dir_problem(folder)
    if problem:
        raise CliError(f"cannot use {folder} as {what}: {problem}; {fix}.")


def describe_model(config: Any) -> str:
    """The startup line's model part: the model and server in use (never the key), or that none
    is configured. Builds a client the way the UI will (which may probe a local Ollama)."""
    from core.agent.config import make_client
    from core.errors import ModelError

    try:
        client = make_client(config)
    except ModelError:
        return ("none configured (set OPENAI_API_KEY or OPENAI_BASE_URL); "
                "messages are still saved")
    return f"{config.model} at {_safe_url(str(client.base_url))}"


def _safe_url(url: str) -> str:
    """``url`` without any user name or password in it."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def make_host_policy(args: argparse.Namespace) -> Any:
    """The ``webui.server.security.HostPolicy`` for ``--host``, ``--allowed-host`` and
    ``$ANYCODE_ALLOWED_HOSTS``. Raises :class:`CliError` for an entry that is not a bare name."""
    from webui.server import security

    try:
        extra = security.parse_allowed_hosts(args.allowed_host) + security.allowed_hosts_from_env()
    except ValueError as err:
        raise CliError(f"{str(err)[:1].upper()}{str(err)[1:]}.") from err
    return security.HostPolicy.for_server(args.host, extra)


# --- sessions --------------------------------------------------------------------------------


def describe_sessions(manager: Any, project: str, limit: int = 10) -> str:
    """A few lines listing the project's recent sessions (``id  title``) for error messages,
    ending with "… and N more" when there are more than ``limit``."""
    from core.session.export import session_label

    metas = manager.list(project)
    if not metas:
        return "This project has no sessions yet."
    lines = [f"  {m.id}  {session_label(m.title, m.created_at)}" for m in metas[:limit]]
    if len(metas) > limit:
        lines.append(f"  … and {len(metas) - limit} more ('anycode sessions list' shows them all)")
    return "Sessions in this project:\n" + "\n".join(lines)


def _describe_candidates(manager: Any, project: str, ids: list[str], limit: int = 10) -> str:
    from core.session.export import session_label

    titles = {m.id: session_label(m.title, m.created_at)
              for m in manager.list(project) + manager.list(project, archived=True)}
    lines = [f"  {i}  {titles.get(i, '')}" for i in ids[:limit]]
    if len(ids) > limit:
        lines.append(f"  … and {len(ids) - limit} more")
    return "\n".join(lines)


def find_initial(storage: Storage, manager: Any, project_path: str, args: argparse.Namespace) -> Any:
    """The ``SessionKey`` to open first for ``--continue`` / ``--resume`` in ``storage`` (whose
    sessions ``manager`` manages), or None.

    ``--resume`` looks for the id (or a unique prefix) in the project first, then in every other
    project; when none matches, for a conversation whose title holds the words given
    (:func:`core.session.lookup.title_matches`), in the same order. Raises :class:`CliError`
    (listing the candidates once) for an empty, ambiguous or unknown id or title."""
    from core.errors import AmbiguousSessionId, AmbiguousTitle, SessionNotFound
    from core.session.keys import project_key

    key = project_key(project_path)
    if args.cont:
        from webui.chat import remote

        latest = manager.latest(key)
        for alias in remote.alias_keys_of_folder(storage, project_path):  # the same checkout elsewhere
            other = manager.latest(alias)
            if other is not None and (latest is None or other.updated_at > latest.updated_at):
                latest = other
        # With a mirror, the newest chat may be one another machine wrote (issue 26): pulled first.
        pulled, why = remote.newest_for_continue(storage, project_path, latest)
        if why:
            print(f"anycode: {why}.", file=sys.stderr)
        if pulled is not None:
            print("anycode: continuing the newest chat, written on another machine (pulled from the mirror).",
                  file=sys.stderr)
            return pulled
        if latest is None:
            print(f"anycode: no session to continue in {project_path}; starting a new chat.",
                  file=sys.stderr)
            return None
        return latest.key
    if args.resume is None:
        return None
    wanted = check_resume(args.resume)
    projects = [key] + [p.project_key for p in manager.list_projects() if p.project_key != key]
    for pk in projects:
        try:
            return manager.find(pk, wanted)
        except AmbiguousSessionId as err:
            raise CliError(
                f"The id prefix {wanted!r} matches {len(err.candidates)} sessions; type more "
                f"characters of the id:\n" + _describe_candidates(manager, pk, err.candidates)
            ) from err
        except SessionNotFound:
            continue
    # No id or prefix matched: words of a title (core.session.lookup), this project first.
    try:
        return manager.find_title(key, wanted)
    except AmbiguousTitle as err:
        raise CliError(f"{err}\n" + "\n".join(f"  {sid}  {title}" for sid, title in err.candidates[:10])
                       + (f"\n  … and {len(err.candidates) - 10} more" if len(err.candidates) > 10 else "")
                       ) from err
    except SessionNotFound:
        pass
    raise CliError(f"No session with id or title {wanted!r} was found.\n"
                   + describe_sessions(manager, key))


def initial_session(storage: Storage, manager: Any, project_path: str, args: argparse.Namespace) -> str | None:
    """The session id to open first for ``--continue`` / ``--resume``, or None (see
    :func:`find_initial`)."""
    found = find_initial(storage, manager, project_path, args)
    return found.session_id if found is not None else None


def check_resume(value: str | None) -> str | None:
    """The ``--resume`` id, stripped; :class:`CliError` when it was given empty."""
    if value is None:
        return None
    if not value.strip():
        raise CliError("--resume needs a session id (or a unique prefix of one, or words of its title).")
    return value.strip()


def _same_project(storage: Storage, project_path: str, other_key: str) -> bool:
    """Whether ``other_key`` is the project at ``project_path`` recorded at another path (the
    same git identity, e.g. on another machine: issue 26), so the folder opened here stays."""
    from core.session.identity import project_identity

    identity = project_identity(project_path)
    try:
        return bool(identity) and other_key in storage.aliases.keys_for(identity)
    except OSError:
        return False


def session_project(manager: Any, key: Any, fallback: str) -> str:
    """The folder of the project ``key`` belongs to (the session's recorded cwd), else
    ``fallback``."""
    try:
        cwd = manager.get(key).cwd
    except Exception as err:  # noqa: BLE001 -- only for the message: keep the fallback
        log.debug("cannot read the cwd of %s: %s", key, err)
        cwd = None
    if not cwd:
        for info in manager.list_projects():
            if info.project_key == key.project_key and info.cwd:
                return info.cwd
        return fallback
    return cwd


# --- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anycode`` (the launcher or one of its commands) with ``argv``; return the exit status
    (0 ok, 1 failed, 2 usage or configuration error; a usage error raises ``SystemExit(2)``)."""
    return options.run(cli, argv, "anycode")


def launch(args: argparse.Namespace) -> int:
    """Start the web UI with the launcher's options and serve until stopped; the exit status
    (0 stopped, 1 an OS error while starting, 2 a refused option or store, 130 Ctrl+C while
    starting). After a served app stopped (Ctrl+C or SIGTERM alike) the process ends right there,
    with status 0, once everything is stored (:func:`exit_now`)."""
    args.allowed_host = list(args.allowed_host or ()) or None
    _stacks_on_sigusr1()  # before "running at" is printed: whoever waits for that line may ask
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "uvicorn.access", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from core.errors import AnycodeError

    try:
        code = _run(args)
    except (CliError, AnycodeError) as err:  # e.g. the database went away during cleanup
        print(f"anycode: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl+C while starting: stop quietly, like once running
        print("anycode: stopped.", file=sys.stderr)
        return 130
    except OSError as err:  # a full disk or an unusable folder met while starting: one sentence
        from core.errors import os_error_message

        logging.getLogger(__name__).debug("start-up failed", exc_info=True)
        print(f"anycode: {os_error_message(err)}; anycode did not start.", file=sys.stderr)
        return 1
    if getattr(args, "served", False):  # the app ran and stopped cleanly: everything is stored
        exit_now(code)
    return code


def _run(args: argparse.Namespace) -> int:
    from webui.server import offline

    offline.apply()
    from core.session.keys import normalize_path

    # Everything that can be checked without the store first: a bad option never runs cleanup.
    check_resume(args.resume)
    auth = parse_auth(args.auth)
    check_exposure(args.host, auth)
    check_port(args.port)
    check_host(args.host)
    host_policy = make_host_policy(args)
    project_path = normalize_path(args.project or os.getcwd())
    if not os.path.isdir(project_path):
        raise CliError(f"--project {project_path} is not a directory.")
    overrides = {k: v for k, v in (("model", args.model), ("base_url", args.base_url)) if v}
    from core.agent.config import ModelConfig

    try:
        ModelConfig.from_env(**overrides)
    except ValueError as err:  # e.g. ANYCODE_TIMEOUT=abc: str(err) is one sentence
        raise CliError(str(err)) from err
    data_dir = options.data_dir_of(args)  # handed to the storage, which hands it to whoever needs it
    check_data_dir(args, data_dir)
    with options.open_storage(args) as storage:
        return _serve(args, storage, project_path, auth, overrides, host_policy)


def _expire_mirror_copies(storage: Storage) -> None:
    """The mirror's own retention at start (issue 25): with ``ANYCODE_MIRROR_RETENTION_DAYS`` set,
    remove the mirror's copies idle for longer, in the background (the mirror may be slow or
    away; the app does not wait for it). Local cleanup never touches the mirror."""
    from core import settings

    mirror = storage.mirror
    if mirror is None or settings.mirror_retention_days() is None:
        return

    def run() -> None:
        try:
            gone = mirror.expire_mirror()
            if gone:
                log.info("mirror retention removed %d expired mirror copies", len(gone))
        except Exception as err:  # noqa: BLE001 -- retried at the next start
            log.warning("mirror retention could not run: %s", err)

    import threading

    threading.Thread(target=run, name="anycode-mirror-retention", daemon=True).start()


def _collect_blobs(storage: Storage) -> None:
    """Delete checkpoint blobs no session refers to (issue 29); never stops the start."""
    from core.stores.blobs import collect_unreferenced

    try:
        collect_unreferenced(storage.sessions, storage.blobs)
    except Exception as err:  # noqa: BLE001 -- a failed listing must not stop the app
        log.warning("checkpoint blobs not collected: %s", err)


def _serve(args: argparse.Namespace, storage: Storage, project_path: str,
           auth: tuple[str, str] | None, overrides: dict[str, Any], host_policy: Any = None) -> int:
    """Clean up, resolve the first session, launch the UI and block until Ctrl+C / SIGTERM."""
    from core.session.keys import project_key
    from core.session.manager import SessionManager
    from webui.server import preflight

    manager = SessionManager(storage.sessions, protected_dirs=storage.protected_dirs())
    # Archive first: a session idle long enough to archive is kept, not cleaned up.
    archived = manager.auto_archive()
    if archived:
        log.info("auto-archive moved %d idle sessions to the archive: %s", len(archived),
                 ", ".join(k.session_id for k in archived))
    removed = manager.cleanup()
    if removed:
        log.info("cleanup removed %d expired sessions: %s", len(removed),
                 ", ".join(k.session_id for k in removed))
    else:
        log.info("cleanup: no expired sessions")
    _expire_mirror_copies(storage)
    _collect_blobs(storage)
    found = find_initial(storage, manager, project_path, args)
    first = found.session_id if found is not None else None
    started_in = project_path
    if found is not None and found.project_key != project_key(project_path):
        # --resume of another project's session: the UI opens that project, so say so and make
        # it the default project (new chats, the project picker) instead of the current folder.
        opened = session_project(manager, found, project_path)
        if project_key(opened) == found.project_key and not _same_project(storage, project_path, found.project_key):
            project_path = opened
    port = find_free_port(args.host, args.port)
    if port != args.port:
        print(f"anycode: port {args.port} is taken; using {port}.", file=sys.stderr)

    from webui.server import private_files
    from webui.server import gradio_patch, security
    from webui.gui.app import build_app, launch_kwargs
    from webui.chat.context import WebContext

    # Exports, uploads and Gradio's cache: a 0700 folder of this run, removed when it stops.
    private = private_files.make_root(private_files.gradio_temp_dir())
    private_files.use_for_gradio(private)
    ctx = WebContext(storage=storage, manager=manager, project_path=project_path,
                     model_overrides=overrides, initial_session=first,
                     export_dir=private_files.private_dir(private / "exports"))
    model_line = describe_model(ctx.model_config())
    demo = build_app(ctx)
    from core.agent import language

    language.warm_up()  # the first title's language detection does not wait for the model
    demo.queue(default_concurrency_limit=16)
    # Gradio builds its own URL from server_name: an IPv6 literal must be bracketed there.
    try:
        # Gradio's page builder without its quadratic scan (issue 32), inside the security rules
        demo.launch(**gradio_patch.install(security.install(
            launch_kwargs(host=preflight.url_host(args.host), port=port, auth=auth, quiet=True),
            host_policy or security.HostPolicy.for_server(args.host),
            after_upload=lambda: private_files.tighten(private))), prevent_thread_lock=True)
    except OSError as err:  # e.g. another program took the port since it was probed
        shutil.rmtree(private, ignore_errors=True)
        raise CliError(f"The web server could not start on port {port} "
                       f"({err.strerror or err}).") from err
    if not security.is_installed(getattr(demo, "app", None)):  # never serve without the guard
        _close_app(demo)
        raise CliError("The web server started without its Host/Origin checks; stopped.")
    url = f"http://{preflight.browse_host(args.host)}:{port}/"
    if first:
        url += f"?session={first}"
    print(f"anycode is running at {url}", flush=True)
    note = " (the resumed session's project)" if project_path != started_in else ""
    print(f"  project: {project_path}{note}", flush=True)
    print(f"  store:   {storage.describe()}", flush=True)
    print(f"  data:    {storage.data_dir}", flush=True)
    print(f"  model:   {model_line}", flush=True)
    print("  press Ctrl+C to stop", flush=True)
    if not args.no_browser:
        webbrowser.open(url)
    previous = _stop_on_sigterm()
    try:
        _wait(demo)
    finally:
        _close_app(demo)
        ctx.close()  # the MCP servers it started (stdio processes would outlive the app's quick exit)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(private, ignore_errors=True)  # download copies, not the sessions
    finish_background_jobs()  # a title or memory job storing what it got: before the store closes
    print("anycode: stopped.", flush=True)
    args.served = True  # launch(): the store is closed next, then the process ends at once
    return 0


BACKGROUND_GRACE = 1.0  # seconds running title and memory jobs get to store their result when stopping
STOP_DUMP_SECONDS = 20.0  # a stop still running after this long prints every thread's stack
EXIT_JOIN_GRACE = 2.0  # seconds non-daemon threads (a library's) get before the process ends
BACKGROUND_JOBS = ("title-", "memory-")  # thread names: core.agent.titles, core.agent.memory_job


def finish_background_jobs(grace: float = BACKGROUND_GRACE) -> list[str]:
    """Wait (at most ``grace`` seconds in all) for the title and memory jobs still running (daemon
    threads named ``title-…``/``memory-…``), so one that has its answer stores it before the store
    is closed and the mirror flushed; one still waiting for the model is left (nothing of it was
    shown or acknowledged; the next exchange of that chat asks again). Returns the names of the
    jobs still running after the wait."""
    deadline = time.monotonic() + grace
    running = [t for t in threading.enumerate() if t.name.startswith(BACKGROUND_JOBS) and t.is_alive()]
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in running if t.is_alive()]
    if left:
        log.info("stopping with background jobs still waiting for the model: %s", ", ".join(left))
    return left


def exit_now(code: int) -> None:
    """End the process with ``code`` at once, after a clean stop (the server closed, the
    background jobs had their grace, the store closed: the mirror got its last writes out).

    Python's own teardown would follow, and on Gradio's import graph that is seconds of garbage
    collection (2–8 s measured on 2 cores) holding nothing of anycode's: it is what made a stop
    slow. What a normal exit does first is still done — non-daemon threads are waited for (at most
    :data:`EXIT_JOIN_GRACE` s), the exit handlers run (logging's flush among them), the output is
    flushed — only the teardown is skipped (``os._exit``)."""
    import atexit

    deadline = time.monotonic() + EXIT_JOIN_GRACE
    for thread in threading.enumerate():  # what a normal exit waits for (none of anycode's own)
        if not thread.daemon and thread is not threading.current_thread() and thread.is_alive():
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("stopping while thread %s still runs", thread.name)
    try:
        atexit._run_exitfuncs()  # what a normal exit runs, in the same order (last registered first)
    except Exception as err:  # noqa: BLE001 -- exiting anyway
        log.debug("an exit handler failed: %s", err)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _wait(demo: Any) -> None:
    """Block until Ctrl+C or SIGTERM (both arrive as KeyboardInterrupt) or the app stops.

    Not ``demo.block_thread()``: it catches the interrupt itself and waits up to 5 s for open
    browser tabs before :func:`_close_app` gets a say."""
    try:
        while getattr(demo, "is_running", False):
            time.sleep(0.2)
    except KeyboardInterrupt:
        # The stop's own waits add up to ~6 s (the close, the background jobs, other threads).
        # Should it hang past STOP_DUMP_SECONDS, every thread's stack goes to stderr: the one
        # report that says where (once seen in a test run on a loaded machine, never explained).
        import faulthandler

        faulthandler.dump_traceback_later(STOP_DUMP_SECONDS, exit=False)


def _close_app(demo: Any, grace: float = CLOSE_GRACE) -> None:
    """Stop the server promptly: ``demo.close()`` (which also ends the tabs' heartbeat streams),
    and if connections still hold it after ``grace`` seconds, tell uvicorn to stop waiting for
    them. A second Ctrl+C during this forces the same."""
    closer = threading.Thread(target=demo.close, kwargs={"verbose": False},
                              name="anycode-close", daemon=True)
    closer.start()
    try:
        closer.join(grace)
    except KeyboardInterrupt:
        pass
    if closer.is_alive():
        server = getattr(demo, "server", None)
        if server is not None:
            log.debug("open connections did not close within %.0f s; stopping anyway", grace)
            # Cut off, the open requests and the lifespan task end in CancelledError, which
            # uvicorn prints as two tracebacks: a stop the user asked for says one line only
            # ("anycode: stopped."; issue 31, item 12).
            logging.getLogger("uvicorn.error").disabled = True
            server.force_exit = True
        try:
            closer.join(grace)
        except KeyboardInterrupt:
            pass


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr and the app runs on: what a
    report of a hung app (or a stop that never came) needs. A test's Ctrl+C went unanswered for
    30 s once in ~40 full runs, with nothing printed; the next one says where it waited."""
    import faulthandler

    if hasattr(signal, "SIGUSR1"):  # not on Windows
        try:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        except (ValueError, RuntimeError, OSError) as err:  # no usable stderr: nothing to print to
            log.debug("no stack dump on SIGUSR1: %s", err)


def _stop_on_sigterm() -> Any:
    """Make SIGTERM (``kill``, service managers) stop the server like Ctrl+C, so the store is
    closed (the mirror gets its last writes out). Returns the previous handler, None when it
    could not be installed (not the main thread)."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:  # signal only works in the main thread
        return None
