"""The issue-25 table again on a real-shaped repository (repo_corpus.py), in the call shapes
agents make: the session's cwd is the repository, and calls name a `path` below it or run
with a `cwd` below it, over-cap globs sampled and kept as the head.

Small greps compare the activity's own time (the server's ActivityTaskStarted ->
ActivityTaskCompleted, which leaves out Temporal's round trips, the same for both) with a
plain rg activity's: the alternative a Temporal user writes, naive rg argv (no
``--no-ignore-parent``, so rg reads the repository's .gitignore above the search root as
it would from the root) run with asyncio in the searched directory. The other rows compare
end to end, as on the first corpus. Glob memory is measured with a ``path`` prefix: on the
first corpus's 18 MB listing (large), on the repository's (small, fixed costs count) and on
the big glob's 100,000 names (1.5 MB, sorted by the worker).
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import corpus as c
import references
import repo_corpus as rc
from flows import Call, CallsWorkflow, PlainRg, PlainRgWorkflow
from rows import (
    MS,
    Context,
    WrongResult,
    _drop_spill,
    _grep_ok,
    _growth_details,
    _one,
    _peak_growth,
    interleave,
)
from stats import RowResult, Target, median, spread

from fs_search.activities._contract import GlobResult, ToolResult

MB = 1e6

NAMES = {
    "repo-small-path": "repo: small grep, path (activity time)",
    "repo-small-cwd": "repo: small grep, cwd (activity time)",
    "repo-heavy": "repo: output-heavy grep, path",
    "repo-glob": "repo: big glob, path, sampled",
    "repo-glob-head": "repo: big glob, path, head",
    "repo-glob-cwd": "repo: big glob, cwd, sampled",
    "globmem-path": "glob memory, path (large)",
    "repo-globmem": "repo: glob memory, path (small)",
    "globmem-100k": "glob memory, path (100,000 names)",
}
PARTS = {
    "repo-small-path": {"repo"},
    "repo-small-cwd": {"repo"},
    "repo-heavy": {"repo"},
    "repo-glob": {"repo"},
    "repo-glob-head": {"repo"},
    "repo-glob-cwd": {"repo"},
    "globmem-path": {"glob", "globmem"},
    "repo-globmem": {"repo"},
    "globmem-100k": {"glob"},
}
TARGETS = {
    "repo-small-path": Target("ratio", "<=", 1.3),
    "repo-small-cwd": Target("ratio", "<=", 1.3),
    "repo-heavy": Target("ratio", "<=", 0.6),
    "repo-glob": Target("ratio", "<=", 1.0),
    "repo-glob-head": Target("ratio", "<=", 1.0),
    "repo-glob-cwd": Target("ratio", "<=", 1.0),
    "globmem-path": Target("ratio", "<=", 2.0),
    "repo-globmem": Target("ratio", "<=", 3.0),
    "globmem-100k": Target("ratio", "<=", 3.0),
}
FULL_COUNTS = {
    "repo-small-path": 30,
    "repo-small-cwd": 30,
    "repo-heavy": 9,
    "repo-glob": 9,
    "repo-glob-head": 9,
    "repo-glob-cwd": 9,
    "globmem-path": 3,
    "repo-globmem": 3,
    "globmem-100k": 3,
}
QUICK_COUNTS = {
    "repo-small-path": 10,
    "repo-small-cwd": 10,
    "repo-heavy": 3,
    "repo-glob": 3,
    "repo-glob-head": 3,
    "repo-glob-cwd": 3,
    "globmem-path": 2,
    "repo-globmem": 2,
    "globmem-100k": 2,
}


def _row(key: str, **fields: Any) -> RowResult:
    return RowResult(key=key, name=NAMES[key], target=TARGETS[key], **fields)


def _repo(ctx: Context, *parts: str) -> Path:
    return ctx.corpus.workspace.joinpath(c.REPO_CWD, *parts)


def _small_call(shape: str) -> Call:
    pattern = rc.REPO_SMALL_PATTERN
    if shape == "path":
        return Call(
            tool="grep", arguments={"pattern": pattern, "path": rc.REPO_SMALL_PACKAGE}, cwd="repo"
        )
    return Call(
        tool="grep", arguments={"pattern": pattern}, cwd=f"{c.REPO_CWD}/{rc.REPO_SMALL_PACKAGE}"
    )


async def _small(ctx: Context, key: str, shape: str) -> RowResult:
    """A small grep below the root (``path`` or ``cwd``) vs the plain rg activity, by the
    activities' own time."""
    env = ctx.env
    spec = env.spec(_small_call(shape))
    plain = PlainRg(
        argv=references.grep_argv(env.activities.rg.path or ctx.rg, rc.REPO_SMALL_PATTERN),
        cwd=str(_repo(ctx, rc.REPO_SMALL_PACKAGE)),
        task_queue=env.plain_queue,
    )
    want = ctx.corpus.repo_small_matches
    ends: dict[str, list[float]] = {"project": [], "reference": []}

    async def project() -> float:
        seconds, activity_s, results = await env.timed_activity(CallsWorkflow, spec)
        _grep_ok(_one(results), total=want, spilled=False)
        ends["project"].append(seconds * MS)
        return activity_s * MS

    async def reference() -> float:
        seconds, activity_s, out = await env.timed_activity(PlainRgWorkflow, plain)
        if (found := out.count('"type":"match"')) != want:
            raise WrongResult(f"plain rg found {found} matches, want {want}")
        ends["reference"].append(seconds * MS)
        return activity_s * MS

    ps, rs = await interleave(project, reference, ctx.n(key))
    where = (
        "path=" + rc.REPO_SMALL_PACKAGE if shape == "path" else "cwd=repo/" + rc.REPO_SMALL_PACKAGE
    )
    return _row(
        key,
        units="ms",
        project=ps,
        reference=rs,
        project_label=f"fs_search.grep ({want} matches, {where}): the activity's own time",
        reference_label=(
            "plain rg activity (rg --json --hidden --no-config --no-ignore-global -e PATTERN "
            "in the searched directory, asyncio subprocess, stdout returned): its own time"
        ),
        details={
            "end_to_end_ms": {k: spread(v[1:]) for k, v in ends.items()},
            "measure": "history ActivityTaskStarted -> ActivityTaskCompleted (server clock)",
        },
    )


