"""Hostile tool arguments through the real activities and real rg (property-based).

Whatever a model sends — shell syntax, globs, regexes, traversal, symlinks, unicode, NUL,
option look-alikes, megabyte strings — a call ends in a result or a contract error, nothing
reaches a shell, nothing outside the workspace (or the spill store) is listed or read, and the
worker's rg environment changes nothing.
"""

from __future__ import annotations

import asyncio
import asyncio.base_events
import os
import posixpath
import shutil
import subprocess
import sys
import sysconfig
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from temporalio.api.enums.v1 import EventType
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

import fs_search.activities
from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import (
    MAX_INCLUDE_BYTES,
    MAX_LOCATOR_BYTES,
    MAX_PATH_BYTES,
    MAX_PATTERN_BYTES,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    ToolResult,
)
from fs_search.activities._search import SearchActivities
from fs_search.activities.rg._executor import Executor
from fs_search.activities.rg._fork_client import SERVER
from fs_search.activities.rg._sandbox import FORK_CHILD, sandbox_for
from fs_search.activities.storage import FileSpillStore, Storage
from fs_search.worker import build_activities
from tests import hostile_strategies as hs
from tests.helpers import Dir, Link, write_tree
from tests.workflows_under_test import Calls, CallsWorkflow, Options

SEARCH_CODES = {"INVALID_ARGUMENT", "SEARCH_INVALID_PATTERN", "SEARCH_FAILED"}
READ_SPILL_CODES = {"INVALID_ARGUMENT", "SEARCH_FAILED"}


