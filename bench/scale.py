"""The Temporal server's cost of N idle workspaces, per-workspace queues vs one host queue,
and of many hosts on one namespace.

Run as ``bench/scale [--workspaces 100,1000,3000] [--modes workspace,host] [--quick]``. For
each N and mode: a fresh Temporal dev server (in memory, its own ports, default limits unless
``--dynamic-config``), one real ``fs-search worker --workspaces-root ROOT --queues MODE
--host-id bench-host`` process over N directories of one small file each; once all N are
attached and a settle pause has passed, an idle window measures the server's and the
worker's RSS and CPU (from /proc, each with its children) and the server's
PollActivityTaskQueue requests (its Prometheus ``service_requests`` counter, frontend,
namespace ``default``) and the ones it refused (``*resource_exhausted*``); then ``--calls``
greps through the project's one-call workflow (``fs_search.Call``: ``FsSearchTools`` with
``host=`` in host mode) give a call's latency. Everything is stopped by pid.

Many hosts (``--hosts H``, host mode): H worker processes on the one server, each its own
root of N workspaces and its own host id ``bench-host-<i>`` (H x N workspaces in all, the
roots under ``--roots-in``, /dev/shm by default); the worker columns are then the median and
the largest over the H workers, and the calls go to workspaces spread over every host.
``--worker-code DIR`` runs the workers on another checkout's code (``DIR`` holding
``activities/``, ``workflows/`` and ``worker/``: say, main's, for a before/after).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.worker import Worker

from fs_search.activities._contract import ToolResult
from fs_search.worker._devstack import DevServer
from fs_search.worker._processes import ManagedProcess, free_port, tail_of
from fs_search.workflows import FsSearchPlugin
from fs_search.workflows._call import CallInput, FsSearchCallWorkflow

MB = 1024 * 1024
HOST_ID = "bench-host"
TICK = os.sysconf("SC_CLK_TCK")
ATTACHED = b"attached workspace "
EXHAUSTED = (b"ResourceExhausted", b"RESOURCE_EXHAUSTED", b"resource exhausted")


class RowAborted(Exception):
    """A row stopped early (server too big, worker gone, attach too slow)."""


@dataclass
class Row:
    """One mode at one N."""

    mode: str
    workspaces: int
    hosts: int = 1
    server_rss_mb: float | None = None
    server_peak_mb: float | None = None
    server_cpu_pct: float | None = None
    # With many hosts: the median over the workers, the largest, and their sum.
    worker_rss_mb: float | None = None
    worker_cpu_pct: float | None = None
    worker_rss_max_mb: float | None = None
    worker_cpu_max_pct: float | None = None
    workers_cpu_pct: float | None = None
    polls_per_min: float | None = None
    refused_per_min: float | None = None
    loaded_partitions: float | None = None
    call_p50_ms: float | None = None
    call_worst_ms: float | None = None
    calls: int = 0
    failed_calls: int = 0
    failures: list[str] = field(default_factory=list)
    attach_s: float | None = None
    idle_s: float | None = None
    worker_exhausted_lines: int = 0
    aborted: str | None = None
    server_log_tail: str = ""


# --- /proc ---------------------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (every thread's children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += _children(current)
    return found


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                kids += [
                    int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                ]
    return kids


def _status_kb(pid: int, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants."""
    return sum(_status_kb(p, "VmRSS") for p in tree(pid)) * 1024


def peak_bytes(pid: int) -> int:
    """VmHWM (peak RSS) of ``pid`` itself."""
    return _status_kb(pid, "VmHWM") * 1024


def _cpu_ticks(pid: int, *, reaped: bool) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[11:15] = utime stime cutime cstime (stat fields 14-17)
    used = int(fields[11]) + int(fields[12])
    return used + (int(fields[13]) + int(fields[14]) if reaped else 0)


def cpu_seconds(pid: int) -> float:
    """CPU of ``pid`` and its live descendants, plus the children it has reaped."""
    ticks = sum(_cpu_ticks(p, reaped=p == pid) for p in tree(pid))
    return ticks / TICK


@dataclass
class CpuMark:
    """A point to measure CPU % from."""

    pid: int
    at: float = field(default_factory=time.monotonic)
    used: float = 0.0

    def __post_init__(self) -> None:
        self.used = cpu_seconds(self.pid)

    def percent(self) -> float:
        """% of one core since the mark."""
        return (cpu_seconds(self.pid) - self.used) / (time.monotonic() - self.at) * 100


