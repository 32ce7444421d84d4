"""Benchmark of one worker process serving many workspaces (``--workspaces-root``).

Run as ``bench/fleet [--workspaces 1000] [--singles 10] [--quick]``. Every worker is a real
``fs-search worker`` child process on one Temporal dev server; calls go through the
benchmark's own workflow (``bench.Calls``, FsSearchTools) as an agent's would. Rows:

* idle cost per workspace: (RSS with N attached - RSS with 1) / (N - 1), worker + helpers;
* idle CPU: the fleet worker's CPU over 20 s with N attached and no calls;
* vs one process each: RSS of one process with 100 workspaces / total RSS of 100
  single-workspace workers (``--singles`` of them are started and measured; the total is
  their mean x 100 when fewer than 100 run);
* attach: directory created -> first call answered (p95 of 20, scan interval 2 s);
* latency: small grep through the N-workspace worker / through a 1-workspace worker
  (interleaved medians);
* fairness: small grep on a quiet workspace while another floods 64 heavy greps /
  the same grep unloaded (medians);
* host-queue fairness: the same on one host queue (``--queues host``), at the limits the
  audit of issue 34 starved a quiet workspace with (4 searches at once, 2 per workspace, 8
  calls held): the flood's backlog is far larger than the calls the host holds;
* hostile host-queue fairness: the same with a flood that ignores the host's hand-backs
  (``max_attempts: 1``, each scheduled again at once: issue 47);
* Nexus fairness: another caller namespace's grep through the fs_search endpoint while one
  namespace floods it with 600 operations, and a new workspace's attach under that flood.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))

from flood import DONE as FLOOD_DONE  # noqa: E402
from flood import READY as FLOOD_READY  # noqa: E402
from flows import WORKFLOWS, Call, CallsWorkflow, Spec  # noqa: E402
from phases import medians, phases  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from fs_search.worker import create_endpoint  # noqa: E402
from fs_search.worker._devstack import DevServer  # noqa: E402
from fs_search.worker._processes import ManagedProcess  # noqa: E402
from fs_search.worker._service_handler import CALLBACKS_DYNAMIC_CONFIG  # noqa: E402
from fs_search.workflows import FsSearchPlugin

MB = 1024 * 1024
# Greps the flooding workspace keeps outstanding in the fairness rows.
FLOOD_CALLS = 64
# Operations the flooding namespace keeps open in the Nexus row.
NEXUS_FLOOD_OPERATIONS = 600
# Worker settings for every worker the benchmark starts (``--set KEY=VALUE``).
SETTINGS: dict[str, str] = {}


@dataclass
class Row:
    name: str
    value: float
    target: str
    met: bool
    detail: str

    def line(self) -> str:
        mark = "yes" if self.met else "NO"
        return f"| {self.name} | {self.value:.3g} | {self.target} | {mark} | {self.detail} |"


class WorkerProc:
    """An ``fs-search worker`` child (fleet or single), measured with its helpers."""

    def __init__(
        self, address: str, log: Path, spill: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        settings = env or {}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "OTEL_"))}
        env.update(SETTINGS)
        env.update(settings)
        env["FS_SEARCH_SPILL_URL"] = f"file://{spill}"
        self.log = log
        self.proc = ManagedProcess(
            [
                sys.executable,
                "-c",
                "from fs_search.worker.cli import run; run()",
                "worker",
                *args,
                "--address",
                address,
                "--sample-over-cap-glob-results",
            ],
            log_path=log,
            env=env,
        )
        self.proc.start()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for(self, needle: str, count: int = 1, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.text().count(needle) < count:
            if not self.proc.running():
                raise RuntimeError(f"worker exited: {self.text()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} x {needle!r} not seen: {self.text()[-2000:]}")
            await asyncio.sleep(0.1)

    def processes(self) -> list[psutil.Process]:
        """The worker and its digest helpers (not rg)."""
        me = psutil.Process(self.proc.pid)
        kids = [p for p in me.children(recursive=True) if "rg" not in p.name()]
        return [me, *kids]

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in self.processes())

    def cpu_seconds(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.processes())

    def stop(self) -> None:
        self.proc.stop(timeout=60)


def make_workspace(path: Path, *, small: int = 10) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for i in range(small):
        (path / f"f{i}.txt").write_text("alpha needle beta\n" if i == 0 else "nothing here\n")


class Flood:
    """The flooding tenant: ``bench/flood.py`` in a process of its own (its own client and
    workflow worker, as another tenant's agents run), stopped by its pid."""

    def __init__(
        self,
        bench: Bench,
        workspace: str,
        *,
        host: str | None,
        sustained: bool,
        ignore_pause: bool = False,
    ) -> None:
        name = f"flood-{uuid.uuid4().hex[:6]}"
        self.log = bench.tmp / f"{name}.log"
        argv = [
            sys.executable,
            str(Path(__file__).parent / "flood.py"),
            "--address",
            bench.server.address,
            "--queue",
            f"{bench.queue}-{name}",
            "--spill-url",
            f"file://{bench.tmp}/spill",
            "--workspace",
            workspace,
            "--calls",
            str(FLOOD_CALLS),
        ]
        argv += ["--host", host] if host else []
        argv += ["--sustained"] if sustained else []
        argv += ["--ignore-pause"] if ignore_pause else []
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "OTEL_"))}
        self.proc = ManagedProcess(argv, log_path=self.log, env=env)
        self.proc.start()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.running()

    async def started(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while FLOOD_READY not in self.text():
            if not self.running() or time.monotonic() > deadline:
                raise RuntimeError(f"the flood did not start: {self.text()[-2000:]}")
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        """Stop starting calls and wait for those in flight (the flood's own exit)."""
        self.proc.stop(timeout=180)

    def summary(self) -> str:
        """How many calls the stopped flood made.

        Raises:
            AssertionError: a flood call failed, or the flood did not end cleanly.
        """
        text = self.text()
        done = [line for line in text.splitlines() if line.startswith(FLOOD_DONE)]
        if "flood failed" in text or not done:
            raise AssertionError(f"the flood's calls failed: {text[-2000:]}")
        return done[-1].removeprefix(f"{FLOOD_DONE}: ")


async def grep_latency(
    client: Client,
    queue: str,
    workspace_id: str,
    pattern: str,
    host: str | None = None,
    *,
    timed: list[dict[str, float]] | None = None,
    endpoint: str | None = None,
) -> float:
    """One grep's time end to end (s); its phases (ms, from its history) appended to
    ``timed`` when given. ``endpoint``: through that Nexus endpoint."""
    spec = Spec(
        workspace_id=workspace_id,
        calls=[Call(tool="grep", arguments={"pattern": pattern})],
        host=host,
        endpoint=endpoint,
    )
    workflow_id = f"fleet-{uuid.uuid4()}"
    started = time.perf_counter()
    results = await client.execute_workflow(
        CallsWorkflow.run, spec, id=workflow_id, task_queue=queue
    )
    elapsed = time.perf_counter() - started
    if results[0].is_error or not results[0].result.total:
        raise AssertionError(f"call failed: {results[0].text}")
    if timed is not None:
        timed.append(await phases(client, workflow_id, elapsed * 1000))
    return elapsed


@dataclass
class Bench:
    """The dev server, the client and its workflow queue, and the fleet worker under test."""

    server: DevServer
    client: Client
    queue: str
    tmp: Path
    workspaces: int
    samples: int
    workers: list[WorkerProc]
    root: Path
    fleet: WorkerProc | None = None
    # Seconds from a fairness row's flood start to its first quiet call measured.
    flood_warmup: float = 1.0

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> WorkerProc:
        worker = WorkerProc(
            self.server.address, self.tmp / f"{name}.log", self.tmp / "spill", *args, env=env
        )
        self.workers.append(worker)
        return worker

    def stop(self, worker: WorkerProc) -> None:
        worker.stop()
        self.workers.remove(worker)

    async def fleet_with(self, n: int) -> WorkerProc:
        """The fleet worker, with at least ``n`` workspaces w0..w<n-1> attached."""
        if self.fleet is None:
            make_workspace(self.root / "w0")
            self.fleet = self.start(
                "fleet", "--workspaces-root", str(self.root), "--scan-interval", "2"
            )
            await self.fleet.wait_for("attached workspace w0")
        for i in range(1, n):
            if not (self.root / f"w{i}").exists():
                make_workspace(self.root / f"w{i}", small=1)
        await self.fleet.wait_for("attached workspace", count=n)
        return self.fleet

    async def grep(self, workspace_id: str, pattern: str = "needle") -> float:
        return await grep_latency(self.client, self.queue, workspace_id, pattern)


ROWS = (
    "idle",
    "attach",
    "latency",
    "fairness",
    "host-fairness",
    "hostile-host-fairness",
    "sustained-fairness",
    "nexus-fairness",
    "processes",
)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1000)
    parser.add_argument("--singles", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--server-fairness",
        action="store_true",
        help="start the dev server with task-queue fairness (matching.enableFairness=true)",
    )
    parser.add_argument("--rows", default=",".join(ROWS), help=f"some of {','.join(ROWS)}")
    parser.add_argument(
        "--flood-warmup",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="the fairness rows' flood runs this long before the quiet calls are measured",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an FS_SEARCH_<NAME> setting for every worker started (e.g. parse_processes=0)",
    )
    parser.add_argument(
        "--keep-tmp",
        action="store_true",
        help="keep the temp dir (logs, workspaces, the flood's spills: hundreds of MB a row)",
    )
    args = parser.parse_args()
    for item in args.set:
        name, _, value = item.partition("=")
        SETTINGS[f"FS_SEARCH_{name.upper()}"] = value
    chosen = [r for r in args.rows.split(",") if r]
    unknown = sorted(set(chosen) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {','.join(ROWS)}")
    tmp = Path(tempfile.mkdtemp(prefix="fs-search-fleet-bench-"))
    fairness = ["matching.enableFairness=true"] if args.server_fairness else []
    server = await DevServer(log_path=tmp / "temporal.log", dynamic_config=fairness).start()
    rows: list[Row] = []
    workers: list[WorkerProc] = []
    try:
        client = await Client.connect(
            server.address, plugins=[FsSearchPlugin(spill_url=f"file://{tmp}/spill")]
        )
        queue = f"fleet-bench-{uuid.uuid4().hex[:6]}"
        bench = Bench(
            server,
            client,
            queue,
            tmp,
            args.workspaces,
            7 if args.quick else 15,
            workers,
            tmp / "root",
            flood_warmup=args.flood_warmup,
        )
        # The flooding tenant's agent workflows run in a process of their own (class Flood).
        async with Worker(client, task_queue=queue, workflows=WORKFLOWS):
            for name in ROWS:
                if name in chosen:
                    if name == "processes":
                        rows += await per_process_row(bench, args.singles)
                    else:
                        rows += await ROW_FUNCTIONS[name](bench)
    finally:
        for w in workers:
            w.stop()
        server.stop()
        if args.keep_tmp:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"\nfs-search fleet benchmark ({args.workspaces} workspaces, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}, settings {SETTINGS or 'default'}"
        f"{', server fairness on' if args.server_fairness else ''})\n"
    )
    print("| row | value | target | met | detail |\n|---|---|---|---|---|")
    for row in rows:
        print(row.line())
    return 0