def examples(n: int) -> settings:
    """Hypothesis settings for properties over real rg subprocesses."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# --- the layout: a workspace next to things it must never reveal ---------------------------


@dataclass
class Layout:
    """``ws/`` next to ``outside/`` (names and contents carry ``marker``), with escapes."""

    base: Path
    ws: Path
    link: Path
    outside: Path
    out_file: Path
    spill: Path
    canary: Path
    marker: str

    def fill(self, value: str | None, *, root: Path | None = None) -> str | None:
        """Replace the strategies' placeholders with this layout's real paths."""
        if value is None:
            return None
        given = str(root or self.ws)
        for token, real in (
            (hs.WS_REAL, str(self.ws)),
            (hs.WS_LINK, str(self.link)),
            (hs.WS_EVIL, str(self.base / "ws-evil")),
            (hs.WS, given),
            (hs.OUT_FILE, str(self.out_file)),
            (hs.OUT_NAME, self.out_file.name),
            (hs.OUT, str(self.outside)),
            (hs.STORE, str(self.spill)),
            (hs.CANARY, str(self.canary)),
        ):
            value = value.replace(token, real)
        return value

    def leaks(self, text: str) -> bool:
        return self.marker in text

    def spill_leaks(self) -> list[str]:
        """Files under the spill directory whose name or content carries the marker."""
        found = []
        for dirpath, _dirs, files in os.walk(self.spill):
            for name in files:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    continue
                with open(path, "rb") as f:
                    if self.marker.encode() in f.read() or self.marker in path:
                        found.append(path)
        return found


def build_layout(base: Path) -> Layout:
    marker = f"{hs.MARKER_PREFIX}_{uuid.uuid4().hex}"
    outside = write_tree(
        base / "outside",
        {
            f"{marker}.txt": f"{marker} needle secret\n",
            f"{marker}_dir/{marker}_inner.py": f"needle = '{marker}'\n",
            f".{marker}_hidden": f"needle {marker}\n",
        },
    )
    write_tree(base, {f"{marker}_sibling.txt": f"needle {marker}\n"})
    write_tree(base / "ws-evil", {f"{marker}.txt": f"needle {marker}\n"})
    out_file = outside / f"{marker}.txt"
    ws = write_tree(
        base / "ws",
        {
            "src/app/main.py": "def main():\n    needle = 1\n    return needle\n",
            "src/lib.rs": "fn needle() {}\n",
            "docs/guide.md": "needle in the guide\r\nsecond line\r\n",
            ".hidden/conf.txt": "needle hidden\n",
            "README.md": "readme needle\n",
            "-dash.txt": "needle dash\n",
            "odd/$(touch x);`y`|z&&w.txt": "needle odd\n",
            "odd/line\nbreak.txt": "needle newline name\n",
            ".ignore": "ignored.log\n",
            "ignored.log": "needle ignored\n",
            "escape_dir": Link(outside),
            "rel_escape": Link("../outside"),
            "up": Link(".."),
            "src/escape_sub": Link(outside),
            "src/leak.txt": Link(out_file),
            "src/rel_leak.txt": Link(f"../../outside/{marker}.txt"),
            "alias": Link(base / "ws" / "src"),
            "loop": Link("loop"),
        },
    )
    link = write_tree(base, {"ws-link": Link(ws)}) / "ws-link"
    return Layout(
        base=base,
        ws=ws,
        link=link,
        outside=outside,
        out_file=out_file,
        spill=base / "spill",
        canary=base / f"canary-{uuid.uuid4().hex}",
        marker=marker,
    )


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    """The hostile layout under tmp_path (the spill store of make_activities is tmp_path/spill)."""
    return build_layout(tmp_path)


@pytest_asyncio.fixture(params=["real root", "symlinked root"])
async def rooted(request, layout, make_activities) -> tuple[Layout, Path, SearchActivities]:
    """Activities over the workspace, given directly or through a symlink; small caps so spills."""
    root = layout.ws if request.param == "real root" else layout.link
    acts = await make_activities(root, glob_max_results=3, grep_max_matches=3)
    return layout, root, acts


# --- no shell, ever ------------------------------------------------------------------------


@dataclass
class ShellGuard:
    """Every process started, and every attempt to use a shell."""

    argvs: list[Any]
    violations: list[str]


@pytest.fixture
def shell_guard(monkeypatch) -> ShellGuard:
    """Records each Popen argv; shells (Popen shell=True, os.system, ...) are violations."""
    guard = ShellGuard(argvs=[], violations=[])
    real_popen = subprocess.Popen

    class GuardedPopen(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, args, *rest, **kwargs):
            if kwargs.get("shell"):
                guard.violations.append(f"Popen(shell=True): {args!r}")
                raise AssertionError("a shell was started")
            guard.argvs.append(args)
            super().__init__(args, *rest, **kwargs)

    def forbidden(name: str):
        def refuse(*args, **kwargs):
            guard.violations.append(f"{name}{args!r}")
            raise AssertionError(f"{name} must never be called")

        return refuse

    monkeypatch.setattr(subprocess, "Popen", GuardedPopen)
    monkeypatch.setattr(asyncio, "create_subprocess_shell", forbidden("create_subprocess_shell"))
    monkeypatch.setattr(
        asyncio.base_events.BaseEventLoop, "subprocess_shell", forbidden("subprocess_shell")
    )
    monkeypatch.setattr(os, "system", forbidden("os.system"))
    monkeypatch.setattr(os, "popen", forbidden("os.popen"))
    return guard


def assert_only_rg_argvs(guard: ShellGuard, acts: SearchActivities) -> None:
    """Every process a subprocess started was an argv list running rg (directly, or under
    `timeout`); a sandboxed rg is forked by the fork server, which takes argv only."""
    assert not guard.violations, guard.violations
    rg = acts.rg.path
    for argv in guard.argvs:
        assert isinstance(argv, list | tuple) and all(isinstance(a, str | bytes) for a in argv)
        assert os.path.isabs(argv[0]), argv
        rest = list(argv[3:]) if os.path.basename(argv[0]) == "timeout" else list(argv)
        assert rest[0] == rg, argv


# --- running calls -------------------------------------------------------------------------


async def outcome(method, req, codes: set[str]) -> Any:
    """The result of one activity call, or its ApplicationError after checking it is a contract
    error with one of ``codes``; anything else propagates and fails the test."""
    try:
        out = await ActivityEnvironment().run(method, req)
    except ApplicationError as e:
        assert e.type in codes, (e.type, e.message)
        assert e.non_retryable, e
        name = "ToolArgumentError" if e.type == "INVALID_ARGUMENT" else "SearchError"
        assert e.details and e.details[0] == {"name": name, "code": e.type}, e.details
        out = e
    if currently_in_test_context():  # outcome statistics (--hypothesis-show-statistics)
        kind = out.type if isinstance(out, ApplicationError) else type(out).__name__
        empty = getattr(out, "total", None) == 0
        event(f"{getattr(method, '__name__', method)}: {kind}{' (empty)' if empty else ''}")
    return out


def request_for(tool: str, layout: Layout, root: Path, pattern, path, include, cwd):
    fill = lambda v: layout.fill(v, root=root)  # noqa: E731
    if tool == "glob":
        return GlobRequest(pattern=fill(pattern), path=fill(path), cwd=fill(cwd))
    return GrepRequest(pattern=fill(pattern), path=fill(path), include=fill(include), cwd=fill(cwd))


def inputs_of(req) -> str:
    return repr(req.model_dump())


def lexical_is_physical(base: str, path: str | None) -> bool:
    """Whether normalising ``path`` lexically names the same place as resolving it (false
    for a symlink followed by ``..``: see the regression tests at the end of this file)."""
    if not path:
        return True
    joined = os.path.join(base, path)
    return os.path.realpath(joined) == os.path.realpath(
        os.path.join(base, posixpath.normpath(path))
    )


def assert_listed_paths_are_inside(layout: Layout, root: Path, req, out) -> None:
    """Each returned path, resolved as the model would (from its cwd), is a file in the workspace."""
    cwd = os.path.join(root, req.cwd) if req.cwd else str(root)
    if not lexical_is_physical(cwd, req.path):
        return
    shown = out.paths if isinstance(out, GlobResult) else [m.path for m in out.matches]
    inside = str(layout.ws) + os.sep
    for path in shown:
        full = os.path.join(cwd, path)
        assert os.path.isfile(full), (req, path)
        assert os.path.realpath(full).startswith(inside), (req, path)


def assert_no_leak(layout: Layout, root: Path, req, out) -> None:
    """Nothing returned (or spilled) carries the outside marker or names a path outside."""
    if isinstance(out, GlobResult | GrepResult):
        assert type(out) is (GlobResult if isinstance(req, GlobRequest) else GrepResult)
        assert not layout.leaks(repr(out.model_dump())), (req, out.text)
        assert_listed_paths_are_inside(layout, root, req, out)
    elif not layout.leaks(inputs_of(req)):
        # An error may echo the request; it must not carry anything read from outside.
        assert not layout.leaks(out.message), (req, out.message)
    assert not layout.spill_leaks(), (req, layout.spill_leaks())


def host_paths(acts: SearchActivities) -> set[str]:
    """Where the worker is installed and its own temp directories: the interpreter, the venv,
    site-packages, the package, the fork server and its children's module, rg (and the fork
    server's python), the empty directory pattern errors are confirmed in. None of it is the
    model's business."""
    paths = {
        sys.prefix,
        sys.exec_prefix,
        sys.executable,
        os.path.realpath(sys.executable),
        sysconfig.get_paths()["purelib"],
        os.path.dirname(fs_search.activities.__file__),
        FORK_CHILD,
        SERVER,
        "fs-search-empty-",
    }
    if acts.rg.path:
        paths |= {acts.rg.path, os.path.dirname(acts.rg.path), os.path.realpath(acts.rg.path)}
    if acts.executor.sandbox is not None:
        paths.add(acts.executor.sandbox.python)
    workspace = str(acts.workspace.root) + os.sep
    # A path the workspace lives under would be in every echo of it: not a host path here.
    return {p for p in paths if p not in ("", "/") and not workspace.startswith(p + os.sep)}


