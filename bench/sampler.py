"""The glob sampler's own time and memory on generated listings of 10^4 to 10^6 names.

Run as ``.venv/bin/python bench/sampler.py [--sizes 10000,100000,1000000] [--repeat 5]``.
Pure code, no rg: each listing is an ``rg --files --null`` buffer in some modification
order, and the measure is :func:`glob_names.listing` with ``sample=True`` and the default
cap (100): counting the directories, handing the cap out recursively, picking the names and
rendering the page's display paths. Shapes:

- ``runs``: a checkout's order, each directory's names together (what rg usually lists);
- ``scattered``: the same names in a random order (times spread over the tree);
- ``deep``: scattered names in a deeper tree (8 levels, a few entries per level).

Prints per shape and size the median time over ``--repeat`` runs, ns per name, and the peak
memory ``tracemalloc`` saw in one more run (NumPy's arrays included), as a multiple of the
listing's bytes. The load average is printed first: the machine is shared.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _glob_names as glob_names

ROOT = SearchTarget(run_dir="/w", file_arg=None, prefix="", root=".")
CAP = 100


def runs(n: int, rng: random.Random) -> list[bytes]:
    """About 100 names a directory, two levels, each directory's names together."""
    dirs = max(n // 100, 1)
    tops = max(int(dirs**0.5), 1)
    names = [b"p%03d/m%04d/f%07d.ts" % (d % tops, d, i) for d in range(dirs) for i in range(100)]
    return names[:n]


def scattered(n: int, rng: random.Random) -> list[bytes]:
    names = runs(n, rng)
    rng.shuffle(names)
    return names


def deep(n: int, rng: random.Random) -> list[bytes]:
    names = []
    for i in range(n):
        parts = [b"d%d" % rng.randrange(3) for _ in range(rng.randrange(1, 9))]
        names.append(b"/".join([*parts, b"f%07d" % i]))
    return names


SHAPES: dict[str, Callable[[int, random.Random], list[bytes]]] = {
    "runs": runs,
    "scattered": scattered,
    "deep": deep,
}


def once(raw: bytes) -> float:
    names = bytearray(raw)
    gc.collect()
    started = time.perf_counter()
    glob_names.listing(names, ROOT, cap=CAP, sample=True, every=False)
    return time.perf_counter() - started


def peak(raw: bytes) -> int:
    names = bytearray(raw)
    gc.collect()
    tracemalloc.start()
    try:
        glob_names.listing(names, ROOT, cap=CAP, sample=True, every=False)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'shape':<10} {'names':>9} {'MB':>6} {'median ms':>10} {'ns/name':>8} {'peak/raw':>9}")
    for shape in args.shapes.split(","):
        for n in map(int, args.sizes.split(",")):
            raw = b"".join(name + b"\0" for name in SHAPES[shape](n, random.Random(46)))
            times = [once(raw) for _ in range(args.repeat)]
            ms = statistics.median(times) * 1000
            print(
                f"{shape:<10} {n:>9} {len(raw) / 1e6:>6.1f} {ms:>10.1f} "
                f"{ms * 1e6 / n:>8.0f} {peak(raw) / len(raw):>9.2f}"
            )


if __name__ == "__main__":
    main()
