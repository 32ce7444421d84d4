"""Deterministic benchmark corpora, built once and cached by a marker of their parameters.

Layout under the corpus directory (default ``bench/.corpus``)::

    ws/                 the workspace the benchmark's workers own
      small/            a few hundred source-like files, SMALL_MATCHES lines with SMALL_PATTERN
      heavy/            files whose ``rg --json HEAVY_PATTERN`` output is 12-18 MB
      overflow/         files whose ``rg --json OVERFLOW_PATTERN`` output is >= 100 MB
      mid/pNN/          MID_DIRS directories, each 1-2 MB of ``rg --json MID_PATTERN`` output
      glob/             GLOB_DIRS x GLOB_PER_DIR empty files
      globmem/aNN/mNN/  GLOBMEM_AREAS x GLOBMEM_MODULES x GLOBMEM_FILES empty files whose
                        ``rg --files --null`` output is just under 20 MB (the raw output cap)
      cancel/huge.bin   a 100 GiB sparse file (rg scans it for minutes, using no disk)
      repo/             a real-shaped monorepo (repo_corpus.py): packages, dependencies and
                        build output ignored by its root .gitignore, generated files, deep paths
    markers/<part>.json the parameters and measured sizes of each built part

Markers live outside ``ws/`` so no search or glob ever sees them. A part whose marker
matches the current parameters (and rg version) is reused; anything else is rebuilt.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import repo_corpus

SEED = 20_240_611
VERSION = 1

SMALL_PATTERN = "bench_small_needle"
SMALL_FILES = 300
SMALL_MATCHES = 10

HEAVY_PATTERN = "heavy_needle"
HEAVY_FILES = 150
HEAVY_MATCHES_PER_FILE = 400
HEAVY_RAW_RANGE = (12_000_000, 18_000_000)

OVERFLOW_PATTERN = "overflow_needle"
OVERFLOW_FILES = 8
OVERFLOW_LINES_PER_FILE = 60_000
OVERFLOW_RAW_MIN = 100_000_000

MID_PATTERN = "mid_needle"
MID_DIRS = 16
MID_FILES = 6
MID_MATCHES_PER_FILE = 1_000
MID_RAW_RANGE = (1_000_000, 2_000_000)

GLOB_DIRS = 100
GLOB_PER_DIR = 1_000

GLOBMEM_AREAS = 20
GLOBMEM_MODULES = 50
GLOBMEM_FILES = 500
# About 20 MB of short paths (36 bytes each), under the worker's 20 MB raw output cap.
GLOBMEM_RAW_RANGE = (15_000_000, 19_900_000)

# The repository corpus's call shapes (see repo_corpus.py): the session cwd is the
# repository; globs below it with `path`, greps with `path` and with `cwd` below it.
REPO_CWD = "repo"
REPO_GLOB_PATH = "packages"
REPO_GLOB_PATTERN = "**/*.{ts,js}"
REPO_CWD_GLOB = "repo/packages/p03"
REPO_CWD_GLOB_PATTERN = "**/*.ts"

SPARSE_BYTES = 100 * 1024**3
CANCEL_PATTERN = "needle_never_found"

_WORDS = (
    "alpha beta gamma delta epsilon config value result handler request response client "
    "server buffer stream parse render index offset length count total cache store load "
    "save read write open close start stop retry error status update create delete list "
    "item entry record field table query filter match token node tree path file line"
).split()


class CorpusError(RuntimeError):
    """A corpus could not be built or does not have the size the benchmark needs."""


@dataclass
class Corpus:
    """Where each part lives (relative to ``workspace``) and what it was measured to hold."""

    root: Path
    workspace: Path
    rg: str
    small_matches: int = 0
    heavy_raw_bytes: int = 0
    heavy_matches: int = 0
    overflow_raw_bytes: int = 0
    mid_dirs: list[str] = field(default_factory=list)
    mid_raw_bytes: list[int] = field(default_factory=list)
    glob_files: int = 0
    globmem_files: int = 0
    globmem_raw_bytes: int = 0
    sparse_file: str = "cancel/huge.bin"
    repo_files: int = 0
    repo_dirs: int = 0
    repo_small_matches: int = 0
    repo_heavy_raw_bytes: int = 0
    repo_heavy_matches: int = 0
    repo_glob_files: int = 0
    repo_glob_raw_bytes: int = 0
    repo_cwd_glob_files: int = 0
    parts: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        """Human-readable lines about the parts built for this run (for the report header)."""
        mid = self.mid_raw_bytes or [0]
        lines = {
            "small": f"small: {SMALL_FILES} files, {self.small_matches} matches of {SMALL_PATTERN!r}",
            "heavy": f"heavy: rg --json output {self.heavy_raw_bytes / 1e6:.1f} MB, "
            f"{self.heavy_matches} matches of {HEAVY_PATTERN!r}",
            "overflow": f"overflow: rg --json output {self.overflow_raw_bytes / 1e6:.1f} MB "
            f"for {OVERFLOW_PATTERN!r}",
            "mid": f"mid: {len(self.mid_dirs)} dirs, rg --json output "
            f"{min(mid) / 1e6:.2f}-{max(mid) / 1e6:.2f} MB each for {MID_PATTERN!r}",
            "glob": f"glob: {self.glob_files} empty files in {GLOB_DIRS} dirs",
            "globmem": f"globmem: {self.globmem_files} empty files, rg --files output "
            f"{self.globmem_raw_bytes / 1e6:.1f} MB",
            "cancel": f"cancel: {self.sparse_file}, {SPARSE_BYTES // 1024**3} GiB sparse",
            "repo": f"repo: {self.repo_files} files in {self.repo_dirs} dirs; glob "
            f"{REPO_GLOB_PATTERN!r} in {REPO_GLOB_PATH}: {self.repo_glob_files} paths, "
            f"{self.repo_glob_raw_bytes / 1e6:.1f} MB; {self.repo_small_matches} matches of "
            f"{repo_corpus.REPO_SMALL_PATTERN!r}; heavy rg --json output "
            f"{self.repo_heavy_raw_bytes / 1e6:.1f} MB, {self.repo_heavy_matches} matches",
        }
        return [f"corpus: {self.workspace}"] + [f"  {lines[p]}" for p in self.parts]


def rg_json_size(rg: str, pattern: str, cwd: Path) -> tuple[int, int]:
    """(bytes, match messages) of ``rg --json`` for ``pattern`` in ``cwd``, read through a pipe."""
    proc = subprocess.Popen(
        [rg, "--json", "--hidden", "--no-config", "--no-ignore-global", "-e", pattern],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=reference_env(),
    )
    assert proc.stdout is not None
    marker = b'\n{"type":"match"'  # every match message starts a line (a "begin" comes first)
    size = 0
    matches = 0
    tail = b""
    while chunk := proc.stdout.read(1 << 20):
        size += len(chunk)
        data = tail + chunk
        matches += data.count(marker)
        tail = data[-(len(marker) - 1) :]
    proc.wait()
    if proc.returncode not in (0, 1):
        raise CorpusError(f"rg exited with {proc.returncode} measuring {cwd}")
    return size, matches


def rg_files_size(rg: str, cwd: Path, pattern: str | None = None) -> tuple[int, int]:
    """(bytes, names) of ``rg --files --null`` in ``cwd`` as the worker's glob lists them
    (``pattern``: its ``--glob``), read through a pipe."""
    argv = [rg, "--files", "--null", "--no-config", "--no-ignore", "--hidden"]
    argv += [f"--glob={pattern}"] if pattern else []
    out = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, check=True).stdout
    return len(out), out.count(b"\0")


def reference_env() -> dict[str, str]:
    """The environment rg runs with in references and checks: nothing that configures rg."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