# --- the dev server's Prometheus metrics ---------------------------------------------------


def scrape(port: int) -> str:
    """The server's /metrics text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _samples(text: str) -> Iterable[tuple[str, str, float]]:
    """(name, labels, value) of each sample line."""
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, _, rest = line.partition("{")
        labels, _, value = rest.rpartition("} ")
        with contextlib.suppress(ValueError):
            yield name, labels, float(value.split()[0])


def _is_poll(labels: str) -> bool:
    return (
        'operation="PollActivityTaskQueue"' in labels
        and 'namespace="default"' in labels
        and 'service_name="frontend"' in labels
    )


@dataclass
class Counters:
    """The counters the rows need, summed over their labels."""

    polls: float
    refused: float
    loaded_partitions: float

    @classmethod
    def read(cls, port: int) -> Counters:
        polls = refused = loaded = 0.0
        for name, labels, value in _samples(scrape(port)):
            if name == "service_requests" and _is_poll(labels):
                polls += value
            elif "resource_exhausted" in name and _is_poll(labels):
                refused += value
            elif name == "loaded_physical_task_queue_count" and 'namespace="default"' in labels:
                loaded += value
        return cls(polls, refused, loaded)


class MetricsDevServer(DevServer):
    """The project's dev server, with its Prometheus metrics on a known port."""

    def __init__(self, log_path: Path, dynamic_config: list[str]) -> None:
        super().__init__(log_path=log_path, dynamic_config=dynamic_config)
        self.metrics_port = free_port()
        self.process.argv = [*self.process.argv, "--metrics-port", str(self.metrics_port)]

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid


# --- the worker under test -----------------------------------------------------------------