async def idle_rows(bench: Bench) -> list[Row]:
    """Idle RSS per workspace and idle CPU."""
    n = bench.workspaces
    fleet = await bench.fleet_with(1)
    await asyncio.sleep(8)
    rss_one = fleet.rss()
    log(f"1 workspace: {rss_one / MB:.1f} MB")
    await bench.fleet_with(n)
    await asyncio.sleep(15)
    rss_n = fleet.rss()
    per = (rss_n - rss_one) / (n - 1) / MB
    log(f"{n} workspaces: {rss_n / MB:.1f} MB")
    rows = [
        Row(
            "idle cost per workspace (MB)",
            per,
            "<= 0.5",
            per <= 0.5,
            f"{rss_one / MB:.1f} MB with 1, {rss_n / MB:.1f} MB with {n}",
        )
    ]
    cpu0, t0 = fleet.cpu_seconds(), time.monotonic()
    server0 = _cpu(bench.server.process.pid)
    await asyncio.sleep(20)
    elapsed = time.monotonic() - t0
    cpu = (fleet.cpu_seconds() - cpu0) / elapsed * 100
    server = (_cpu(bench.server.process.pid) - server0) / elapsed * 100
    rows.append(
        Row(
            "idle CPU (% of a core)",
            cpu,
            "<= 5",
            cpu <= 5,
            f"{n} attached, 20 s idle; the dev server meanwhile {server:.1f} %",
        )
    )
    log(f"idle cpu {cpu:.2f}% (server {server:.1f}%)")
    return rows


