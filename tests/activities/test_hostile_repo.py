"""A hostile repository (docs/security.md): planted symlinks, ignore files, VCS metadata and FIFOs.

Each tree sits next to ``outside/``, whose names and contents carry a canary. Every call
must end in a result or a contract error, and the canary must never appear in anything the
model receives: result, error, footer or spill artifact. Each case runs with the kernel
sandbox on (Landlock, as the worker runs by default here) and with ``FS_SEARCH_SANDBOX=off``,
to show the Python-level checks hold on their own.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest, GrepRequest, GrepResult
from fs_search.activities._held_root import HeldRoot
from fs_search.activities._ignore_files import SOME_SKIPPED
from fs_search.activities.rg import IGNORE_FILES_SKIPPED
from fs_search.activities.rg._elf_loader import loader_files
from fs_search.activities.rg._executor import Executor
from fs_search.activities.rg._fork_child import landlock_abi
from fs_search.activities.rg._sandbox import Sandbox, SandboxUnavailable, sandbox_for
from tests.helpers import Fifo, Link, write_tree

HAS_LANDLOCK = landlock_abi() > 0
needs_landlock = pytest.mark.skipif(not HAS_LANDLOCK, reason="this kernel has no Landlock")
MODES = [pytest.param("auto", marks=needs_landlock, id="landlock"), pytest.param("off", id="off")]


@dataclass
class Repo:
    """``base/ws`` (the workspace) next to ``base/outside`` (the canary's home)."""

    base: Path
    ws: Path
    outside: Path
    canary: str

    def leaks(self, text: str) -> bool:
        return self.canary in text

    def spilled(self) -> str:
        """Every spill artifact's name and content, concatenated."""
        out = []
        for dirpath, _dirs, files in os.walk(self.base / "spill"):
            for name in files:
                path = os.path.join(dirpath, name)
                out.append(path)
                with open(path, encoding="utf-8", errors="replace") as f:
                    out.append(f.read())
        return "\n".join(out)


def hostile_repo(base: Path) -> Repo:
    """The canary outside, and a workspace with ordinary files that match ``needle``."""
    canary = f"CANARY_{uuid.uuid4().hex}"
    outside = write_tree(
        base / "outside",
        {
            f"{canary}.txt": f"needle {canary} secret\n",
            f"{canary}_dir/inner.txt": f"needle {canary}\n",
            # Every line is a glob rg cannot parse, so rg quotes it in an error.
            "bad_ignore": f"{canary}[\n{{{canary}\n",
            "gitdir/commondir": "../common\n",
            "gitdir/HEAD": "ref: refs/heads/main\n",
            "common/info/exclude": f"{canary}[\n",
            "common/HEAD": "ref: refs/heads/main\n",
        },
    )
    ws = write_tree(
        base / "ws",
        {
            "src/main.py": "needle = 1\n",
            "docs/guide.md": "the needle in the guide\n",
            "sub/notes.txt": "needle notes\n",
        },
    )
    return Repo(base=base, ws=ws, outside=outside, canary=canary)


async def call(acts, req):
    """The result, or the contract error (anything else fails the test)."""
    method = acts.glob if isinstance(req, GlobRequest) else acts.grep
    try:
        return await ActivityEnvironment().run(method, req)
    except ApplicationError as e:
        assert e.type in {"INVALID_ARGUMENT", "SEARCH_INVALID_PATTERN", "SEARCH_FAILED"}, e
        assert e.non_retryable
        return e


def assert_clean(repo: Repo, out) -> None:
    """Nothing the model receives names or quotes the canary."""
    text = out.message if isinstance(out, ApplicationError) else repr(out.model_dump())
    assert not repo.leaks(text), text
    assert not repo.leaks(repo.spilled())


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return hostile_repo(tmp_path)


# --- finding 1: loops and chains never escape -------------------------------------------


def plant_loops(repo: Repo) -> None:
    write_tree(
        repo.ws,
        {
            "loop": Link("loop"),
            "a": Link("b"),
            "b": Link("a"),
            "evil": Link(repo.outside),
            "self": Link("self/x"),
            # A chain of 41 links (one more than the resolver follows) ending outside.
            **{f"c{i}": Link(f"c{i + 1}") for i in range(41)},
            "c41": Link(repo.outside),
        },
    )


ESCAPES = [
    "loop/../evil",
    "loop/../evil/inner.txt",
    "a/../evil",
    "self/../evil",
    "loop/../../outside",
    "c0",
    "c0/inner.txt",
    "evil",
    "sub/../evil/.",
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field", ["path", "cwd"])
@pytest.mark.parametrize("value", ESCAPES)
async def test_loops_and_long_chains_are_invalid_argument(
    repo, make_activities, mode, field, value
):
    """A loop, a self-referencing link or an over-long chain never resolves to outside."""
    plant_loops(repo)
    acts = await make_activities(repo.ws, sandbox=mode)
    for req in (
        GlobRequest(pattern="**/*", **{field: value}),
        GrepRequest(pattern="needle", **{field: value}),
    ):
        out = await call(acts, req)
        assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT", (req, out)
        assert_clean(repo, out)


@pytest.mark.parametrize("mode", MODES)
async def test_whole_tree_search_with_loops_stays_inside(repo, make_activities, mode):
    """Searching the whole tree beside loops and outside links returns only inside files."""
    plant_loops(repo)
    acts = await make_activities(repo.ws, sandbox=mode)
    grep = await call(acts, GrepRequest(pattern="needle"))
    glob = await call(acts, GlobRequest(pattern="**/*"))
    assert isinstance(grep, GrepResult)
    assert sorted(m.path for m in grep.matches) == ["docs/guide.md", "src/main.py", "sub/notes.txt"]
    assert sorted(glob.paths) == ["docs/guide.md", "src/main.py", "sub/notes.txt"]
    assert_clean(repo, grep)
    assert_clean(repo, glob)


# --- finding 5: VCS metadata is never searched, named or not --------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("path", ".git"),
        ("path", ".git/config"),
        ("path", "./.git/"),
        ("path", "sub/.hg/hgrc"),
        ("path", "gitlink"),
        ("path", "gitlink/config"),
        ("path", "src/../.git"),
        ("cwd", ".git"),
        ("cwd", "sub/.svn"),
    ],
)
async def test_vcs_paths_are_invalid_argument(repo, make_activities, mode, field, value):
    """.git (and friends) named directly, through `..` or through a symlink: INVALID_ARGUMENT."""
    secret = f"url = https://{repo.canary}@example.com/x.git\n"
    write_tree(
        repo.ws,
        {
            ".git/config": secret,
            "sub/.hg/hgrc": secret,
            "sub/.svn/entries": secret,
            "gitlink": Link(".git"),
        },
    )
    acts = await make_activities(repo.ws, sandbox=mode)
    for req in (
        GrepRequest(pattern="url", **{field: value}),
        GlobRequest(pattern="*", **{field: value}),
    ):
        out = await call(acts, req)
        assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT", (req, out)
        assert_clean(repo, out)


