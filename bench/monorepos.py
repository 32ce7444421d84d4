"""fs-search on real monorepos, against references that do not share its code or its rg run.

    .venv/bin/python bench/monorepos.py --repo cargo=/path/to/cargo.git --repo pnpm=... --repo pip=...

Each ``--repo NAME=GIT`` (a git directory, bare or not: a clone of rust-lang/cargo, pnpm/pnpm or
pypa/pip, say) is checked out into a temporary work tree and made into what a developer's
machine holds (:func:`add_debris`: ``node_modules/`` at the root and in packages, ``target/``,
``dist/``, ``build/``, ``.venv/``, caches, logs, ``.env`` files, ``.ignore``/``.rgignore`` files
with negations, ``.git/info/exclude``, a nested repository, hidden files, a non-UTF-8 name, a
60 KB line), every file's times scattered. Every text file holds the word ``fsneedle``, so a
grep for it shows exactly which files a search sees.

A ``fs-search worker`` process serves the tree on a dev server and the calls agents make run
through ``FsSearchClient``, with ``path``/``cwd`` at every depth: packages, their sources,
directories the ignore files hide named explicitly. Each answer is compared with:

- **rg, run another way**: rg (15 or later: ``--reference-rg``) in the *workspace root* with the
  search root as its path argument (globs and ``include`` anchored by prefixing the search
  root), which is what the contract says a search below the root gives;
- **git's own ignore engine** (grep calls in a second copy of the tree without ``.ignore`` and
  ``.rgignore`` files, whose repository tracks nothing): the files ``git ls-files --others
  --exclude-standard`` lists beneath the search root (each nested repository asked itself);
- **a plain allocation** (over-cap sampled globs): the sampling rule's recursive round-robin written out
  directly over the mtime-ordered listing.

Prints, per repository and class (grep below the root, a root inside an ignored directory,
sampled pages, glob listings, errors), how many calls were exact, and each miss. Run it with
another checkout's venv (its ``python``) to measure that code: ``--reference-rg`` keeps the
reference at rg 15 whatever the venv holds, and ``FS_SEARCH_RG_PATH`` picks the worker's rg.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import posixpath
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from fs_search.worker._devstack import DevServer
from fs_search.workflows import FsSearchClient, FsSearchPlugin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the references in tests/
from tests import rg_reference as ref  # noqa: E402
from tests.monorepo_shapes import GIT_ENV, VCS, git_ignores, git_visible  # noqa: E402

NEEDLE = "fsneedle"
CAP = 100  # the default glob_max_results: pages are compared at it
MANIFESTS = ("package.json", "Cargo.toml", "pyproject.toml", "setup.py", "__init__.py")


# --- the work tree ---------------------------------------------------------------------


def checkout(git_dir: Path, dest: Path) -> None:
    """The newest commit of ``git_dir`` as files in ``dest``, which then becomes a fresh git
    repository tracking nothing (so every file is judged by the ignore rules alone)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", "HEAD"],
        check=True,
        capture_output=True,
        env=GIT_ENV,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    subprocess.run(["git", "init", "-q", str(dest)], check=True, env=GIT_ENV)


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)


