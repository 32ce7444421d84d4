"""Env files: ``KEY=VALUE`` lines that ``fs-search dev`` writes and ``--env-file`` reads.

The format is the one ``docker run --env-file``, ``node --env-file`` and python-dotenv
read, kept to what all of them agree on: one ``KEY=VALUE`` per line, ``#`` comments and
blank lines ignored, an optional ``export`` in front (so a shell can ``source`` it too), and
a value optionally in single or double quotes. Variables already in the environment win
over the file, as with those tools: a file sets only what is unset.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

_LINE = re.compile(r"^(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>.*)$")
# Values written bare: what every reader (and a POSIX shell) takes literally.
_BARE = re.compile(r"^[A-Za-z0-9_./:@%+,=-]*$")


class EnvFileError(ValueError):
    """An env file cannot be read or has a line that is not ``KEY=VALUE``."""


def read_env_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The variables an env file sets, in file order.

    Raises:
        EnvFileError: the file cannot be read, or a line is not ``KEY=VALUE`` (the message
            names the file and the line number).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise EnvFileError(f"--env-file {os.fspath(path)!r}: cannot be read ({reason})") from e
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise EnvFileError(
                f"--env-file {os.fspath(path)!r} line {number}: expected KEY=VALUE, "
                f"got {_shorten(line)!r}"
            )
        found[match["key"]] = _unquote(match["value"].strip())
    return found


def load_env_file(
    path: str | os.PathLike[str], environ: MutableMapping[str, str] | None = None
) -> list[str]:
    """Set the file's variables that ``environ`` (default ``os.environ``) does not have;
    the names set, in file order.

    Raises:
        EnvFileError: as :func:`read_env_file`.
    """
    env = os.environ if environ is None else environ
    added = []
    for key, value in read_env_file(path).items():
        if key not in env:
            env[key] = value
            added.append(key)
    return added


def write_env_file(path: str | os.PathLike[str], variables: Mapping[str, str]) -> None:
    """Write ``variables`` as ``KEY=VALUE`` lines, readable only by the owner (it may hold
    credentials); the file is replaced whole, never left half-written."""
    target = Path(path)
    lines = ["# Written by `fs-search dev`; read with `fs-search --env-file PATH ...`"]
    lines += [f"{key}={_quote(value)}" for key, value in variables.items()]
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _quote(value: str) -> str:
    if _BARE.match(value):
        return value
    if "'" in value or "\n" in value:
        # No quoting means the same to docker, node, dotenv and a shell for these.
        raise ValueError(f"an env file value cannot hold a quote or a newline: {value!r}")
    return f"'{value}'"


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _shorten(line: str, limit: int = 60) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"