# --- finding 2: ignore files never leak ---------------------------------------------------


def plant_ignore(repo: Repo, kind: str) -> None:
    ws, outside, canary = repo.ws, repo.outside, repo.canary
    if kind == "linked outside":
        write_tree(ws, {".ignore": Link(outside / "bad_ignore")})
    elif kind == "malformed inside":
        write_tree(ws, {"sub/.gitignore": f"{canary}[\n", ".rgignore": f"{{{canary}\n"})
    elif kind == "git file chain":
        # rg follows .git's gitdir, then commondir, to read info/exclude outside.
        write_tree(ws, {".git": f"gitdir: {outside / 'gitdir'}\n"})
    elif kind == "malformed above":
        write_tree(
            repo.base,
            {
                ".ignore": f"{canary}[\n",
                ".gitignore": f"{canary}[\n",
                ".git/info/exclude": f"{canary}[\n",
                ".git/HEAD": "ref: x\n",
            },
        )
    elif kind == "unreadable":
        write_tree(
            ws, {".ignore": Link(outside / "no-such-file"), "sub/.ignore": Link("/proc/self/mem")}
        )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "kind",
    ["linked outside", "malformed inside", "git file chain", "malformed above", "unreadable"],
)
async def test_ignore_files_never_fail_a_search_or_leak(repo, make_activities, mode, kind):
    """Hostile ignore files: grep and glob still answer, and rg's complaints stay in the log."""
    plant_ignore(repo, kind)
    acts = await make_activities(repo.ws, sandbox=mode)
    grep = await call(acts, GrepRequest(pattern="needle"))
    assert isinstance(grep, GrepResult), grep
    assert {m.path for m in grep.matches} >= {"src/main.py", "docs/guide.md"}
    assert_clean(repo, grep)
    assert_clean(repo, await call(acts, GlobRequest(pattern="**/*.txt")))
    # A pattern error is still reported, quoting only rg's words about the pattern.
    bad = await call(acts, GrepRequest(pattern="needle("))
    assert isinstance(bad, ApplicationError) and bad.type == "SEARCH_INVALID_PATTERN", bad
    assert_clean(repo, bad)