async def small_path(ctx: Context) -> RowResult:
    """Small grep with ``path`` below the session's root."""
    return await _small(ctx, "repo-small-path", "path")


async def small_cwd(ctx: Context) -> RowResult:
    """Small grep with ``cwd`` below the workspace root."""
    return await _small(ctx, "repo-small-cwd", "cwd")


async def heavy(ctx: Context) -> RowResult:
    """The output-heavy grep with ``path`` (15 MB of rg --json, spilled) vs the naive
    consumer in that directory."""
    env = ctx.env
    corpus = ctx.corpus
    arguments = {"pattern": rc.REPO_HEAVY_PATTERN, "path": rc.REPO_HEAVY_PACKAGE}
    spec = env.spec(Call(tool="grep", arguments=arguments, cwd=c.REPO_CWD))
    cwd = _repo(ctx, rc.REPO_HEAVY_PACKAGE)

    async def project() -> float:
        seconds, results = await env.timed(CallsWorkflow, spec)
        result = _one(results)
        _grep_ok(result, total=corpus.repo_heavy_matches, spilled=True)
        _drop_spill(result)
        return seconds * MS

    async def reference() -> float:
        gc.collect()
        got = await asyncio.to_thread(references.naive_grep, ctx.rg, rc.REPO_HEAVY_PATTERN, cwd)
        if got.items != corpus.repo_heavy_matches:
            raise WrongResult(f"reference found {got.items}, want {corpus.repo_heavy_matches}")
        return got.seconds * MS

    ps, rs = await interleave(project, reference, ctx.n("repo-heavy"))
    return _row(
        "repo-heavy",
        units="ms",
        project=ps,
        reference=rs,
        project_label=f"workflow -> fs_search.grep path={rc.REPO_HEAVY_PACKAGE} (spilled)",
        reference_label="subprocess rg --json in that directory | json.loads every line",
        details={"raw_bytes": corpus.repo_heavy_raw_bytes, "matches": corpus.repo_heavy_matches},
    )


def _glob_check(result: ToolResult, total: int, *, sampled: bool) -> None:
    glob = result.result
    if result.is_error or not isinstance(glob, GlobResult):
        raise WrongResult(f"glob failed: {result.text[:300]}")
    if glob.total != total or glob.spill is None or glob.sampled != sampled:
        raise WrongResult(
            f"glob found {glob.total} of {total}, sampled {glob.sampled} (spill {glob.spill_error})"
        )