async def attach_row(bench: Bench) -> list[Row]:
    """Directory created -> first call answered."""
    await bench.fleet_with(bench.workspaces)
    attach = []
    for i in range(20 if bench.samples > 7 else 8):
        wid = f"late{i}-{uuid.uuid4().hex[:4]}"
        started = time.perf_counter()
        make_workspace(bench.root / wid)
        await bench.grep(wid)
        attach.append(time.perf_counter() - started)
    p95 = sorted(attach)[max(0, int(len(attach) * 0.95) - 1)]
    log(f"attach p95 {p95:.2f}")
    return [
        Row(
            "attach p95 (s)",
            p95,
            "<= 3",
            p95 <= 3,
            f"median {statistics.median(attach):.2f} s, max {max(attach):.2f} s, "
            f"n={len(attach)}, scan interval 2 s",
        )
    ]


async def latency_row(bench: Bench) -> list[Row]:
    """A small grep through the N-workspace worker vs through a 1-workspace worker."""
    await bench.fleet_with(bench.workspaces)
    single_ws = bench.tmp / "single"
    make_workspace(single_ws)
    single = bench.start("single", "--workspace", str(single_ws), "--workspace-id", "solo")
    await single.wait_for("polling task queue")
    for _ in range(3):
        await bench.grep("w0")
        await bench.grep("solo")
    many, one = [], []
    for _ in range(bench.samples):
        many.append(await bench.grep("w0"))
        one.append(await bench.grep("solo"))
    bench.stop(single)
    ratio = statistics.median(many) / statistics.median(one)
    log(f"latency ratio {ratio:.3f}")
    return [
        Row(
            "latency ratio",
            ratio,
            "<= 1.1",
            ratio <= 1.1,
            f"{statistics.median(many) * 1000:.0f} ms via {bench.workspaces} vs "
            f"{statistics.median(one) * 1000:.0f} ms via 1 (medians of {bench.samples})",
        )
    ]