# --- finding 3: ignore files never exhaust memory or hang ---------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["linked", "device"])
async def test_endless_ignore_file_is_skipped_not_fatal(repo, make_activities, mode, kind):
    """An endless ignore file (`.ignore -> /dev/zero`, or a zero device node in the tree):
    without Landlock the worker sees it before rg starts and leaves that kind of ignore file
    out, saying so; under Landlock the linked one is unreadable to rg, and the device node
    (inside the tree, so readable) makes rg hit its memory limit and the search runs again
    without ignore files, saying so."""
    if kind == "linked":
        write_tree(repo.ws, {".ignore": Link("/dev/zero")})
    elif os.geteuid() == 0:
        os.mknod(repo.ws / ".ignore", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    else:
        pytest.skip("creating a device node needs root")
    acts = await make_activities(repo.ws, sandbox=mode, rg_memory_mb=256)
    grep = await call(acts, GrepRequest(pattern="needle"))
    assert isinstance(grep, GrepResult), grep
    assert len(grep.matches) == 3
    if mode == "off":
        assert SOME_SKIPPED in grep.text and IGNORE_FILES_SKIPPED not in grep.text
    elif kind == "device":
        assert IGNORE_FILES_SKIPPED in grep.text
    assert not acts.executor.live_process_groups


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["inside", "outside"])
async def test_fifo_ignore_file_never_hangs(repo, make_activities, mode, where):
    """A FIFO as an ignore file (in the tree, or linked from outside): answered well in budget."""
    if where == "inside":
        write_tree(repo.ws, {".ignore": Fifo()})
    else:
        write_tree(repo.outside, {"fifo": Fifo()})
        write_tree(repo.ws, {"sub/.gitignore": Link(repo.outside / "fifo")})
    acts = await make_activities(repo.ws, sandbox=mode)
    started = time.monotonic()
    grep = await call(acts, GrepRequest(pattern="needle", timeout_ms=30_000))
    assert time.monotonic() - started < 15
    assert isinstance(grep, GrepResult), grep
    assert {m.path for m in grep.matches} >= {"src/main.py", "docs/guide.md"}
    assert not acts.executor.live_process_groups


# --- the kernel backs the Python checks ---------------------------------------------------


@needs_landlock
async def test_kernel_denies_what_escaped_every_python_check(repo, rg_bin):
    """The executor called directly on a symlink to an outside file: Landlock denies the read."""
    write_tree(repo.ws, {"leak.txt": Link(repo.outside / f"{repo.canary}.txt")})
    executor = Executor(sandbox=sandbox_for("required", 256, program=rg_bin))
    for target in ("leak.txt", str(repo.outside / f"{repo.canary}.txt"), str(repo.outside)):
        run = await executor.run(
            [rg_bin, "--no-config", "-L", "needle", target],
            cwd=str(repo.ws),
            timeout_s=20,
            max_stdout=1_000_000,
            tree=HeldRoot(repo.ws),
        )
        assert repo.canary.encode() not in run.stdout, target
        assert run.returncode == 2 and "Permission denied" in run.stderr, run
    inside = await executor.run(
        [rg_bin, "--no-config", "needle", "src"],
        cwd=str(repo.ws),
        timeout_s=20,
        max_stdout=1_000_000,
        tree=HeldRoot(repo.ws),
    )
    assert inside.returncode == 0 and b"needle = 1" in inside.stdout
    # Without the sandbox, the same call reads the outside file: the test can fail.
    bare = await Executor().run(
        [rg_bin, "--no-config", "needle", "leak.txt"],
        cwd=str(repo.ws),
        timeout_s=20,
        max_stdout=1_000_000,
    )
    assert repo.canary.encode() in bare.stdout


