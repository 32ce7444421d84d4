"""A user's mistakes on the command line: one `fs-search: ...` line (rc 2), tool errors an
`Error: ...` (rc 1); never a traceback. Each runs `fs-search` as a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import sparse_file, write_tree
from tests.worker.cli.test_main import cli

WORKER = ("worker", "--sample-over-cap-glob-results", "--address", "127.0.0.1:1")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "ws", {"a.txt": "TODO one\n", "b.txt": "TODO two\n"})


def one_line(p, *, rc: int = 2) -> str:
    """The single stderr line of a refused command (its return code checked)."""
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert (p.returncode, len(lines)) == (rc, 1), (p.returncode, p.stderr)
    assert lines[0].startswith("fs-search: "), lines
    return lines[0]


@pytest.mark.parametrize(
    "url", ["s3:/bucket/x", "s3://", "https://s3.example/x", "file://relative"]
)
@pytest.mark.parametrize("command", ["grep", "worker"])
def test_a_bad_spill_url_is_one_line_naming_the_key(url, command, ws):
    """A malformed FS_SEARCH_SPILL_URL stops the CLI and the worker with one line naming it."""
    args = ("grep", "TODO", "--workspace", str(ws)) if command == "grep" else WORKER
    if command == "worker":
        args = (*args, "--workspace", str(ws))
    line = one_line(cli(*args, env={"FS_SEARCH_SPILL_URL": url}, timeout=60))
    assert "FS_SEARCH_SPILL_URL" in line and repr(url) in line


@pytest.mark.parametrize(
    "args",
    [
        ("grep", "TODO"),
        ("glob", "*"),
        WORKER,
        ("dev",),
    ],
    ids=["grep", "glob", "worker", "dev"],
)
def test_a_missing_workspace_is_one_line_naming_the_option(args, tmp_path):
    """--workspace naming nothing, or a file, is refused before anything starts."""
    missing, a_file = tmp_path / "nope", tmp_path / "file.txt"
    a_file.write_text("x")
    line = one_line(cli(*args, "--workspace", str(missing), timeout=60))
    assert line == f"fs-search: --workspace {str(missing)!r} does not exist"
    line = one_line(cli(*args, "--workspace", str(a_file), timeout=60))
    assert line == f"fs-search: --workspace {str(a_file)!r} is not a directory"


def test_a_bad_workspaces_root_is_one_line(tmp_path):
    """--workspaces-root naming nothing or a file is refused naming the option."""
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for root, what in [(tmp_path / "nope", "does not exist"), (a_file, "is not a directory")]:
        line = one_line(cli(*WORKER, "--workspaces-root", str(root), timeout=60))
        assert line == f"fs-search: --workspaces-root {str(root)!r} {what}"


@pytest.mark.parametrize("command", ["grep", "worker"])
@pytest.mark.parametrize("address", ["not an address", "localhost", "localhost:99999"])
def test_a_malformed_address_is_one_line(command, address, ws):
    """An address that is not HOST:PORT is a settings error (rc 2), not the SDK's ValueError
    nor a connection to a port the user did not give (the SDK takes "localhost" as port 80)."""
    if command == "grep":
        args: tuple[str, ...] = ("grep", "x", "--workspace-id", "w")
    else:
        args = ("worker", "--sample-over-cap-glob-results", "--workspace", str(ws))
    line = one_line(cli(*args, "--address", address, timeout=60))
    what = "port 99999 is not a TCP port" if address.endswith("99999") else "not HOST:PORT"
    assert line.startswith(f"fs-search: Temporal address {address!r} is {what}"), line


def test_env_file_mistakes_are_one_line(tmp_path, ws):
    """A missing env file, or a line that is not KEY=VALUE, names the file (and the line)."""
    missing = tmp_path / "missing.env"
    line = one_line(cli("--env-file", str(missing), "grep", "x", "--workspace", str(ws)))
    assert (
        line
        == f"fs-search: --env-file {str(missing)!r}: cannot be read (No such file or directory)"
    )
    bad = tmp_path / "bad.env"
    bad.write_text("# ok\nTEMPORAL_ADDRESS=localhost:7233\nnot a setting\n")
    line = one_line(cli("worker", "--env-file", str(bad), "--workspace", str(ws)))
    assert (
        line
        == f"fs-search: --env-file {str(bad)!r} line 3: expected KEY=VALUE, got 'not a setting'"
    )


def test_env_file_settings_reach_the_worker(tmp_path, ws):
    """A worker reads its settings from --env-file; the environment wins over the file."""
    env_file = tmp_path / "worker.env"
    env_file.write_text("FS_SEARCH_SPILL_URL='s3:/from-the-file'\n")
    line = one_line(cli(*WORKER, "--workspace", str(ws), "--env-file", str(env_file)))
    assert "FS_SEARCH_SPILL_URL='s3:/from-the-file'" in line
    line = one_line(
        cli(
            *WORKER,
            "--workspace",
            str(ws),
            "--env-file",
            str(env_file),
            env={"FS_SEARCH_SPILL_URL": "file://from-the-env"},
        )
    )
    assert "FS_SEARCH_SPILL_URL='file://from-the-env'" in line


def tool_error(p) -> str:
    """A tool error: `Error: ...` on stdout, rc 1, stderr only the embedded call's own line."""
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "WARNING" not in p.stderr, p.stderr
    assert [line for line in p.stderr.splitlines() if not line.startswith("fs-search: ")] == []
    assert p.stdout.startswith("Error: "), p.stdout
    return p.stdout


def test_tool_errors_print_error_text_only(ws, tmp_path):
    """Budget exceeded, raw output overflow and an invalid pattern: `Error: ...`, rc 1."""
    spill = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    sparse_file(ws / "huge.bin", gigabytes=100)
    budget = cli(
        "grep",
        "zzz",
        "--path",
        "huge.bin",
        "--workspace",
        str(ws),
        env={**spill, "FS_SEARCH_TIMEOUT_MS": "500"},
    )
    assert "did not finish within its 500 ms budget" in tool_error(budget)
    overflow = cli(
        "grep",
        "TODO",
        "--workspace",
        str(ws),
        env={**spill, "FS_SEARCH_RAW_OUTPUT_MAX_BYTES": "64"},
    )
    assert "more than 64 bytes of raw output" in tool_error(overflow)
    pattern = cli("grep", "foo(", "--workspace", str(ws), env=spill)
    assert tool_error(pattern).startswith("Error: invalid pattern")