def make_busy(busy: Path) -> None:
    """The flooding workspace: every grep of "match" yields ~15 MB of rg --json."""
    if busy.exists():
        return
    busy.mkdir(parents=True)
    for d in range(8):
        (busy / f"d{d}").mkdir()
        # 8 x 7,500 matching lines: ~15 MB of rg --json per call, like the heavy row.
        (busy / f"d{d}" / "many.txt").write_text("match line of text\n" * 7_500)


async def fairness_row(bench: Bench) -> list[Row]:
    """A quiet workspace's small grep while another floods 64 heavy greps."""
    fleet = await bench.fleet_with(bench.workspaces)
    make_busy(bench.root / "busy")
    await fleet.wait_for("attached workspace busy")
    return [await _fairness(bench, fleet, "fairness ratio", quiet="w1", busy="busy")]


# The limits the audit of issue 34 starved a quiet workspace on a host queue with.
HOST_LIMITS = {
    "FS_SEARCH_MAX_CONCURRENT_SEARCHES": "4",
    "FS_SEARCH_MAX_CONCURRENT_PER_WORKSPACE": "2",
    "FS_SEARCH_MAX_QUEUED_SEARCHES": "8",
}


async def host_fairness_row(bench: Bench) -> list[Row]:
    """The fairness row on one host queue, at small limits (the flood far exceeds them)."""
    return [await _sustained_fairness(bench, host=True)]