def system_libc() -> str:
    """The C library a dynamically linked system program maps."""
    return next(f for f in loader_files("/bin/true") if os.path.basename(f).startswith("libc."))


@needs_landlock
async def test_rg_reads_its_loader_files_and_not_their_directories(repo, rg_bin):
    """The ruleset grants the files rg's loader opens one by one (none for the wheel's
    static rg): rg runs, but cannot list the system's library directory or read the
    libraries it does not map (the first ruleset granted /usr/lib whole)."""
    libs = [f for f in loader_files(rg_bin) if ".so" in os.path.basename(f)]
    lib_dir = os.path.dirname(os.path.realpath(system_libc()))
    neighbours = sorted(set(os.listdir(lib_dir)) - {os.path.basename(f) for f in libs})
    assert neighbours  # the directory holds more than rg's libraries: the test can fail
    system = [p for p in ("/usr/lib/os-release", "/etc/os-release") if os.path.exists(p)]
    executor = Executor(sandbox=sandbox_for("required", 256, program=rg_bin))
    for argv in (
        [rg_bin, "--no-config", "--files", lib_dir],
        [rg_bin, "--no-config", "-a", "-c", "", os.path.join(lib_dir, neighbours[0]), *system],
    ):
        run = await executor.run(
            argv, cwd=str(repo.ws), timeout_s=20, max_stdout=1_000_000, tree=HeldRoot(repo.ws)
        )
        assert run.stdout == b"" and "Permission denied" in run.stderr, (argv, run)
    # Unconfined, the same reads succeed.
    bare = await Executor().run(
        [rg_bin, "--no-config", "--files", lib_dir], cwd="/", timeout_s=20, max_stdout=1 << 24
    )
    assert bare.returncode == 0 and bare.stdout


@needs_landlock
async def test_rg_may_execute_nothing_but_itself(repo, rg_bin, tmp_path):
    """A preprocessor (which the contract never passes) cannot run: no exec, no writes."""
    marker = tmp_path / "written"
    script = tmp_path / "pre.sh"
    script.write_text(f'#!/bin/sh\necho ran > {marker}\ncat "$1"\n')
    script.chmod(0o755)
    argv = [rg_bin, "--no-config", "--pre", str(script), "needle", "src"]
    limits = {"cwd": str(repo.ws), "timeout_s": 20, "max_stdout": 1_000_000}
    confined = await Executor(sandbox=sandbox_for("required", 256, program=rg_bin)).run(
        argv, tree=HeldRoot(repo.ws), **limits
    )
    assert b"needle" not in confined.stdout and not marker.exists()
    # The same argv unconfined runs the script: the test can fail.
    bare = await Executor().run(argv, **limits)
    assert b"needle" in bare.stdout and marker.exists()


# --- the setting ------------------------------------------------------------------------


async def test_tools_reports_the_sandbox(repo, make_activities):
    """fs_search.tools says whether rg runs under Landlock."""
    off = await make_activities(repo.ws, sandbox="off")
    assert (await ActivityEnvironment().run(off.tools)).sandbox == "none"
    if HAS_LANDLOCK:
        on = await make_activities(repo.ws)
        assert (await ActivityEnvironment().run(on.tools)).sandbox == "landlock"


