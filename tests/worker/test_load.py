"""Load: many mixed calls from concurrent workflows against two workers on two workspaces.

CI runs 120 calls; the full 400-call run: ``FS_SEARCH_FULL_LOAD=1 pytest tests/worker/test_load.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from temporalio.worker import Worker

from fs_search.activities._workspace import VCS_DIRS
from tests.helpers import write_tree
from tests.procs import RG, WorkerProcess, rg_processes
from tests.workflows_under_test import MixedCalls, MixedCallsWorkflow

GLOB_CAP, GREP_CAP = 50, 40
WORKER_ENV = {
    "FS_SEARCH_GLOB_MAX_RESULTS": str(GLOB_CAP),
    "FS_SEARCH_GREP_MAX_MATCHES": str(GREP_CAP),
    "FS_SEARCH_MAX_CONCURRENT_SEARCHES": "4",
    "FS_SEARCH_RG_THREADS": "1",
}
EXCLUDE = [f"--glob=!{d}" for d in VCS_DIRS]

MENU = [
    ("glob", {"pattern": "*.py"}),
    ("glob", {"pattern": "d1/**"}),
    ("glob", {"pattern": "*.md", "path": "d2"}),
    ("grep", {"pattern": "alpha"}),
    ("grep", {"pattern": "beta", "include": "*.md"}),
    ("grep", {"pattern": "gam+a", "path": "d0"}),
    ("grep", {"pattern": "("}),
    ("grep", {"pattern": "x", "include": "a,b"}),
    ("glob", {"pattern": "*", "path": "/etc"}),
    ("grep", {"pattern": "alpha", "path": "missing"}),
]
ERRORS = {
    6: "SEARCH_INVALID_PATTERN",
    7: "INVALID_ARGUMENT",
    8: "INVALID_ARGUMENT",
    9: "SEARCH_FAILED",
}


def make_workspace(root: Path, seed: int) -> Path:
    rnd = random.Random(seed)
    files = {}
    for i in range(260):
        ext = rnd.choice(["py", "md", "txt"])
        words = rnd.choices(
            ["alpha", "beta", "gamma", "gammma", "delta", "-flag", "x"], k=rnd.randint(1, 12)
        )
        files[f"d{i % 5}/sub{i % 3}/f{i:03}.{ext}"] = "\n".join(words) + "\n"
    files[".git/config"] = "alpha beta\n"
    return write_tree(root, files)


def expected(ws: Path, tool: str, args: dict) -> list:
    """What a direct rg run says: glob paths (mtime order) or sorted (path, line) pairs."""
    path = args.get("path")
    cwd = ws / path if path else ws
    prefix = f"{path}/" if path else ""
    if tool == "glob":
        out = subprocess.run(
            [
                RG,
                "--no-config",
                "--files",
                "--sort=modified",
                "--no-ignore",
                "--hidden",
                f"--glob={args['pattern']}",
                *EXCLUDE,
            ],
            cwd=cwd,
            capture_output=True,
            text=True,
        )
        return [prefix + p for p in out.stdout.splitlines()]
    argv = [RG, "--no-config", "--json", "--hidden", *EXCLUDE, "-e", args["pattern"]]
    if args.get("include"):
        argv.insert(3, f"--glob={args['include']}")
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    pairs = []
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg["type"] == "match":
            pairs.append((prefix + msg["data"]["path"]["text"], msg["data"]["line_number"]))
    return sorted(pairs, key=lambda p: (p[0].split("/"), p[1]))


def check(result, ws: Path, index: int, tool: str, args: dict, truth: dict) -> None:
    if index in ERRORS:
        assert result.is_error and result.error.code == ERRORS[index], (tool, args, result.text)
        return
    assert not result.is_error, (tool, args, result.text)
    want = truth[index]
    r = result.result
    assert r.total == len(want), (tool, args)
    if tool == "glob":
        assert r.paths == want[:GLOB_CAP]
        if r.truncated:
            assert Path(r.spill.locator).read_text().splitlines() == want
    else:
        assert [(m.path, m.line_number) for m in r.matches] == want[:GREP_CAP]
        if r.truncated:
            assert Path(r.spill.locator).read_text().count("  Line ") == len(want)


async def _load(dev_env, tmp_path: Path, total_calls: int) -> None:
    address = dev_env.client.service_client.config.target_host
    spaces = {
        f"load-a-{uuid.uuid4().hex[:6]}": make_workspace(tmp_path / "a", 1),
        f"load-b-{uuid.uuid4().hex[:6]}": make_workspace(tmp_path / "b", 2),
    }
    truths = {
        wsid: {i: expected(ws, t, a) for i, (t, a) in enumerate(MENU) if i not in ERRORS}
        for wsid, ws in spaces.items()
    }
    env = {**WORKER_ENV, "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    workers = [
        WorkerProcess(ws, address, wsid, env=env, args=("--no-sample-over-cap-glob-results",))
        for wsid, ws in spaces.items()
    ]
    rnd = random.Random(7)
    plan = [(rnd.choice(list(spaces)), rnd.randrange(len(MENU))) for _ in range(total_calls)]
    per_workflow = [plan[i::8] for i in range(8)]
    queue = f"load-{uuid.uuid4()}"
    try:
        async with Worker(
            dev_env.client,
            task_queue=queue,
            workflows=[MixedCallsWorkflow],
            max_concurrent_workflow_tasks=8,
        ):
            # Warm up, then take each worker's baseline memory.
            await dev_env.client.execute_workflow(
                MixedCallsWorkflow.run,
                MixedCalls(calls=[(w, *MENU[i]) for w in spaces for i in range(len(MENU))]),
                id=f"warm-{uuid.uuid4()}",
                task_queue=queue,
            )
            baseline = [w.rss() for w in workers]
            started = time.monotonic()
            outcomes = await asyncio.gather(
                *[
                    dev_env.client.execute_workflow(
                        MixedCallsWorkflow.run,
                        MixedCalls(calls=[(w, *MENU[i]) for w, i in chunk]),
                        id=f"load-{n}-{uuid.uuid4()}",
                        task_queue=queue,
                    )
                    for n, chunk in enumerate(per_workflow)
                ]
            )
            elapsed = time.monotonic() - started
        answered = 0
        for chunk, results in zip(per_workflow, outcomes, strict=True):
            assert len(results) == len(chunk)
            for (wsid, i), result in zip(chunk, results, strict=True):
                check(result, spaces[wsid], i, *MENU[i], truths[wsid])
                answered += 1
        assert answered == total_calls
        await asyncio.sleep(0.5)
        assert rg_processes(cwd_under=tmp_path) == []
        after = [w.rss() for w in workers]
        for before, now in zip(baseline, after, strict=True):
            assert now < before + 64 * 1024 * 1024, (before, now)
        print(f"{total_calls} calls in {elapsed:.1f} s; worker RSS {baseline} -> {after}")
    finally:
        for w in workers:
            assert w.terminate() == 0
    assert rg_processes(cwd_under=tmp_path) == []


async def test_load_short(dev_env, tmp_path):
    """120 mixed calls (some over cap, some invalid) from 8 workflows on 2 workers all answer correctly."""
    await _load(dev_env, tmp_path, 120)


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("FS_SEARCH_FULL_LOAD"),
    reason="set FS_SEARCH_FULL_LOAD=1 for the full load run",
)
async def test_load_full(dev_env, tmp_path):
    """The full run: 400 mixed calls from 8 concurrent workflows against 2 workers."""
    await _load(dev_env, tmp_path, 400)
