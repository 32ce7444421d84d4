"""Machine description, the results table and the JSON rows."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from corpus import rg_version
from stats import RowResult, percentile


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine(rg: str, repo: Path) -> dict[str, Any]:
    """CPU, cores, Python, rg, temporalio, the repository revision and the load average."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    revision = _git(repo, "rev-parse", "--short", "HEAD")
    dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "rg": rg_version(rg),
        "rg_path": rg,
        "temporalio": _version("temporalio"),
        "platform": platform.platform(),
        "revision": f"{revision}{' (modified)' if dirty else ''}" if revision else None,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _git(repo: Path, *args: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def header(info: dict[str, Any]) -> list[str]:
    """The header lines describing the machine."""
    return [
        f"machine: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), "
        f"load {' '.join(str(x) for x in info['loadavg_at_start'])}",
        f"python: {info['python']}; {info['rg']}; temporalio {info['temporalio']}; "
        f"revision {info['revision'] or '?'}",
        f"platform: {info['platform']}  ({sys.executable})",
    ]


def _num(x: float | None, unit: str) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if unit == "MB":
        return f"{x:.1f}"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}"


def _spread(values: list[float] | None, unit: str) -> str:
    if not values:
        return ""
    return f"[{_num(percentile(values, 10), unit)}-{_num(percentile(values, 90), unit)}]"


def _metric(row: RowResult) -> str:
    value = row.metric
    if value is None:
        return "-"
    if row.target.metric == "ratio":
        return f"{value:.2f}"
    if not row.target.unit:  # a count
        return f"{row.target.metric} {value:g}"
    return f"{row.target.metric} {_num(value, row.units)}"


def table(rows: list[RowResult]) -> str:
    """The results as a fixed-width table (medians, p10-p90, ratio, target, met)."""
    head = [
        "row",
        "unit",
        "project",
        "[p10-p90]",
        "reference",
        "[p10-p90]",
        "ratio",
        "target",
        "met",
        "n",
    ]
    lines = [head]
    for row in rows:
        met = {True: "yes", False: "NO", None: "-"}[row.met]
        if row.error:
            met = "ERROR"
        lines.append(
            [
                row.name,
                row.units,
                _num(row.project_median, row.units),
                _spread(row.project, row.units),
                _num(row.reference_median, row.units),
                _spread(row.reference, row.units),
                _metric(row),
                row.target.describe(),
                met,
                str(row.n),
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    right = {2, 4, 6}
    out = []
    for line in lines:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(line)
        ]
        out.append("  ".join(cells).rstrip())
    notes = [note for row in rows if not row.error for note in _notes(row)]
    errors = [f"  {row.name}: ERROR {row.error}" for row in rows if row.error]
    extra = [
        "ratio = project/reference median (concurrency: sequential/concurrent); "
        "cancel compares the p95 of the project's latencies, queueing the calls reported "
        "missing, unknown workspace the slowest report.",
        *notes,
        *errors,
    ]
    return "\n".join(out + [""] + extra)


def _notes(row: RowResult) -> list[str]:
    measures = f"project = {row.project_label}"
    if row.reference_label:
        measures += f"; reference = {row.reference_label}"
    notes = [f"  {row.name}: {measures}"]
    if row.summary:
        notes.append(f"  {row.name}: {row.summary}")
    return notes