async def _glob(ctx: Context, key: str, *, head: bool, shape: str) -> RowResult:
    env = ctx.env
    corpus = ctx.corpus
    pattern = c.REPO_GLOB_PATTERN
    if shape == "path":
        call = Call(
            tool="glob", arguments={"pattern": pattern, "path": c.REPO_GLOB_PATH}, cwd=c.REPO_CWD
        )
    else:
        call = Call(tool="glob", arguments={"pattern": pattern}, cwd=f"repo/{c.REPO_GLOB_PATH}")
    spec = env.spec(call, workspace_id=env.head_workspace_id if head else None)
    cwd = _repo(ctx, c.REPO_GLOB_PATH)
    # Alongside, the literal naive call, which respects the ignore files and skips hidden
    # files: fewer paths (not the glob's answer), so not the row's reference.
    literal: list[float] = []
    literal_items = 0

    async def project() -> float:
        seconds, results = await env.timed(CallsWorkflow, spec)
        result = _one(results)
        _glob_check(result, corpus.repo_glob_files, sampled=not head)
        _drop_spill(result)
        return seconds * MS

    async def reference() -> float:
        nonlocal literal_items
        gc.collect()
        naive = await asyncio.to_thread(
            references.naive_glob, ctx.rg, cwd, pattern, same_files=False
        )
        literal.append(naive.seconds * MS)
        literal_items = naive.items
        gc.collect()
        got = await asyncio.to_thread(references.naive_glob, ctx.rg, cwd, pattern)
        if got.items != corpus.repo_glob_files:
            raise WrongResult(f"reference listed {got.items}, want {corpus.repo_glob_files}")
        return got.seconds * MS

    ps, rs = await interleave(project, reference, ctx.n(key))
    where = f"path={c.REPO_GLOB_PATH}" if shape == "path" else f"cwd=repo/{c.REPO_GLOB_PATH}"
    return _row(
        key,
        units="ms",
        project=ps,
        reference=rs,
        project_label=(
            f"workflow -> fs_search.glob {pattern!r} {where} "
            f"({'head' if head else 'sampled'} page + spill)"
        ),
        reference_label=f"subprocess {' '.join(references.glob_argv('rg', pattern))}, split",
        details={
            "files": corpus.repo_glob_files,
            "raw_bytes": corpus.repo_glob_raw_bytes,
            "literal_naive": {
                "argv": " ".join(references.glob_argv("rg", pattern, same_files=False)),
                "files": literal_items,
                "ms": spread(literal[1:]),
            },
        },
        summary=(
            f"the literal naive call (ignore files respected, no hidden files) lists "
            f"{literal_items} paths in {median(literal[1:]):.0f} ms"
        ),
    )


async def glob_path(ctx: Context) -> RowResult:
    """The repository's big glob with ``path``, sampled."""
    return await _glob(ctx, "repo-glob", head=False, shape="path")


async def glob_head(ctx: Context) -> RowResult:
    """The repository's big glob with ``path``, the head kept (sampling off)."""
    return await _glob(ctx, "repo-glob-head", head=True, shape="path")


async def glob_cwd(ctx: Context) -> RowResult:
    """The repository's big glob with ``cwd`` below the root, sampled."""
    return await _glob(ctx, "repo-glob-cwd", head=False, shape="cwd")


async def _memory(
    ctx: Context, key: str, *, warm: list[Call], call: Call, total: int, raw: int
) -> RowResult:
    def check(result: ToolResult) -> None:
        _glob_check(result, total, sampled=True)

    trials = [await _peak_growth(ctx, warm, call, check) for _ in range(ctx.n(key))]
    return _row(
        key,
        units="MB",
        project=[(t.worker + t.helpers) / MB for t in trials],
        reference=[raw / MB] * len(trials),
        project_label=(
            f"worker + digest helpers peak RSS growth during glob "
            f"{call.arguments['pattern']!r} path={call.arguments['path']} (sampled, spilled)"
        ),
        reference_label="the glob's raw rg --files --null output",
        details={
            "files": total,
            "worker_growth_mb": [round(t.worker / MB, 1) for t in trials],
            "helpers_growth_mb": [round(t.helpers / MB, 1) for t in trials],
            **_growth_details(trials, raw),
        },
    )


async def globmem_path(ctx: Context) -> RowResult:
    """The glob memory row's 18 MB listing, named by ``path`` (every path shown with it)."""
    corpus = ctx.corpus
    return await _memory(
        ctx,
        "globmem-path",
        warm=[Call(tool="glob", arguments={"pattern": "*.txt", "path": "glob"})],
        call=Call(tool="glob", arguments={"pattern": "*.txt", "path": "globmem"}),
        total=corpus.globmem_files,
        raw=corpus.globmem_raw_bytes,
    )


async def repo_globmem(ctx: Context) -> RowResult:
    """The repository's big glob with ``path``: a small output, where fixed costs count."""
    corpus = ctx.corpus
    arguments = {"pattern": c.REPO_GLOB_PATTERN, "path": c.REPO_GLOB_PATH}
    call = Call(tool="glob", arguments=arguments, cwd=c.REPO_CWD)
    return await _memory(
        ctx,
        "repo-globmem",
        warm=[call],
        call=call,
        total=corpus.repo_glob_files,
        raw=corpus.repo_glob_raw_bytes,
    )


async def globmem_100k(ctx: Context) -> RowResult:
    """The big glob's 100,000 names (1.5 MB of output), named by ``path``: a small output,
    where fixed costs count."""
    corpus = ctx.corpus
    raw, names = c.rg_files_size(ctx.rg, ctx.corpus.workspace / "glob", "*.txt")
    if names != corpus.glob_files:
        raise WrongResult(f"rg --files lists {names} names in glob/, not {corpus.glob_files}")
    call = Call(tool="glob", arguments={"pattern": "*.txt", "path": "glob"})
    return await _memory(
        ctx, "globmem-100k", warm=[call], call=call, total=corpus.glob_files, raw=raw
    )


ROWS = {
    "repo-small-path": small_path,
    "repo-small-cwd": small_cwd,
    "repo-heavy": heavy,
    "repo-glob": glob_path,
    "repo-glob-head": glob_head,
    "repo-glob-cwd": glob_cwd,
    "globmem-path": globmem_path,
    "repo-globmem": repo_globmem,
    "globmem-100k": globmem_100k,
}