def packages(ws: Path, rng: random.Random, most: int) -> list[str]:
    """Directories holding a package manifest, at several depths (relative to ``ws``)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(ws):
        dirnames[:] = sorted(d for d in dirnames if d not in VCS and d != "node_modules")
        rel = os.path.relpath(dirpath, ws)
        if rel != "." and any(m in filenames for m in MANIFESTS):
            found.append(rel)
    by_depth: dict[int, list[str]] = defaultdict(list)
    for rel in found:
        by_depth[rel.count("/")].append(rel)
    chosen: list[str] = []
    while len(chosen) < most and any(by_depth.values()):
        for depth in sorted(by_depth):
            if by_depth[depth] and len(chosen) < most:
                chosen.append(by_depth[depth].pop(rng.randrange(len(by_depth[depth]))))
    return sorted(chosen)


def add_debris(ws: Path, rng: random.Random, pkgs: list[str], *, dot_ignores: bool) -> list[str]:
    """What a developer's machine adds to a checkout; returns the directories it made that
    the ignore files hide (to be named as search roots)."""
    files: dict[str, str | bytes] = {
        "node_modules/left-pad/index.js": "module.exports = 1\n",
        "node_modules/left-pad/package.json": '{"name": "left-pad"}\n',
        "node_modules/.bin/tool": "#!/bin/sh\n",
        "node_modules/@scope/pkg/lib/index.js": "exports.x = 1\n",
        "target/debug/build/out.rs": "fn main() {}\n",
        "target/debug/deps/lib.d": "deps\n",
        "dist/bundle.js": "var x;\n",
        "build/lib/mod.py": "x = 1\n",
        ".venv/lib/python3.11/site-packages/pkg/mod.py": "x = 1\n",
        ".venv/pyvenv.cfg": "home = /usr/bin\n",
        ".pytest_cache/v/cache/nodeids": "[]\n",
        ".mypy_cache/3.11/mod.json": "{}\n",
        "__pycache__/conftest.cpython-311.pyc": "pyc\n",
        "logs/app.log": "started\n",
        "debug.log": "debug\n",
        "npm-debug.log": "npm\n",
        ".env": "TOKEN=x\n",
        ".env.local": "TOKEN=y\n",
        ".DS_Store": "ds\n",
        ".idea/workspace.xml": "<x/>\n",
        ".vscode/settings.json": "{}\n",
        ".config/tool.toml": "x = 1\n",
        "scratch/notes.md": "notes\n",
        "notes.secret": "secret\n",
        "coverage/lcov.info": "lcov\n",
        "long-line.txt": "x" * 60_000 + "\n",
        "vendor/nested/.gitignore": "*.tmp\nout/\n",
        "vendor/nested/src/lib.rs": "pub fn f() {}\n",
        "vendor/nested/a.tmp": "tmp\n",
        "vendor/nested/out/gen.rs": "gen\n",
        "vendor/nested/debug.log": "nested log\n",
    }
    files[os.fsdecode(b"odd-name-\xff.txt")] = "odd\n"
    for pkg in pkgs:
        files[f"{pkg}/node_modules/dep/index.js"] = "module.exports = 2\n"
        files[f"{pkg}/node_modules/dep/sub/deep/x.js"] = "deep\n"
        files[f"{pkg}/node_modules/.cache/c.json"] = "{}\n"
        files[f"{pkg}/dist/index.js"] = "var y;\n"
        files[f"{pkg}/dist/keep.js"] = "var keep;\n"
        files[f"{pkg}/lib/index.js"] = "lib\n"
        files[f"{pkg}/build/out.txt"] = "build\n"
        files[f"{pkg}/target/release/bin"] = "bin\n"
        files[f"{pkg}/coverage/index.html"] = "<p/>\n"
        files[f"{pkg}/__pycache__/m.cpython-311.pyc"] = "pyc\n"
        files[f"{pkg}/.turbo/turbo.log"] = "turbo\n"
        files[f"{pkg}/.eslintcache"] = "[]\n"
        files[f"{pkg}/test.log"] = "log\n"
        files[f"{pkg}/snapshots/a.snap"] = "snap\n"
        files[f"{pkg}/snapshots/keep.snap"] = "keep\n"
        files[f"{pkg}/gen/sub/a.rs"] = "a\n"
        files[f"{pkg}/gen/sub/keep.rs"] = "keep\n"
        files[f"{pkg}/src/storage/x.rs"] = "x\n"
        files[f"{pkg}/src/storage/y.rs"] = "y\n"
    for name, text in files.items():
        _write(ws / name, text)
    subprocess.run(["git", "init", "-q", str(ws / "vendor/nested")], check=True, env=GIT_ENV)
    # The classic patterns, appended to the root .gitignore (anchored ones name real
    # packages, so they sit two or more levels down).
    anchored = [p for p in pkgs if "/" in p] or pkgs
    extra = [
        "",
        "# debris",
        "**/node_modules/**",
        "target/",
        "/dist",
        "build/",
        ".venv/",
        "*.log",
        "!keep.log",
        ".env*",
        "coverage",
        "__pycache__/",
        ".pytest_cache/",
        ".turbo",
        *(f"{p}/gen/sub/*" for p in pkgs),
        *(f"!{p}/gen/sub/keep.rs" for p in pkgs),
        *(f"/{p}/src/storage/*" for p in anchored),
        *(f"!/{p}/src/storage/x.rs" for p in anchored),
    ]
    gitignore = ws / ".gitignore"
    old = gitignore.read_text() if gitignore.exists() else ""
    gitignore.write_text(old + ("\n" if old and not old.endswith("\n") else "") + "\n".join(extra))
    _write(ws / ".git/info/exclude", "*.secret\nscratch/\n")
    if pkgs:  # a package re-includes what the root hides
        _write(ws / pkgs[0] / ".gitignore", "!test.log\n!dist/\n")
    if dot_ignores:
        dot = ws / ".ignore"
        old = dot.read_text() if dot.exists() else ""
        dot.write_text(old + "\n*.snap\n!keep.snap\nlong-line.txt\n")
        for pkg in pkgs[1::2]:
            _write(ws / pkg / ".rgignore", "*.md\n!README.md\nlib/\n")
    else:
        for path in list(ws.rglob(".ignore")) + list(ws.rglob(".rgignore")):
            path.unlink()
    return [
        "node_modules",
        "node_modules/left-pad",
        "target/debug",
        "build",
        ".venv/lib",
        "dist",
        *(f"{p}/node_modules" for p in pkgs[:3]),
        *(f"{p}/node_modules/dep" for p in pkgs[:2]),
        *(f"{p}/dist" for p in pkgs[:3]),
        *(f"{p}/gen/sub" for p in pkgs[:2]),
        *(f"{p}/src/storage" for p in anchored[:2]),
    ]


def needle_everywhere(ws: Path, rng: random.Random) -> None:
    """``fsneedle`` at the end of every regular file; every file's time scattered over a
    year (unique to the nanosecond), so a listing has one modification order."""
    base = 1_700_000_000 * 10**9
    for dirpath, dirnames, filenames in os.walk(ws):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            with open(path, "ab") as f:
                f.write(b"\n" + NEEDLE.encode() + b"\n")
            when = base + rng.randrange(365 * 86400 * 10**9)
            os.utime(path, ns=(when, when))


# --- references ------------------------------------------------------------------------


def allocation(paths: list[str], cap: int) -> tuple[list[str], bool]:
    """The sampling rule's sampled page of the mtime-ordered ``paths`` (relative to the search root),
    written out plainly: (page, sampled)."""

    @dataclass
    class Node:
        entries: dict[str, Node | str] = field(default_factory=dict)  # first appearance order
        size: int = 0

    root = Node()
    for p in paths:
        node = root
        node.size += 1
        parts = p.split("/")
        for part in parts[:-1]:
            kid = node.entries.setdefault(part + "/", Node())
            assert isinstance(kid, Node)
            node = kid
            node.size += 1
        node.entries[p] = p
    if len(root.entries) == len(paths):  # flat: the head
        return paths[:cap], False

    def take(node: Node, share: int) -> list[str]:
        entries = list(node.entries.values())
        picked: list[str] = []
        for entry, n in zip(entries, rounds(entries, share), strict=True):
            if n:
                picked += take(entry, n) if isinstance(entry, Node) else [entry]
        return picked

    groups = []
    for entry, n in zip(
        root.entries.values(), rounds(list(root.entries.values()), cap), strict=True
    ):
        if n:
            groups.append(take(entry, n) if isinstance(entry, Node) else [entry])
    order = {p: i for i, p in enumerate(paths)}
    page = [p for g in groups for p in sorted(g, key=order.__getitem__)]
    return page, True


def rounds(entries: list[Any], share: int) -> list[int]:
    """``share`` handed out one path per turn, entries in order, until it or they run out."""
    sizes = [1 if isinstance(e, str) else e.size for e in entries]
    got = [0] * len(entries)
    while share > 0 and any(g < s for g, s in zip(got, sizes, strict=True)):
        for i, size in enumerate(sizes):
            if share and got[i] < size:
                got[i] += 1
                share -= 1
    return got


# --- the calls -------------------------------------------------------------------------


@dataclass
class Case:
    kind: str  # grep-below, ignored-root, sample, glob, error, grep-git
    tool: str
    cwd: str | None
    args: dict[str, Any]
    root: str  # the search root, relative to the workspace ("." for the root)
    spill: bool = False
    error: str | None = None


def search_roots(ws: Path, pkgs: list[str], rng: random.Random) -> list[str]:
    roots = list(pkgs)
    for pkg in pkgs:
        kids = sorted(
            d.name
            for d in (ws / pkg).iterdir()
            if d.is_dir() and not d.is_symlink() and d.name not in VCS
        )
        if kids:
            roots.append(f"{pkg}/{rng.choice(kids)}")
    return roots


def cases(ws: Path, roots: list[str], ignored_roots: list[str], rng: random.Random) -> list[Case]:
    out: list[Case] = [Case("grep-root", "grep", None, {"pattern": NEEDLE}, ".")]
    includes = ["*.rs", "*.ts", "*.py", "*.js", "*.md", "src/**", "**/*.json"]
    for root in roots:
        parent, _, base = root.rpartition("/")
        kind = "ignored-root" if git_ignores(ws, root) else "grep-below"
        out.append(Case(kind, "grep", None, {"pattern": NEEDLE, "path": root}, root))
        out.append(Case(kind, "grep", root, {"pattern": NEEDLE}, root))
        if parent:
            out.append(Case(kind, "grep", parent, {"pattern": NEEDLE, "path": base}, root))
        include = rng.choice(includes)
        out.append(
            Case(kind, "grep", None, {"pattern": NEEDLE, "path": root, "include": include}, root)
        )
        out.append(Case("glob", "glob", None, {"pattern": "**/*", "path": root}, root))
    for root in ignored_roots:
        if (ws / root).is_dir():
            out.append(Case("ignored-root", "grep", None, {"pattern": NEEDLE, "path": root}, root))
            parent, _, base = root.rpartition("/")
            if parent:
                out.append(
                    Case("ignored-root", "grep", parent, {"pattern": NEEDLE, "path": base}, root)
                )
    # Over-cap globs, sampled: the repository's own big directories.
    for root in [".", *roots]:
        for pattern in ("**/*", "**/*.rs", "**/*.ts", "**/*.py", "*.md"):
            out.append(
                Case("sample", "glob", None, {"pattern": pattern, "path": root}, root, spill=True)
            )
    out.append(
        Case(
            "error",
            "grep",
            None,
            {"pattern": NEEDLE, "path": "no/such"},
            ".",
            error="SEARCH_FAILED",
        )
    )
    out.append(
        Case(
            "error",
            "grep",
            None,
            {"pattern": NEEDLE, "path": "../.."},
            ".",
            error="INVALID_ARGUMENT",
        )
    )
    out.append(
        Case(
            "error",
            "grep",
            None,
            {"pattern": "(", "path": "."},
            ".",
            error="SEARCH_INVALID_PATTERN",
        )
    )
    out.append(
        Case(
            "error",
            "glob",
            None,
            {"pattern": "**/*", "path": ".git"},
            ".",
            error="INVALID_ARGUMENT",
        )
    )
    return out


@dataclass
class Outcome:
    case: Case
    exact: bool
    detail: str = ""


def judge(case: Case, result: Any, ws: Path, rg: str, visible: set[str] | None) -> Outcome:
    if case.error:
        code = result.error.code if result.error else None
        return Outcome(case, code == case.error, f"got {code}")
    if result.is_error:
        return Outcome(case, False, f"error {result.text[:200]}")
    path_arg = case.args.get("path")
    if case.tool == "grep":
        ours = [(m.path, m.line_number, m.line) for m in result.result.matches]
        want = ref.grep_from_root(rg, ws, case.cwd, path_arg, NEEDLE, case.args.get("include"))
        if ours != want:
            extra = sorted({m[0] for m in ours} - {m[0] for m in want})
            missing = sorted({m[0] for m in want} - {m[0] for m in ours})
            return Outcome(
                case,
                False,
                f"shows {extra[:4]} ({len(extra)}), misses {missing[:4]} ({len(missing)})",
            )
        if visible is not None and case.kind != "ignored-root" and not case.args.get("include"):
            under = "" if case.root == "." else case.root + "/"
            oracle = {f for f in visible if f.startswith(under)}
            got = ref.files_of(ours, ws, case.cwd, path_arg)
            if got != oracle:
                return Outcome(
                    case,
                    False,
                    f"git: rg shows {sorted(got - oracle)[:4]}, git shows {sorted(oracle - got)[:4]}",
                )
        return Outcome(case, True)
    listing = ref.glob_from_root(rg, ws, case.cwd, path_arg, case.args["pattern"])
    if not case.spill:
        ok = result.result.paths == listing
        return Outcome(case, ok, "" if ok else "listing differs")
    if len(listing) <= CAP:
        ok = result.result.paths == listing and not result.result.sampled
        return Outcome(case, ok, "" if ok else "under cap differs")
    norm = posixpath.normpath(path_arg) if path_arg else "."
    rel = [p if norm == "." else p[len(norm) + 1 :] for p in listing]
    page, sampled = allocation(rel, CAP)
    want = [ref.shown(path_arg, p) for p in page]
    ok = result.result.paths == want and result.result.sampled == sampled
    if ok:
        return Outcome(case, True)
    cut = 0 if norm == "." else len(norm) + 1

    def dirs(page: list[str]) -> dict[str, int]:
        return dict(Counter(posixpath.dirname(p[cut:]) for p in page).most_common(3))

    return Outcome(
        case,
        False,
        f"page differs ({len(listing)} paths): by directory ours {dirs(result.result.paths)}, "
        f"the rule's {dirs(want)}",
    )


# --- running ---------------------------------------------------------------------------


def fs_search_bin() -> str:
    found = shutil.which("fs-search", path=os.path.dirname(sys.executable))
    if not found:
        raise SystemExit(f"no fs-search next to {sys.executable}")
    return found


@contextlib.contextmanager
def worker(ws: Path, address: str, wsid: str, spill: Path, log: Path):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FS_SEARCH_", "OTEL_", "TEMPORAL_")) or k == "FS_SEARCH_RG_PATH"
    }
    env |= {"FS_SEARCH_SPILL_URL": f"file://{spill}", "FS_SEARCH_SANDBOX": "auto"}
    argv = [fs_search_bin(), "worker", "--workspace", str(ws), "--workspace-id", wsid]
    argv += ["--address", address, "--sample-over-cap-glob-results"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


async def ready(client: Client, wsid: str, timeout: float = 120) -> None:
    """Until the worker answers its catalogue (it may take seconds to start on a busy host)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await FsSearchClient(client, wsid).tools()
        if got.available or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.5)


