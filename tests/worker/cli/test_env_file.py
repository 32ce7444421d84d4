"""Env files: what `fs-search dev --env-file` writes, `--env-file` reads back (and a shell too)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fs_search.worker.cli._env_file import (
    EnvFileError,
    load_env_file,
    read_env_file,
    write_env_file,
)

SETTINGS = {
    "TEMPORAL_ADDRESS": "127.0.0.1:7233",
    "FS_SEARCH_SPILL_URL": "s3://fs-search/spill",
    "AWS_SECRET_ACCESS_KEY": "a/b+c=d",
    "WITH_SPACE": "two words",
    "EMPTY": "",
}


def test_written_file_reads_back_and_sources_in_a_shell(tmp_path: Path):
    """write_env_file's output is read back exactly, by us and by `set -a; . file`."""
    path = tmp_path / "dev.env"
    write_env_file(path, SETTINGS)
    assert read_env_file(path) == SETTINGS
    assert path.stat().st_mode & 0o777 == 0o600
    shell = subprocess.run(
        ["sh", "-c", f'set -a; . "{path}"; set +a; env -0'],
        capture_output=True,
        check=True,
        env={},
    )
    sourced = dict(item.split("=", 1) for item in shell.stdout.decode().split("\0") if "=" in item)
    assert {k: sourced[k] for k in SETTINGS} == SETTINGS


def test_read_accepts_comments_export_and_quotes(tmp_path: Path):
    """Comments, blank lines, `export`, and quoted values as docker/node/dotenv accept them."""
    path = tmp_path / "x.env"
    path.write_text("# c\n\nexport A=1\nB = 'two words'\nC=\"3\"\n  D=x=y  \n")
    assert read_env_file(path) == {"A": "1", "B": "two words", "C": "3", "D": "x=y"}


def test_load_keeps_existing_variables(tmp_path: Path):
    """Variables already in the environment win over the file (as with docker and node)."""
    path = tmp_path / "x.env"
    path.write_text("A=from-file\nB=from-file\n")
    environ = {"A": "from-env"}
    assert load_env_file(path, environ) == ["B"]
    assert environ == {"A": "from-env", "B": "from-file"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("A=1\nno equals sign\n", "line 2: expected KEY=VALUE, got 'no equals sign'"),
        ("1A=x\n", "line 1: expected KEY=VALUE, got '1A=x'"),
    ],
)
def test_a_line_that_is_not_a_setting_names_its_number(tmp_path: Path, content, message):
    """A malformed line is refused with the file's name and the line's number."""
    path = tmp_path / "bad.env"
    path.write_text(content)
    with pytest.raises(EnvFileError) as e:
        read_env_file(path)
    assert str(e.value) == f"--env-file {str(path)!r} {message}"


def test_values_that_no_reader_agrees_on_are_refused(tmp_path: Path):
    """A quote or newline in a value would read differently per tool: not written at all."""
    with pytest.raises(ValueError, match="quote or a newline"):
        write_env_file(tmp_path / "x.env", {"A": "it's"})
    assert list(tmp_path.iterdir()) == []
