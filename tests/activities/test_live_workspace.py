"""A workspace written during the search (docs/security.md, "A live workspace"): symlink swaps race
every search, and nothing outside the workspace is ever read, listed or echoed.

A swapper process exchanges a directory of the workspace with a symlink to a place outside
(``renameat2(RENAME_EXCHANGE)`` in a loop) while searches run. Outside are a canary
directory and a system library directory, which the first Landlock ruleset granted whole.
With the sandbox on, no search may return a byte from outside however the race falls. With
it off, the workspace is not confined against a concurrent writer (README, Security model):
there the test asserts only that every call ends in a result or a contract error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest, GlobResult, GrepRequest, GrepResult
from fs_search.activities.rg._elf_loader import loader_files
from fs_search.activities.rg._fork_child import landlock_abi
from tests.helpers import Link, write_tree

needs_landlock = pytest.mark.skipif(landlock_abi() == 0, reason="this kernel has no Landlock")

# Exchanges two names until stdin closes, then prints how many times it did.
SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys, threading
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = (os.fsencode(p) for p in sys.argv[1:3])
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    swaps = 0
    print("ready", flush=True)
    while not done.is_set():
        if libc.renameat2(-100, a, -100, b, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
            swaps += 1
    print(swaps, flush=True)
    """
)

INSIDE_LINE = "needle inside"


@dataclass
class Race:
    """``ws`` with ``d/sub`` (real) and ``d/lnk`` (a link out), ``top`` and ``top_lnk`` the
    same one level up, and the canary outside."""

    ws: Path
    canary: str
    inside_names: set[str]


def library_dir(rg: str) -> str:
    """A directory holding the libraries rg's loader maps (granted whole by the old ruleset),
    or, for a static rg, the system's (where a dynamically linked program finds libc)."""
    mapped = [f for f in (*loader_files(rg), *loader_files("/bin/true")) if ".so" in f]
    return os.path.dirname(mapped[0])


@pytest.fixture
def race(tmp_path: Path, rg_bin: str) -> Race:
    canary = f"CANARY_{os.getpid()}_{id(tmp_path)}"
    write_tree(tmp_path / "outside", {f"{canary}.txt": f"needle {canary}\n", "more/x.txt": canary})
    ws = write_tree(
        tmp_path / "ws",
        {
            "d/sub/inner.txt": f"{INSIDE_LINE}\n",
            "d/top.txt": f"{INSIDE_LINE}\n",
            "d/lnk": Link(tmp_path / "outside"),
            "d/lib": Link(library_dir(rg_bin)),
            "d/etc": Link("/usr/lib" if os.path.isdir("/usr/lib") else "/etc"),
            "top/inner.txt": f"{INSIDE_LINE}\n",
            "top_lnk": Link(tmp_path / "outside"),
        },
    )
    # Whatever the swap, a file found inside has one of these names (under either name of
    # the real directory); every file outside is named otherwise.
    inside = {"inner.txt", "top.txt"}
    return Race(ws=ws, canary=canary, inside_names=inside)


class Swapper:
    """A process exchanging two names of the workspace until stopped."""

    def __init__(self, a: Path, b: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", SWAPPER, str(a), str(b)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self) -> int:
        """Stop swapping; how many swaps were made."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        out = self.proc.stdout.read()
        self.proc.wait(timeout=30)
        return int(out.strip())


@pytest.fixture
def swapper(race: Race, request) -> Iterator[Swapper]:
    """The swapper on the pair ``request.param`` names (stopped at the end in any case)."""
    a, b = request.param
    swapper = Swapper(race.ws / a, race.ws / b)
    try:
        yield swapper
    finally:
        if swapper.proc.poll() is None:
            swapper.proc.kill()
            swapper.proc.wait()


def leaked(race: Race, out) -> list[str]:
    """What a result holds that did not come from inside the workspace."""
    if isinstance(out, ApplicationError):
        return [out.message] if race.canary in out.message else []
    bad = []
    if isinstance(out, GlobResult):
        bad += [p for p in out.paths if os.path.basename(p) not in race.inside_names]
    else:
        bad += [f"{m.path}: {m.line}" for m in out.matches if m.line != INSIDE_LINE]
    bad += [out.text] if race.canary in out.text else []
    return bad


async def search(acts, req):
    method = acts.glob if isinstance(req, GlobRequest) else acts.grep
    try:
        return await ActivityEnvironment().run(method, req)
    except ApplicationError as e:
        assert e.type in {"INVALID_ARGUMENT", "SEARCH_FAILED"}, e
        assert e.non_retryable
        return e


def requests(path: str) -> list[GlobRequest | GrepRequest]:
    return [
        GlobRequest(pattern="**", path=path),
        GrepRequest(pattern="needle|NAME=|ID=|GLIBC", path=path),
        GrepRequest(pattern="needle|NAME=", path=f"{path}/inner.txt"),
    ]


# Pairs swapped: a directory below the search root (rg's own walk races), and the search
# root itself (resolution then rg's start race).
PAIRS = [
    pytest.param(("d/sub", "d/lnk"), id="below-root-to-canary"),
    pytest.param(("d/sub", "d/lib"), id="below-root-to-libraries"),
    pytest.param(("d/sub", "d/etc"), id="below-root-to-usr-lib"),
    pytest.param(("top", "top_lnk"), id="search-root-to-canary"),
]
ROUNDS = 40
MIN_SWAPS = 300


@needs_landlock
@pytest.mark.parametrize("swapper", PAIRS, indirect=True)
async def test_with_the_sandbox_nothing_outside_is_read_during_swaps(
    race, swapper, make_activities
):
    """Under Landlock, ≥300 swaps of a searched directory with a link out: 0 bytes from outside."""
    acts = await make_activities(race.ws, sandbox="required")
    leaks: list[str] = []
    outcomes: set[str] = set()
    for _ in range(ROUNDS):
        for req in requests("d") + requests("top"):
            out = await search(acts, req)
            outcomes.add(type(out).__name__)
            leaks += leaked(race, out)
    swaps = swapper.stop()
    assert not leaks, leaks[:10]
    assert swaps >= MIN_SWAPS, swaps
    assert outcomes & {"GlobResult", "GrepResult"}, outcomes  # the searches did run
    assert not acts.executor.live_process_groups


@pytest.mark.parametrize("swapper", PAIRS[:1] + PAIRS[3:], indirect=True)
async def test_without_the_sandbox_every_call_still_ends_in_a_contract_outcome(
    race, swapper, make_activities
):
    """With the sandbox off, a concurrently written workspace is not confined (documented);
    every call still ends in a result or a contract error, and no rg is left running."""
    acts = await make_activities(race.ws, sandbox="off")
    for _ in range(ROUNDS // 4):
        for req in requests("d") + requests("top"):
            out = await search(acts, req)
            assert isinstance(out, GlobResult | GrepResult | ApplicationError), out
    assert swapper.stop() > 0
    assert not acts.executor.live_process_groups