async def run_cases(client: Client, wsid: str, todo: list[Case]) -> list[Any]:
    sem = asyncio.Semaphore(4)

    async def one(case: Case) -> Any:
        async with sem:
            tools = FsSearchClient(client, wsid, cwd=case.cwd, spill=case.spill, timeout_ms=60_000)
            return await tools.call(case.tool, case.args)

    return await asyncio.gather(*(one(c) for c in todo))


async def measure(name: str, git_dir: Path, tmp: Path, rg: str, seed: int) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for variant in ("full", "git"):
        rng = random.Random(f"{seed}-{name}")
        ws = tmp / f"{name}-{variant}"
        checkout(git_dir, ws)
        pkgs = packages(ws, rng, 8)
        ignored = add_debris(ws, rng, pkgs, dot_ignores=variant == "full")
        needle_everywhere(ws, random.Random(seed))
        roots = search_roots(ws, pkgs, rng)
        todo = cases(ws, roots, ignored, rng)
        if variant == "git":  # git's oracle: greps only (globs list ignored files too)
            todo = [c for c in todo if c.tool == "grep" and not c.error]
        visible = git_visible(ws) if variant == "git" else None
        server = await DevServer().start()
        try:
            client = await Client.connect(
                server.address, plugins=[FsSearchPlugin(spill_url=f"file://{tmp / 'spill'}")]
            )
            wsid = f"mono-{name}-{variant}-{uuid.uuid4().hex[:6]}"
            with worker(ws, server.address, wsid, tmp / "spill", tmp / f"{wsid}.log"):
                await ready(client, wsid)
                got = await run_cases(client, wsid, todo)
        finally:
            server.stop()
        for case, result in zip(todo, got, strict=True):
            out = judge(case, result, ws, rg, visible)
            if variant == "git":
                out.case.kind = "git-oracle"
            outcomes.append(out)
    return outcomes


