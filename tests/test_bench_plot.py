"""bench/plot.py draws the published bench table: the chart cannot go stale or lie."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "performance.md"
CHART = ROOT / "docs" / "assets" / "bench.svg"


def _plot():
    spec = importlib.util.spec_from_file_location("bench_plot", ROOT / "bench" / "plot.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_plot"] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def test_the_chart_is_drawn_from_the_published_table(tmp_path):
    """docs/assets/bench.svg is what bench/plot.py draws from docs/performance.md's table."""
    plot = _plot()
    assert plot.main([str(TABLE), str(tmp_path / "bench.svg")]) == 0
    assert (tmp_path / "bench.svg").read_text() == CHART.read_text(), "run python bench/plot.py"


def test_each_bar_agrees_with_its_rows_verdict():
    """A row marked met (✓) is a bar within its target (≤ 1), one not met is past it."""
    plot = _plot()
    rows = plot.table_rows(TABLE.read_text())
    assert len(rows) >= 8
    for cells in rows:
        bar = plot.bar(cells)
        assert (bar.fraction <= 1) == ("✓" in cells[4]), (cells, bar)
        assert re.escape(bar.label) and bar.label in CHART.read_text()


def test_both_kinds_of_target_and_a_row_without_a_ratio():
    """≤ targets are result/target, ≥ targets target/result, and cancel reads its p95."""
    plot = _plot()
    assert plot.bar(["a", "1 ms", "2 ms", "0.5", "≤ 1.0 ✓"]).fraction == 0.5
    assert plot.bar(["b", "1 ms", "2 ms", "4× faster", "≥ 2 ✓"]).fraction == 0.5
    cancel = plot.bar(["cancel", "median 165 ms, p95 250 ms", "—", "—", "p95 ≤ 0.5 s ✓"])
    assert cancel.fraction == 0.5 and cancel.note.startswith("p95 250 ms")
