"""The ``fs-search`` command line: worker, glob, grep, spill read, dev.

Each command imports what it uses when it starts, before asyncio runs it (Ctrl-C until then
leaves at once, see ``_entry``): ``--version`` and ``--help`` end in the parser, and a
one-off call in address mode loads Temporal's client and the workflow side, no worker
(tests/worker/cli/test_start_up.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from importlib import import_module
from types import FrameType
from typing import TYPE_CHECKING, Any

from fs_search.worker._connect import TemporalSettingsError, TemporalUnreachable
from fs_search.worker.cli._entry import EXIT_INTERRUPTED, leave_interrupted
from fs_search.worker.cli._env_file import EnvFileError, load_env_file
from fs_search.worker.cli._parser import attach_regexp, build_parser

if TYPE_CHECKING:
    from fs_search.activities import StorageSettings, ToolResult
    from fs_search.worker.cli._address import CallOptions

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
# How long a one-off call may take to leave after Ctrl-C, whatever is still shutting down:
# stopping the search takes at most 5 s of it (the call's activity closing, rg killed).
INTERRUPT_EXIT_S = 7.0
# Settings mistakes (exit 2, one line) raised by modules a command may not load, by module:
# looked up only among the modules already imported (an error of a module never imported
# was never raised), so that catching them loads nothing.
_SETTINGS_ERRORS = (
    ("fs_search.activities._config", "ConfigError"),
    ("fs_search.worker._otel_setup", "TelemetryConfigError"),
    ("fs_search.worker._processes", "PortTaken"),
)
# What `fs-search worker` runs on, imported before it starts (Ctrl-C meanwhile leaves at once).
_WORKER_MODULES = (
    "fs_search.worker._app",
    "fs_search.worker._fleet",
    "fs_search.worker._otel_setup",
    "fs_search.worker._queue_owner",
    "fs_search.worker._service_handler",
    "fs_search.workflows._plugin",
)
_SPILL_MODULES = ("fs_search.activities.results", "fs_search.activities.storage")


class UsageError(ValueError):
    """The command line asks for something that cannot be done (exit 2, one line)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fs-search`` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(
        attach_regexp(sys.argv[1:] if argv is None else list(argv))
    )
    # A mistake in a subcommand's arguments shows that subcommand's usage, not the top one's.
    usage = getattr(args, "subparser", parser)
    if unknown:
        usage.error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "connect_timeout", 1) <= 0:
        usage.error(f"--connect-timeout must be positive (got {args.connect_timeout:g})")
    import logging

    level = logging.INFO if (args.verbose or args.command in ("worker", "dev")) else logging.WARNING
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.env_file:
            # Before anything reads the environment (settings, Temporal, telemetry).
            load_env_file(args.env_file)
        if args.command == "worker":
            _load(_WORKER_MODULES)
            return _run(_worker(args))
        if args.command in ("glob", "grep"):
            if args.address and not args.workspace_id:
                usage.error("--address requires --workspace-id")
            if args.host and not args.workspace_id:
                usage.error("--host goes with --workspace-id (address mode)")
            if args.workspace and args.workspace_id:
                usage.error(
                    "--workspace (embedded mode) and --workspace-id (address mode) are exclusive"
                )
            if args.command == "grep":
                if (args.pattern is None) == (args.regexp is None):
                    usage.error("give the pattern once: as PATTERN or with -e/--regexp")
                args.pattern = args.regexp if args.pattern is None else args.pattern
            options = _call_options(args)
            # The mode's modules load here, before the call starts anything.
            if options.address:
                from fs_search.worker.cli._address import run_address_call as run_call
            else:
                from fs_search.worker.cli._embedded import run_call
            return _run(_bounded_on_interrupt(_call(run_call(options), as_json=args.json)))
        if args.command == "spill":
            _load(_SPILL_MODULES)
            return _run(_spill_read(args))
        if args.command == "dev":
            from pathlib import Path

            from fs_search.worker.cli._dev import run_dev

            problem = _worker_args_problem(args)
            if problem:
                raise UsageError(problem)
            return _run(
                run_dev(
                    args.workspace,
                    workspace_id=args.workspace_id,
                    sample=not args.no_sample,
                    data_dir=Path(args.data_dir) if args.data_dir else None,
                    port=args.port,
                    ui_port=args.ui_port,
                    env_file=Path(args.write_env_file) if args.write_env_file else None,
                    workspaces_root=args.workspaces_root,
                    queues=args.queues,
                    host_id=args.host_id,
                    scan_interval=args.scan_interval,
                )
            )
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as e:
        said = _one_line(e)
        if said is None:
            raise
        line, code = said
        print(f"fs-search: {line}", file=sys.stderr)
        return code
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def _one_line(error: Exception) -> tuple[str, int] | None:
    """The line (after ``fs-search: ``) and exit code a user's mistake or an unreachable
    server ends a command with; None for anything else (a bug: its traceback shows)."""
    if isinstance(error, TemporalUnreachable):
        return str(error), EXIT_UNREACHABLE
    if isinstance(error, (UsageError, EnvFileError, TemporalSettingsError)):
        return str(error), EXIT_USAGE
    queue_taken = _loaded("fs_search.worker._queue_owner", "QueueTaken")
    if queue_taken is not None and isinstance(error, queue_taken):
        # The error naming both workers is logged just above.
        return f"worker not started: another host's worker polls {error.queue}", EXIT_USAGE
    for module, name in _SETTINGS_ERRORS:
        kind = _loaded(module, name)
        if kind is not None and isinstance(error, kind):
            return str(error), EXIT_USAGE
    return None


