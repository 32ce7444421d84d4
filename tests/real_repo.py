"""A repository shaped like the ones agents search (for the differential test against rg).

A git monorepo: packages with sources, tests and build output, a root ``.gitignore`` for
dependency and build directories (``node_modules/``, ``dist/``, ``target/``, ``/build``),
generated files, logs with a negated keeper, an ``.ignore`` and an ``.rgignore`` beside
them, nested ``.gitignore`` files (one re-including what the root hides), a nested
repository whose own rules replace the outer ``.gitignore``, ``.git/info/exclude``, hidden
files, deep paths, a non-UTF-8 name and a long line. Every file holds ``needle`` on some
lines, so any grep for it sees what the ignore files hide or show.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.helpers import write_tree

ROOT_GITIGNORE = """\
# dependencies and build output
node_modules/
dist/
target/
/build
*.log
!keep.log
**/generated/*.ts
coverage
"""


def real_shaped_repo(root: Path, *, seed: int = 38) -> Path:
    """Write the repository under ``root``; return ``root``."""
    rnd = random.Random(seed)
    files: dict[str, str | bytes] = {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/config": "[core]\n\tbare = false\n",
        ".git/info/exclude": "*.secret\n",
        ".gitignore": ROOT_GITIGNORE,
        ".ignore": "*.snap\ndocs/api/\n",
        ".env": "NEEDLE_TOKEN=needle\n",
        ".github/workflows/ci.yml": "name: needle ci\n",
        "README.md": "# needle\n",
        "build/out.txt": "needle in build\n",
        "docs/guide.md": "needle guide\n",
        "docs/api/index.html": "<p>needle api</p>\n",
        "notes.secret": "needle secret\n",
        "server.log": "needle log\n",
        "keep.log": "needle kept log\n",
        "coverage/lcov.info": "needle coverage\n",
        "a/b/c/d/e/f/deep.txt": "deep needle\n",
        "long.txt": "x" * 5000 + " needle\n",
    }
    for package in ("api", "web", "shared"):
        base = f"packages/{package}"
        files[f"{base}/package.json"] = f'{{"name": "{package}", "needle": true}}\n'
        for i in range(rnd.randint(6, 12)):
            depth = "/".join(f"m{rnd.randint(0, 3)}" for _ in range(rnd.randint(0, 3)))
            name = f"{base}/src/{depth}/f{i}.ts" if depth else f"{base}/src/f{i}.ts"
            files[name] = "".join(
                f"line {n} {'needle' if rnd.random() < 0.3 else 'hay'}\n" for n in range(8)
            )
        files[f"{base}/src/generated/types.ts"] = "export type Needle = 1\n"
        files[f"{base}/src/generated/readme.md"] = "generated needle docs\n"
        files[f"{base}/tests/test_{package}.py"] = "def test_needle():\n    pass\n"
        files[f"{base}/node_modules/dep/index.js"] = "module.exports = 'needle'\n"
        files[f"{base}/dist/bundle.js"] = "var needle;\n"
        files[f"{base}/__snapshots__/x.snap"] = "needle snapshot\n"
        files[f"{base}/debug.log"] = "needle debug\n"
    # A package re-includes what the root hides: its own .gitignore wins below it.
    files["packages/web/.gitignore"] = "!debug.log\nlocal/\n"
    files["packages/web/local/settings.json"] = '{"needle": 1}\n'
    files["packages/web/.rgignore"] = "*.md\n"
    files["packages/web/README.md"] = "web needle\n"
    # A Rust crate with its build directory.
    files["crates/core/Cargo.toml"] = '[package]\nname = "needle"\n'
    files["crates/core/src/lib.rs"] = "pub fn needle() {}\n"
    files["crates/core/target/debug/build.log"] = "needle target\n"
    files["crates/core/target/debug/out.rs"] = "fn needle() {}\n"
    # A nested repository: the outer .gitignore stops at it, the outer .ignore does not.
    files["vendor/lib/.git/HEAD"] = "ref: refs/heads/main\n"
    files["vendor/lib/.gitignore"] = "*.o\n"
    files["vendor/lib/a.o"] = "needle object\n"
    files["vendor/lib/b.c"] = "int needle;\n"
    files["vendor/lib/trace.log"] = "needle trace\n"
    files["vendor/lib/dist/lib.js"] = "var needle;\n"
    files["vendor/lib/x.snap"] = "needle snap\n"
    files["vendor/lib/src/deep/c.h"] = "#define NEEDLE needle\n"
    write_tree(root, files)
    # A name that is not UTF-8 (rg reports it as bytes).
    with open(os.fsencode(root / "packages/shared/src") + b"/caf\xe9.ts", "wb") as f:
        f.write(b"needle caf\xe9\n")
    return root