def rg_major(rg: str) -> int:
    first = subprocess.run([rg, "--version"], capture_output=True, text=True, check=True).stdout
    return int(re.match(r"ripgrep (\d+)\.", first).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", action="append", required=True, help="NAME=GIT_DIR")
    parser.add_argument(
        "--reference-rg", default=shutil.which("rg", path=os.path.dirname(sys.executable))
    )
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument("--keep", action="store_true", help="keep the work trees")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every miss")
    args = parser.parse_args()
    rg = args.reference_rg
    if not rg or rg_major(rg) < 15:
        raise SystemExit("the reference needs rg 15 or later: pass --reference-rg")
    tmp = Path(tempfile.mkdtemp(prefix="fs-search-monorepos-"))
    rows = []
    try:
        for item in args.repo:
            name, _, git_dir = item.partition("=")
            started = time.monotonic()
            outcomes = asyncio.run(measure(name, Path(git_dir), tmp, rg, args.seed))
            by_kind: dict[str, list[Outcome]] = defaultdict(list)
            for o in outcomes:
                by_kind[o.case.kind].append(o)
            total = sum(o.exact for o in outcomes)
            print(f"{name}: {total}/{len(outcomes)} exact ({time.monotonic() - started:.0f} s)")
            for kind, items in sorted(by_kind.items()):
                exact = sum(o.exact for o in items)
                print(f"  {kind:13} {exact}/{len(items)}")
                for o in items:
                    if not o.exact and (args.verbose or kind != "git-oracle"):
                        where = f"cwd={o.case.cwd} " if o.case.cwd else ""
                        print(f"    miss: {o.case.tool} {where}{o.case.args}: {o.detail}")
            rows += [
                {
                    "repo": name,
                    "kind": o.case.kind,
                    "tool": o.case.tool,
                    "cwd": o.case.cwd,
                    "args": o.case.args,
                    "exact": o.exact,
                    "detail": o.detail,
                }
                for o in outcomes
            ]
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
