"""A real-shaped repository corpus: a monorepo with its dependencies and build output.

Layout under ``ws/repo`` (deterministic; about 95,000 files in about 700 directories)::

    .git/HEAD                    a git repository, so the root .gitignore applies
    .gitignore                   node_modules/ dist/ target/ coverage/ *.log
    .github/workflows/*.yml      hidden files
    packages/pNN/                REPO_PACKAGES workspace packages, each:
      package.json
      src/aN/mN/*.ts             source (a few hundred bytes each)
      tests/*.test.ts
      dist/{esm,cjs}/*.js        build output (ignored)
      node_modules/dN/{lib,dist}/*.js   the package's dependencies (ignored)
    node_modules/dNN/{lib,dist}/*.js    hoisted dependencies (ignored)
    crates/cN/src/mN/*.rs, crates/cN/target/debug/{deps,build}/*   (target/ ignored)
    generated/proto/*.pb.ts      generated and checked in
    docs/guide/a/b/c/d/e/*.md    deep paths

Files are written package by package, as a checkout does, so each directory's files have
neighbouring mtimes; then REPO_EDITS source files across the packages are touched again,
one after another, as recent edits are. The small needle is in REPO_SMALL_MATCHES lines of
one package's sources; the heavy needle in every source file of another (60,000 lines,
about 15 MB of ``rg --json``); neither is in an ignored file, so a grep finds the same
lines whether or not the root .gitignore is applied below the root.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

REPO_PACKAGES = 16
REPO_AREAS = 4
REPO_MODULES = 5
REPO_SRC_PER_DIR = 100
REPO_TESTS = 200
REPO_DIST_PER_DIR = 500
REPO_PKG_DEPS = 4
REPO_DEP_PER_DIR = 200
REPO_ROOT_DEPS = 20
REPO_ROOT_DEP_PER_DIR = 300
REPO_CRATES = 2
REPO_CRATE_MODULES = 3
REPO_CRATE_PER_DIR = 100
REPO_TARGET_PER_DIR = 2000
REPO_GENERATED = 1000
REPO_DOCS = 100
REPO_EDITS = 300

REPO_SMALL_PATTERN = "repo_small_needle"
REPO_SMALL_PACKAGE = "packages/p03"
REPO_SMALL_MATCHES = 10
REPO_HEAVY_PATTERN = "repo_heavy_needle"
REPO_HEAVY_PACKAGE = "packages/p07"
REPO_HEAVY_PER_FILE = 30
GITIGNORE = "node_modules/\ndist/\ntarget/\ncoverage/\n*.log\n"

_WORDS = (
    "state props value result handler request response client server buffer stream "
    "parse render index offset length count total cache store load save config"
).split()


def params() -> dict[str, Any]:
    """Everything the layout depends on (the corpus marker's parameters)."""
    return {k: v for k, v in globals().items() if k.startswith("REPO_") or k == "GITIGNORE"}


def _line(rng: random.Random, i: int) -> str:
    a, b, c = (rng.choice(_WORDS) for _ in range(3))
    return f"export const {a}_{i} = ({b}: number) => {c}({b} + {i});"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _empty_files(directory: Path, names: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.close(os.open(directory / name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))


def _filled(directory: Path, names: list[str], text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        _write(directory / name, text)


def build(out: Path) -> dict[str, Any]:
    """Write the repository under ``out``; returns what was written (counts and needles)."""
    rng = random.Random("repo")
    (out / ".git").mkdir()
    _write(out / ".git" / "HEAD", "ref: refs/heads/main\n")
    _write(out / ".gitignore", GITIGNORE)
    _filled(out / ".github" / "workflows", [f"ci{i}.yml" for i in range(6)], "on: push\n")
    small_at = sorted(rng.sample(range(REPO_AREAS * REPO_MODULES * REPO_SRC_PER_DIR), 10))
    sources: list[Path] = []
    for p in range(REPO_PACKAGES):
        pkg = out / "packages" / f"p{p:02}"
        _write(pkg / "package.json", f'{{"name": "@repo/p{p:02}", "version": "1.0.{p}"}}\n')
        n = 0
        for a in range(REPO_AREAS):
            for m in range(REPO_MODULES):
                for f in range(REPO_SRC_PER_DIR):
                    lines = [_line(rng, i) for i in range(rng.randrange(8, 16))]
                    if f"packages/p{p:02}" == REPO_HEAVY_PACKAGE:
                        lines += [
                            f"  const h{i} = {REPO_HEAVY_PATTERN}({rng.choice(_WORDS)}, {i});"
                            for i in range(REPO_HEAVY_PER_FILE)
                        ]
                    if f"packages/p{p:02}" == REPO_SMALL_PACKAGE and n in small_at:
                        lines.insert(3, f"  {REPO_SMALL_PATTERN}({rng.choice(_WORDS)});")
                    path = pkg / "src" / f"a{a}" / f"m{m}" / f"f{f:03}.ts"
                    _write(path, "\n".join(lines) + "\n")
                    sources.append(path)
                    n += 1
        _filled(pkg / "tests", [f"t{i:03}.test.ts" for i in range(REPO_TESTS)], "test();\n")
        for kind in ("esm", "cjs"):
            names = [f"chunk{i:04}.js" for i in range(REPO_DIST_PER_DIR)]
            _filled(pkg / "dist" / kind, names, "var a=1;" * 30 + "\n")
        for d in range(REPO_PKG_DEPS):
            for kind in ("lib", "dist"):
                names = [f"x{i:03}.js" for i in range(REPO_DEP_PER_DIR)]
                _filled(pkg / "node_modules" / f"d{d}" / kind, names, "module.exports=1;" * 8)
    for d in range(REPO_ROOT_DEPS):
        for kind in ("lib", "dist"):
            names = [f"x{i:03}.js" for i in range(REPO_ROOT_DEP_PER_DIR)]
            _filled(out / "node_modules" / f"d{d:02}" / kind, names, "module.exports=1;" * 8)
    for c in range(REPO_CRATES):
        crate = out / "crates" / f"c{c}"
        for m in range(REPO_CRATE_MODULES):
            names = [f"f{i:03}.rs" for i in range(REPO_CRATE_PER_DIR)]
            _filled(crate / "src" / f"m{m}", names, "pub fn f() {}\n")
        for kind in ("deps", "build"):
            names = [f"o{i:04}.d" for i in range(REPO_TARGET_PER_DIR)]
            _empty_files(crate / "target" / "debug" / kind, names)
    generated = [f"msg{i:04}.pb.ts" for i in range(REPO_GENERATED)]
    _filled(out / "generated" / "proto", generated, "// generated\n")
    deep = out / "docs" / "guide" / "a" / "b" / "c" / "d" / "e"
    _filled(deep, [f"page{i:03}.md" for i in range(REPO_DOCS)], "# page\n")
    # Recent edits: some sources touched again, one after another.
    base = max(os.stat(p).st_mtime_ns for p in sources[-10:]) + 1_000_000_000
    for i, path in enumerate(rng.sample(sources, REPO_EDITS)):
        t = base + i * 1_000_000
        os.utime(path, ns=(t, t))
    files = sum(len(names) for _, _, names in os.walk(out))
    dirs = sum(len(subdirs) for _, subdirs, _ in os.walk(out))
    return {"repo_files": files, "repo_dirs": dirs}
