"""Generated monorepos of the shapes people have, with the ignore patterns they use.

Each builder writes a git work tree (a real repository, ``git init``, tracking nothing, so
git's own ignore engine can judge it) where every file holds ``needle``: a pnpm workspace,
a cargo workspace and a Python monorepo with nested ``.gitignore`` files. Between them
they hold the classic patterns (``**/x/**``, ``dir/sub/*``, ``/anchored``, negations at
several depths, ``.ignore`` and ``.rgignore``, ``.git/info/exclude``), a nested repository,
hidden files, a non-UTF-8 name, and build or dependency directories that a model may name
as a search root although the ignore files hide them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import write_tree

# git without the host's configuration (a global excludesFile would change its answer).
GIT_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "LC_ALL": "C",
}
VCS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")


@dataclass(frozen=True)
class Shape:
    """A generated monorepo.

    Attributes:
        root: the workspace.
        ignored_roots: directories the ignore files hide, to be named as search roots.
        gitignore_only: no ``.ignore``/``.rgignore`` file: git's engine judges every file.
    """

    root: Path
    ignored_roots: tuple[str, ...]
    gitignore_only: bool


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=GIT_ENV)


def _needle(files: dict[str, str]) -> dict[str, str]:
    return {name: f"{text}needle in {name}\n" for name, text in files.items()}


def pnpm_workspace(root: Path) -> Shape:
    """A pnpm workspace: ``**/node_modules/**`` as pnpm writes it, packages' build output,
    an anchored directory with a re-included file three levels down, a package whose own
    ``.gitignore`` re-includes what the root hides, ``.git/info/exclude``."""
    files = _needle(
        {
            ".gitignore": (
                "**/node_modules/**\nlib\ndist\n*.log\ncoverage\n.turbo\n"
                "__typecheck__/\n/packages/core/src/generated/*\n"
                "!/packages/core/src/generated/keep.ts\npackages/*/fixtures/*/out/\n# "
            ),
            "pnpm-workspace.yaml": "packages:\n  - packages/*\n  - apps/*\n# ",
            "package.json": '{"private": true}\n// ',
            ".npmrc": "shamefully-hoist=false\n# ",
            "node_modules/root-dep/index.js": "module.exports = 1\n// ",
            "node_modules/.pnpm/dep@1.0.0/node_modules/dep/index.js": "// ",
            "packages/core/package.json": '{"name": "core"}\n// ',
            "packages/core/src/index.ts": "export const a = 1\n// ",
            "packages/core/src/util/a.ts": "export const b = 2\n// ",
            "packages/core/src/util/deep/b.ts": "// ",
            "packages/core/src/generated/x.ts": "// ",
            "packages/core/src/generated/keep.ts": "// ",
            "packages/core/src/generated/sub/y.ts": "// ",
            "packages/core/lib/index.js": "// ",
            "packages/core/dist/index.js": "// ",
            "packages/core/node_modules/dep/index.js": "// ",
            "packages/core/node_modules/dep/sub/deep/x.js": "// ",
            "packages/core/node_modules/.bin/tool": "# ",
            "packages/core/test/a.test.ts": "// ",
            "packages/core/debug.log": "",
            "packages/core/__typecheck__/index.d.ts": "// ",
            "packages/cli/package.json": '{"name": "cli"}\n// ',
            "packages/cli/.gitignore": "!debug.log\n# ",
            "packages/cli/debug.log": "",
            "packages/cli/src/main.ts": "// ",
            "packages/cli/src/cmd/run.ts": "// ",
            "packages/cli/src/cmd/build.ts": "// ",
            "packages/cli/fixtures/simple/out/x.txt": "",
            "packages/cli/fixtures/simple/in/y.txt": "",
            "packages/cli/node_modules/core/index.js": "// ",
            "packages/ui/package.json": '{"name": "ui"}\n// ',
            "packages/ui/src/App.tsx": "// ",
            "packages/ui/src/components/Button.tsx": "// ",
            "packages/ui/coverage/lcov.info": "",
            "packages/ui/.turbo/turbo-build.log": "",
            "packages/ui/.eslintcache": "",
            "apps/web/package.json": '{"name": "web"}\n// ',
            "apps/web/src/page.tsx": "// ",
            "apps/web/src/lib/api.ts": "// ",
            "apps/web/.env.local": "",
            "apps/web/dist/main.js": "// ",
            "notes.local": "",
            ".github/workflows/ci.yml": "# ",
        }
    )
    write_tree(root, files)
    git_init(root)
    (root / ".git/info/exclude").write_text("*.local\n")
    return Shape(
        root,
        (
            "node_modules",
            "packages/core/node_modules",
            "packages/core/node_modules/dep",
            "packages/core/lib",
            "packages/core/src/generated",
            "packages/cli/fixtures/simple/out",
            "apps/web/dist",
        ),
        gitignore_only=True,
    )


def cargo_workspace(root: Path) -> Shape:
    """A cargo workspace: ``target/`` at every level, an ``.ignore`` hiding a generated
    directory's files but a few (``doc/book/src/commands/*`` and negations, as cargo's
    own), an ``.rgignore`` with a negation, a nested ``.gitignore``, a nested repository."""
    files = _needle(
        {
            ".gitignore": "/target\n/Cargo.lock\ntarget/\n**/*.rs.bk\n.idea/\n# ",
            ".ignore": (
                "doc/book/src/commands/*\n!doc/book/src/commands/index.md\n"
                "tests/testsuite/**/*.jsonl\n# "
            ),
            "Cargo.toml": "[workspace]\n# ",
            "src/main.rs": "fn main() {}\n// ",
            "crates/core/Cargo.toml": "[package]\n# ",
            "crates/core/src/lib.rs": "// ",
            "crates/core/src/storage/x.rs": "// ",
            "crates/core/src/storage/y.rs": "// ",
            "crates/core/src/lib.rs.bk": "// ",
            "crates/core/target/debug/out.rs": "// ",
            "crates/core/benches/b.rs": "// ",
            "crates/cli/Cargo.toml": "[package]\n# ",
            "crates/cli/src/main.rs": "// ",
            "crates/cli/tests/it.rs": "// ",
            "crates/cli/.rgignore": "*.snap\n!keep.snap\n# ",
            "crates/cli/snapshots/a.snap": "",
            "crates/cli/snapshots/keep.snap": "",
            "doc/book/.gitignore": "book/\n# ",
            "doc/book/book/index.html": "",
            "doc/book/src/guide.md": "",
            "doc/book/src/commands/cargo-build.md": "",
            "doc/book/src/commands/cargo-test.md": "",
            "doc/book/src/commands/index.md": "",
            "tests/testsuite/main.rs": "// ",
            "tests/testsuite/cargo_add/out/log.jsonl": "",
            "tests/testsuite/cargo_add/in/Cargo.toml": "# ",
            "target/debug/deps/x.d": "",
            "target/release/y": "",
            ".idea/workspace.xml": "",
            ".cargo/config.toml": "# ",
            "vendor/nested/.gitignore": "*.o\ntarget/\n# ",
            "vendor/nested/a.o": "",
            "vendor/nested/b.c": "// ",
            "vendor/nested/src/deep/c.h": "// ",
            "vendor/nested/target/x": "",
        }
    )
    write_tree(root, files)
    git_init(root)
    git_init(root / "vendor/nested")
    return Shape(
        root,
        ("target", "target/debug", "crates/core/target", "doc/book/book", "vendor/nested/target"),
        gitignore_only=False,
    )


