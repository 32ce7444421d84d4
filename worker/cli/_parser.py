"""The ``fs-search`` command line's arguments (pure argparse; ``_main.py`` runs the commands).

Light on purpose: ``--version`` and ``--help`` end here, so this module loads neither
pydantic nor temporalio (tests/worker/cli/test_start_up.py holds it to that).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from fs_search.activities import DISTRIBUTION, clash_warning, installed_version
from fs_search.worker._connect import DEFAULT_CONNECT_TIMEOUT

# ``spill read``'s page, as ReadSpillRequest defines it (tests/worker/cli/test_main.py checks
# them against the model; read here without loading the contract's pydantic models).
SPILL_PAGE_OFFSET = 0
SPILL_PAGE_LINES = 2000


def version_line() -> str:
    """What ``fs-search --version`` prints: the distribution and its version."""
    found = installed_version(DISTRIBUTION)
    if found is None:  # run from a source tree that is not installed
        return f"fs-search ({DISTRIBUTION}, not installed)"
    return f"fs-search ({DISTRIBUTION}) {found}"


class _Version(argparse.Action):
    """``--version``: the line on stdout and, when another distribution claims
    ``fs_search`` or the command (the registry's ``fs-search``), a warning on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print the version and the distribution, then exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_line(), flush=True)
        warning = clash_warning()
        if warning:
            print(warning, file=sys.stderr, flush=True)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fs-search",
        description="ripgrep-backed glob and grep tools as Temporal activities.",
        epilog=(
            "Temporal connection: --address, else TEMPORAL_ADDRESS, else the envconfig profile "
            "(--profile / TEMPORAL_PROFILE in TEMPORAL_CONFIG_FILE), as every Temporal tool. "
            "`fs-search dev --env-file .fs-search.env` writes a local stack's settings; "
            "`fs-search --env-file .fs-search.env grep ...` (or any command) reads them."
        ),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("-V", "--version", action=_Version)
    env_file_arg(parser, default=None)
    sub = parser.add_subparsers(dest="command", required=True)

    w = sub.add_parser("worker", help="run the worker for one workspace, or for all on a host")
    w.set_defaults(subparser=w)
    where = w.add_mutually_exclusive_group(required=True)
    where.add_argument("--workspace", help="the one directory this worker searches")
    where.add_argument(
        "--workspaces-root",
        metavar="DIR",
        help="serve every direct subdirectory of DIR named by a valid id, on fs-search/<name>",
    )
    w.add_argument("--workspace-id", help="queue id (default: derived from host and path)")
    fleet_args(w)
    w.add_argument(
        "--nexus-queue",
        metavar="QUEUE",
        help="also serve the fs_search Nexus service on QUEUE, an endpoint's target, for "
        "callers in other namespaces (default: FS_SEARCH_NEXUS_QUEUE; none)",
    )
    operating_args(w)
    connection_args(w, fallback=", then localhost:7233")
    env_file_arg(w)
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
        t.set_defaults(subparser=t)
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
        t.add_argument(
            "--workspace-id",
            help="address mode: the worker's workspace id (needs a Temporal address: "
            "--address, TEMPORAL_ADDRESS or a profile)",
        )
        t.add_argument(
            "--host",
            help="address mode: the host serving the workspace on fs-search-host/<host> "
            "(a worker run with --queues host|both)",
        )
        connection_args(t)
        env_file_arg(t)

    d = sub.add_parser(
        "dev", help="run a local stack: Temporal dev server + UI, SeaweedFS S3, a worker"
    )
    d.set_defaults(subparser=d)
    where = d.add_mutually_exclusive_group()
    where.add_argument("--workspace", default=".", help="the directory searched (default: .)")
    where.add_argument(
        "--workspaces-root",
        metavar="DIR",
        help="serve every direct subdirectory of DIR named by a valid id, as `fs-search "
        "worker --workspaces-root` does (instead of one --workspace)",
    )
    d.add_argument("--workspace-id", help="queue id (default: derived from host and path)")
    fleet_args(d)
    d.add_argument("--data-dir", help="where S3 keeps its data (default: a temporary directory)")
    d.add_argument(
        "--port",
        type=int,
        help="Temporal's gRPC port (default: 7233, or a free port when 7233 is taken)",
    )
    d.add_argument(
        "--ui-port",
        type=int,
        help="the Temporal UI's port (default: 8233, or a free port when 8233 is taken)",
    )
    d.add_argument(
        "--env-file",
        dest="write_env_file",
        metavar="PATH",
        help="write the callers' settings (TEMPORAL_ADDRESS, FS_SEARCH_*, AWS_*) there as "
        "KEY=VALUE lines, for `fs-search --env-file PATH ...`, docker --env-file or "
        "`set -a; . PATH`",
    )
    d.add_argument(
        "--no-sample-over-cap-glob-results",
        dest="no_sample",
        action="store_true",
        help="keep the mtime-ordered head of over-cap globs instead of sampling",
    )

    spill = sub.add_parser("spill", help="spill artifacts")
    spill.set_defaults(subparser=spill)
    spill_sub = spill.add_subparsers(dest="spill_command", required=True)
    r = spill_sub.add_parser("read", help="print a page of a spill artifact")
    r.set_defaults(subparser=r)
    r.add_argument("locator")
    env_file_arg(r)
    r.add_argument(
        "--offset",
        type=int,
        default=SPILL_PAGE_OFFSET,
        help=f"first line, 0-based (default: {SPILL_PAGE_OFFSET})",
    )
    r.add_argument(
        "--limit",
        type=int,
        default=SPILL_PAGE_LINES,
        help=f"number of lines (default and at most: {SPILL_PAGE_LINES})",
    )
    return parser


def fleet_args(p: argparse.ArgumentParser) -> None:
    """The options of a process serving every workspace under a root."""
    p.add_argument(
        "--scan-interval",
        type=float,
        metavar="S",
        help=(
            "with --workspaces-root: seconds between scans for new and removed workspaces where "
            "the root is scanned (no filesystem events, or a network filesystem); with events, "
            "between checks of the entries that are links (default: the fleet's, 2)"
        ),
    )
    p.add_argument(
        "--queues",
        choices=("workspace", "host", "both"),
        help=(
            "with --workspaces-root: poll fs-search/<workspace> per workspace (default), "
            "the host's one queue fs-search-host/<host-id>, or both (default: FS_SEARCH_QUEUES)"
        ),
    )
    p.add_argument(
        "--host-id",
        help="this host's id (default: FS_SEARCH_HOST_ID, then the host name)",
    )


def operating_args(p: argparse.ArgumentParser) -> None:
    """A worker's probes, metrics and drain (docs/operating.md)."""
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve /livez, /readyz and /metrics (Prometheus) there (default: FS_SEARCH_HTTP; "
        "none)",
    )
    p.add_argument(
        "--drain-timeout",
        type=float,
        metavar="S",
        help="on SIGTERM, seconds running calls have to finish before they are cancelled and "
        "retried elsewhere (default: FS_SEARCH_DRAIN_TIMEOUT, then 25)",
    )
    p.add_argument(
        "--metrics-per-workspace",
        action="store_true",
        default=None,
        help="with --workspaces-root: label the call counters with each workspace's id (one "
        "series per workspace; default: FS_SEARCH_METRICS_PER_WORKSPACE, then off)",
    )


def connection_args(p: argparse.ArgumentParser, *, fallback: str = "") -> None:
    p.add_argument(
        "--address",
        help="Temporal address HOST:PORT "
        f"(default: TEMPORAL_ADDRESS, then the profile's{fallback})",
    )
    p.add_argument(
        "--namespace", help="Temporal namespace (default: TEMPORAL_NAMESPACE, then the profile's)"
    )
    p.add_argument(
        "--profile",
        help="temporalio envconfig profile (default: TEMPORAL_PROFILE, then 'default') "
        "in TEMPORAL_CONFIG_FILE or the user's Temporal config file",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        metavar="S",
        default=DEFAULT_CONNECT_TIMEOUT.total_seconds(),
        help="seconds to wait for the Temporal server to answer "
        f"(default: {DEFAULT_CONNECT_TIMEOUT.total_seconds():g})",
    )


def env_file_arg(p: argparse.ArgumentParser, default: object = argparse.SUPPRESS) -> None:
    # Before or after the command: a subcommand's option must not reset the global one.
    p.add_argument(
        "--env-file",
        metavar="PATH",
        default=default,
        help="read KEY=VALUE lines (as `fs-search dev --env-file` writes them) into the "
        "environment before anything else; variables already set win",
    )


def attach_regexp(argv: list[str]) -> list[str]:
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