def assert_no_host_paths(acts: SearchActivities, req, out) -> None:
    """The model-facing text (a result's text, an error's message) names nothing of the
    worker's installation, unless the request itself did (an error may echo it)."""
    text = out.message if isinstance(out, ApplicationError) else out.text
    echoed = inputs_of(req)
    shown = [p for p in host_paths(acts) if p in text and p not in echoed]
    assert not shown, (req, shown, text)


# --- 1 + 3: never a crash, never a leak ----------------------------------------------------


@examples(150)
@given(
    tool=hs.tools,
    pattern=hs.patterns,
    path=hs.paths,
    include=hs.includes,
    cwd=hs.cwds,
)
async def test_hostile_requests_end_in_a_result_or_contract_error_and_never_leak(
    rooted, shell_guard, tool, pattern, path, include, cwd
):
    """Any request: a result or a non-retryable contract error; no outside name or content."""
    layout, root, acts = rooted
    req = request_for(tool, layout, root, pattern, path, include, cwd)
    out = await outcome(getattr(acts, tool), req, SEARCH_CODES)
    assert_no_leak(layout, root, req, out)
    assert_no_host_paths(acts, req, out)
    assert_only_rg_argvs(shell_guard, acts)
    assert not acts.executor.live_process_groups


# --- a broken worker: the workspace gone, rg that cannot start ------------------------------


async def broken_worker(layout: Layout, tmp_path: Path, rg_bin: str, how: str) -> SearchActivities:
    """Activities over the layout's workspace, then broken: the workspace removed or replaced
    by a file, or rg (a copy, probed fine at start) no longer executable, run directly or
    through the fork server."""
    rg = tmp_path / "rg-bin" / "rg"
    rg.parent.mkdir()
    shutil.copy(rg_bin, rg)
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={"sample_over_cap_glob_results": False, "rg_path": str(rg)},
    )
    sandbox = sandbox_for("auto", config.rg_memory_mb, program=str(rg))
    executor = {
        "rg not executable": Executor(),
        "rg not executable, sandboxed": Executor(sandbox=sandbox),
    }.get(how)
    store = FileSpillStore(tmp_path / "spill", ttl_hours=config.spill_ttl_hours)
    acts = await build_activities(
        config, layout.ws, executor=executor, storage=Storage.beside(store)
    )
    assert acts.rg.path == str(rg), acts.rg
    if how.startswith("rg not executable"):
        rg.chmod(0o644)
    else:
        shutil.rmtree(layout.ws)
        if how == "workspace replaced by a file":
            layout.ws.write_text("not a directory\n")
    return acts


