"""The project checks itself against rg run another way (issues 38, 46): glob and grep
through a real worker process and Temporal, on real-shaped repositories, give exactly what
rg (15 or later) gives run *in the workspace root* with the search root as its path
argument — every ignore file from the root down applied beneath the search root, the
search root itself searched even where one hides it. The worker runs rg in the search root:
rg 14 applied the parent directories' ignore files wrongly there (and so did a reference
that ran rg the worker's way). Where the search root is not hidden, two more answers that
share no rg run with the worker must agree: the files a walk from the root sees, and, in
trees with ``.gitignore`` files only, git's own ignore engine.

The cases are the call shapes agents make: the whole workspace, ``path`` and ``cwd`` below
the root (into packages, a nested repository, an ignored build directory named explicitly,
a file), absolute paths, ``include`` globs relative to the search root. Each is run with the
kernel sandbox on and off. Results are compared in full (``spill: false``): every path in
order (glob: oldest first), every match's path, line number and whole line.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import Worker

from fs_search.activities.rg._fork_child import landlock_abi
from tests import rg_reference as ref
from tests.monorepo_shapes import SHAPES, directories, git_ignores, git_visible
from tests.procs import WorkerProcess
from tests.real_repo import real_shaped_repo
from tests.workflows_under_test import Calls, CallsWorkflow, Options

PATHS: list[tuple[str | None, str | None]] = [  # (cwd, path)
    (None, None),
    (None, "packages/web"),
    (None, "./packages/web/"),
    (None, "packages/web/src"),
    (None, "packages/api/src/generated"),
    (None, "packages/web/dist"),  # ignored by the root, named explicitly: rg searches it
    (None, "crates/core"),
    (None, "vendor/lib"),
    (None, "vendor/lib/src/deep"),
    (None, "a/b/c"),
    ("packages", "web"),
    ("packages", None),
    ("vendor/lib", "src"),
    ("vendor", "lib/dist"),
    ("packages/web", "src"),
]
GREPS: list[dict[str, Any]] = [
    {"pattern": "needle"},
    {"pattern": "needle", "include": "*.ts"},
    {"pattern": "needle", "include": "src/**"},
    {"pattern": "needle", "include": "*.log"},
    {"pattern": "NEEDLE|Needle"},
]
GLOBS = ["**/*", "*.log", "**/*.ts", "src/**"]


def _cases(ws: Path) -> list[tuple[str | None, str, dict[str, Any]]]:
    cases: list[tuple[str | None, str, dict[str, Any]]] = []
    for cwd, path in [*PATHS, (None, str(ws / "packages/web")), ("packages", str(ws / "vendor"))]:
        for args in GREPS:
            cases.append((cwd, "grep", {**args, **({"path": path} if path else {})}))
        for pattern in GLOBS:
            cases.append((cwd, "glob", {"pattern": pattern, **({"path": path} if path else {})}))
    # A file named explicitly: searched whatever the ignore files say.
    cases.append((None, "grep", {"pattern": "needle", "path": "packages/web/dist/bundle.js"}))
    return cases


SANDBOXES = [
    pytest.param(
        "auto", id="landlock", marks=pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock")
    ),
    pytest.param("off", id="off"),
]


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_glob_and_grep_give_what_rg_gives_from_anywhere(dev_env, tmp_path, rg_bin, sandbox):
    ws = real_shaped_repo(tmp_path / "ws")
    for above in Path(ws).parents:
        for name in (".ignore", ".gitignore", ".rgignore", ".git"):
            assert not (above / name).exists(), f"{above / name} would change rg's answer"
    address = dev_env.client.service_client.config.target_host
    wsid = f"diff-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        ws,
        address,
        wsid,
        env={"FS_SEARCH_SANDBOX": sandbox},
        args=("--no-sample-over-cap-glob-results",),
    )
    cases = _cases(ws)
    by_cwd: dict[str | None, list[int]] = {}
    for i, (cwd, _, _) in enumerate(cases):
        by_cwd.setdefault(cwd, []).append(i)
    results: dict[int, Any] = {}
    try:
        queue = f"diff-caller-{uuid.uuid4()}"
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            for cwd, indexes in by_cwd.items():
                got = await dev_env.client.execute_workflow(
                    CallsWorkflow.run,
                    Calls(
                        options=Options(workspace_id=wsid, cwd=cwd, spill=False, timeout_ms=60_000),
                        calls=[(cases[i][1], cases[i][2]) for i in indexes],
                    ),
                    id=f"diff-{uuid.uuid4()}",
                    task_queue=queue,
                )
                results.update(zip(indexes, got, strict=True))
    finally:
        worker.terminate()
    checked = 0
    for i, (cwd, tool, args) in enumerate(cases):
        result = results[i]
        assert not result.is_error, (cwd, tool, args, result.text)
        path = args.get("path")
        if tool == "grep":
            ours = [(m.path, m.line_number, m.line) for m in result.result.matches]
            want = ref.grep_from_root(rg_bin, ws, cwd, path, args["pattern"], args.get("include"))
            assert ours == want, (cwd, args)
            assert result.result.total == len(want)
        else:
            want_paths = ref.glob_from_root(rg_bin, ws, cwd, path, args["pattern"])
            assert result.result.paths == want_paths, (cwd, args)
        checked += 1
    assert checked == len(cases) > 150
    # The repository is shaped so the ignore files matter from below the root: a grep of
    # packages/web shows its re-included debug.log but not node_modules or dist.
    web = next(
        results[i]
        for i, (cwd, tool, args) in enumerate(cases)
        if cwd is None and tool == "grep" and args == {"pattern": "needle", "path": "packages/web"}
    )
    shown = {m.path for m in web.result.matches}
    assert "packages/web/debug.log" in shown
    assert not any("node_modules" in p or "/dist/" in p or p.endswith(".md") for p in shown)


# Per shape, the include globs agents pass (a name glob and one anchored at the search root).
INCLUDES = {"pnpm": ["*.ts", "src/**"], "cargo": ["*.rs", "src/**"], "python": ["*.py", "src/**"]}


def _shape_cases(name: str, ws: Path) -> list[tuple[str | None, str, dict[str, Any]]]:
    """Every directory as a search root three ways (``path``, ``cwd``, ``cwd`` + ``path``),
    with and without ``include``; globs at some; a file in an ignored directory."""
    cases: list[tuple[str | None, str, dict[str, Any]]] = [(None, "grep", {"pattern": "needle"})]
    includes = INCLUDES[name]
    dirs = directories(ws)
    for i, d in enumerate(dirs):
        parent, _, base = d.rpartition("/")
        cases.append((None, "grep", {"pattern": "needle", "path": d}))
        cases.append((d, "grep", {"pattern": "needle"}))
        if parent:
            cases.append((parent, "grep", {"pattern": "needle", "path": base}))
        include = includes[i % len(includes)]
        cases.append((None, "grep", {"pattern": "needle", "path": d, "include": include}))
        if i % 4 == 0:
            cases.append((None, "glob", {"pattern": "**/*", "path": d}))
    cases.append((None, "grep", {"pattern": "needle", "path": f"./{dirs[-1]}/"}))
    cases.append((None, "grep", {"pattern": "needle", "path": str(ws / dirs[-1])}))
    return cases


async def _run_cases(dev_env, ws: Path, sandbox: str, cases) -> dict[int, Any]:
    address = dev_env.client.service_client.config.target_host
    wsid = f"shape-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        ws,
        address,
        wsid,
        env={"FS_SEARCH_SANDBOX": sandbox},
        args=("--no-sample-over-cap-glob-results",),
    )
    by_cwd: dict[str | None, list[int]] = {}
    for i, (cwd, _, _) in enumerate(cases):
        by_cwd.setdefault(cwd, []).append(i)
    results: dict[int, Any] = {}
    try:
        queue = f"shape-caller-{uuid.uuid4()}"
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            # A few cwds at once: the worker runs calls concurrently, as an agent's do.
            limit = asyncio.Semaphore(4)

            async def one(cwd: str | None, indexes: list[int]) -> None:
                async with limit:
                    got = await dev_env.client.execute_workflow(
                        CallsWorkflow.run,
                        Calls(
                            options=Options(
                                workspace_id=wsid, cwd=cwd, spill=False, timeout_ms=60_000
                            ),
                            calls=[(cases[i][1], cases[i][2]) for i in indexes],
                        ),
                        id=f"shape-{uuid.uuid4()}",
                        task_queue=queue,
                    )
                results.update(zip(indexes, got, strict=True))

            await asyncio.gather(*(one(cwd, indexes) for cwd, indexes in by_cwd.items()))
    finally:
        worker.terminate()
    return results


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_monorepo_shapes_below_the_root_agree_with_three_references(
    dev_env, tmp_path, rg_bin, shape, sandbox
):
    """pnpm, cargo and Python monorepos, every directory a search root: the answer is rg's
    from the workspace root with that path; where the search root is not hidden, the files
    are those a walk from the root sees beneath it, and (``.gitignore`` only) those git's
    engine leaves visible."""
    built = SHAPES[shape](tmp_path / shape)
    ws = built.root
    cases = _shape_cases(shape, ws)
    results = await _run_cases(dev_env, ws, sandbox, cases)
    walked = ref.visible_from_root(rg_bin, ws)
    by_git = git_visible(ws) if built.gitignore_only else None
    hidden_roots = searched_hidden = 0
    for i, (cwd, tool, args) in enumerate(cases):
        result = results[i]
        assert not result.is_error, (cwd, tool, args, result.text)
        path = args.get("path")
        if tool == "glob":
            assert result.result.paths == ref.glob_from_root(rg_bin, ws, cwd, path, args["pattern"])
            continue
        ours = [(m.path, m.line_number, m.line) for m in result.result.matches]
        assert ours == ref.grep_from_root(rg_bin, ws, cwd, path, "needle", args.get("include")), (
            cwd,
            args,
        )
        if args.get("include"):
            continue
        root = ref.search_root(ws, cwd, path)
        if root != "." and git_ignores(ws, root):
            # Named explicitly: searched although hidden (what lies beneath it may still be
            # hidden by a pattern such as **/node_modules/**).
            hidden_roots += 1
            searched_hidden += bool(ours)
            continue
        under = "" if root == "." else root + "/"
        files = ref.files_of(ours, ws, cwd, path)
        assert files == {f for f in walked if f.startswith(under)}, (cwd, args)
        if by_git is not None:
            assert files == {f for f in by_git if f.startswith(under)}, (cwd, args)
    assert hidden_roots >= 3 and searched_hidden >= 1 and len(cases) > 100