async def hostile_host_fairness_row(bench: Bench) -> list[Row]:
    """The host row with a hostile flood: each grep one activity with ``max_attempts: 1``,
    scheduled again at once whenever the host hands it back (the pause it asks ignored)."""
    return [await _sustained_fairness(bench, host=True, ignore_pause=True)]


async def sustained_fairness_row(bench: Bench) -> list[Row]:
    """The host row's flood and limits on per-workspace queues: the same process and cores,
    each workspace on its own queue — what the host queue is held against."""
    return [await _sustained_fairness(bench, host=False)]


async def _sustained_fairness(bench: Bench, *, host: bool, ignore_pause: bool = False) -> Row:
    root = bench.tmp / ("host-root" if host else "sustained-root")
    make_workspace(root / "quiet")
    make_busy(root / "busy")
    host_id = f"bench-{uuid.uuid4().hex[:6]}"
    queues = "host" if host else "workspace"
    args = ("--workspaces-root", str(root), "--queues", queues, "--host-id", host_id)
    worker = bench.start(f"{queues}-fleet", *args, env=HOST_LIMITS)
    try:
        await worker.wait_for("attached workspace busy")
        await worker.wait_for("attached workspace quiet")
        if host:
            await worker.wait_for("serving host queue")
        limits = ", ".join(
            f"{k.removeprefix('FS_SEARCH_').lower()}={v}" for k, v in HOST_LIMITS.items()
        )
        name = "host-queue fairness ratio" if host else "workspace-queue fairness ratio, sustained"
        if ignore_pause:
            name = "host-queue fairness ratio, a flood ignoring the pause (max_attempts 1)"
        return await _fairness(
            bench,
            worker,
            name,
            quiet="quiet",
            busy="busy",
            host=host_id if host else None,
            note=f"{queues} queues, {limits}",
            sustained=True,
            ignore_pause=ignore_pause,
        )
    finally:
        bench.stop(worker)


async def _fairness(
    bench: Bench,
    fleet: WorkerProc,
    name: str,
    *,
    quiet: str,
    busy: str,
    host: str | None = None,
    note: str = "",
    sustained: bool = False,
    ignore_pause: bool = False,
) -> Row:
    """A quiet workspace's small grep while ``busy`` floods 64 heavy greps / alone.

    ``sustained``: the flood keeps 64 greps outstanding until every quiet call is measured
    (each one ended is fired again), so every quiet call meets a standing backlog; otherwise
    64 are fired once."""
    samples = bench.samples

    timed: dict[str, list[dict[str, float]]] = {"alone": [], "flooded": []}

    async def grep(when: str) -> float:
        return await grep_latency(
            bench.client, bench.queue, quiet, "needle", host, timed=timed[when]
        )

    alone = [await grep("alone") for _ in range(samples)]
    flood = Flood(bench, busy, host=host, sustained=sustained, ignore_pause=ignore_pause)
    try:
        await flood.started()
        await asyncio.sleep(bench.flood_warmup)
        flooded = []
        usage = Usage(bench, fleet, flood)
        for _ in range(samples):
            if not flood.running():
                break
            flooded.append(await grep("flooded"))
        where = usage.report()
    finally:
        flood.stop()
    summary = flood.summary()
    if len(flooded) < 3:
        raise AssertionError("the flood ended before the quiet calls were measured")
    fair = statistics.median(flooded) / statistics.median(alone)
    log(f"{name} {fair:.2f}")
    return Row(
        name,
        fair,
        "<= 3",
        fair <= 3,
        f"{statistics.median(flooded) * 1000:.0f} ms during a "
        f"{'sustained ' if sustained else ''}{FLOOD_CALLS}-grep flood from a tenant process "
        f"of its own ({summary}; quiet calls from {bench.flood_warmup:g} s in) vs "
        f"{statistics.median(alone) * 1000:.0f} ms alone (n={len(flooded)}/{len(alone)}, "
        f"max {max(flooded) * 1000:.0f} ms){'; ' + note if note else ''}; "
        f"CPU during the flood: {where}; quiet call's median ms alone: "
        f"{medians(timed['alone'])}; during the flood: {medians(timed['flooded'])}",
    )


