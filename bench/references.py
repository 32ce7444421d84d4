"""The naive consumers the project is compared with: one Python process, no Temporal.

Each runs rg as a subprocess reading its stdout through a pipe (never rg writing to
/dev/null, which rg special-cases) and returns the seconds it took plus what it found, so
the caller can check it found the same thing as the project.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from corpus import reference_env

_CHUNK = 256 * 1024


@dataclass(frozen=True)
class Consumed:
    """What a naive consumer took and found."""

    seconds: float
    items: int
    raw_bytes: int


def grep_argv(rg: str, pattern: str) -> list[str]:
    """The reference grep command (the project adds VCS exclusions and a backstop)."""
    return [rg, "--json", "--hidden", "--no-config", "--no-ignore-global", "-e", pattern]


def _match(message: dict[str, object]) -> tuple[str, int, str] | None:
    if message.get("type") != "match":
        return None
    data = message["data"]
    assert isinstance(data, dict)
    return (data["path"].get("text", ""), int(data["line_number"]), data["lines"].get("text", ""))


def naive_grep(rg: str, pattern: str, cwd: Path) -> Consumed:
    """Run rg --json, ``json.loads`` every line, keep (path, line number, line) of matches."""
    started = time.perf_counter()
    proc = subprocess.run(
        grep_argv(rg, pattern),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=reference_env(),
        check=False,
    )
    matches = []
    for line in proc.stdout.splitlines():
        found = _match(json.loads(line))
        if found is not None:
            matches.append(found)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"reference rg exited with {proc.returncode}")
    return Consumed(seconds, len(matches), len(proc.stdout))


def naive_overflow(rg: str, pattern: str, cwd: Path, cap: int) -> Consumed:
    """Read and parse rg's output up to ``cap`` bytes, then kill rg (and reap it)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        grep_argv(rg, pattern),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=reference_env(),
        bufsize=0,
    )
    assert proc.stdout is not None
    matches = []
    read = 0
    tail = b""
    try:
        while read < cap:
            chunk = proc.stdout.read(min(_CHUNK, cap - read))
            if not chunk:
                break
            read += len(chunk)
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                found = _match(json.loads(line))
                if found is not None:
                    matches.append(found)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    seconds = time.perf_counter() - started
    return Consumed(seconds, len(matches), read)


def glob_argv(rg: str, pattern: str | None = None, *, same_files: bool = True) -> list[str]:
    """The reference glob command: ``rg --files --sort=modified``; with a ``pattern``, its
    ``--glob``, and (``same_files``) what selects the files fs-search's glob lists: ignored
    and hidden files too."""
    argv = [rg, "--files", "--sort=modified"]
    if pattern is not None:
        argv += ["--no-ignore", "--hidden"] if same_files else []
        argv.append(f"--glob={pattern}")
    return argv


def naive_glob(
    rg: str, cwd: Path, pattern: str | None = None, *, same_files: bool = True
) -> Consumed:
    """Run ``rg --files --sort=modified`` (``glob_argv``), decode its output and split it
    into lines."""
    started = time.perf_counter()
    proc = subprocess.run(
        glob_argv(rg, pattern, same_files=same_files),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=reference_env(),
        check=False,
    )
    paths = proc.stdout.decode("utf-8", "replace").splitlines()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"reference rg --files exited with {proc.returncode}")
    return Consumed(seconds, len(paths), len(proc.stdout))