def python_monorepo(root: Path) -> Shape:
    """A Python monorepo: services and libraries each with nested ``.gitignore`` files
    (anchored patterns and a negation inside a package), caches and a virtualenv, a
    root-anchored ``/build/`` that a package's own ``build/`` is not, hidden files and a
    non-UTF-8 name."""
    files = _needle(
        {
            ".gitignore": (
                "__pycache__/\n*.py[cod]\n.venv/\n/build/\n/dist/\n*.egg-info/\n.*cache\n.tox/\n# "
            ),
            "pyproject.toml": "[tool]\n# ",
            ".env": "",
            ".venv/lib/python3.11/site-packages/pkg/mod.py": "# ",
            ".venv/pyvenv.cfg": "",
            "build/lib/common/util.py": "# ",
            "dist/pkg.tar": "",
            "services/api/pyproject.toml": "# ",
            "services/api/.gitignore": (
                "local_settings.py\n/migrations/*\n!/migrations/0001_initial.py\n# "
            ),
            "services/api/local_settings.py": "# ",
            "services/api/migrations/0001_initial.py": "# ",
            "services/api/migrations/0002_auto.py": "# ",
            "services/api/src/api/__init__.py": "# ",
            "services/api/src/api/routes/users.py": "# ",
            "services/api/src/api/routes/__pycache__/users.cpython-311.pyc": "",
            "services/api/tests/test_users.py": "# ",
            "services/api/build/lib/api.py": "# ",
            "services/api/api.egg-info/PKG-INFO": "",
            "services/worker/src/worker/main.py": "# ",
            "services/worker/src/worker/main.pyc": "",
            "services/worker/.pytest_cache/v/cache/nodeids": "",
            "services/worker/.gitignore": "*.tmp\n!keep.tmp\n# ",
            "services/worker/a.tmp": "",
            "services/worker/keep.tmp": "",
            "libs/common/src/common/util.py": "# ",
            "libs/common/src/common/deep/er/est.py": "# ",
            "libs/common/.tox/py311/log.txt": "",
            "libs/common/dist/common.whl": "",
            "tools/scripts/release.py": "# ",
        }
    )
    write_tree(root, files)
    with open(os.fsencode(root / "libs/common/src/common") + b"/caf\xe9.py", "wb") as f:
        f.write(b"# needle caf\xe9\n")
    git_init(root)
    return Shape(
        root,
        (
            ".venv/lib",
            "build",
            "build/lib",
            "services/api/migrations",
            "services/api/src/api/routes/__pycache__",
            "libs/common/.tox",
        ),
        gitignore_only=True,
    )


