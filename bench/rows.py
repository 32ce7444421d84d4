"""The benchmark's rows: each measures the project against its reference, interleaved.

Every row warms each side up once, then alternates project and reference samples
(A B A B ...) and checks each result, so a wrong answer fails the row instead of
producing a fast number.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import random
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import corpus as c
import procs
import queued
import references
from flows import (
    Call,
    CallsWorkflow,
    CancelOneWorkflow,
    NoopWorkflow,
    PlainRg,
    PlainRgWorkflow,
    Spec,
)
from harness import Env, child_worker
from stats import RowResult, Target, median, percentile, spread

from fs_search.activities._budget import DEFAULT_SCHEDULE_TO_START
from fs_search.activities._contract import ErrorCode, GlobResult, GrepResult, ToolResult
from fs_search.activities.rg import for_grep

Sample = Callable[[], Awaitable[float]]
MS = 1000.0
MB = 1e6
CANCEL_WAIT_S = 30.0


NAMES = {
    "small": "small grep",
    "heavy": "output-heavy grep",
    "overflow": "overflow",
    "glob": "big glob",
    "concurrency": "concurrency",
    "memory": "memory",
    "globmem": "glob memory",
    "cancel": "cancel",
    "queueing": "queueing",
    "unknown": "unknown workspace",
}
PARTS = {
    "small": {"small"},
    "heavy": {"heavy"},
    "overflow": {"overflow"},
    "glob": {"glob"},
    "concurrency": {"mid"},
    "memory": {"small", "mid", "heavy"},
    "globmem": {"glob", "globmem"},
    "cancel": {"cancel"},
    "queueing": set(),  # fresh files of its own, next to the corpus (queued.slow_files)
    "unknown": set(),
}
TARGETS = {
    "small": Target("ratio", "<=", 1.05),
    "heavy": Target("ratio", "<=", 0.6),
    "overflow": Target("ratio", "<=", 0.75),
    "glob": Target("ratio", "<=", 1.0),
    "concurrency": Target("ratio", ">=", 1.6),
    "memory": Target("ratio", "<=", 3.0),
    "globmem": Target("ratio", "<=", 2.0),
    "cancel": Target("p95", "<=", 500, "ms"),
    "queueing": Target("missing", "==", 0),
    "unknown": Target("max", "<=", 10, "s"),
}


class WrongResult(AssertionError):
    """A side of a row returned something other than what the corpus holds."""


@dataclass
class Context:
    """What every row needs: the running env, the corpus, rg, and the repetition counts."""

    env: Env
    corpus: c.Corpus
    rg: str
    quick: bool
    log: Callable[[str], None]
    seed: int = c.SEED
    counts: dict[str, int] = field(default_factory=dict)

    def n(self, key: str) -> int:
        """Measured pairs (or trials) for a row."""
        return self.counts[key]


FULL_COUNTS = {
    "small": 30,
    "heavy": 9,
    "overflow": 9,
    "glob": 9,
    "concurrency": 5,
    "memory": 3,
    "globmem": 3,
    "cancel": 20,
    "queueing": 64,  # calls, all at once
    "unknown": 3,
}
QUICK_COUNTS = {
    "small": 10,
    "heavy": 3,
    "overflow": 3,
    "glob": 3,
    "concurrency": 2,
    "memory": 2,
    "globmem": 2,
    "cancel": 10,
    "queueing": 32,
    "unknown": 2,
}


async def interleave(
    project: Sample, reference: Sample, n: int, *, warmup: int = 1
) -> tuple[list[float], list[float]]:
    """Warm up each side ``warmup`` times, then take ``n`` samples of each, A B A B ..."""
    for _ in range(warmup):
        await project()
        await reference()
    ps: list[float] = []
    rs: list[float] = []
    for _ in range(n):
        ps.append(await project())
        rs.append(await reference())
    return ps, rs


def _row(key: str, **fields: Any) -> RowResult:
    return RowResult(key=key, name=NAMES[key], target=TARGETS[key], **fields)


def _one(results: list[ToolResult]) -> ToolResult:
    if len(results) != 1:
        raise WrongResult(f"expected one result, got {len(results)}")
    return results[0]


def _grep_ok(result: ToolResult, *, total: int, spilled: bool) -> GrepResult:
    if result.is_error or not isinstance(result.result, GrepResult):
        raise WrongResult(f"grep failed: {result.text[:300]}")
    grep = result.result
    if grep.total != total:
        raise WrongResult(f"grep found {grep.total} matches, the corpus has {total}")
    if spilled and grep.spill is None:
        raise WrongResult(f"grep over the cap was not spilled: {grep.spill_error}")
    return grep


def _drop_spill(result: ToolResult) -> None:
    """Remove a spill artifact (outside the timing) so the store does not grow."""
    inner = result.result
    if isinstance(inner, GrepResult | GlobResult) and inner.spill is not None:
        with contextlib.suppress(OSError):
            os.unlink(inner.spill.locator)


# --- rows ---------------------------------------------------------------------------


async def small_grep(ctx: Context) -> RowResult:
    """``fs_search.grep`` with ~10 matches vs a plain rg activity (same rg argv, asyncio
    subprocess, stdout returned; its own queue in the same worker process); a no-op
    activity round trip is measured alongside (``details.noop``)."""
    env = ctx.env
    spec = env.spec(Call(tool="grep", arguments={"pattern": c.SMALL_PATTERN}, cwd="small"))
    plain = PlainRg(
        argv=for_grep(c.SMALL_PATTERN, rg=env.activities.rg.path or ctx.rg),
        cwd=str(ctx.corpus.workspace / "small"),
        task_queue=env.plain_queue,
    )
    noops: list[float] = []
    # Each side's activity alone (history ActivityTaskStarted -> Completed): the time the
    # project controls, without Temporal's round trips.
    activity: dict[str, list[float]] = {"project": [], "reference": []}

    async def project() -> float:
        seconds, activity_s, results = await env.timed_activity(CallsWorkflow, spec)
        _grep_ok(_one(results), total=ctx.corpus.small_matches, spilled=False)
        activity["project"].append(activity_s * MS)
        return seconds * MS

    async def reference() -> float:
        seconds, activity_s, out = await env.timed_activity(PlainRgWorkflow, plain)
        activity["reference"].append(activity_s * MS)
        found = out.count('"type":"match"')
        if found != ctx.corpus.small_matches:
            raise WrongResult(f"plain rg found {found} matches, want {ctx.corpus.small_matches}")
        seconds_noop, results = await env.timed(NoopWorkflow, spec)
        if _one(results).is_error:
            raise WrongResult(f"noop failed: {results[0].text[:300]}")
        noops.append(seconds_noop * MS)
        return seconds * MS

    ps, rs = await interleave(project, reference, ctx.n("small"))
    return _row(
        "small",
        units="ms",
        project=ps,
        reference=rs,
        project_label=f"workflow -> fs_search.grep ({ctx.corpus.small_matches} matches) -> result",
        reference_label=(
            "same workflow kind -> plain rg activity (same argv, asyncio subprocess, stdout "
            "returned; own queue, same worker process) -> result"
        ),
        details={
            "noop": spread(noops[1:]) if len(noops) > 1 else None,
            "activity_ms": {k: spread(v[1:]) for k, v in activity.items()},
            "activity_ratio": round(
                median(activity["project"][1:]) / median(activity["reference"][1:]), 3
            ),
        },
        summary=(
            f"activity alone (history events): {median(activity['project'][1:]):.1f} ms vs "
            f"{median(activity['reference'][1:]):.1f} ms, "
            f"{median(activity['project'][1:]) / median(activity['reference'][1:]):.2f}x"
        ),
    )


async def heavy_grep(ctx: Context) -> RowResult:
    """``fs_search.grep`` with 12-18 MB of raw output (spilled) vs the naive consumer."""
    env = ctx.env
    corpus = ctx.corpus
    spec = env.spec(Call(tool="grep", arguments={"pattern": c.HEAVY_PATTERN}, cwd="heavy"))
    cwd = corpus.workspace / "heavy"

    async def project() -> float:
        seconds, results = await env.timed(CallsWorkflow, spec)
        result = _one(results)
        _grep_ok(result, total=corpus.heavy_matches, spilled=True)
        _drop_spill(result)
        return seconds * MS

    async def reference() -> float:
        gc.collect()
        got = await asyncio.to_thread(references.naive_grep, ctx.rg, c.HEAVY_PATTERN, cwd)
        if got.items != corpus.heavy_matches:
            raise WrongResult(f"reference found {got.items} matches, want {corpus.heavy_matches}")
        return got.seconds * MS

    ps, rs = await interleave(project, reference, ctx.n("heavy"))
    return _row(
        "heavy",
        units="ms",
        project=ps,
        reference=rs,
        project_label="workflow -> fs_search.grep (spill: page + file) -> result",
        reference_label="subprocess rg --json | json.loads every line, keep matches",
        details={"raw_bytes": corpus.heavy_raw_bytes, "matches": corpus.heavy_matches},
    )


async def overflow(ctx: Context) -> RowResult:
    """A grep ending in SEARCH_RAW_OUTPUT_OVERFLOW vs parsing the first 20 MB and killing rg."""
    env = ctx.env
    corpus = ctx.corpus
    cap = env.activities.config.raw_output_max_bytes
    spec = env.spec(Call(tool="grep", arguments={"pattern": c.OVERFLOW_PATTERN}, cwd="overflow"))
    cwd = corpus.workspace / "overflow"

    async def project() -> float:
        seconds, results = await env.timed(CallsWorkflow, spec)
        result = _one(results)
        if result.error is None or result.error.code != ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW:
            raise WrongResult(f"expected SEARCH_RAW_OUTPUT_OVERFLOW, got: {result.text[:300]}")
        return seconds * MS

    async def reference() -> float:
        gc.collect()
        got = await asyncio.to_thread(
            references.naive_overflow, ctx.rg, c.OVERFLOW_PATTERN, cwd, cap
        )
        if got.raw_bytes < cap:
            raise WrongResult(f"reference read only {got.raw_bytes} bytes before rg ended")
        return got.seconds * MS

    ps, rs = await interleave(project, reference, ctx.n("overflow"))
    return _row(
        "overflow",
        units="ms",
        project=ps,
        reference=rs,
        project_label=f"workflow -> fs_search.grep -> SEARCH_RAW_OUTPUT_OVERFLOW at {cap} bytes",
        reference_label=f"subprocess rg --json, parse the first {cap} bytes, kill rg",
        details={"full_raw_bytes": corpus.overflow_raw_bytes, "cap_bytes": cap},
    )


async def big_glob(ctx: Context) -> RowResult:
    """``fs_search.glob`` over 100,000 files vs the naive ``rg --files --sort=modified``."""
    env = ctx.env
    corpus = ctx.corpus
    spec = env.spec(Call(tool="glob", arguments={"pattern": "*.txt"}, cwd="glob"))
    cwd = corpus.workspace / "glob"

    async def project() -> float:
        seconds, results = await env.timed(CallsWorkflow, spec)
        result = _one(results)
        glob = result.result
        if result.is_error or not isinstance(glob, GlobResult):
            raise WrongResult(f"glob failed: {result.text[:300]}")
        if glob.total != corpus.glob_files or glob.spill is None:
            raise WrongResult(f"glob found {glob.total} (spill {glob.spill_error})")
        _drop_spill(result)
        return seconds * MS

    async def reference() -> float:
        gc.collect()
        got = await asyncio.to_thread(references.naive_glob, ctx.rg, cwd)
        if got.items != corpus.glob_files:
            raise WrongResult(f"reference listed {got.items} files, want {corpus.glob_files}")
        return got.seconds * MS

    ps, rs = await interleave(project, reference, ctx.n("glob"))
    return _row(
        "glob",
        units="ms",
        project=ps,
        reference=rs,
        project_label="workflow -> fs_search.glob '*.txt' (sampled page + spill) -> result",
        reference_label="subprocess rg --files --sort=modified, decode, split lines",
        details={"files": corpus.glob_files},
    )


async def concurrency(ctx: Context) -> RowResult:
    """16 mid-size greps gathered in one workflow vs the same 16 one after another."""
    env = ctx.env
    corpus = ctx.corpus
    per_dir = c.MID_FILES * c.MID_MATCHES_PER_FILE
    calls = [
        Call(tool="grep", arguments={"pattern": c.MID_PATTERN}, cwd=d) for d in corpus.mid_dirs
    ]

    async def run(concurrent: bool) -> float:
        spec = env.spec(*calls, concurrent=concurrent)
        seconds, results = await env.timed(CallsWorkflow, spec)
        if len(results) != len(calls):
            raise WrongResult(f"{len(results)} results for {len(calls)} calls")
        for result in results:
            _grep_ok(result, total=per_dir, spilled=True)
            _drop_spill(result)
        return seconds * MS

    async def concurrent() -> float:
        return await run(True)

    async def sequential() -> float:
        return await run(False)

    ps, rs = await interleave(concurrent, sequential, ctx.n("concurrency"))
    return _row(
        "concurrency",
        units="ms",
        project=ps,
        reference=rs,
        ratio_inverted=True,
        project_label=f"{len(calls)} greps gathered in one workflow (all at once on one worker)",
        reference_label=f"the same {len(calls)} greps one after another in one workflow",
        details={
            "calls": len(calls),
            "raw_bytes_each": [min(corpus.mid_raw_bytes), max(corpus.mid_raw_bytes)],
            "ratio_is": "sequential / concurrent",
            "max_concurrent_searches": env.activities.config.max_concurrent_searches,
        },
    )


@dataclass
class Growth:
    """Peak RSS growth (bytes) of a fresh worker process and its digest helpers during a call."""

    worker: float
    helpers: float
    sampled: float
    idle_rss: float
    exact: bool


async def _peak_growth(
    ctx: Context, warm: list[Call], call: Call, check: Callable[[ToolResult], None]
) -> Growth:
    """Start a fresh ``fs-search worker`` process, warm it with ``warm`` (so lazily loaded
    code is in), reset its and its digest helpers' peak RSS (``clear_refs``), run ``call``
    and read each ``VmHWM`` - the RSS before the call. An RSS sampler (5 ms) on the worker
    runs alongside as a cross-check, and replaces ``VmHWM`` where ``clear_refs`` is denied.
    """
    env = ctx.env
    async with child_worker(env) as child:
        wsid = child.workspace_id
        idle = procs.status_kb(child.pid, "VmRSS") * 1024
        for result in await env.execute(CallsWorkflow, env.spec(*warm, workspace_id=wsid)):
            if result.is_error:
                raise WrongResult(f"warm-up failed: {result.text[:300]}")
            _drop_spill(result)
        await asyncio.sleep(0.2)
        pids = [child.pid, *procs.digest_helpers(child.pid)]
        before = {pid: procs.status_kb(pid, "VmRSS") * 1024 for pid in pids}
        exact = all([procs.reset_peak(pid) for pid in pids])
        with procs.RssSampler(child.pid) as sampler:
            results = await env.execute(CallsWorkflow, env.spec(call, workspace_id=wsid))
        peak = {pid: procs.status_kb(pid, "VmHWM") * 1024 for pid in pids}
        result = _one(results)
        check(result)
        _drop_spill(result)
    grown = {pid: max(peak[pid] - before[pid], 0) for pid in pids}
    sampled = max(sampler.peak - before[child.pid], 0)
    return Growth(
        worker=grown[child.pid] if exact else sampled,
        helpers=sum(grown[pid] for pid in pids[1:]),
        sampled=sampled,
        idle_rss=idle,
        exact=exact,
    )


async def memory(ctx: Context) -> RowResult:
    """Peak RSS growth of a worker process during the output-heavy grep vs its raw bytes."""
    corpus = ctx.corpus
    raw = corpus.heavy_raw_bytes
    warm = [
        Call(tool="grep", arguments={"pattern": c.SMALL_PATTERN}, cwd="small"),
        Call(tool="grep", arguments={"pattern": c.MID_PATTERN}, cwd=corpus.mid_dirs[0]),
    ]
    call = Call(tool="grep", arguments={"pattern": c.HEAVY_PATTERN}, cwd="heavy")

    def check(result: ToolResult) -> None:
        _grep_ok(result, total=corpus.heavy_matches, spilled=True)

    trials = [await _peak_growth(ctx, warm, call, check) for _ in range(ctx.n("memory"))]
    return _row(
        "memory",
        units="MB",
        project=[t.worker / MB for t in trials],
        reference=[raw / MB] * len(trials),
        project_label="worker process peak RSS growth during the output-heavy grep",
        reference_label="the grep's raw rg --json output",
        details=_growth_details(trials, raw),
    )


async def glob_memory(ctx: Context) -> RowResult:
    """Peak RSS growth of a worker process and its digest helpers during a glob listing
    ~18 MB of short paths (sampled page + spill) vs the raw ``rg --files`` bytes."""
    corpus = ctx.corpus
    raw = corpus.globmem_raw_bytes
    warm = [Call(tool="glob", arguments={"pattern": "*.txt"}, cwd="glob")]
    call = Call(tool="glob", arguments={"pattern": "*.txt"}, cwd="globmem")

    def check(result: ToolResult) -> None:
        glob = result.result
        if result.is_error or not isinstance(glob, GlobResult):
            raise WrongResult(f"glob failed: {result.text[:300]}")
        if glob.total != corpus.globmem_files or glob.spill is None:
            raise WrongResult(f"glob found {glob.total} (spill {glob.spill_error})")

    trials = [await _peak_growth(ctx, warm, call, check) for _ in range(ctx.n("globmem"))]
    return _row(
        "globmem",
        units="MB",
        project=[(t.worker + t.helpers) / MB for t in trials],
        reference=[raw / MB] * len(trials),
        project_label="worker + digest helpers peak RSS growth during a glob of ~18 MB of paths",
        reference_label="the glob's raw rg --files --null output",
        details={
            "files": corpus.globmem_files,
            "worker_growth_mb": [round(t.worker / MB, 1) for t in trials],
            "helpers_growth_mb": [round(t.helpers / MB, 1) for t in trials],
            **_growth_details(trials, raw),
        },
    )


def _growth_details(trials: list[Growth], raw: int) -> dict[str, Any]:
    exact = all(t.exact for t in trials)
    return {
        "method": "VmHWM after clear_refs" if exact else "psutil RSS sampled every 5 ms",
        "sampled_growth_mb": [round(t.sampled / MB, 1) for t in trials],
        "worker_idle_rss_mb": [round(t.idle_rss / MB, 1) for t in trials],
        "raw_bytes": raw,
    }


async def cancel(ctx: Context) -> RowResult:
    """Cancel request -> rg's process group dead, over trials on a 100 GiB sparse file."""
    env = ctx.env
    executor = env.activities.executor
    spec = env.spec(
        Call(
            tool="grep",
            arguments={"pattern": c.CANCEL_PATTERN, "path": "huge.bin"},
            cwd="cancel",
        )
    )
    rng = random.Random(f"{ctx.seed}:cancel")
    latencies: list[float] = []  # until the group no longer exists (reaped)
    dead: list[float] = []  # until no member is alive (zombies may remain)
    unreaped = 0
    n = ctx.n("cancel")
    for trial in range(n + 1):  # the first trial is the warm-up
        if executor.live_process_groups:
            raise WrongResult(
                f"rg groups still running before a trial: {executor.live_process_groups}"
            )
        handle = await env.client.start_workflow(
            CancelOneWorkflow.run,
            spec,
            id=f"bench-cancel-{trial}-{os.getpid()}-{time.time_ns()}",
            task_queue=env.workflow_queue,
        )
        pgid = await _new_group(executor)
        members = await _members(pgid)
        # Cancel at a varying point of the heartbeat cycle (0.2 s beats, 0.5 s throttle).
        await asyncio.sleep(rng.uniform(0.3, 0.8))
        started = time.perf_counter()
        await handle.signal(CancelOneWorkflow.cancel_call)
        end = await asyncio.to_thread(procs.wait_group_end, pgid, members, timeout=CANCEL_WAIT_S)
        result: ToolResult = await handle.result()
        if result.error is None or result.error.code != ErrorCode.SEARCH_ABORTED:
            raise WrongResult(f"cancelled call returned: {result.text[:300]}")
        if trial == 0:
            continue
        dead.append((end.dead - started) * MS)
        if end.reaped is None:  # zombies outlived the wait: count the whole wait
            unreaped += 1
        gone = end.reaped if end.reaped is not None else started + CANCEL_WAIT_S
        latencies.append((gone - started) * MS)
    return _row(
        "cancel",
        units="ms",
        project=latencies,
        project_label="signal cancelling the running call -> rg's process group gone",
        reference_label="(absolute target)",
        details={
            "p95_ms": round(percentile(latencies, 95), 1),
            "no_live_member_p95_ms": round(percentile(dead, 95), 1),
            "trials_with_unreaped_zombies": unreaped,
            "group": "rg alone in its own process group (forked by the launch server)",
        },
    )