def _loaded(module: str, name: str) -> Any:
    """``module.name`` if ``module`` is already imported, else None."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def _load(modules: Sequence[str]) -> None:
    """Import what a command runs on before it starts: Ctrl-C meanwhile leaves at once."""
    for module in modules:
        import_module(module)


def _run(command: Coroutine[Any, Any, int]) -> int:
    """Run a command under asyncio. From here Ctrl-C cancels it (asyncio's own handler) and
    it stops what it started; before, in the console script, Ctrl-C left at once."""
    import asyncio

    if signal.getsignal(signal.SIGINT) is leave_interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return asyncio.run(command)


async def _bounded_on_interrupt(call: Coroutine[Any, Any, int]) -> int:
    """Run ``call`` so that Ctrl-C always ends the process within INTERRUPT_EXIT_S.

    asyncio cancels the call on SIGINT, and the call stops its search (the embedded worker
    kills rg; in address mode the activity is cancelled and waited for, at most 5 s). What
    follows (a worker's and a connection's shutdown) waits on a server that, when loaded,
    may answer late: past the bound the process leaves anyway, with exit 130.
    """
    interrupted = signal.getsignal(signal.SIGINT)  # asyncio's: cancels this task

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        timer = threading.Timer(INTERRUPT_EXIT_S, _leave_interrupted)
        timer.daemon = True
        timer.start()
        if callable(interrupted):
            interrupted(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
    return await call


def _leave_interrupted() -> None:
    print(
        f"fs-search: interrupted; left after {INTERRUPT_EXIT_S:g} s without waiting for the "
        "connection to close",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os._exit(EXIT_INTERRUPTED)


async def _worker(args: argparse.Namespace) -> int:
    from fs_search.activities import FsSearchConfig
    from fs_search.worker._app import build_services, default_workspace_id, run_until_signalled
    from fs_search.worker._connect import connect
    from fs_search.worker._fleet import serve_root
    from fs_search.worker._operating import Operating
    from fs_search.worker._otel_setup import telemetry_from_env
    from fs_search.worker._queue_owner import HOST_ID_ENV, host_id_from_env
    from fs_search.worker._service_handler import serving_service
    from fs_search.workflows import FsSearchPlugin

    overrides: dict[str, object] = {"sample_over_cap_glob_results": args.sample}
    if args.queues:
        overrides["queues"] = args.queues
    if args.nexus_queue:
        overrides["nexus_queue"] = args.nexus_queue
    for key in ("http", "drain_timeout", "metrics_per_workspace"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    config = FsSearchConfig.load(overrides=overrides)
    problem = _worker_args_problem(args)
    if problem:
        print(f"fs-search: {problem}", file=sys.stderr)
        return EXIT_USAGE
    host_id = host_id_from_env(
        lambda name: args.host_id if name == HOST_ID_ENV and args.host_id else os.environ.get(name)
    )
    telemetry = telemetry_from_env()
    operating = Operating(config, workspaces_root=bool(args.workspaces_root))
    operating.adopt(telemetry)
    async with (
        telemetry.running(),
        operating.running(),
        contextlib.AsyncExitStack() as serving,
    ):
        services = await build_services(
            config,
            workspaces_root=bool(args.workspaces_root),
            telemetry=operating.search_telemetry(),
        )
        operating.watch_services(services)
        client = await connect(
            address=args.address,
            namespace=args.namespace,
            profile=args.profile,
            plugins=[FsSearchPlugin(external_storage=services.storage), operating.drain.plugin()],
            runtime=telemetry.runtime,
            timeout=timedelta(seconds=args.connect_timeout),
        )
        operating.watch_client(client)
        # The Nexus handler (--nexus-queue) runs beside any mode: it starts each call's
        # activity on the workspace's (or host's) queue, whoever serves it.
        await serving.enter_async_context(
            serving_service(client, config.nexus_queue, cap_ms=config.timeout_ms)
        )
        if args.workspaces_root:
            # No --scan-interval: the fleet's own default.
            interval = {} if args.scan_interval is None else {"scan_interval": args.scan_interval}
            await serve_root(
                client,
                services,
                args.workspaces_root,
                host_id=host_id,
                queues=config.queues,
                stop=operating.stop,
                drain=operating.drain_timeout,
                watch=operating.watch_fleet,
                on_ready=operating.ready,
                **interval,
            )
            return EXIT_OK
        workspace_id = args.workspace_id or default_workspace_id(args.workspace)
        activities = services.activities_for(args.workspace, workspace_id)
        operating.watch_workspace(activities)
        await run_until_signalled(
            client,
            activities,
            workspace_id=workspace_id,
            host_id=host_id,
            stop=operating.stop,
            drain=operating.drain_timeout,
            on_ready=operating.ready,
        )
    return EXIT_OK


def _require_directory(option: str, path: str) -> None:
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise UsageError(f"{option} {path!r} {what}")


def _worker_args_problem(args: argparse.Namespace) -> str | None:
    option = "--workspaces-root" if args.workspaces_root else "--workspace"
    try:
        _require_directory(option, args.workspaces_root or args.workspace)
    except UsageError as e:
        return str(e)
    if args.workspaces_root and not os.access(args.workspaces_root, os.R_OK | os.X_OK):
        return f"--workspaces-root {args.workspaces_root!r} cannot be read by this user"
    if args.workspaces_root and args.workspace_id:
        return "--workspace-id goes with --workspace (under --workspaces-root ids are names)"
    if args.queues and args.queues != "workspace" and not args.workspaces_root:
        return "--queues host|both goes with --workspaces-root (a host queue serves many)"
    if args.host_id and not args.workspaces_root and args.command == "dev":
        return "--host-id goes with --workspaces-root"
    if args.scan_interval is not None and args.scan_interval <= 0:
        return f"--scan-interval must be positive (got {args.scan_interval})"
    return None


def _call_options(args: argparse.Namespace) -> CallOptions:
    """The call the command line asks for, and where (address mode: the server every
    Temporal tool would connect to)."""
    from fs_search.worker._connect import connection_settings
    from fs_search.worker.cli._address import CallOptions

    arguments: dict[str, object] = {"pattern": args.pattern}
    if args.path is not None:
        arguments["path"] = args.path
    if getattr(args, "include", None) is not None:
        arguments["include"] = args.include
    address = None
    workspace = args.workspace or os.getcwd()
    if args.workspace_id:
        # Address mode: the server comes from where every Temporal tool finds it.
        settings = connection_settings(
            address=args.address, namespace=args.namespace, profile=args.profile
        )
        address = settings.get("target_host")
        if not address:
            raise UsageError(
                f"--workspace-id {args.workspace_id} needs the Temporal server its worker "
                "polls: give --address HOST:PORT, set TEMPORAL_ADDRESS (or --env-file PATH), "
                "or configure a profile (--profile, TEMPORAL_CONFIG_FILE); to search a "
                "directory here without a worker, give --workspace DIR instead"
            )
    else:
        _require_directory("--workspace", workspace)
        if not args.verbose:
            # The in-process worker would log each failed call with its traceback; the
            # call's `Error: ...` already says it (-v shows the worker's log).
            import logging

            logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    return CallOptions(
        tool=args.command,
        arguments=arguments,
        cwd=args.cwd,
        spill=not args.no_spill,
        workspace=workspace,
        workspace_id=args.workspace_id,
        host=args.host,
        address=address,
        namespace=args.namespace,
        profile=args.profile,
        no_sample=getattr(args, "no_sample", False),
        connect_timeout=timedelta(seconds=args.connect_timeout),
    )


async def _call(call: Coroutine[Any, Any, ToolResult], *, as_json: bool) -> int:
    """Run the call, print its result; the exit code says whether it is a tool error."""
    result = await call
    _print(result, as_json=as_json)
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def _spill_read(args: argparse.Namespace) -> int:
    from fs_search.activities import ArgumentProblem, ReadSpillRequest, SearchError, StorageSettings
    from fs_search.activities.results import read_spill_text
    from fs_search.activities.storage import storage_for

    try:
        req = ReadSpillRequest.checked(
            {"locator": args.locator, "offset": args.offset, "limit": args.limit}
        )
    except ArgumentProblem as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_TOOL_ERROR
    settings = StorageSettings.load()
    unset = _store_unset_for(req.locator, settings)
    if unset:
        print(f"Error: {unset}", file=sys.stderr)
        return EXIT_TOOL_ERROR
    storage = storage_for(settings)
    try:
        page = await storage.spill_store.read(req.locator, offset=req.offset, limit=req.limit)
    except SearchError as e:
        print(f"Error: {e.message} ({_store_read(settings)})", file=sys.stderr)
        return EXIT_TOOL_ERROR
    finally:
        await storage.close()
    print(read_spill_text(page))
    return EXIT_OK


def _store_read(settings: StorageSettings) -> str:
    """Which store ``spill read`` reads, in words."""
    from fs_search.activities import SPILL_URL_ENV

    if settings.spill_url:
        return f"this command reads the store {SPILL_URL_ENV} names: {settings.spill_url}"
    return f"this command reads the local default store: {SPILL_URL_ENV} is not set"


def _store_unset_for(locator: str, settings: StorageSettings) -> str | None:
    """Why an S3 locator cannot be read with no S3 store set (None when one is)."""
    from fs_search.activities import S3_ENDPOINT_URL_ENV, SPILL_URL_ENV

    if not locator.startswith("s3://") or (settings.spill_url or "").startswith("s3://"):
        return None
    return (
        f"{locator} is in an S3 store, and {_store_read(settings)}: set {SPILL_URL_ENV}="
        f"s3://<bucket>/<prefix> (and {S3_ENDPOINT_URL_ENV} for a store outside AWS) as the "
        "worker's, or give --env-file PATH (`fs-search dev --env-file PATH` writes one)"
    )


def _print(result: ToolResult, *, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        print(for_a_person(result))


def for_a_person(result: ToolResult) -> str:
    """The model's text, its spill footer saying how a person reads the saved result (the
    command) rather than how the model does (its read or read_spill tool)."""
    spill = getattr(result.result, "spill", None)
    if spill is None or not spill.hint:
        return result.text
    # The footer is the last place the hint appears (a matched line could hold it too).
    before, found, after = result.text.rpartition(spill.hint)
    if not found:
        return result.text
    command = f"fs-search spill read {shlex.quote(spill.locator)}"
    return f"{before}Read it with `{command}` (--offset and --limit page it, in lines).{after}"
