"""The ``fs-search`` command line: worker, glob, grep, spill read."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from fs_search.activities.config import ConfigError, FsSearchConfig
from fs_search.activities.models import (
    MAX_READ_SPILL_LINES,
    ArgumentProblem,
    ReadSpillRequest,
    ToolResult,
)
from fs_search.worker.connect import TemporalSettingsError, TemporalUnreachable
from fs_search.worker.telemetry import TelemetryConfigError

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fs-search",
        description="ripgrep-backed glob and grep tools as Temporal activities.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    w = sub.add_parser("worker", help="run the worker for one workspace, or for all on a host")
    where = w.add_mutually_exclusive_group(required=True)
    where.add_argument("--workspace", help="the one directory this worker searches")
    where.add_argument(
        "--workspaces-root",
        metavar="DIR",
        help="serve every direct subdirectory of DIR named by a valid id, on fs-search/<name>",
    )
    w.add_argument("--workspace-id", help="queue id (default: derived from host and path)")
    w.add_argument(
        "--scan-interval",
        type=float,
        default=2.0,
        metavar="S",
        help="with --workspaces-root: seconds between scans for new and removed workspaces",
    )
    _connection_args(w)
    mode = w.add_mutually_exclusive_group()
    mode.add_argument(
        "--sample-over-cap-glob-results",
        dest="sample",
        action="store_true",
        default=None,
        help="over-cap glob pages are sampled across top-level entries",
    )
    mode.add_argument(
        "--no-sample-over-cap-glob-results",
        dest="sample",
        action="store_false",
        help="over-cap glob pages keep the modification-time-ordered head",
    )

    for tool in ("glob", "grep"):
        t = sub.add_parser(tool, help=f"run one {tool} call")
        if tool == "grep":
            t.add_argument("pattern", nargs="?", help="the regex (or give it with -e)")
            t.add_argument(
                "-e",
                "--regexp",
                metavar="PATTERN",
                help="the regex, for one that starts with '-' (e.g. -e '-->')",
            )
        else:
            t.add_argument("pattern")
        t.add_argument("--path", help="search root (relative to --cwd, or absolute)")
        if tool == "grep":
            t.add_argument("--include", help="one glob limiting which files are searched")
        t.add_argument("--cwd", help="working directory (relative to the workspace root)")
        t.add_argument("--json", action="store_true", help="print the ToolResult as JSON")
        t.add_argument("--no-spill", action="store_true", help="return every entry; save nothing")
        if tool == "glob":
            t.add_argument(
                "--no-sample-over-cap-glob-results",
                dest="no_sample",
                action="store_true",
                help="embedded mode: keep the mtime-ordered head instead of sampling",
            )
        t.add_argument(
            "--workspace", help="embedded mode: the workspace (default: current directory)"
        )
        t.add_argument("--workspace-id", help="address mode: the worker's workspace id")
        _connection_args(t)

    d = sub.add_parser(
        "dev", help="run a local stack: Temporal dev server + UI, SeaweedFS S3, a worker"
    )
    d.add_argument("--workspace", default=".", help="the directory searched (default: .)")
    d.add_argument("--workspace-id", help="queue id (default: derived from host and path)")
    d.add_argument("--data-dir", help="where S3 keeps its data (default: a temporary directory)")
    d.add_argument(
        "--no-sample-over-cap-glob-results",
        dest="no_sample",
        action="store_true",
        help="keep the mtime-ordered head of over-cap globs instead of sampling",
    )

    spill = sub.add_parser("spill", help="spill artifacts")
    spill_sub = spill.add_subparsers(dest="spill_command", required=True)
    r = spill_sub.add_parser("read", help="print a page of a spill artifact")
    r.add_argument("locator")
    page = ReadSpillRequest.model_fields
    r.add_argument(
        "--offset", type=int, default=page["offset"].default, help=page["offset"].description
    )
    r.add_argument(
        "--limit",
        type=int,
        default=page["limit"].default,
        help=f"{(page['limit'].description or '').rstrip('.')} (at most {MAX_READ_SPILL_LINES})",
    )
    return parser


def _connection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", help="Temporal address HOST:PORT (default: TEMPORAL_ADDRESS)")
    p.add_argument("--namespace", help="Temporal namespace (default: TEMPORAL_NAMESPACE)")
    p.add_argument("--profile", help="temporalio envconfig profile")


def _attach_regexp(argv: list[str]) -> list[str]:
    """``-e X`` / ``--regexp X`` as ``--regexp=X``: argparse refuses a separate value that
    starts with ``-`` (``-e -->``), which is exactly what the option is for."""
    out: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg == "--":
            out.append(arg)
            out.extend(rest)
            break
        if arg in ("-e", "--regexp"):
            value = next(rest, None)
            out.append("--regexp" if value is None else f"--regexp={value}")
        else:
            out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fs-search`` console script."""
    parser = _parser()
    args = parser.parse_args(_attach_regexp(sys.argv[1:] if argv is None else list(argv)))
    level = logging.INFO if (args.verbose or args.command in ("worker", "dev")) else logging.WARNING
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.command == "worker":
            return asyncio.run(_worker(args))
        if args.command in ("glob", "grep"):
            if args.address and not args.workspace_id:
                parser.error("--address requires --workspace-id")
            if args.workspace and args.address:
                parser.error("--workspace (embedded mode) and --address are exclusive")
            if args.command == "grep":
                if (args.pattern is None) == (args.regexp is None):
                    parser.error("give the pattern once: as PATTERN or with -e/--regexp")
                args.pattern = args.regexp if args.pattern is None else args.pattern
            return asyncio.run(_call(args))
        if args.command == "spill":
            return asyncio.run(_spill_read(args))
        if args.command == "dev":
            from pathlib import Path

            from fs_search.worker.dev import run_dev

            return asyncio.run(
                run_dev(
                    args.workspace,
                    workspace_id=args.workspace_id,
                    sample=not args.no_sample,
                    data_dir=Path(args.data_dir) if args.data_dir else None,
                )
            )
    except ConfigError as e:
        print(f"fs-search: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (TelemetryConfigError, TemporalSettingsError) as e:
        print(f"fs-search: {e}", file=sys.stderr)
        return EXIT_USAGE
    except TemporalUnreachable as e:
        print(f"fs-search: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


async def _worker(args: argparse.Namespace) -> int:
    from fs_search.worker.app import build_services, default_workspace_id, run_until_signalled
    from fs_search.worker.connect import connect
    from fs_search.worker.fleet import serve_root
    from fs_search.worker.telemetry import telemetry_from_env
    from fs_search.workflows.plugin import FsSearchPlugin

    config = FsSearchConfig.load(overrides={"sample_over_cap_glob_results": args.sample})
    problem = _worker_args_problem(args)
    if problem:
        print(f"fs-search: {problem}", file=sys.stderr)
        return EXIT_USAGE
    telemetry = telemetry_from_env()
    async with telemetry.running():
        services = await build_services(config)
        client = await connect(
            address=args.address,
            namespace=args.namespace,
            profile=args.profile,
            plugins=[FsSearchPlugin(external_storage=services.storage)],
            runtime=telemetry.runtime,
        )
        if args.workspaces_root:
            root, interval = args.workspaces_root, args.scan_interval
            await serve_root(client, services, root, scan_interval=interval)
            return EXIT_OK
        workspace_id = args.workspace_id or default_workspace_id(args.workspace)
        activities = services.activities_for(args.workspace, workspace_id)
        await run_until_signalled(client, activities, workspace_id=workspace_id)
    return EXIT_OK


def _worker_args_problem(args: argparse.Namespace) -> str | None:
    directory = args.workspaces_root or args.workspace
    if not os.path.isdir(directory):
        what = "workspaces root" if args.workspaces_root else "workspace"
        return f"{what} {directory!r} is not a directory"
    if args.workspaces_root and args.workspace_id:
        return "--workspace-id goes with --workspace (under --workspaces-root ids are names)"
    if args.scan_interval <= 0:
        return f"--scan-interval must be positive (got {args.scan_interval})"
    return None


async def _call(args: argparse.Namespace) -> int:
    from fs_search.worker.embedded import CallOptions, run_call

    arguments: dict[str, object] = {"pattern": args.pattern}
    if args.path is not None:
        arguments["path"] = args.path
    if getattr(args, "include", None) is not None:
        arguments["include"] = args.include
    options = CallOptions(
        tool=args.command,
        arguments=arguments,
        cwd=args.cwd,
        spill=not args.no_spill,
        workspace=args.workspace or os.getcwd(),
        workspace_id=args.workspace_id,
        address=args.address,
        namespace=args.namespace,
        profile=args.profile,
        no_sample=getattr(args, "no_sample", False),
    )
    result = await run_call(options)
    _print(result, as_json=args.json)
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


async def _spill_read(args: argparse.Namespace) -> int:
    from fs_search.activities.errors import SearchError
    from fs_search.activities.render import read_spill_text
    from fs_search.activities.storage import storage_for

    try:
        req = ReadSpillRequest.checked(
            {"locator": args.locator, "offset": args.offset, "limit": args.limit}
        )
    except ArgumentProblem as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_TOOL_ERROR
    config = FsSearchConfig.load(overrides={"sample_over_cap_glob_results": False})
    storage = storage_for(config)
    try:
        page = await storage.artifacts.read(req.locator, offset=req.offset, limit=req.limit)
    except SearchError as e:
        print(f"Error: {e.message}", file=sys.stderr)
        return EXIT_TOOL_ERROR
    finally:
        await storage.close()
    print(read_spill_text(page))
    return EXIT_OK


def _print(result: ToolResult, *, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        print(result.text)


def run() -> None:
    """Console-script entry: run, flush, and leave without interpreter finalisation.

    Temporal's core threads can still be calling back into Python while the interpreter
    finalises, which can abort the process after its work is done; everything has been
    shut down and flushed by then, so exit directly.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