BROKEN = [
    "workspace removed",
    "workspace replaced by a file",
    "rg not executable",
    "rg not executable, sandboxed",
]


@pytest_asyncio.fixture(params=BROKEN)
async def broken(request, layout, tmp_path, rg_bin) -> tuple[Layout, SearchActivities]:
    return layout, await broken_worker(layout, tmp_path, rg_bin, request.param)


@examples(40)
@given(tool=hs.tools, pattern=hs.patterns, path=hs.paths, include=hs.includes, cwd=hs.cwds)
async def test_a_broken_worker_never_shows_its_installation(
    broken, tool, pattern, path, include, cwd
):
    """Any request to a worker whose workspace is gone or whose rg cannot start: a contract
    error naming nothing of the worker's installation (and a gone workspace says so)."""
    layout, acts = broken
    req = request_for(tool, layout, layout.ws, pattern, path, include, cwd)
    out = await outcome(getattr(acts, tool), req, SEARCH_CODES)
    assert isinstance(out, ApplicationError), (req, out)
    assert_no_host_paths(acts, req, out)
    if not acts.workspace.readable() and out.type == "SEARCH_FAILED":
        assert "the workspace cannot be read" in out.message, out.message


ESCAPE_PATHS = [
    "escape_dir",
    "escape_dir/",
    "escape_dir/..",
    "rel_escape",
    "up",
    "up/outside",
    "src/leak.txt",
    "src/rel_leak.txt",
    "src/../escape_dir",
    "alias/../../outside",
    "../outside",
    "../ws-evil",
    hs.OUT,
    hs.OUT_FILE,
    hs.WS_EVIL,
    f"{hs.WS}/escape_dir",
    f"{hs.WS_LINK}/up",
    f"{hs.WS_REAL}/../outside",
    f"{hs.WS}/..",
]


@examples(80)
@given(
    tool=hs.tools,
    glob_pattern=st.sampled_from(
        ["*", "**", "**/*", "**/*.txt", "*.py", f"*{hs.MARKER_PREFIX}*", "**/.*", "../**", "/**"]
    ),
    grep_pattern=st.sampled_from(
        ["needle", "(?s).*", ".", "e", hs.MARKER_PREFIX, "secret", "^", "(?i)NEEDLE"]
    ),
    path=hs.weighted(
        (3, st.sampled_from([None, ".", "src", "alias", "docs", hs.WS, f"{hs.WS_LINK}/src"])),
        (2, st.sampled_from(ESCAPE_PATHS)),
    ),
    cwd=hs.weighted(
        (4, st.none()),
        (1, st.sampled_from(["src", "alias", hs.WS_REAL, hs.WS_LINK])),
        (1, st.sampled_from(["escape_dir", "up", "../outside", hs.OUT, f"{hs.WS}/.."])),
    ),
    include=st.sampled_from(
        [None, None, None, "*", "**", f"*{hs.MARKER_PREFIX}*", "../**", "*.txt", "**/*"]
    ),
)
async def test_symlink_and_traversal_escapes_never_list_or_read_outside(
    rooted, tool, glob_pattern, grep_pattern, path, cwd, include
):
    """Broad patterns through every escape route: results never name or quote outside files."""
    layout, root, acts = rooted
    pattern = glob_pattern if tool == "glob" else grep_pattern
    req = request_for(tool, layout, root, pattern, path, include, cwd)
    out = await outcome(getattr(acts, tool), req, SEARCH_CODES)
    assert_no_leak(layout, root, req, out)


async def test_layout_is_hostile_enough(layout, rg_bin):
    """Sanity: rg following symlinks from ws/ would reveal the marker (so leaks are detectable)."""
    followed = subprocess.run(
        [rg_bin, "--no-config", "--follow", "--hidden", "--no-ignore", "-e", "needle"],
        cwd=layout.ws,
        capture_output=True,
        text=True,
    )
    assert layout.marker in followed.stdout
    assert layout.marker not in str(layout.ws) and layout.marker not in str(layout.spill)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("path", "escape_dir"),
        ("path", "rel_escape"),
        ("path", "up"),
        ("path", "src/leak.txt"),
        ("path", "src/rel_leak.txt"),
        ("path", "../ws-evil"),
        ("cwd", "escape_dir"),
        ("cwd", "up"),
        ("cwd", "escape_dir/.."),
    ],
)
async def test_escape_routes_are_invalid_argument(rooted, field, value):
    """Each symlink or traversal route out of the workspace is refused as INVALID_ARGUMENT."""
    _layout, _root, acts = rooted
    calls = [(acts.grep, GrepRequest(pattern="needle", **{field: value}))]
    calls.append((acts.glob, GlobRequest(pattern="*", **{field: value})))
    for method, req in calls:
        err = await outcome(method, req, SEARCH_CODES)
        assert isinstance(err, ApplicationError) and err.type == "INVALID_ARGUMENT", (req, err)
        assert "outside the workspace" in err.message, err.message


