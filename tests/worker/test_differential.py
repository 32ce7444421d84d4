"""The project checks itself against rg (issue 38): glob and grep through a real worker
process and Temporal, on a real-shaped repository, give exactly what rg gives run the seed's
way — in the search root, every ignore file from there up to the workspace root applied.

The cases are the call shapes agents make: the whole workspace, ``path`` and ``cwd`` below
the root (into packages, a nested repository, an ignored build directory named explicitly,
a file), absolute paths, ``include`` globs relative to the search root. Each is run with the
kernel sandbox on and off. Results are compared in full (``spill: false``): every path in
order (glob: oldest first), every match's path, line number and whole line.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import Worker

from fs_search.activities.rg._fork_child import landlock_abi
from fs_search.activities.workspace import VCS_DIRS
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


def _rg(rg_bin: str, argv: list[str], cwd: Path) -> bytes:
    done = subprocess.run(
        [rg_bin, "--no-config", "--no-ignore-global", *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    # rg exits 2 when a filter left no file to search at all: an empty answer.
    nothing = done.returncode == 2 and done.stderr.startswith(b"rg: No files were searched")
    assert done.returncode in (0, 1) or nothing, done.stderr
    return done.stdout


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", "replace")


def _shown(prefix: str | None, rel: str) -> str:
    rel = rel.removeprefix("./")
    if not prefix:
        return rel
    norm = posixpath.normpath(prefix)
    return rel if norm == "." else f"{norm}/{rel}"


def _search_root(ws: Path, cwd: str | None, path: str | None) -> Path:
    return ws / (cwd or ".") / (path or ".")


def rg_grep(rg_bin: str, ws: Path, cwd, path, pattern, include=None) -> list[tuple[str, int, str]]:
    """What rg gives in the search root (ignore files from there up: nothing above the
    workspace holds any), shown as the contract shows it."""
    vcs = [f"--glob=!{d}" for d in VCS_DIRS]
    argv = ["--json", "--hidden", *([f"--glob={include}"] if include else []), *vcs]
    root = _search_root(ws, cwd, path)
    if root.is_file():  # a file target: rg in its directory, the file named
        out = _rg(rg_bin, [*argv, "-e", pattern, "--", root.name], root.parent)
    else:
        out = _rg(rg_bin, [*argv, "-e", pattern], root)
    found = []
    for line in out.splitlines():
        message = json.loads(line)
        if message["type"] != "match":
            continue
        data = message["data"]
        text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
        shown = posixpath.normpath(path) if root.is_file() else _shown(path, _text(data["path"]))
        found.append((shown, data["line_number"], text))
    return sorted(found, key=lambda m: (m[0].split("/"), m[1]))


def rg_glob(rg_bin: str, ws: Path, cwd, path, pattern) -> list[str]:
    vcs = [f"--glob=!{d}" for d in VCS_DIRS]
    argv = ["--files", "--null", "--sort=modified", "--no-ignore", "--hidden"]
    out = _rg(rg_bin, [*argv, f"--glob={pattern}", *vcs], _search_root(ws, cwd, path))
    names = [os.fsdecode(n) for n in out.split(b"\0") if n]
    return [
        _shown(path, n.encode("utf-8", "surrogateescape").decode("utf-8", "replace")) for n in names
    ]


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


@pytest.mark.parametrize(
    "sandbox",
    [
        pytest.param(
            "auto",
            id="landlock",
            marks=pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock"),
        ),
        pytest.param("off", id="off"),
    ],
)
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
            want = rg_grep(rg_bin, ws, cwd, path, args["pattern"], args.get("include"))
            assert ours == want, (cwd, args)
            assert result.result.total == len(want)
        else:
            want_paths = rg_glob(rg_bin, ws, cwd, path, args["pattern"])
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