def rg_version(rg: str) -> str:
    """The first line of ``rg --version``."""
    out = subprocess.run([rg, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else "?"


def build(
    root: Path, rg: str, *, parts: set[str] | None = None, rebuild: bool = False, log: Any = print
) -> Corpus:
    """Build (or reuse) the corpora under ``root`` and return what they hold.

    Args:
        root: the corpus directory.
        rg: the rg binary used to verify output sizes.
        parts: which parts to build (default: all).
        rebuild: ignore the markers and build everything again.
        log: progress lines go here.
    """
    root = root.resolve()
    workspace = root / "ws"
    markers = root / "markers"
    workspace.mkdir(parents=True, exist_ok=True)
    markers.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(root=root, workspace=workspace, rg=rg)
    version = rg_version(rg)
    builders: dict[str, Callable[[Path, Corpus], dict[str, Any]]] = {
        "small": _build_small,
        "heavy": _build_heavy,
        "overflow": _build_overflow,
        "mid": _build_mid,
        "glob": _build_glob,
        "globmem": _build_globmem,
        "cancel": _build_cancel,
        "repo": _build_repo,
    }
    for name, builder in builders.items():
        if parts is not None and name not in parts:
            continue
        corpus.parts.append(name)
        params = {"version": VERSION, "seed": SEED, "rg": version, **_params(name)}
        marker = markers / f"{name}.json"
        target = workspace / name
        saved = _read_marker(marker)
        if not rebuild and saved and saved.get("params") == params and target.exists():
            _apply(corpus, saved.get("measured", {}))
            continue
        started = time.perf_counter()
        marker.unlink(missing_ok=True)
        building = workspace / f".{name}.building"
        for stale in (building, target):
            if stale.exists():
                shutil.rmtree(stale)
        building.mkdir(parents=True)
        measured = builder(building, corpus)
        building.rename(target)
        _apply(corpus, measured)
        marker.write_text(json.dumps({"params": params, "measured": measured}, indent=2))
        log(f"built corpus part {name} in {time.perf_counter() - started:.1f} s: {measured}")
    return corpus


def _params(name: str) -> dict[str, Any]:
    table: dict[str, dict[str, Any]] = {
        "small": {"files": SMALL_FILES, "matches": SMALL_MATCHES, "pattern": SMALL_PATTERN},
        "heavy": {
            "files": HEAVY_FILES,
            "per_file": HEAVY_MATCHES_PER_FILE,
            "pattern": HEAVY_PATTERN,
        },
        "overflow": {
            "files": OVERFLOW_FILES,
            "lines": OVERFLOW_LINES_PER_FILE,
            "pattern": OVERFLOW_PATTERN,
        },
        "mid": {
            "dirs": MID_DIRS,
            "files": MID_FILES,
            "per_file": MID_MATCHES_PER_FILE,
            "pattern": MID_PATTERN,
        },
        "glob": {"dirs": GLOB_DIRS, "per_dir": GLOB_PER_DIR},
        "globmem": {
            "areas": GLOBMEM_AREAS,
            "modules": GLOBMEM_MODULES,
            "files": GLOBMEM_FILES,
        },
        "cancel": {"bytes": SPARSE_BYTES},
        "repo": {
            **repo_corpus.params(),
            "glob": [REPO_GLOB_PATH, REPO_GLOB_PATTERN, REPO_CWD_GLOB, REPO_CWD_GLOB_PATTERN],
        },
    }
    return table[name]


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _apply(corpus: Corpus, measured: dict[str, Any]) -> None:
    for key, value in measured.items():
        if hasattr(corpus, key):
            setattr(corpus, key, value)


def _rng(part: str) -> random.Random:
    return random.Random(f"{SEED}:{part}")


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _code_line(rng: random.Random, i: int) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"def {rng.choice(_WORDS)}_{i}({rng.choice(_WORDS)}, {rng.choice(_WORDS)}):"
    if kind == 1:
        return f"    {rng.choice(_WORDS)} = {rng.choice(_WORDS)}.{rng.choice(_WORDS)}({i})"
    if kind == 2:
        return f"    # {_words(rng, rng.randrange(3, 9))}"
    return f"    return {rng.choice(_WORDS)}_{rng.randrange(1000)}"


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _build_small(out: Path, corpus: Corpus) -> dict[str, Any]:
    rng = _rng("small")
    files = [out / f"pkg{i % 15:02}" / f"module_{i:03}.txt" for i in range(SMALL_FILES)]
    contents = [[_code_line(rng, j) for j in range(rng.randrange(30, 60))] for _ in files]
    for k in range(SMALL_MATCHES):
        lines = contents[rng.randrange(len(files))]
        at = rng.randrange(len(lines))
        lines.insert(at, f"    value_{k} = {SMALL_PATTERN}({rng.choice(_WORDS)})")
    for path, lines in zip(files, contents, strict=True):
        _write(path, lines)
    _, matches = rg_json_size(corpus.rg, SMALL_PATTERN, out)
    if matches != SMALL_MATCHES:
        raise CorpusError(f"small corpus has {matches} matches, expected {SMALL_MATCHES}")
    return {"small_matches": matches}


def _matching_files(
    out: Path, part: str, pattern: str, files: int, per_file: int, noise: int = 1
) -> None:
    """``files`` files, each with ``per_file`` lines containing ``pattern`` between
    ``noise`` non-matching lines."""
    rng = _rng(part)
    for f in range(files):
        lines: list[str] = []
        for i in range(per_file):
            lines.extend(_code_line(rng, i) for _ in range(noise))
            lines.append(
                f"    {rng.choice(_WORDS)}_{i} = {pattern}({_words(rng, rng.randrange(2, 7))})"
            )
        _write(out / f"d{f % 10:02}" / f"file_{f:04}.txt", lines)


def _build_heavy(out: Path, corpus: Corpus) -> dict[str, Any]:
    _matching_files(out, "heavy", HEAVY_PATTERN, HEAVY_FILES, HEAVY_MATCHES_PER_FILE)
    size, matches = rg_json_size(corpus.rg, HEAVY_PATTERN, out)
    low, high = HEAVY_RAW_RANGE
    if not low <= size <= high:
        raise CorpusError(f"heavy corpus: rg --json emits {size} bytes, want {low}-{high}")
    return {"heavy_raw_bytes": size, "heavy_matches": matches}


def _build_overflow(out: Path, corpus: Corpus) -> dict[str, Any]:
    rng = _rng("overflow")
    for f in range(OVERFLOW_FILES):
        lines = [
            f"{OVERFLOW_PATTERN} {i:07} {_words(rng, 5)}" for i in range(OVERFLOW_LINES_PER_FILE)
        ]
        _write(out / f"big_{f:02}.txt", lines)
    size, _ = rg_json_size(corpus.rg, OVERFLOW_PATTERN, out)
    if size < OVERFLOW_RAW_MIN:
        raise CorpusError(f"overflow corpus: rg --json emits {size} bytes, want >= 100 MB")
    return {"overflow_raw_bytes": size}


def _build_mid(out: Path, corpus: Corpus) -> dict[str, Any]:
    dirs: list[str] = []
    sizes: list[int] = []
    for d in range(MID_DIRS):
        sub = out / f"p{d:02}"
        _matching_files(sub, f"mid{d}", MID_PATTERN, MID_FILES, MID_MATCHES_PER_FILE)
        size, _ = rg_json_size(corpus.rg, MID_PATTERN, sub)
        low, high = MID_RAW_RANGE
        if not low <= size <= high:
            raise CorpusError(
                f"mid corpus p{d:02}: rg --json emits {size} bytes, want {low}-{high}"
            )
        dirs.append(f"mid/p{d:02}")
        sizes.append(size)
    return {"mid_dirs": dirs, "mid_raw_bytes": sizes}


def _build_glob(out: Path, corpus: Corpus) -> dict[str, Any]:
    flags = os.O_CREAT | os.O_WRONLY | os.O_EXCL
    for d in range(GLOB_DIRS):
        sub = out / f"d{d:03}"
        sub.mkdir()
        for i in range(GLOB_PER_DIR):
            os.close(os.open(sub / f"f{i:04}.txt", flags, 0o644))
    count = sum(1 for d in out.iterdir() for _ in os.scandir(d))
    return {"glob_files": count}


def _build_globmem(out: Path, corpus: Corpus) -> dict[str, Any]:
    flags = os.O_CREAT | os.O_WRONLY | os.O_EXCL
    n = 0
    for a in range(GLOBMEM_AREAS):
        for m in range(GLOBMEM_MODULES):
            sub = out / f"area_{a:02}" / f"module_{m:02}"
            sub.mkdir(parents=True)
            for _ in range(GLOBMEM_FILES):
                os.close(os.open(sub / f"file_{n:06}_x.txt", flags, 0o644))
                n += 1
    size, names = rg_files_size(corpus.rg, out)
    low, high = GLOBMEM_RAW_RANGE
    if not low <= size <= high or names != n:
        raise CorpusError(f"globmem corpus: rg --files lists {names} names in {size} bytes")
    return {"globmem_files": names, "globmem_raw_bytes": size}


def _build_cancel(out: Path, corpus: Corpus) -> dict[str, Any]:
    with open(out / "huge.bin", "wb") as f:
        f.truncate(SPARSE_BYTES)
    return {"sparse_file": "cancel/huge.bin"}


def _build_repo(out: Path, corpus: Corpus) -> dict[str, Any]:
    measured = repo_corpus.build(out)
    small = out / repo_corpus.REPO_SMALL_PACKAGE
    _, small_matches = rg_json_size(corpus.rg, repo_corpus.REPO_SMALL_PATTERN, small)
    heavy = out / repo_corpus.REPO_HEAVY_PACKAGE
    size, matches = rg_json_size(corpus.rg, repo_corpus.REPO_HEAVY_PATTERN, heavy)
    low, high = HEAVY_RAW_RANGE
    if small_matches != repo_corpus.REPO_SMALL_MATCHES or not low <= size <= high:
        raise CorpusError(f"repo corpus: {small_matches} small matches, heavy {size} bytes")
    glob_bytes, glob_files = rg_files_size(corpus.rg, out / REPO_GLOB_PATH, REPO_GLOB_PATTERN)
    cwd_dir = out / REPO_CWD_GLOB.removeprefix(f"{REPO_CWD}/")
    _, cwd_files = rg_files_size(corpus.rg, cwd_dir, REPO_CWD_GLOB_PATTERN)
    return {
        **measured,
        "repo_small_matches": small_matches,
        "repo_heavy_raw_bytes": size,
        "repo_heavy_matches": matches,
        "repo_glob_files": glob_files,
        "repo_glob_raw_bytes": glob_bytes,
        "repo_cwd_glob_files": cwd_files,
    }


def as_dict(corpus: Corpus) -> dict[str, Any]:
    """The corpus description for the JSON report."""
    data = asdict(corpus)
    data["root"] = str(corpus.root)
    data["workspace"] = str(corpus.workspace)
    return data