@pytest.mark.parametrize("path", ["escape_dir/..", "rel_escape/..", "up/.."])
async def test_path_that_resolves_outside_through_a_symlink_then_dotdot_is_refused(
    layout, make_activities, path
):
    """A path whose physical resolution (symlinks followed) leaves the workspace is refused."""
    acts = await make_activities(layout.ws)
    err = await outcome(acts.grep, GrepRequest(pattern="needle", path=path), SEARCH_CODES)
    assert isinstance(err, ApplicationError) and err.type == "INVALID_ARGUMENT", err


# --- 2: no shell ---------------------------------------------------------------------------


@examples(80)
@given(
    tool=hs.tools,
    field=st.sampled_from(["pattern", "path", "include", "cwd"]),
    payload=hs.shell_injections(),
)
async def test_shell_payloads_never_reach_a_shell(
    layout, make_activities, shell_guard, tool, field, payload
):
    """Shell syntax in any field is inert: no shell is started and the canary never appears."""
    if field == "include":
        tool = "grep"
    acts = await make_activities(layout.ws)
    fields: dict[str, Any] = {"pattern": "needle", "path": None, "include": None, "cwd": None}
    fields[field] = payload
    req = request_for(tool, layout, layout.ws, **fields)
    await outcome(getattr(acts, tool), req, SEARCH_CODES)
    assert_only_rg_argvs(shell_guard, acts)
    assert not layout.canary.exists(), req


async def test_shell_guard_catches_a_shell(shell_guard, layout):
    """Sanity: the guard records a shell started through asyncio or subprocess."""
    with pytest.raises(AssertionError):
        await asyncio.create_subprocess_shell(f"touch {layout.canary}")
    with pytest.raises(AssertionError):
        subprocess.run(f"touch {layout.canary}", shell=True)
    assert len(shell_guard.violations) == 2 and not layout.canary.exists()


# --- 4: read_spill stays in its store ------------------------------------------------------


@pytest_asyncio.fixture
async def hostile_store(layout, make_activities) -> tuple[Layout, SearchActivities, str, str]:
    """A store holding one real artifact plus symlinks and look-alikes leading outside."""
    acts = await make_activities(layout.ws, glob_max_results=2)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
    assert r.spill is not None
    artifact = r.spill.locator
    store = layout.spill
    write_tree(
        store,
        {
            "evil.txt": Link(layout.out_file),
            "rel_evil.txt": Link(os.path.relpath(layout.out_file, store)),
            "evil_dir": Link(layout.outside),
            "dir.txt": Dir(),
        },
    )
    write_tree(layout.base, {"spill-sibling/x.txt": layout.marker, "spill.txt": layout.marker})
    return layout, acts, artifact, Path(artifact).read_text()


@examples(150)
@given(locator=hs.locators(), offset=st.integers(-2, 40), limit=st.integers(-1, 3000))
async def test_read_spill_never_reads_outside_its_store(hostile_store, locator, offset, limit):
    """Any locator: INVALID_ARGUMENT or SEARCH_FAILED, or a page of this store's own artifact."""
    layout, acts, artifact, content = hostile_store
    filled = layout.fill(locator).replace(hs.ARTIFACT, artifact)
    req = ReadSpillRequest(locator=filled, offset=offset, limit=limit)
    out = await outcome(acts.read_spill, req, READ_SPILL_CODES)
    if isinstance(out, ReadSpillResult):
        assert not layout.leaks(out.text) and "root:" not in out.text, (filled, out.text)
        assert set(out.text.splitlines()) <= set(content.splitlines()), (filled, out.text)
    elif not layout.leaks(filled):
        assert not layout.leaks(out.message), (filled, out.message)


STORE_ESCAPES = {
    "etc-passwd": lambda lay: "/etc/passwd",
    "file-url-etc-passwd": lambda lay: "file:///etc/passwd",
    "dotdot": lambda lay: f"{lay.spill}/../outside/{lay.out_file.name}",
    "dotdot-in-url": lambda lay: f"file://{lay.spill}/%2e%2e/spill.txt",
    "symlink": lambda lay: f"{lay.spill}/evil.txt",
    "relative-symlink": lambda lay: f"{lay.spill}/rel_evil.txt",
    "symlink-in-url": lambda lay: f"file://localhost{lay.spill}/evil.txt",
    "dir-symlink": lambda lay: f"{lay.spill}/evil_dir/{lay.out_file.name}",
    "sibling-with-store-prefix": lambda lay: f"{lay.spill}-sibling/x.txt",
    "store-name-dot-txt": lambda lay: f"{lay.spill}.txt",
    "proc-root": lambda lay: f"/proc/self/root{lay.out_file}",
    "outside-file": lambda lay: str(lay.out_file),
    "s3": lambda lay: "s3://bucket/key.txt",
    "relative": lambda lay: "relative/x.txt",
    "empty": lambda lay: "",
}