def test_required_refuses_a_kernel_without_landlock(caplog):
    """required: no Landlock, no worker; auto: a warning, and rg still runs limited."""
    with pytest.raises(SandboxUnavailable, match="FS_SEARCH_SANDBOX=required"):
        sandbox_for("required", 512, abi=0, program=None)
    auto = sandbox_for("auto", 512, abi=0, program=None)
    assert auto == Sandbox(landlock_abi=0, memory_mb=512, python=auto.python)
    assert "no Landlock" in caplog.text
    assert sandbox_for("off", 512, abi=7, program=None).landlock_abi == 0
    assert sandbox_for("required", 512, abi=7, program=None).landlock_abi == 7


# --- the property: any request over a tree holding every hazard ---------------------------


def every_hazard(repo: Repo) -> None:
    plant_loops(repo)
    plant_ignore(repo, "linked outside")
    plant_ignore(repo, "malformed above")
    write_tree(
        repo.ws,
        {
            ".git/config": f"token {repo.canary}\n",
            "src/leak.txt": Link(repo.outside / f"{repo.canary}.txt"),
            "docs/.ignore": Fifo(),
            "gitlink": Link(".git"),
        },
    )


COMPONENTS = [
    "loop",
    "a",
    "evil",
    "c0",
    "..",
    ".",
    "src",
    "sub",
    ".git",
    "gitlink",
    "leak.txt",
    "x",
]
PATHS = st.none() | st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=4).map("/".join)
PATTERNS = st.sampled_from(["needle", "**/*", "*", "secret", "CANARY", "token", ".*", "[", "**"])


@pytest_asyncio.fixture(params=MODES)
async def hazards(request, tmp_path_factory, make_activities):
    """One tree holding every hazard, and activities over it (small caps, so results spill)."""
    repo = hostile_repo(tmp_path_factory.mktemp("hazards"))
    every_hazard(repo)
    acts = await make_activities(
        repo.ws, sandbox=request.param, glob_max_results=2, grep_max_matches=2
    )
    return repo, acts


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tool=st.sampled_from(["glob", "grep"]), pattern=PATTERNS, path=PATHS, cwd=PATHS)
async def test_any_request_over_a_hostile_repo_answers_and_never_leaks(
    hazards, tool, pattern, path, cwd
):
    """Property: every hazard at once, any cwd/path/pattern: a result or a contract error."""
    repo, acts = hazards
    model = GlobRequest if tool == "glob" else GrepRequest
    out = await call(acts, model(pattern=pattern, path=path, cwd=cwd, timeout_ms=20_000))
    assert_clean(repo, out)
    assert not acts.executor.live_process_groups


# --- finding: no existence oracle outside the workspace --------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field", ["path", "cwd"])
async def test_every_path_that_leaves_gets_one_answer_whatever_exists_outside(
    tmp_path, make_activities, mode, field
):
    """A sibling tenant's file names, /etc's, and a detour out and back in all get the same
    INVALID_ARGUMENT words as names that exist nowhere: nothing outside is looked up."""
    root = tmp_path / "root"
    write_tree(root / "a", {"hello.txt": "hello\n"})
    write_tree(root / "b", {"SECRET_PLAN_B.md": "plan\n", "dir/x": "x\n"})
    ws = root / "a"
    acts = await make_activities(ws, sandbox=mode)
    existing_dir = str(tmp_path)  # exists, outside the workspace
    paths = [
        "../b/SECRET_PLAN_B.md/x",
        "../b/NOPE.md/x",
        "../b/dir",
        "../b/nope",
        "/etc/shadow/x",
        "/etc/no_such/x",
        "/etc/passwd",
        f"{existing_dir}/root/../root/a/hello.txt",
        f"{existing_dir}/noroot/../root/a/hello.txt",
        f"/etc/apt/../..{ws}/hello.txt",
        f"/etc/noapt/../..{ws}/hello.txt",
    ]
    answers = set()
    for asked in paths:
        req = GrepRequest(pattern="x", **{field: asked})
        out = await call(acts, req)
        assert isinstance(out, ApplicationError) and out.type == "INVALID_ARGUMENT", (asked, out)
        answers.add(out.message.replace(repr(asked), "<given>"))
    assert answers == {f"{field} <given> is outside the workspace (symlinks are followed)"}
