"""`fs-search dev`: the whole local stack in one command, stopped cleanly by Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.helpers import write_tree
from tests.worker.test_cli import FS_SEARCH, cli


def _port_open(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


def test_dev_stack_serves_searches_with_s3_spills_and_stops_on_ctrl_c(tmp_path: Path):
    """dev prints the UI and caller env; a CLI call through it spills to S3; Ctrl-C stops all."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {i}\n" for i in range(300))})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "AWS_", "OTEL_"))}
    proc = subprocess.Popen(
        [
            FS_SEARCH,
            "dev",
            "--workspace",
            str(ws),
            "--workspace-id",
            "dev-test",
            "--data-dir",
            str(tmp_path / "s3"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        banner = []
        deadline = time.monotonic() + 90
        for line in proc.stdout:
            banner.append(line)
            if line.startswith("Try:") or time.monotonic() > deadline:
                break
        text = "".join(banner)
        exports = dict(re.findall(r"^export (\w+)=(.*)$", text, re.M))
        ui = re.search(r"Temporal UI:\s+(\S+)", text).group(1)
        assert "task queue fs-search/dev-test" in text
        assert set(exports) >= {
            "TEMPORAL_ADDRESS",
            "FS_SEARCH_SPILL_URL",
            "FS_SEARCH_S3_ENDPOINT_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
        }
        with urllib.request.urlopen(ui, timeout=10) as response:
            assert response.status == 200

        p = cli(
            "grep",
            "hit",
            "--address",
            exports["TEMPORAL_ADDRESS"],
            "--workspace-id",
            "dev-test",
            env=exports,
        )
        assert p.returncode == 0, p.stderr
        locator = re.search(r"(s3://fs-search/spill/\S+)", p.stdout).group(1)
        assert "read_spill" in p.stdout
        page = cli("spill", "read", locator, "--offset", "295", env=exports)
        assert page.returncode == 0, page.stderr
        assert "Line 300: hit 299" in page.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0
    assert not _port_open(exports["TEMPORAL_ADDRESS"])
    assert not _port_open(exports["FS_SEARCH_S3_ENDPOINT_URL"].removeprefix("http://"))