async def per_process_row(bench: Bench, singles: int) -> list[Row]:
    """One process with 100 workspaces vs 100 single-workspace workers."""
    root = bench.tmp / "root100"
    for i in range(100):
        make_workspace(root / f"p{i}", small=1)
    fleet = bench.start("fleet100", "--workspaces-root", str(root))
    await fleet.wait_for("attached workspace", count=100)
    started = [
        bench.start(
            f"single{i}", "--workspace", str(root / f"p{i}"), "--workspace-id", f"single-{i}"
        )
        for i in range(singles)
    ]
    for w in started:
        await w.wait_for("polling task queue")
    await asyncio.sleep(10)
    fleet_rss = fleet.rss()
    each = [w.rss() for w in started]
    for w in [fleet, *started]:
        bench.stop(w)
    ratio = fleet_rss / (statistics.mean(each) * 100)
    return [
        Row(
            "vs one process each",
            ratio,
            "<= 0.05",
            ratio <= 0.05,
            f"{fleet_rss / MB:.0f} MB for 100 in one process vs "
            f"{statistics.mean(each) / MB:.0f} MB per single worker x 100 ({singles} measured)",
        )
    ]


async def nexus_fairness_row(bench: Bench) -> list[Row]:
    """Another caller namespace's small grep through the fs_search endpoint while one
    namespace floods it with 600 operations (``bench/nexus_flood.py``: each on a made-up
    workspace, each asking the handler to check its queue), against alone; and a new
    workspace's attach (directory made -> the worker's "attached" line) under that flood,
    against without it. Its own dev server: three namespaces, callbacks on."""
    server = await DevServer(
        log_path=bench.tmp / "nexus-temporal.log",
        dynamic_config=[CALLBACKS_DYNAMIC_CONFIG],
        namespaces=["fs-search", "agents", "others"],
    ).start()
    root = bench.tmp / "nexus-root"
    make_workspace(root / "quiet")
    flood: ManagedProcess | None = None
    worker: WorkerProc | None = None
    try:
        search = await Client.connect(
            server.address,
            namespace="fs-search",
            plugins=[FsSearchPlugin(spill_url=f"file://{bench.tmp}/spill")],
        )
        others = await Client.connect(
            server.address,
            namespace="others",
            plugins=[FsSearchPlugin(external_storage=False)],
        )
        endpoint, nexus_queue = f"bench-{uuid.uuid4().hex[:6]}", "fs-search-nexus"
        await create_endpoint(
            search, name=endpoint, target_namespace="fs-search", target_queue=nexus_queue
        )
        worker = WorkerProc(
            server.address,
            bench.tmp / "nexus-fleet.log",
            bench.tmp / "spill",
            "--workspaces-root",
            str(root),
            "--namespace",
            "fs-search",
            "--nexus-queue",
            nexus_queue,
            "--scan-interval",
            "1",
        )
        await worker.wait_for("attached workspace quiet")
        queue = f"nexus-quiet-{uuid.uuid4().hex[:6]}"

        async def quiet() -> float:
            return await grep_latency(others, queue, "quiet", "needle", endpoint=endpoint)

        async def attach() -> float:
            name = f"late-{uuid.uuid4().hex[:6]}"
            started = time.perf_counter()
            make_workspace(root / name)
            await worker.wait_for(f"attached workspace {name}", timeout=180)
            return time.perf_counter() - started

        async with Worker(others, task_queue=queue, workflows=WORKFLOWS):
            for _ in range(3):
                await quiet()
            alone = [await quiet() for _ in range(bench.samples)]
            attach_alone = [await attach() for _ in range(3)]
            log_path = bench.tmp / "nexus-flood.log"
            flood = ManagedProcess(
                [
                    sys.executable,
                    str(Path(__file__).parent / "nexus_flood.py"),
                    "--address",
                    server.address,
                    "--namespace",
                    "agents",
                    "--endpoint",
                    endpoint,
                    "--operations",
                    str(NEXUS_FLOOD_OPERATIONS),
                ],
                log_path=log_path,
                env={k: v for k, v in os.environ.items() if not k.startswith("FS_SEARCH_")},
            )
            flood.start()
            deadline = time.monotonic() + 60
            while "nexus flood started" not in log_path.read_text(errors="replace"):
                if time.monotonic() > deadline or not flood.running():
                    raise RuntimeError(f"the Nexus flood did not start: {log_path.read_text()}")
                await asyncio.sleep(0.1)
            await asyncio.sleep(max(3.0, bench.flood_warmup))
            attach_flooded = [await attach() for _ in range(3)]
            flooded = [await quiet() for _ in range(bench.samples)]
    finally:
        if flood is not None:
            flood.stop(timeout=60)
        if worker is not None:
            worker.stop()
        server.stop()
    ratio = statistics.median(flooded) / statistics.median(alone)
    attach_ratio = statistics.median(attach_flooded) / max(0.05, statistics.median(attach_alone))
    log(f"nexus fairness {ratio:.2f}, attach {attach_ratio:.2f}")
    return [
        Row(
            "Nexus fairness ratio (another namespace under a 600-operation flood)",
            ratio,
            "<= 3",
            ratio <= 3,
            f"{statistics.median(flooded) * 1000:.0f} ms through the endpoint during the flood "
            f"vs {statistics.median(alone) * 1000:.0f} ms alone (n={len(flooded)}/{len(alone)}, "
            f"max {max(flooded) * 1000:.0f} ms)",
        ),
        Row(
            "attach under that flood (s)",
            statistics.median(attach_flooded),
            "<= 3",
            statistics.median(attach_flooded) <= 3,
            f"median of 3, alone {statistics.median(attach_alone):.2f} s "
            f"(directory made -> attached, scan interval 1 s)",
        ),
    ]