async def _new_group(executor: Any, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups = executor.live_process_groups
        if groups:
            return int(groups[0])
        await asyncio.sleep(0.005)
    raise WrongResult("rg never started for the cancel trial")


async def _members(pgid: int, timeout: float = 2.0) -> list[int]:
    """The group's processes once it has one (rg, forked by the launch server)."""
    deadline = time.monotonic() + timeout
    members = procs.group_members(pgid)
    while not members and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
        members = procs.group_members(pgid)
    return members


QUEUE_CAP = 2  # FS_SEARCH_MAX_CONCURRENT_SEARCHES of the queueing row's worker
QUEUE_PER_WORKFLOW = 8  # calls each agent-like workflow gathers
MISSING = "no fs-search worker"


async def queueing(ctx: Context) -> RowResult:
    """``n`` slow greps started at once from workflows with default ``FsSearchTools``
    options, on a worker process running 2 searches at once: the calls reported missing
    (or failed at all), and how long each waited before its rg started."""
    env = ctx.env
    root = ctx.corpus.root / "queueing"
    names = await asyncio.to_thread(queued.slow_files, root, ctx.n("queueing"))
    settings = {"FS_SEARCH_MAX_CONCURRENT_SEARCHES": str(QUEUE_CAP)}
    try:
        async with child_worker(env, workspace=root, settings=settings) as child:
            specs = _queue_specs(env, names, child.workspace_id)
            await _warm_queue(env, child.workspace_id)
            with procs.ChildWatcher(child.pid) as watcher:
                started = time.perf_counter()
                handles = await asyncio.gather(*(env.start(CallsWorkflow, s) for s in specs))
                results = await asyncio.gather(*(h.result() for h in handles))
                makespan = time.perf_counter() - started
            timelines = [t for h in handles for t in await queued.timelines(env.client, h)]
    finally:
        await asyncio.to_thread(shutil.rmtree, root, True)
    flat = [r for rs in results for r in rs]
    waits = queued.waits(timelines, queued.rg_runs(watcher))
    _check_queued(flat, waits)
    return _queueing_row(flat, waits, makespan, workflows=len(specs))


def _queue_specs(env: Env, names: list[str], workspace_id: str) -> list[Spec]:
    calls = [
        Call(tool="grep", arguments={"pattern": queued.SLOW_PATTERN, "path": name})
        for name in names
    ]
    chunks = [calls[i : i + QUEUE_PER_WORKFLOW] for i in range(0, len(calls), QUEUE_PER_WORKFLOW)]
    return [env.spec(*chunk, concurrent=True, workspace_id=workspace_id) for chunk in chunks]


async def _warm_queue(env: Env, workspace_id: str) -> None:
    """One small grep, so the fresh worker's lazily loaded code is in before the flood."""
    call = Call(tool="grep", arguments={"pattern": queued.SLOW_PATTERN, "path": queued.WARM_FILE})
    result = _one(await env.execute(CallsWorkflow, env.spec(call, workspace_id=workspace_id)))
    _grep_ok(result, total=0, spilled=False)


def _check_queued(results: list[ToolResult], waits: queued.Waits) -> None:
    """Calls that succeeded found nothing (the files are holes), and each one's rg was seen."""
    for result in results:
        if not result.is_error:
            _grep_ok(result, total=0, spilled=False)
    ran = sum(not r.is_error for r in results)
    if waits.unseen or len(waits.total) < ran:
        raise WrongResult(f"{ran} calls succeeded, rg seen for {len(waits.total)}")


def _queueing_row(
    results: list[ToolResult], waits: queued.Waits, makespan: float, *, workflows: int
) -> RowResult:
    missing = [r.text for r in results if r.is_error and MISSING in r.text]
    failed = [r.text for r in results if r.is_error]
    total, rg = waits.total, waits.rg
    summary = (
        f"{len(results)} calls: {len(missing)} reported missing, {len(failed)} failed; "
        f"wait p50 {median(total):.1f} s, p95 {percentile(total, 95):.1f} s "
        f"(in Temporal's queue p95 {percentile(waits.in_temporal, 95):.2f} s); "
        f"each rg ran p50 {median(rg):.2f} s; all answered in {makespan:.1f} s"
    )
    return _row(
        "queueing",
        units="s",
        project=total,
        value=float(len(missing)),
        summary=summary,
        project_label=(
            f"each call's wait, first ActivityTaskScheduled (history) -> its rg process "
            f"started in the worker (/proc): {len(results)} greps of a fresh 256 MiB sparse "
            f"file each, from {workflows} workflows at once with default FsSearchTools "
            f"options, one fs-search worker process with max_concurrent_searches={QUEUE_CAP}"
        ),
        details={
            "calls": len(results),
            "workflows": workflows,
            "max_concurrent_searches": QUEUE_CAP,
            "reported_missing": len(missing),
            "failed": len(failed),
            "failures": failed[:3],
            "wait_s": spread(total),
            "in_temporal_queue_s": spread(waits.in_temporal),
            "in_worker_s": spread(waits.in_worker),
            "rg_run_s": spread(rg),
            "rescheduled_calls": waits.rescheduled,
            "retried_calls": waits.retried,
            "all_answered_s": round(makespan, 2),
        },
    )


async def unknown_workspace(ctx: Context) -> RowResult:
    """A grep on a workspace no worker serves, default options: seconds to its
    SEARCH_FAILED 'no fs-search worker is serving workspace ...', end to end."""
    env = ctx.env
    took: list[float] = []
    text = ""
    for _ in range(ctx.n("unknown")):
        wsid = f"bench-nobody-{uuid.uuid4().hex[:8]}"
        call = Call(tool="grep", arguments={"pattern": c.SMALL_PATTERN})
        seconds, results = await env.timed(CallsWorkflow, env.spec(call, workspace_id=wsid))
        text = _one(results).text
        _check_unserved(_one(results), wsid)
        took.append(seconds)
    wait = DEFAULT_SCHEDULE_TO_START.total_seconds()
    return _row(
        "unknown",
        units="s",
        project=took,
        summary=f"reported in {', '.join(f'{s:.1f}' for s in took)} s: {_first_clause(text)}",
        project_label=(
            "workflow -> grep on a workspace nothing serves, default FsSearchTools options "
            f"(schedule-to-start {wait:g} s, then one fs_search.queue_liveness check) -> "
            "SEARCH_FAILED, end to end"
        ),
        details={"schedule_to_start_s": wait, "error_text": text},
    )


def _first_clause(text: str) -> str:
    return text.removeprefix("Error: ").split("; ", 1)[0]


def _check_unserved(result: ToolResult, workspace_id: str) -> None:
    expected = f"no fs-search worker is serving workspace {workspace_id!r}"
    if result.error is None or result.error.code != ErrorCode.SEARCH_FAILED:
        raise WrongResult(f"expected SEARCH_FAILED, got: {result.text[:300]}")
    if expected not in result.text:
        raise WrongResult(f"expected {expected!r}, got: {result.text[:300]}")


ROWS: dict[str, Callable[[Context], Awaitable[RowResult]]] = {
    "small": small_grep,
    "heavy": heavy_grep,
    "overflow": overflow,
    "glob": big_glob,
    "concurrency": concurrency,
    "memory": memory,
    "globmem": glob_memory,
    "cancel": cancel,
    "queueing": queueing,
    "unknown": unknown_workspace,
}


# The same table on the real-shaped repository, in agents' call shapes (repo_rows.py), after
# the first corpus's rows. (Imported here, at the end: repo_rows uses this module's helpers.)
import repo_rows  # noqa: E402

NAMES.update(repo_rows.NAMES)
PARTS.update(repo_rows.PARTS)
TARGETS.update(repo_rows.TARGETS)
FULL_COUNTS.update(repo_rows.FULL_COUNTS)
QUICK_COUNTS.update(repo_rows.QUICK_COUNTS)
ROWS.update(repo_rows.ROWS)