class LogWatch:
    """Reads a log as it grows: attach lines and refused polls."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.attached = 0
        self.exhausted = 0
        self.tail: list[bytes] = []

    def update(self) -> None:
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
            self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            self.attached += ATTACHED in line
            self.exhausted += any(e in line for e in EXHAUSTED)
        self.tail = (self.tail + lines)[-5:]

    def last(self) -> str:
        return " | ".join(line.decode(errors="replace") for line in self.tail)[-1500:]


def start_worker(
    address: str,
    root: Path,
    mode: str,
    tmp: Path,
    host_id: str = HOST_ID,
    code: Path | None = None,
) -> ManagedProcess:
    """One ``fs-search worker --workspaces-root`` process (``code``: run that checkout's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "OTEL_"))}
    env["FS_SEARCH_SPILL_URL"] = f"file://{tmp}/spill"
    # Skip the per-attach DescribeTaskQueue check (10/s): 3,000 would take 5 min to attach.
    env["FS_SEARCH_ALLOW_SHARED_QUEUE"] = "1"
    if code is not None:
        env["PYTHONPATH"] = str(code_path(code, tmp))
    argv = [sys.executable, "-c", "from fs_search.worker.cli import run; run()", "worker"]
    argv += ["--workspaces-root", str(root), "--queues", mode, "--host-id", host_id]
    argv += ["--address", address, "--sample-over-cap-glob-results"]
    worker = ManagedProcess(argv, log_path=tmp / f"worker-{mode}-{host_id}.log", env=env)
    worker.start()
    return worker


def code_path(code: Path, tmp: Path) -> Path:
    """A directory to put first on PYTHONPATH so ``fs_search.*`` imports ``code``'s modules
    (the editable install's finder comes after it)."""
    top = tmp / "code"
    package = top / "fs_search"
    if not package.exists():
        package.mkdir(parents=True)
        for part in ("activities", "workflows", "worker"):
            os.symlink((code / part).resolve(), package / part)
    return top


def make_root(root: Path, n: int) -> None:
    """``n`` workspaces w00000.. of one small file each (kept between rows)."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        ws = root / workspace_id(i)
        if not ws.exists():
            ws.mkdir()
            (ws / "notes.txt").write_text("alpha needle beta\n")
    for extra in sorted(root.iterdir())[n:]:
        shutil.rmtree(extra)


def host_id(i: int) -> str:
    return f"{HOST_ID}-{i:03d}"


def workspace_id(i: int) -> str:
    return f"w{i:05d}"


# --- one row -------------------------------------------------------------------------------


@dataclass
class Opts:
    settle: float
    idle: float
    calls: int
    call_timeout: float
    attach_timeout: float
    max_server_bytes: int
    dynamic_config: list[str]
    hosts: int = 1
    code: Path | None = None


@dataclass
class Running:
    """The processes of a row, watched for memory and liveness."""

    server: MetricsDevServer
    workers: list[ManagedProcess]
    logs: list[LogWatch]
    opts: Opts
    row: Row

    @property
    def attached(self) -> int:
        """Attaches logged by the worker that logged fewest."""
        return min(log.attached for log in self.logs)

    def check(self) -> None:
        for log in self.logs:
            log.update()
        self.row.worker_exhausted_lines = sum(log.exhausted for log in self.logs)
        for worker, log in zip(self.workers, self.logs, strict=True):
            if not worker.running():
                raise RowAborted(f"a worker exited: {log.last()}")
        if not self.server.process.running():
            raise RowAborted("the dev server exited")
        rss = rss_bytes(self.server.pid)
        self.row.server_peak_mb = max(self.row.server_peak_mb or 0, rss / MB)
        if rss > self.opts.max_server_bytes:
            raise RowAborted(f"server RSS {rss / MB:.0f} MB > --max-server-gb")

    async def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.check()
            await asyncio.sleep(min(1.0, left))


async def wait_attached(run: Running, n: int, started: float) -> None:
    """Until the worker logged ``n`` attaches; the seconds since it started go in the row."""
    deadline = started + run.opts.attach_timeout
    while True:
        run.check()
        if run.attached >= n:
            run.row.attach_s = time.monotonic() - started
            return
        if time.monotonic() > deadline:
            raise RowAborted(
                f"{run.attached} of {n} attached (the slowest worker) in "
                f"{run.opts.attach_timeout:.0f} s"
            )
        await asyncio.sleep(0.2)


async def idle_window(run: Running) -> None:
    """RSS, CPU and polls of the server and the worker over ``opts.idle`` seconds, no calls."""
    port = run.server.metrics_port
    before = await asyncio.to_thread(Counters.read, port)
    server = CpuMark(run.server.pid)
    workers = [CpuMark(w.pid or 0) for w in run.workers]
    started = time.monotonic()
    await run.sleep(run.opts.idle)
    row = run.row
    row.server_cpu_pct = server.percent()
    cpu = [w.percent() for w in workers]
    row.worker_cpu_pct, row.worker_cpu_max_pct = statistics.median(cpu), max(cpu)
    row.workers_cpu_pct = sum(cpu)
    after = await asyncio.to_thread(Counters.read, port)
    minutes = (time.monotonic() - started) / 60
    row.idle_s = minutes * 60
    row.polls_per_min = (after.polls - before.polls) / minutes
    row.refused_per_min = (after.refused - before.refused) / minutes
    row.loaded_partitions = after.loaded_partitions
    row.server_rss_mb = rss_bytes(run.server.pid) / MB
    row.server_peak_mb = max(row.server_peak_mb or 0, peak_bytes(run.server.pid) / MB)
    rss = [rss_bytes(w.pid or 0) / MB for w in run.workers]
    row.worker_rss_mb, row.worker_rss_max_mb = statistics.median(rss), max(rss)


async def one_call(
    client: Client, queue: str, call: CallInput, timeout: float
) -> tuple[float, str]:
    """One grep through ``fs_search.Call``: (seconds, failure or "")."""
    started = time.perf_counter()
    try:
        handle = await client.start_workflow(
            FsSearchCallWorkflow.run, call, id=f"scale-{uuid.uuid4()}", task_queue=queue
        )
    except Exception as e:  # noqa: BLE001 - the server refusing the call is a failed call
        return time.perf_counter() - started, f"{call.workspace_id}: starting: {e}"
    try:
        result: ToolResult = await asyncio.wait_for(handle.result(), timeout)
    except TimeoutError:
        with contextlib.suppress(Exception):
            await handle.terminate("bench/scale: no answer in time")
        return time.perf_counter() - started, f"{call.workspace_id}: no answer in {timeout:.0f} s"
    except Exception as e:  # noqa: BLE001 - a failed call is counted, not raised
        return time.perf_counter() - started, f"{call.workspace_id}: {e}"
    elapsed = time.perf_counter() - started
    if result.is_error or result.result is None or not getattr(result.result, "total", 0):
        return elapsed, f"{call.workspace_id}: {result.text[:200]}"
    return elapsed, ""


_RUNTIME: list[Runtime] = []


def quiet_runtime() -> Runtime:
    """The bench's own client logs only errors: at 3,000 workspace queues its workflow worker's
    polls are refused too, and the SDK's retry warnings would flood stdout (the server's
    metrics and the worker's log count them)."""
    if not _RUNTIME:
        quiet = TelemetryFilter(core_level="ERROR", other_level="ERROR")
        _RUNTIME.append(Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=quiet))))
    return _RUNTIME[0]


