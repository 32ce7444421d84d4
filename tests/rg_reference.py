"""What a search below the workspace root must give, computed without the worker's code.

The contract: a glob or grep with ``path``/``cwd`` below the root gives exactly what rg
(15 or later) gives run *in the workspace root* with the search root as its path argument
(:func:`grep_from_root`, :func:`glob_from_root`): every ignore file from the root down
applies beneath the search root, and the search root itself is searched even where an
ignore file hides it. The worker runs rg another way (in the search root), so a bug of rg's
in applying parent directories' ignore files shows as a difference.

Where the search root is not itself hidden, a second rg answer must agree:
:func:`visible_from_root`, the files a walk from the workspace root sees, kept beneath the
search root (rg applies each ignore file as it descends into its directory, the case no
rg version has had wrong). ``tests.monorepo_shapes.git_visible`` is a third, from git.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import re
import subprocess
from pathlib import Path

from fs_search.activities._workspace import VCS_DIRS

Match = tuple[str, int, str]  # (display path, line number, line)


def run(rg: str, argv: list[str], cwd: Path) -> bytes:
    """rg's stdout, its configuration and the host's global gitignore ignored."""
    done = subprocess.run(
        [rg, "--no-config", "--no-ignore-global", *argv],
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


def lossy(name: str) -> str:
    """A file system name as the contract shows it (undecodable bytes as U+FFFD)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def shown(path: str | None, under: str) -> str:
    """The display path: the normalised ``path`` joined with the path under the search root."""
    if not path:
        return under
    norm = posixpath.normpath(path)
    return under if norm == "." else f"{norm}/{under}"


def search_root(ws: Path, cwd: str | None, path: str | None) -> str:
    """The search root relative to the workspace root ("." for the root itself)."""
    full = os.path.normpath(os.path.join(ws, cwd or ".", path or "."))
    rel = os.path.relpath(full, ws)
    assert not rel.startswith(".."), (cwd, path)
    return rel


def anchored(glob: str, root: str) -> str:
    """``glob``, matched relative to the search root, for rg run in the workspace root: a
    glob with a ``/`` is anchored, so the search root (its glob characters escaped) goes
    before it; one without matches a name at any depth either way."""
    if root == "." or "/" not in glob.rstrip("/"):
        return glob
    return re.sub(r"([*?\[\]{}\\!])", r"\\\1", root) + "/" + glob.lstrip("/")


def _vcs() -> list[str]:
    return [f"--glob=!{d}" for d in VCS_DIRS]


def grep_from_root(
    rg: str, ws: Path, cwd: str | None, path: str | None, pattern: str, include: str | None = None
) -> list[Match]:
    """rg in the workspace root with the search root as its path argument, shown as the
    contract shows it, ordered by path then line."""
    root = search_root(ws, cwd, path)
    argv = ["--json", "--hidden", *([f"--glob={anchored(include, root)}"] if include else [])]
    out = run(rg, [*argv, *_vcs(), "-e", pattern, "--", root], ws)
    file_target = (ws / root).is_file()
    found = []
    for line in out.splitlines():
        message = json.loads(line)
        if message["type"] != "match":
            continue
        data = message["data"]
        name = _text(data["path"]).removeprefix("./")
        if file_target:
            display = posixpath.normpath(path or root)
        else:
            display = shown(path, name if root == "." else name[len(root) + 1 :])
        text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
        found.append((display, data["line_number"], text))
    return sorted(found, key=lambda m: (m[0].split("/"), m[1]))


def glob_from_root(rg: str, ws: Path, cwd: str | None, path: str | None, pattern: str) -> list[str]:
    """``rg --files`` in the workspace root with the search root as its path argument,
    oldest modified first, shown as the contract shows it."""
    root = search_root(ws, cwd, path)
    argv = ["--files", "--null", "--sort=modified", "--no-ignore", "--hidden"]
    out = run(rg, [*argv, f"--glob={anchored(pattern, root)}", *_vcs(), "--", root], ws)
    names = [os.fsdecode(n).removeprefix("./") for n in out.split(b"\0") if n]
    cut = 0 if root == "." else len(root) + 1
    return [shown(path, lossy(n[cut:])) for n in names]


def visible_from_root(rg: str, ws: Path) -> set[str]:
    """Every file a walk from the workspace root sees (ignore files applied as it descends),
    relative to the root, shown lossily."""
    out = run(rg, ["--files", "--null", "--hidden", *_vcs()], ws)
    return {lossy(os.fsdecode(n).removeprefix("./")) for n in out.split(b"\0") if n}


def files_of(matches: list[Match], ws: Path, cwd: str | None, path: str | None) -> set[str]:
    """The files of ``matches`` (display paths) relative to the workspace root."""
    root = search_root(ws, cwd, path)
    norm = posixpath.normpath(path) if path else "."
    out = set()
    for display, _, _ in matches:
        under = display if norm == "." else display[len(norm) + 1 :]
        out.add(under if root == "." else f"{root}/{under}")
    return out
