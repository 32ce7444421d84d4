"""How straight one call's path is: the fs-search modules and functions one in-process glob and
one grep pass through, and how often a return goes back into a module the call had left.

    .venv/bin/python bench/trace_calls.py [--show]

Each tool runs once to warm up (imports, rg probed), then once under ``sys.setprofile`` (this
thread; rg's own process and any worker thread are not traced) over a small tree in a temp
directory. Counted: Python frames whose module is ``fs_search.*``. ``modules`` and ``functions``
are the distinct ones entered; ``returns`` counts the return events whose caller frame is in
another fs-search module (the path steps back into a module it had left). A coroutine's every
resume is a call and every suspension a return, so the numbers compare runs of this script, not
other tracers. The returns are a median of five traced runs. ``--show`` prints the modules and functions.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from temporalio.testing import ActivityEnvironment

from fs_search.activities import FsSearchConfig, Storage
from fs_search.activities.storage import FileSpillStore
from fs_search.worker import build_activities
from fs_search.workflows import GlobRequest, GrepRequest

TREE = {
    "src/app/main.py": "def main():\n    # TODO: wire\n    return 1\n",
    "src/app/util.py": "def util():\n    pass  # TODO later\n",
    "src/lib.rs": "fn lib() {}\n",
    "docs/guide.md": "TODO: write the guide\nsecond line\n",
    "README.md": "readme TODO\n",
}

# Suspensions depend on timing: the returns are the median of a few runs.
RUNS = 5


def _module(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) and name.startswith("fs_search.") else None


class Trace:
    def __init__(self) -> None:
        self.functions: Counter[str] = Counter()
        self.modules: set[str] = set()
        self.returns = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        module = _module(frame)
        if module is None:
            return
        if event == "call":
            self.modules.add(module)
            self.functions[f"{module}.{frame.f_code.co_qualname}"] += 1
        elif event == "return":
            caller = _module(frame.f_back)
            if caller is not None and caller != module:
                self.returns += 1


async def traced(activity: Any, request: Any) -> Trace:
    env = ActivityEnvironment()
    await env.run(activity, request)  # warm
    trace = Trace()
    sys.setprofile(trace)
    try:
        await env.run(activity, request)
    finally:
        sys.setprofile(None)
    return trace


async def main(show: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        for name, body in TREE.items():
            (ws / name).parent.mkdir(parents=True, exist_ok=True)
            (ws / name).write_text(body)
        config = FsSearchConfig.load(
            getenv=lambda _: None, overrides={"sample_over_cap_glob_results": True}
        )
        store = FileSpillStore(Path(tmp) / "spill", ttl_hours=config.spill_ttl_hours)
        acts = await build_activities(config, ws, storage=Storage.beside(store))
        for label, activity, request in (
            ("glob", acts.glob, GlobRequest(pattern="**/*")),
            ("grep", acts.grep, GrepRequest(pattern="TODO")),
        ):
            runs = [await traced(activity, request) for _ in range(RUNS)]
            t = runs[-1]
            returns = statistics.median(r.returns for r in runs)
            print(
                f"{label}: {len(t.modules)} modules, {len(t.functions)} functions, "
                f"{returns:g} returns into a module already left "
                f"(median of {RUNS}: {sorted(r.returns for r in runs)})"
            )
            if show:
                for module in sorted(t.modules):
                    print(f"  {module}")
                for function, n in sorted(t.functions.items()):
                    print(f"    {n:4d} {function}")


if __name__ == "__main__":
    asyncio.run(main("--show" in sys.argv))