SHAPES: dict[str, Callable[[Path], Shape]] = {
    "pnpm": pnpm_workspace,
    "cargo": cargo_workspace,
    "python": python_monorepo,
}


def directories(root: Path) -> list[str]:
    """Every directory of the tree (relative, VCS directories left out), shallowest first."""
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in VCS)
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            found.append(rel)
    return sorted(found, key=lambda d: (d.count("/"), d))


def git_visible(root: Path) -> set[str]:
    """The files git's own ignore engine leaves visible (relative; each nested repository
    asked itself, as its own rules replace the outer ``.gitignore``), left out what rg never
    searches (VCS directories, links, binary files), names shown lossily as the contract
    shows them."""
    out: set[str] = set()

    def walk(repo: Path, prefix: str) -> None:
        listed = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
            env=GIT_ENV,
        ).stdout
        for raw in filter(None, listed.split(b"\0")):
            name = os.fsdecode(raw)
            full = repo / name
            if name.endswith("/") and (full / ".git").exists():
                walk(full, prefix + name)
            elif any(part in VCS for part in name.split("/")) or full.is_symlink():
                continue  # never searched; rg does not follow links it walks
            elif full.is_file() and b"\0" not in full.read_bytes():  # rg skips binary files
                shown = (prefix + name).encode("utf-8", "surrogateescape")
                out.add(shown.decode("utf-8", "replace"))

    walk(root, "")
    return out


def git_ignores(root: Path, rel: str) -> bool:
    """Whether git hides the directory ``rel`` or one of its parents (each part asked of the
    innermost repository holding it)."""
    parts = rel.split("/")
    repo, base = root, 0
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[base:i])
        done = subprocess.run(
            ["git", "-C", str(repo), "check-ignore", "-q", sub + "/"], env=GIT_ENV, check=False
        )
        if done.returncode == 0:
            return True
        if (repo / sub / ".git").exists():
            repo, base = repo / sub, i
    return False
