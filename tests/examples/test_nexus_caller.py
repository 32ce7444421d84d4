"""The Nexus page's "Try it" commands, run as written: `fs-search dev`, the callers' namespace
made with the `temporal` CLI of the environment, and examples/nexus_caller.py in it."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

from tests.procs import FS_SEARCH

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "serving-other-namespaces.md"
CALLER = ROOT / "examples" / "nexus_caller.py"
SHELL = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PLACEHOLDER = "<the workspace id dev printed>"


def _blocks() -> tuple[str, str]:
    """The page's two "Try it" blocks: the stack's command, and the caller's side."""
    blocks = SHELL.findall(PAGE.read_text(encoding="utf-8"))
    [dev] = [b for b in blocks if "fs-search dev " in b]
    [caller] = [b for b in blocks if "temporal operator namespace create" in b]
    return dev, caller


def test_the_page_shows_the_example_caller_as_it_is():
    """The caller on the page is examples/nexus_caller.py, to the character."""
    shown = [b for b in PYTHON.findall(PAGE.read_text()) if b.startswith("# nexus_caller.py\n")]
    assert shown == [CALLER.read_text(encoding="utf-8")]


def test_the_nexus_page_runs_as_written(tmp_path):
    """`fs-search dev` serves the endpoint; the page's commands make the callers' namespace and
    run the caller in it (TEMPORAL_NAMESPACE overridden), which greps through the endpoint."""
    dev_block, caller_block = _blocks()
    [dev_line] = [line for line in dev_block.splitlines() if line.startswith("fs-search dev ")]
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("# TODO: ship it\n")
    (project / "nexus_caller.py").write_text(CALLER.read_text())
    bin_dir = str(Path(FS_SEARCH).parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FS_SEARCH_", "TEMPORAL_", "AWS_", "OTEL_"))
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"  # fs-search, temporal, python
    env["TEMPORAL_CONFIG_FILE"] = str(tmp_path / "no-temporal-config.toml")
    dev = subprocess.Popen(
        shlex.split(dev_line),
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert dev.stdout is not None
        banner = []
        deadline = time.monotonic() + 120
        for line in dev.stdout:
            banner.append(line)
            if line.startswith("Try:") or time.monotonic() > deadline:
                break
        text = "".join(banner)
        found = re.search(r"Workspace id: (\S+)", text)
        assert found and "Nexus:        endpoint fs-search -> namespace default" in text, text
        assert "TEMPORAL_NAMESPACE=default" in (project / ".fs-search.env").read_text()
        script = caller_block.replace(PLACEHOLDER, found[1])
        ran = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "Namespace agents successfully registered" in ran.stdout, ran.stdout
        # (The caller's own file, in the searched directory too, has a TODO line of its own.)
        assert "\napp.py:\n  Line 1: # TODO: ship it\n" in ran.stdout, ran.stdout
    finally:
        os.killpg(dev.pid, signal.SIGINT)  # Ctrl-C in terminal 1
        try:
            assert dev.wait(60) == 0
        finally:
            if dev.poll() is None:
                os.killpg(dev.pid, signal.SIGKILL)
                dev.wait(10)
