"""The fs-search command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import write_tree
from tests.procs import FS_SEARCH, WorkerProcess

# No Temporal settings from the machine's environment or the user's config file.
NO_TEMPORAL_CONFIG = "/nonexistent/fs-search-tests/temporal.toml"


def cli_env(env: dict | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: the test's own settings only."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "TEMPORAL_"))}
    full["TEMPORAL_CONFIG_FILE"] = NO_TEMPORAL_CONFIG
    full.update(env or {})
    return full


def cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    return subprocess.run(
        [FS_SEARCH, *args],
        cwd=cwd,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "ws",
        {
            "src/a.py": "import os\n# TODO one\n",
            "src/b.py": "# TODO two\n",
            "notes.md": "nothing\n",
        },
    )


def test_embedded_grep_prints_text_and_exits_0(ws, tmp_path):
    """Embedded mode runs a real search through a dev server and prints the model's text."""
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    p = cli("grep", "TODO", "--workspace", str(ws), env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "src/a.py:\n  Line 2: # TODO one\n\nsrc/b.py:\n  Line 1: # TODO two\n"


def test_embedded_glob_json_defaults_to_cwd(ws, tmp_path):
    """Without --workspace the current directory is the workspace; --json prints the ToolResult."""
    p = cli(
        "glob", "*.py", "--json", cwd=ws, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["is_error"] is False and out["result"]["paths"] == ["src/a.py", "src/b.py"]


def test_embedded_sampling_default_and_opt_out(tmp_path):
    """Embedded mode samples over-cap globs unless --no-sample-over-cap-glob-results."""
    files = {**{f"big/{i:03}.txt": "x" for i in range(120)}, "small/a.txt": "x"}
    ws = write_tree(tmp_path / "ws", files)
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    sampled = json.loads(cli("glob", "*", "--json", "--workspace", str(ws), env=env).stdout)
    assert sampled["result"]["sampled"] is True and "small/a.txt" in sampled["result"]["paths"]
    head = json.loads(
        cli(
            "glob",
            "*",
            "--json",
            "--no-sample-over-cap-glob-results",
            "--workspace",
            str(ws),
            env=env,
        ).stdout
    )
    assert head["result"]["sampled"] is False and "small/a.txt" not in head["result"]["paths"]
    full = json.loads(
        cli("glob", "*", "--json", "--no-spill", "--workspace", str(ws), env=env).stdout
    )
    assert len(full["result"]["paths"]) == 121 and full["result"]["spill"] is None


def test_grep_regexp_option_takes_a_pattern_starting_with_a_dash(tmp_path):
    """-e/--regexp passes a pattern such as `-->` without `--`; PATTERN xor -e."""
    ws = write_tree(tmp_path / "ws", {"a.html": "<!-- note -->\n", "b.txt": "plain\n"})
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    for flag in ("-e", "--regexp"):
        p = cli("grep", flag, "-->", "--workspace", str(ws), env=env)
        assert p.returncode == 0, p.stderr
        assert p.stdout == "a.html:\n  Line 1: <!-- note -->\n"
    both = cli("grep", "x", "-e", "y", "--workspace", str(ws))
    assert both.returncode == 2 and "give the pattern once" in both.stderr


def test_tool_error_exits_1(ws):
    """A tool error prints `Error: ...` and exits 1."""
    p = cli("grep", "(", "--workspace", str(ws))
    assert p.returncode == 1 and p.stdout.startswith("Error: invalid pattern")


def test_usage_errors_exit_2(ws):
    """Usage errors exit 2."""
    assert cli("grep").returncode == 2
    assert cli("grep", "x", "--address", "localhost:1").returncode == 2  # needs --workspace-id
    assert cli("frobnicate").returncode == 2


@pytest.mark.parametrize(
    ("args", "usage", "error"),
    [
        (("grep", "x", "--address", "localhost:1"), "fs-search grep", "--address requires"),
        (("grep", "x", "--frobnicate"), "fs-search grep", "unrecognized arguments: --frobnicate"),
        (("glob", "x", "--connect-timeout", "0"), "fs-search glob", "--connect-timeout must"),
        (("worker", "--workspace", ".", "--nope"), "fs-search worker", "unrecognized"),
        (("spill", "read"), "fs-search spill read", "required: locator"),
    ],
)
def test_a_usage_error_shows_that_subcommands_usage(args, usage, error):
    """A mistake in a subcommand's arguments prints that subcommand's usage, not the top one's."""
    p = cli(*args, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(f"usage: {usage} "), p.stderr
    assert error in p.stderr.splitlines()[-1], p.stderr


def test_version_names_the_distribution():
    """--version (and -V) print the distribution's name and version; -v stays verbose."""
    from importlib.metadata import version

    for flag in ("--version", "-V"):
        p = cli(flag, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout == f"fs-search (fs-search-temporal) {version('fs-search-temporal')}\n"


def test_unreachable_temporal_exits_3_in_one_line():
    """Address mode against a closed port exits 3 with one line in the `temporal` CLI's words."""
    for command in (("grep", "x", "--workspace-id", "w"), ("glob", "*", "--workspace-id", "w")):
        p = cli(*command, "--address", "127.0.0.1:1", timeout=60)
        assert p.returncode == 3, (p.stdout, p.stderr)
        assert p.stderr.splitlines() == [
            "fs-search: failed connecting to Temporal server at 127.0.0.1:1: connection refused"
        ]


def test_a_server_that_never_answers_gives_up_after_the_connect_timeout():
    """A server that accepts but never answers: exit 3 after --connect-timeout, saying so."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        p = cli(
            "grep", "x", "--workspace-id", "w", "--address", address, "--connect-timeout", "1",
            timeout=60,
        )  # fmt: skip
        took = time.monotonic() - started
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert p.stderr.splitlines() == [
        f"fs-search: failed connecting to Temporal server at {address}: no answer within 1 s "
        "(--connect-timeout)"
    ]
    assert 1 <= took < 30


def test_worker_requires_the_sampling_choice(ws):
    """A worker without an explicit sampling choice exits non-zero naming the key."""
    p = cli("worker", "--workspace", str(ws), "--address", "127.0.0.1:1", timeout=30)
    assert p.returncode != 0
    assert "FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS" in p.stderr


def test_worker_refuses_invalid_settings(ws):
    """Invalid values are refused at start-up with the key's name."""
    p = cli(
        "worker",
        "--workspace",
        str(ws),
        "--sample-over-cap-glob-results",
        env={"FS_SEARCH_GLOB_MAX_RESULTS": "-5"},
        timeout=30,
    )
    assert p.returncode != 0 and "FS_SEARCH_GLOB_MAX_RESULTS" in p.stderr


async def test_address_mode_against_a_running_worker(dev_env, ws, tmp_path):
    """Address mode runs the call on fs-search/<id> of a separately running worker as a
    one-off call: one standalone activity each, no workflow started."""
    from datetime import UTC, datetime

    address = dev_env.client.service_client.config.target_host
    wsid = f"cli-{uuid.uuid4()}"
    worker = WorkerProcess(
        ws, address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    )
    since = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    try:
        p = cli("grep", "TODO", "--path", "src", "--address", address, "--workspace-id", wsid)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("src/a.py:\n  Line 2: # TODO one")
        p = cli("glob", "*.md", "--json", "--address", address, "--workspace-id", wsid)
        assert json.loads(p.stdout)["result"]["paths"] == ["notes.md"]
    finally:
        assert worker.terminate(timeout=20) == 0
    started = await dev_env.client.count_workflows(f"StartTime >= '{since}'")
    assert started.count == 0
    activities = [
        a async for a in dev_env.client.list_activities(f"TaskQueue = 'fs-search/{wsid}'")
    ]
    assert sorted(a.activity_type for a in activities) == ["fs_search.glob", "fs_search.grep"]


async def test_address_mode_falls_back_to_the_one_call_workflow_and_says_so(ws, tmp_path):
    """A server without standalone activities: the call runs through fs_search.Call, same
    output, and stderr says so in one line."""
    from fs_search.worker._devstack import DevServer

    server = await DevServer(dynamic_config=["activity.enableStandalone=false"]).start()
    try:
        wsid = f"cli-{uuid.uuid4()}"
        worker = WorkerProcess(
            ws, server.address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
        )
        try:
            p = cli(
                "grep", "TODO", "--path", "src", "--address", server.address, "--workspace-id", wsid
            )
        finally:
            assert worker.terminate(timeout=20) == 0
    finally:
        server.stop()
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("src/a.py:\n  Line 2: # TODO one")
    said = [line for line in p.stderr.splitlines() if "standalone activities" in line]
    assert len(said) == 1 and "fs_search.Call" in said[0], p.stderr


def test_module_entry_point():
    """`python -m fs_search.worker --help` works like the console script."""
    p = subprocess.run(
        [sys.executable, "-m", "fs_search.worker", "--help"], capture_output=True, text=True
    )
    assert p.returncode == 0 and "worker" in p.stdout


async def test_spill_read_pages_an_s3_artifact(s3, make_activities, tmp_path):
    """`fs-search spill read` pages through an S3 artifact and refuses foreign locators."""
    from temporalio.testing import ActivityEnvironment

    from fs_search.activities._contract import GlobRequest
    from fs_search.activities.storage._s3 import S3SpillStore

    prefix = f"cli-{uuid.uuid4().hex[:8]}"
    ws = write_tree(tmp_path / "ws", {f"f{i:02}.txt": "x" for i in range(10)})
    store = S3SpillStore.from_url(s3.url(prefix), endpoint_url=s3.endpoint_url)
    acts = await make_activities(ws, store=store, glob_max_results=2)
    locator = (await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))).spill.locator
    p = cli("spill", "read", locator, "--offset", "2", "--limit", "3", env=s3.env(prefix))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "f02.txt\nf03.txt\nf04.txt\n\n(Lines 3-5 of 10; continue with offset=5.)\n"
    p = cli("spill", "read", f"s3://{s3.bucket}/elsewhere/x.txt", env=s3.env(prefix))
    assert p.returncode == 1 and "outside" in p.stderr
    assert f"this command reads the store FS_SEARCH_SPILL_URL names: {s3.url(prefix)}" in p.stderr
    # Without the store's settings the locator is not "outside": there is no S3 store to read.
    p = cli("spill", "read", locator)
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        f"Error: {locator} is in an S3 store, and this command reads the local default "
        "store: FS_SEARCH_SPILL_URL is not set: set FS_SEARCH_SPILL_URL=s3://<bucket>/<prefix> "
        "(and FS_SEARCH_S3_ENDPOINT_URL for a store outside AWS) as the worker's, or give "
        "--env-file PATH (`fs-search dev --env-file PATH` writes one)"
    ]


def test_a_spilled_result_tells_a_person_the_command_to_read_it(tmp_path):
    """The CLI's footer names `fs-search spill read LOCATOR` (the model's says its read tool),
    and that command reads the saved result; --json keeps the model's text as it is."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {i}\n" for i in range(300))})
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    p = cli("grep", "hit", "--workspace", str(ws), env=env)
    assert p.returncode == 0, p.stderr
    footer = p.stdout.splitlines()[-1]
    command = re.fullmatch(
        r"Read it with `(fs-search spill read (\S+))` \(--offset and --limit page it, in lines\)\.",
        footer,
    )
    assert command, p.stdout
    assert "read tool" not in p.stdout
    page = cli("spill", "read", command[2], "--offset", "295", env=env)
    assert page.returncode == 0 and "Line 300: hit 299" in page.stdout, page
    as_json = json.loads(cli("grep", "hit", "--workspace", str(ws), "--json", env=env).stdout)
    assert "with the read tool" in as_json["text"]


def test_spill_read_page_arguments_are_the_models(tmp_path):
    """`spill read` checks offset/limit as read_spill does; its defaults are the model's."""
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    p = cli("spill", "read", f"{tmp_path}/spill/wf/run/1.glob.txt", "--offset", "-1", env=env)
    assert p.returncode == 1 and p.stderr.strip() == "Error: offset must be >= 0 (got -1)"
    p = cli("spill", "read", f"{tmp_path}/spill/wf/run/1.glob.txt", "--limit", "0", env=env)
    assert p.returncode == 1 and p.stderr.strip() == "Error: limit must be >= 1 (got 0)"
    usage = " ".join(cli("spill", "read", "--help").stdout.split())
    assert "first line, 0-based (default: 0)" in usage
    assert "number of lines (default and at most: 2000)" in usage
    # The parser states them without loading the contract: they must be the model's.
    from fs_search.activities._contract import MAX_READ_SPILL_LINES, ReadSpillRequest
    from fs_search.worker.cli._parser import SPILL_PAGE_LINES, SPILL_PAGE_OFFSET

    fields = ReadSpillRequest.model_fields
    assert (SPILL_PAGE_OFFSET, SPILL_PAGE_LINES) == (
        fields["offset"].default,
        fields["limit"].default,
    )
    assert SPILL_PAGE_LINES == MAX_READ_SPILL_LINES


def test_unreadable_tls_settings_exit_2():
    """A missing TLS file in the Temporal settings is a clear usage error, not a traceback."""
    p = cli(
        "grep",
        "x",
        "--address",
        "127.0.0.1:1",
        "--workspace-id",
        "w",
        env={
            "TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent/cert.pem",
            "TEMPORAL_TLS_CLIENT_KEY_PATH": "/nonexistent/key.pem",
        },
        timeout=30,
    )
    assert p.returncode == 2 and "/nonexistent/cert.pem" in p.stderr and "Traceback" not in p.stderr


def test_embedded_mode_names_its_workspace_id_on_stderr(ws, tmp_path):
    """An embedded call says on stderr which directory it searches and its default id."""
    from fs_search.worker import default_workspace_id

    p = cli(
        "glob", "*.md", "--workspace", str(ws), env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"}
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == "notes.md\n"
    wsid = default_workspace_id(ws)
    assert f"fs-search: searching {ws} (workspace id {wsid})" in p.stderr


def test_workspace_id_without_a_temporal_address_is_a_usage_error(ws):
    """--workspace-id with no --address, TEMPORAL_ADDRESS or profile: one line, rc 2, no search."""
    p = cli("grep", "TODO", "--workspace-id", "ws1", cwd=ws, timeout=30)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fs-search: --workspace-id ws1 needs"), lines
    assert "TEMPORAL_ADDRESS" in lines[0] and "--address" in lines[0]
    both = cli("grep", "TODO", "--workspace", str(ws), "--workspace-id", "ws1", timeout=30)
    assert both.returncode == 2 and "exclusive" in both.stderr


async def test_address_comes_from_temporal_address_a_profile_or_an_env_file(dev_env, ws, tmp_path):
    """Address mode finds the server as Temporal tools do: TEMPORAL_ADDRESS, a profile, --env-file."""
    address = dev_env.client.service_client.config.target_host
    wsid = f"cli-{uuid.uuid4()}"
    elsewhere = write_tree(tmp_path / "elsewhere", {"TODO.txt": "TODO not this one\n"})
    worker = WorkerProcess(
        ws, address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    )
    config = tmp_path / "temporal.toml"
    config.write_text(
        f'[profile.default]\naddress = "127.0.0.1:1"\n[profile.dev]\naddress = "{address}"\n'
    )
    env_file = tmp_path / "dev.env"
    env_file.write_text(f"# from fs-search dev\nexport TEMPORAL_ADDRESS={address}\n")
    expected = "src/a.py:\n  Line 2: # TODO one\n\nsrc/b.py:\n  Line 1: # TODO two\n"
    try:
        for args, env in [
            ((), {"TEMPORAL_ADDRESS": address}),
            (("--profile", "dev"), {"TEMPORAL_CONFIG_FILE": str(config)}),
            ((), {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "dev"}),
            (("--env-file", str(env_file)), {}),
        ]:
            p = cli("grep", "TODO", "--workspace-id", wsid, *args, cwd=elsewhere, env=env)
            assert (p.returncode, p.stdout) == (0, expected), (args, env, p.stderr)
            assert "embedded" not in p.stderr
        # The command line wins over the environment, the environment over the file.
        p = cli(
            "--env-file", str(env_file), "grep", "TODO", "--workspace-id", wsid,
            env={"TEMPORAL_ADDRESS": "127.0.0.1:1"}, timeout=60,
        )  # fmt: skip
        assert p.returncode == 3 and "Temporal server at 127.0.0.1:1: connection" in p.stderr
        p = cli(
            "grep", "TODO", "--workspace-id", wsid, "--address", address,
            env={"TEMPORAL_ADDRESS": "127.0.0.1:1"},
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
    finally:
        assert worker.terminate(timeout=20) == 0


async def test_unknown_namespace_is_one_line(dev_env):
    """A namespace the server does not have is a settings error naming it (rc 2), not a traceback."""
    address = dev_env.client.service_client.config.target_host
    p = cli("grep", "x", "--address", address, "--workspace-id", "w", "--namespace", "no-such-ns")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"fs-search: Temporal namespace 'no-such-ns' does not exist on {address} "
        "(--namespace, TEMPORAL_NAMESPACE or the profile's namespace)"
    ]


async def test_ctrl_c_in_address_mode_cancels_the_activity_and_rg(dev_env, tmp_path):
    """SIGINT: the CLI cancels its one-off call's standalone activity, waits for rg to die,
    exits 130; the activity reads Canceled and had a deadline (never left pending)."""
    from temporalio.client import ActivityExecutionStatus

    from tests.helpers import sparse_file
    from tests.procs import alive, wait_until

    address = dev_env.client.service_client.config.target_host
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin", gigabytes=200)  # rg reads it for its whole 30 s budget
    wsid = f"cli-{uuid.uuid4()}"
    worker = WorkerProcess(
        ws, address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    )
    try:
        proc = subprocess.Popen(
            [FS_SEARCH, "grep", "zzz", "--path", "huge.bin", "--workspace-id", wsid],
            env=cli_env({"TEMPORAL_ADDRESS": address}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: worker.rg_processes(), timeout=60)
            rgs = worker.rg_processes()
            proc.send_signal(signal.SIGINT)
            start = time.monotonic()
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err
        assert took < 5 + 3, took  # the CLI waits at most 5 s (margin: a loaded machine)
        assert "Traceback" not in err and out == ""
        wait_until(lambda: not alive(rgs), timeout=2)
        activity_id = re.search(r"activity (fs-search-grep-[0-9a-f-]+) cancelled", err)
        assert activity_id, err
        desc = await dev_env.client.get_activity_handle(activity_id[1]).describe()
        assert desc.status == ActivityExecutionStatus.CANCELED
        assert desc.schedule_to_close_timeout is not None
        assert 0 < desc.schedule_to_close_timeout.total_seconds() <= 10 * 60
    finally:
        assert worker.terminate(timeout=20) == 0


STUCK_AFTER_CTRL_C = """
import asyncio, sys
from fs_search.worker.cli._main import EXIT_INTERRUPTED, _bounded_on_interrupt

async def call():
    print("ready", flush=True)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        await asyncio.sleep(60)  # a shutdown that waits on a server that does not answer
    return 0

try:
    sys.exit(asyncio.run(_bounded_on_interrupt(call())))
except KeyboardInterrupt:
    sys.exit(EXIT_INTERRUPTED)
"""


def test_ctrl_c_leaves_within_its_bound_whatever_is_still_shutting_down():
    """A one-off call whose shutdown hangs after Ctrl-C still exits 130 within the bound."""
    from fs_search.worker.cli._main import INTERRUPT_EXIT_S

    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_AFTER_CTRL_C],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=40)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert INTERRUPT_EXIT_S <= took < INTERRUPT_EXIT_S + 10, took
    assert err.strip().splitlines()[-1].startswith("fs-search: interrupted; left after 7 s")
