"""Order statistics and the result of one benchmark row."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between order statistics."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    """The median (NaN for no values)."""
    return percentile(values, 50)


def spread(values: Sequence[float]) -> dict[str, float]:
    """min, p10, median, p90, p95, max of ``values`` (rounded for reporting)."""
    return {
        "min": _round(min(values)) if values else math.nan,
        "p10": _round(percentile(values, 10)),
        "median": _round(median(values)),
        "p90": _round(percentile(values, 90)),
        "p95": _round(percentile(values, 95)),
        "max": _round(max(values)) if values else math.nan,
    }


def _round(x: float) -> float:
    return round(x, 3) if math.isfinite(x) else x


def _maybe(x: float | None) -> float | None:
    return None if x is None else _round(x)


@dataclass(frozen=True)
class Target:
    """What a row must reach: ``metric`` ``op`` (``<=``, ``>=``, ``==``) ``value``.

    ``ratio``, ``p95`` and ``max`` are computed from the samples; any other metric (e.g.
    ``missing``, a count) is the row's own ``RowResult.value``.
    """

    metric: str
    op: str
    value: float
    unit: str = ""

    def met(self, x: float | None) -> bool | None:
        """Whether ``x`` reaches the target (None when there is no value)."""
        if x is None or not math.isfinite(x):
            return None
        if self.op == "==":
            return x == self.value
        return x <= self.value if self.op == "<=" else x >= self.value

    def describe(self) -> str:
        """E.g. ``ratio <= 1.5`` or ``p95 <= 1500 ms``."""
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.metric} {self.op} {self.value:g}{unit}"


@dataclass
class RowResult:
    """One row: project and reference samples, the compared metric and whether it is met.

    ``ratio`` is project/reference, except where ``ratio_inverted`` (concurrency:
    sequential/concurrent, i.e. reference/project).
    """

    key: str
    name: str
    units: str
    target: Target
    project: list[float] = field(default_factory=list)
    reference: list[float] | None = None
    ratio_inverted: bool = False
    project_label: str = ""
    reference_label: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    value: float | None = None
    """The value compared with the target, for a metric the row computes itself."""
    summary: str = ""
    """A line printed under the table (what the row found, beyond medians)."""

    @property
    def project_median(self) -> float | None:
        """Median of the project's samples."""
        return median(self.project) if self.project else None

    @property
    def reference_median(self) -> float | None:
        """Median of the reference's samples (None for absolute rows)."""
        return median(self.reference) if self.reference else None

    @property
    def ratio(self) -> float | None:
        """project/reference medians (reference/project when inverted)."""
        p, r = self.project_median, self.reference_median
        if p is None or r is None or p <= 0 or r <= 0:
            return None
        return r / p if self.ratio_inverted else p / r

    @property
    def metric(self) -> float | None:
        """The value compared with the target."""
        if self.target.metric == "ratio":
            return self.ratio
        if self.target.metric == "p95":
            return percentile(self.project, 95) if self.project else None
        if self.target.metric == "max":
            return max(self.project) if self.project else None
        return self.value

    @property
    def met(self) -> bool | None:
        """Whether the target is reached (None when the row produced no value)."""
        return None if self.error else self.target.met(self.metric)

    @property
    def n(self) -> int:
        """Samples per side."""
        return len(self.project)

    def as_json(self) -> dict[str, Any]:
        """The row as the ``--json`` output describes it."""
        ratio = self.ratio
        metric = self.metric if not self.error else None
        return {
            "row": self.name,
            "key": self.key,
            "project_median": _maybe(self.project_median),
            "reference_median": _maybe(self.reference_median),
            "ratio": _maybe(ratio),
            "target": self.target.describe(),
            "metric": _maybe(metric),
            "met": self.met,
            "spreads": {
                "project": spread(self.project) if self.project else None,
                "reference": spread(self.reference) if self.reference else None,
            },
            "units": self.units,
            "n": self.n,
            "project_measures": self.project_label,
            "reference_measures": self.reference_label,
            "summary": self.summary,
            "details": self.details,
            "error": self.error,
            "seconds": round(self.seconds, 1),
        }