@pytest.mark.parametrize("escape", sorted(STORE_ESCAPES))
async def test_read_spill_refuses_known_escapes(hostile_store, escape):
    """Each store escape (symlink, traversal, look-alike, other scheme) is INVALID_ARGUMENT."""
    layout, acts, _artifact, _content = hostile_store
    locator = STORE_ESCAPES[escape](layout)
    out = await outcome(acts.read_spill, ReadSpillRequest(locator=locator), READ_SPILL_CODES)
    assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT", (locator, out)


async def test_read_spill_reads_its_own_artifact(hostile_store):
    """Sanity: the store's real artifact is readable, so refusals above are not blanket."""
    _layout, acts, artifact, content = hostile_store
    page = await outcome(acts.read_spill, ReadSpillRequest(locator=artifact), READ_SPILL_CODES)
    assert isinstance(page, ReadSpillResult) and page.text.splitlines() == content.splitlines()


# --- 5: the worker's rg environment changes nothing ----------------------------------------

HOSTILE_RG_CONFIGS = [
    ["--files-without-match"],
    ["--max-count=0"],
    ["--glob=!*"],
    ["--no-ignore", "--follow", "-uuu"],
    ["--pre={script}", "--pre-glob=*"],
    ["--replace=HACKED", "--context=3", "--ignore-case"],
    ["--type-add=x:*.md", "--type-not=x", "--no-hidden", "--sort=path"],
    ["--null-data", "--invert-match"],
]


def hostile_environment(layout: Layout, config: list[str]) -> dict[str, str]:
    """RIPGREP_CONFIG_PATH and friends, a git global ignore, and a PATH with a fake rg."""
    evil = layout.base / "evil-env"
    (evil / "bin").mkdir(parents=True, exist_ok=True)
    script = evil / "pre.sh"
    script.write_text(f'#!/bin/sh\ntouch {layout.canary}\necho "{layout.marker}"\n')
    script.chmod(0o755)
    for fake in ("rg", "timeout"):
        (evil / "bin" / fake).write_text(f"#!/bin/sh\ntouch {layout.canary}\n")
        (evil / "bin" / fake).chmod(0o755)
    rc = evil / "ripgreprc"
    write_tree(
        evil,
        {
            "ripgreprc": "\n".join(line.format(script=script) for line in config) + "\n",
            "git/ignore": "*\n",
            ".gitconfig": f"[core]\n\texcludesFile = {evil / 'git' / 'ignore'}\n",
        },
    )
    return {
        "RIPGREP_CONFIG_PATH": str(rc),
        "RIPGREP_COLOR": "always",
        "RIPGREP_THREADS": "1",
        "HOME": str(evil),
        "XDG_CONFIG_HOME": str(evil),
        "PATH": f"{evil / 'bin'}:{os.environ.get('PATH', '')}",
        "LC_ALL": "tr_TR.UTF-8",
        "GIT_DIR": str(layout.outside),
    }


async def comparable(layout: Layout, method, req) -> Any:
    out = await outcome(method, req, SEARCH_CODES)
    if isinstance(out, ApplicationError):
        return ("error", out.type, out.message)
    artifact = Path(out.spill.locator).read_text() if out.spill else None
    return ("result", out.model_dump(), artifact)


@examples(50)
@given(
    tool=hs.tools,
    pattern=hs.tame_patterns,
    path=hs.tame_paths,
    include=hs.tame_includes,
    config=st.sampled_from(HOSTILE_RG_CONFIGS),
)
async def test_hostile_rg_environment_changes_nothing(
    layout, make_activities, tool, pattern, path, include, config
):
    """RIPGREP_CONFIG_PATH (flags, --pre), HOME, PATH in the worker: identical results."""
    acts = await make_activities(layout.ws, glob_max_results=3, grep_max_matches=3)
    req = request_for(tool, layout, layout.ws, pattern, path, include, None)
    method = getattr(acts, tool)
    plain = await comparable(layout, method, req)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in hostile_environment(layout, config).items():
            mp.setenv(key, value)
        hostile = await comparable(layout, method, req)
    assert hostile == plain, (config, req)
    assert not layout.canary.exists()


