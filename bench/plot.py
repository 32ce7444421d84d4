"""The bench table as an SVG chart: each row's result against its target (standard library only).

    python bench/plot.py [docs/performance.md] [docs/assets/bench.svg]

Reads the first table whose header starts ``| row |`` (the table ``bench/run`` prints and
docs/performance.md publishes) and draws one bar per row: the result as a fraction of its
target, so every bar left of the dashed line (1.0) met its target. A "≤" target is
``result / target``, a "≥" one ``target / result``; a row without a ratio (cancel) is read
from the measure its target names (``p95 ≤ 0.5 s`` and ``p95 262 ms``).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = r"(\d+(?:\.\d+)?)"
LABEL_W, BARS_W, NOTE_W, ROW_H, TOP, SCALE_MAX = 170, 420, 300, 30, 56, 1.25
WIDTH = LABEL_W + BARS_W + NOTE_W


@dataclass(frozen=True)
class Bar:
    label: str
    fraction: float  # result / target (or target / result for a "≥" target): ≤ 1 is met
    note: str


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of the first ``| row |`` table's body rows."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| row |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _seconds(value: str, unit: str) -> float:
    return float(value) / 1000 if unit == "ms" else float(value)


def bar(cells: list[str]) -> Bar:
    """One table row as a bar (see the module docstring)."""
    row, project, _reference, ratio, target = cells[:5]
    label = re.sub(r"\s*\(.*\)$", "", row)
    limit = re.search(rf"([≤≥])\s*{NUMBER}\s*(ms|s)?", target)
    if limit is None:
        raise ValueError(f"no target in {target!r}")
    sign, bound = limit[1], float(limit[2])
    measured = re.match(NUMBER, ratio)
    if measured is not None:
        value = float(measured[1])
        shown = ratio.replace("×", "x")
    else:  # e.g. cancel: "p95 ≤ 0.5 s" against "median 165 ms, p95 262 ms"
        name = target.split()[0]
        found = re.search(rf"{name}\s+{NUMBER}\s*(ms|s)", project)
        if found is None:
            raise ValueError(f"no {name} in {project!r}")
        value = _seconds(found[1], found[2])
        bound = _seconds(limit[2], limit[3] or "s")
        shown = f"{name} {found[1]} {found[2]}"
    fraction = value / bound if sign == "≤" else bound / value
    return Bar(label, fraction, f"{shown} (target {sign} {limit[2]}{limit[3] or ''})")


def svg(bars: list[Bar], title: str) -> str:
    """The chart: one horizontal bar per row, the target at 1.0."""
    height = TOP + ROW_H * len(bars) + 40
    span = BARS_W - 20
    note_x = LABEL_W + BARS_W + 10

    def x(fraction: float) -> float:
        return LABEL_W + span * min(fraction, SCALE_MAX) / SCALE_MAX

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
        '<text x="10" y="40" fill="#555">each row as a fraction of its target: left of the '
        "dashed line (1.0) met it; shorter is better</text>",
    ]
    for i, b in enumerate(bars):
        y = TOP + i * ROW_H
        colour = "#2e7d32" if b.fraction <= 1 else "#c62828"
        out.append(f'<text x="10" y="{y + 19}">{escape(b.label)}</text>')
        out.append(
            f'<rect x="{LABEL_W}" y="{y + 6}" width="{x(b.fraction) - LABEL_W:.1f}" '
            f'height="{ROW_H - 10}" fill="{colour}"/>'
        )
        out.append(
            f'<text x="{note_x}" y="{y + 19}" fill="#333">'
            f"{b.fraction:.2f} of target · {escape(b.note)}</text>"
        )
    bottom = TOP + ROW_H * len(bars)
    out.append(
        f'<line x1="{x(1.0):.1f}" y1="{TOP}" x2="{x(1.0):.1f}" y2="{bottom}" stroke="#000" '
        'stroke-dasharray="5,4"/>'
    )
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0, 1.25):
        out.append(
            f'<text x="{x(tick):.1f}" y="{bottom + 18}" text-anchor="middle" fill="#555">'
            f"{tick:g}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else ROOT / "docs" / "performance.md"
    target = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "assets" / "bench.svg"
    bars = [bar(cells) for cells in table_rows(source.read_text(encoding="utf-8"))]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(svg(bars, "fs-search bench: every row against its target"), "utf-8")
    print(f"wrote {target} ({len(bars)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