async def measure_calls(run: Running, address: str, mode: str, n: int) -> None:
    """One warm-up, then ``opts.calls`` greps on workspaces spread over the N."""
    client = await Client.connect(address, plugins=[FsSearchPlugin()], runtime=quiet_runtime())
    queue = f"scale-bench-{uuid.uuid4().hex[:6]}"
    count = run.opts.calls
    hosts = run.opts.hosts
    # (workspace, host index): the last workspace of the last host, then spread over both.
    targets = [(n - 1, hosts - 1)] + [(i * n // count, i * hosts // count) for i in range(count)]
    times: list[float] = []
    async with Worker(client, task_queue=queue, workflows=[FsSearchCallWorkflow]):
        for i, (target, on) in enumerate(targets):
            run.check()
            host = None if mode != "host" else HOST_ID if hosts == 1 else host_id(on)
            call = CallInput(
                workspace_id=workspace_id(target),
                tool="grep",
                arguments={"pattern": "needle"},
                host=host,
            )
            elapsed, failure = await one_call(client, queue, call, run.opts.call_timeout)
            if failure:
                run.row.failures.append(failure)
            if i:  # the first is the warm-up
                times.append(elapsed)
    row = run.row
    row.calls = len(targets)
    row.failed_calls = len(row.failures)
    row.call_p50_ms = statistics.median(times) * 1000
    row.call_worst_ms = max(times) * 1000


async def run_row(mode: str, n: int, roots: list[Path], tmp: Path, opts: Opts) -> Row:
    """Server, workers (one per root), attach, idle window, calls, stop; whatever was
    measured is kept."""
    row = Row(mode, n, hosts=len(roots))
    server = MetricsDevServer(tmp / f"temporal-{mode}-{n}.log", opts.dynamic_config)
    await server.start()
    workers: list[ManagedProcess] = []
    try:
        started = time.monotonic()
        for i, root in enumerate(roots):
            host = HOST_ID if len(roots) == 1 else host_id(i)
            workers.append(start_worker(server.address, root, mode, tmp, host, opts.code))
        logs = [LogWatch(w.log_path or tmp / "none") for w in workers]
        run = Running(server, workers, logs, opts, row)
        await wait_attached(run, n, started)
        say(f"{mode} {n}: attached in {row.attach_s:.1f} s; settling {opts.settle:.0f} s")
        await run.sleep(opts.settle)
        say(f"{mode} {n}: idle window {opts.idle:.0f} s")
        await idle_window(run)
        say(f"{mode} {n}: {opts.calls} calls")
        await measure_calls(run, server.address, mode, n)
    except Exception as e:  # noqa: BLE001 - one row's failure must not lose the others
        row.aborted = str(e) if isinstance(e, RowAborted) else f"{type(e).__name__}: {e}"
        row.server_log_tail = tail_of(server.process.log_path, 5)
        say(f"{mode} {n}: aborted: {row.aborted}")
    finally:
        for worker in workers:
            worker.stop(timeout=30)
        server.stop()
    return row


# --- output --------------------------------------------------------------------------------

COLUMNS = (
    ("mode", "mode", "{}"),
    ("N", "workspaces", "{:,}"),
    ("server RSS MB", "server_rss_mb", "{:,.0f}"),
    ("server CPU %", "server_cpu_pct", "{:.1f}"),
    ("worker RSS MB", "worker_rss_mb", "{:,.0f}"),
    ("worker CPU %", "worker_cpu_pct", "{:.2f}"),
    ("polls/min", "polls_per_min", "{:,.0f}"),
    ("refused/min", "refused_per_min", "{:,.0f}"),
    ("call p50 ms", "call_p50_ms", "{:,.0f}"),
    ("worst ms", "call_worst_ms", "{:,.0f}"),
    ("failed calls", "failed_calls", "{}"),
    ("attach s", "attach_s", "{:.1f}"),
)


def _cell(row: Row, key: str, fmt: str) -> str:
    value = getattr(row, key)
    if key == "failed_calls":
        return f"{value}/{row.calls}"
    return "—" if value is None else fmt.format(value)


# Many hosts: H workers of N workspaces each (worker columns: median / largest, and the sum).
HOSTS_COLUMNS = (
    ("hosts x N", "hosts", "{}"),
    ("workspaces", "total", "{:,}"),
    ("server RSS MB", "server_rss_mb", "{:,.0f}"),
    ("server CPU %", "server_cpu_pct", "{:.1f}"),
    ("polls/min", "polls_per_min", "{:,.0f}"),
    ("refused/min", "refused_per_min", "{:,.0f}"),
    ("worker CPU % median / max", "worker_cpu", "{}"),
    ("all workers CPU %", "workers_cpu_pct", "{:.1f}"),
    ("worker RSS MB median / max", "worker_rss", "{}"),
    ("call p50 ms", "call_p50_ms", "{:,.0f}"),
    ("worst ms", "call_worst_ms", "{:,.0f}"),
    ("failed calls", "failed_calls", "{}"),
    ("attach s", "attach_s", "{:.1f}"),
)


def _hosts_cell(row: Row, key: str, fmt: str) -> str:
    if key == "hosts":
        return f"{row.hosts} x {row.workspaces:,}"
    if key == "total":
        return f"{row.hosts * row.workspaces:,}"
    if key == "worker_cpu" and row.worker_cpu_pct is not None:
        return f"{row.worker_cpu_pct:.2f} / {row.worker_cpu_max_pct:.2f}"
    if key == "worker_rss" and row.worker_rss_mb is not None:
        return f"{row.worker_rss_mb:,.0f} / {row.worker_rss_max_mb:,.0f}"
    if key in ("worker_cpu", "worker_rss"):
        return "—"
    return _cell(row, key, fmt)


def table(rows: list[Row]) -> str:
    many = any(row.hosts > 1 for row in rows)
    columns = HOSTS_COLUMNS if many else COLUMNS
    cell = _hosts_cell if many else _cell
    lines = ["| " + " | ".join(title for title, _, _ in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    for row in rows:
        lines.append("| " + " | ".join(cell(row, k, f) for _, k, f in columns) + " |")
    return "\n".join(lines)


def notes(rows: list[Row]) -> list[str]:
    out = []
    for row in rows:
        where = f"{row.mode} {row.workspaces:,}"
        if row.aborted:
            out.append(f"{where}: ABORTED — {row.aborted} (server log: {row.server_log_tail})")
        for failure in row.failures:
            out.append(f"{where}: failed call — {failure}")
        if row.worker_exhausted_lines:
            out.append(
                f"{where}: {row.worker_exhausted_lines} ResourceExhausted lines in the worker log"
            )
    return out


def header(opts: Opts, argv: list[str]) -> str:
    code = f", worker code {opts.code}" if opts.code else ""
    return (
        f"fs-search scale benchmark ({' '.join(argv) or 'defaults'}): {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}, idle window {opts.idle:.0f} s after {opts.settle:.0f} s, "
        f"dynamic config {opts.dynamic_config or 'default'}{code}"
    )


def say(message: str) -> None:
    print(f"[scale bench] {message}", file=sys.stderr, flush=True)


# --- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--workspaces", help="Ns, comma-separated (default 100,1000,3000)")
    p.add_argument("--modes", default="workspace,host", help="some of workspace,host")
    p.add_argument("--quick", action="store_true", help="100,1000; 65 s idle window")
    p.add_argument(
        "--idle",
        type=float,
        help="idle window in s (default 120, --quick 65); an idle queue's poll returns about once a"
        " minute, so a window under 60 s can count none",
    )
    p.add_argument("--settle", type=float, help="pause after attach in s (default 10, --quick 5)")
    p.add_argument("--calls", type=int, default=5, help="measured greps per row (plus a warm-up)")
    p.add_argument("--call-timeout", type=float, default=60, help="a call's bound in s")
    p.add_argument("--max-server-gb", type=float, default=12, help="abort a row past this")
    p.add_argument(
        "--dynamic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dev-server dynamic config value (e.g. frontend.namespaceCount=10000)",
    )
    p.add_argument(
        "--hosts",
        type=int,
        default=1,
        help="host workers on the one server, each its own root of N workspaces (host mode)",
    )
    p.add_argument(
        "--roots-in",
        type=Path,
        help="where the workspace roots are made (default /dev/shm when there, else a temp dir)",
    )
    p.add_argument(
        "--worker-code",
        type=Path,
        help="run the workers on this checkout's code (a directory holding activities/, "
        "workflows/ and worker/)",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON on stdout")
    p.add_argument("--save", type=Path, help="also write the rows as JSON to this file")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (server/worker logs)")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - {"workspace", "host"}:
        p.error("--modes takes workspace and/or host")
    args.mode_list = modes
    if args.hosts < 1:
        p.error("--hosts takes a positive count")
    if args.hosts > 1 and modes != ["host"]:
        p.error("--hosts runs host workers: add --modes host")
    if args.worker_code and not (args.worker_code / "worker" / "_fleet.py").is_file():
        p.error("--worker-code takes a checkout (a directory holding worker/_fleet.py)")
    default = "100,1000" if args.quick else "100,1000,3000"
    args.sizes = [int(x) for x in (args.workspaces or default).split(",") if x]
    if not args.sizes or min(args.sizes) < 1:
        p.error("--workspaces takes positive counts")
    return args


def options(args: argparse.Namespace) -> Opts:
    return Opts(
        settle=args.settle if args.settle is not None else (5 if args.quick else 10),
        idle=args.idle if args.idle is not None else (65 if args.quick else 120),
        calls=args.calls,
        call_timeout=args.call_timeout,
        attach_timeout=120 + max(args.sizes) * 0.1 + 10 * args.hosts,
        max_server_bytes=int(args.max_server_gb * 1024 * MB),
        dynamic_config=args.dynamic_config,
        hosts=args.hosts,
        code=args.worker_code,
    )


async def run_all(args: argparse.Namespace, opts: Opts, head: str) -> list[Row]:
    """Every row; with ``--save`` the file is rewritten after each (a crash keeps the rest)."""
    tmp = Path(tempfile.mkdtemp(prefix="fs-search-scale-bench-"))
    where = args.roots_in or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp)
    roots_dir = Path(tempfile.mkdtemp(prefix="fs-search-scale-roots-", dir=where))
    rows: list[Row] = []
    started = time.monotonic()
    try:
        for n in args.sizes:
            roots = [roots_dir / f"root-{i:03d}" for i in range(opts.hosts)]
            made = time.monotonic()
            for root in roots:
                make_root(root, n)
            say(f"{opts.hosts} x {n:,} workspaces made in {time.monotonic() - made:.1f} s")
            for mode in args.mode_list:
                rows.append(await run_row(mode, n, roots, tmp, opts))
                say(table(rows[-1:]).splitlines()[-1])
                if args.save:
                    save(args.save, payload(head, rows, time.monotonic() - started))
    finally:
        shutil.rmtree(roots_dir, ignore_errors=True)
        if args.keep:
            say(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


def payload(head: str, rows: list[Row], seconds: float) -> dict[str, object]:
    return {"header": head, "seconds": round(seconds), "rows": [asdict(r) for r in rows]}


def save(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def main(argv: list[str] | None = None) -> int:
    """Exit status 1 when a row was aborted (failed calls alone do not change it)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    opts = options(args)
    started = time.monotonic()
    head = header(opts, argv)
    rows = asyncio.run(run_all(args, opts, head))
    elapsed = time.monotonic() - started
    data = payload(head, rows, elapsed)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"\n{head}\n\n{table(rows)}\n")
        print("\n".join(notes(rows) + [f"total {elapsed:.0f} s, load {os.getloadavg()[0]:.2f}"]))
    if args.save:
        save(args.save, data)
        say(f"saved {args.save}")
    return 1 if any(r.aborted for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