def test_hostile_rg_config_would_change_results(layout, rg_bin):
    """Sanity: each hostile environment does change rg's output when rg is allowed to see it."""
    argv = [rg_bin, "--json", "--hidden", "-e", "needle"]
    plain = subprocess.run(argv, cwd=layout.ws, capture_output=True, env={})
    for config in HOSTILE_RG_CONFIGS:
        env = hostile_environment(layout, config)
        changed = subprocess.run(argv, cwd=layout.ws, capture_output=True, env=env)
        assert (changed.returncode, changed.stdout) != (plain.returncode, plain.stdout), config


# --- 8: size limits ------------------------------------------------------------------------

FIELD_LIMITS = {
    "pattern": MAX_PATTERN_BYTES,
    "path": MAX_PATH_BYTES,
    "cwd": MAX_PATH_BYTES,
    "include": MAX_INCLUDE_BYTES,
}


@examples(60)
@given(
    field=st.sampled_from(sorted(FIELD_LIMITS)),
    tool=hs.tools,
    over=st.booleans(),
    unit=st.sampled_from(["a", "é", "日", "\U0001f600", "*"]),
    extra=st.integers(0, 3),
)
async def test_size_limits_count_utf8_bytes(
    layout, make_activities, shell_guard, field, tool, over, unit, extra
):
    """Over a field's byte limit: INVALID_ARGUMENT before rg; at or under it: not a size error."""
    if tool == "glob" and field == "include":
        tool = "grep"
    acts = await make_activities(layout.ws)
    limit = FIELD_LIMITS[field]
    size = len(unit.encode())
    value = unit * (limit // size + 1 + extra if over else limit // size - extra)
    args: dict[str, Any] = {"pattern": "needle"}
    args[field] = value
    req = (GlobRequest if tool == "glob" else GrepRequest)(**args)
    started = len(shell_guard.argvs)
    out = await outcome(getattr(acts, tool), req, SEARCH_CODES)
    too_big = len(value.encode()) > limit
    assert too_big is over
    if too_big:
        assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT"
        assert f"{field} is {len(value.encode())} bytes; the limit is {limit}" in out.message
        assert len(shell_guard.argvs) == started  # refused before rg ran
    else:
        assert not (isinstance(out, ApplicationError) and "the limit is" in out.message), out


@examples(50)
@given(
    field=st.sampled_from(["pattern", "path", "include", "cwd", "locator"]),
    tool=hs.tools,
    before=st.text(max_size=8),
    after=st.text(max_size=8),
)
async def test_nul_in_any_field_is_invalid_argument(
    layout, make_activities, shell_guard, field, tool, before, after
):
    """A NUL anywhere in pattern, path, include, cwd or locator: INVALID_ARGUMENT, no rg run."""
    acts = await make_activities(layout.ws)
    value = before + "\x00" + after
    started = len(shell_guard.argvs)
    if field == "locator":
        req: Any = ReadSpillRequest(locator=f"{layout.spill}/{value}.txt")
        method, codes = acts.read_spill, READ_SPILL_CODES
    else:
        tool = "grep" if field == "include" else tool
        args: dict[str, Any] = {"pattern": "needle", field: value}
        req = (GlobRequest if tool == "glob" else GrepRequest)(**args)
        method, codes = getattr(acts, tool), SEARCH_CODES
    out = await outcome(method, req, codes)
    assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT", (req, out)
    assert f"{field} contains a NUL character" in out.message, out.message
    assert len(shell_guard.argvs) == started


OVERSIZED = {
    "pattern": "x" * 2_000_000,
    "path": "a/" * 500_000,
    "include": "*" * 100_000,
    "cwd": "c" * 1_000_000,
}


@pytest.mark.parametrize(
    ("tool", "field"),
    [("glob", f) for f in sorted(OVERSIZED) if f != "include"]
    + [("grep", f) for f in sorted(OVERSIZED)],
)
async def test_oversized_requests_are_refused_by_the_activity(
    layout, make_activities, shell_guard, tool, field
):
    """2 MB pattern, 1 MB path, 100 KB include, 1 MB cwd: INVALID_ARGUMENT, rg never started."""
    acts = await make_activities(layout.ws)
    args = {"pattern": "needle", field: OVERSIZED[field]}
    req = (GlobRequest if tool == "glob" else GrepRequest)(**args)
    started = len(shell_guard.argvs)
    err = await outcome(getattr(acts, tool), req, SEARCH_CODES)
    assert isinstance(err, ApplicationError) and err.type == "INVALID_ARGUMENT"
    assert f"{field} is {len(OVERSIZED[field])} bytes" in err.message
    assert len(err.message) < 500  # the refusal does not echo the megabytes
    assert len(shell_guard.argvs) == started  # rg never ran


async def test_oversized_locator_is_refused_by_read_spill(layout, make_activities):
    """A 1 MB read_spill locator is INVALID_ARGUMENT."""
    acts = await make_activities(layout.ws)
    locator = str(layout.spill) + "/" + "a" * 1_000_000 + ".txt"
    err = await outcome(acts.read_spill, ReadSpillRequest(locator=locator), READ_SPILL_CODES)
    assert isinstance(err, ApplicationError) and err.type == "INVALID_ARGUMENT"
    assert f"locator is {len(locator)} bytes; the limit is {MAX_LOCATOR_BYTES}" in err.message


async def _run_calls_without_search_worker(ts_env, options: Options, calls) -> tuple:
    """Run CallsWorkflow with no worker on the workspace queue; return results and history."""
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(ts_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        handle = await ts_env.client.start_workflow(
            CallsWorkflow.run,
            Calls(options=options, calls=calls),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
        with ts_env.auto_time_skipping_disabled():
            # Real time: a scheduled call would wait its 60 s schedule-to-start.
            results = await asyncio.wait_for(handle.result(), 20)
        history = await handle.fetch_history()
    return results, [e.event_type for e in history.events]


@pytest.mark.parametrize(
    ("cwd", "calls"),
    [
        (
            None,
            [
                ("grep", {"pattern": OVERSIZED["pattern"]}),
                ("glob", {"pattern": OVERSIZED["pattern"]}),
                ("glob", {"pattern": "*", "path": OVERSIZED["path"]}),
                ("grep", {"pattern": "x", "path": OVERSIZED["path"]}),
                ("grep", {"pattern": "x", "include": OVERSIZED["include"]}),
                ("read_spill", {"locator": "/" + "l" * 1_000_000}),
            ],
        ),
        (OVERSIZED["cwd"], [("glob", {"pattern": "*"}), ("grep", {"pattern": "x"})]),
    ],
    ids=["pattern-path-include-locator", "cwd"],
)
async def test_oversized_requests_are_refused_by_the_workflow_helper_before_scheduling(
    ts_env, cwd, calls
):
    """FsSearchTools refuses oversized fields with INVALID_ARGUMENT and schedules nothing."""
    options = Options(workspace_id=f"ws-{uuid.uuid4()}", cwd=cwd, schedule_to_start_ms=60_000)
    results, events = await _run_calls_without_search_worker(ts_env, options, calls)
    results = [ToolResult.model_validate(r) for r in results]
    assert [r.error.code if r.error else None for r in results] == [
        ErrorCode.INVALID_ARGUMENT
    ] * len(calls)
    assert all(r.is_error and "limit" in r.text and len(r.text) < 500 for r in results)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in events
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED in events


async def test_history_check_sees_a_scheduled_call(ts_env):
    """Sanity: a normal-sized call without a worker is scheduled (and times out to start)."""
    options = Options(workspace_id=f"ws-{uuid.uuid4()}", schedule_to_start_ms=1000)
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(ts_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        handle = await ts_env.client.start_workflow(
            CallsWorkflow.run,
            Calls(options=options, calls=[("grep", {"pattern": "x"})]),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
        [result] = await handle.result()
        events = [e.event_type for e in (await handle.fetch_history()).events]
    assert ToolResult.model_validate(result).error.code == ErrorCode.SEARCH_FAILED
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED in events


# --- regressions: bugs these properties found (fixed) --------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "include"),
    [(None, "*.zzz"), (None, "a\nb"), ("empty", None), ("all_ignored", None)],
    ids=["include-matches-nothing", "include-with-newline", "empty-dir", "all-ignored-dir"],
)
async def test_grep_that_searches_no_file_is_no_matches(layout, make_activities, path, include):
    """grep over no searchable file (include matching nothing, empty dir) is `No matches found`."""
    write_tree(
        layout.ws,
        {"empty": Dir(), "all_ignored/.ignore": "*\n", "all_ignored/a.txt": "needle\n"},
    )
    acts = await make_activities(layout.ws)
    out = await outcome(
        acts.grep, GrepRequest(pattern="needle", path=path, include=include), SEARCH_CODES
    )
    assert isinstance(out, GrepResult), out
    assert (out.text, out.total) == ("No matches found", 0)


async def test_a_path_that_leaves_and_comes_back_is_outside_whatever_exists(
    layout, make_activities
):
    """A path through a link out of the workspace and back in by `..` is outside, in the same
    words as one through a name that does not exist out there: nothing outside is looked up."""
    acts = await make_activities(layout.ws)
    answers = set()
    for path in ("escape_dir/../ws/src", "rel_escape/../ws/src", "../ws/src", "../nope/../ws/src"):
        out = await outcome(acts.grep, GrepRequest(pattern="needle", path=path), SEARCH_CODES)
        assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT", out
        answers.add(out.message.replace(repr(path), "<path>"))
    assert answers == {"path <path> is outside the workspace (symlinks are followed)"}