ROW_FUNCTIONS = {
    "idle": idle_rows,
    "attach": attach_row,
    "latency": latency_row,
    "fairness": fairness_row,
    "host-fairness": host_fairness_row,
    "hostile-host-fairness": hostile_host_fairness_row,
    "sustained-fairness": sustained_fairness_row,
    "nexus-fairness": nexus_fairness_row,
}


class Usage:
    """CPU of the dev server, the fleet worker (+ helpers, + rg), this process and the flood
    tenant's, from now."""

    def __init__(self, bench: Bench, fleet: WorkerProc, flood: Flood) -> None:
        self.fleet = fleet
        self.flood = flood.pid
        self.server = bench.server.process.pid
        self.started = time.monotonic()
        self.before = self._now()

    def _now(self) -> dict[str, float]:
        worker = psutil.Process(self.fleet.proc.pid)
        helpers = [k for k in worker.children(recursive=True) if "rg" not in k.name()]
        return {
            "server": _cpu(self.server),
            # rg's CPU reaches the worker's children times once rg is reaped.
            "worker + helpers + rg": _cpu(worker.pid) + sum(_cpu(k.pid) for k in helpers),
            "bench": _cpu(os.getpid()),
            "flood tenant": _cpu(self.flood),
        }

    def report(self) -> str:
        elapsed = time.monotonic() - self.started
        after = self._now()
        return ", ".join(f"{k} {(after[k] - self.before[k]) / elapsed * 100:.0f} %" for k in after)


def _cpu(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system + times.children_user + times.children_system


def log(message: str) -> None:
    print(f"[fleet bench] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
