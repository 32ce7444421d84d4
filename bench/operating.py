"""Benchmark of a worker's /metrics (docs/operating.md, issue 48).

Run as ``bench/operating [--workspaces 10000] [--called 500] [--pairs 100]``. Rows:

* scrape of a worker serving N workspaces (``--workspaces-root``, the host queue): the
  scrape's size, its series, and the time of one GET /metrics (median and p90 of 20), after
  one call in each of ``--called`` workspaces; by default, and with
  ``--metrics-per-workspace``;
* cost of the endpoint on the small grep: one-off greps (``FsSearchClient``, one standalone
  activity each) alternately through a worker with ``--http`` (scraped every second meanwhile)
  and one without, interleaved; the medians and their ratio.

Every worker is a real ``fs-search worker`` child process on one Temporal dev server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from temporalio.client import Client

from fs_search.worker._binaries import find_binary
from fs_search.worker._devstack import DevServer
from fs_search.workflows import FsSearchClient, FsSearchPlugin

FS_SEARCH = find_binary("fs-search") or "fs-search"
SERVING = re.compile(r"serving /livez, /readyz and /metrics on (http://\S+)")


class Child:
    """An ``fs-search worker`` process; its log in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        full = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "OTEL_"))}
        self.proc = subprocess.Popen(
            [FS_SEARCH, "worker", *argv],
            env={**full, **env},
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not log {text!r}:\n{self.log()[-3000:]}")
            time.sleep(0.2)

    @property
    def url(self) -> str:
        found = SERVING.search(self.log())
        assert found, self.log()[-2000:]
        return found.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def series(scrape: bytes) -> int:
    return sum(1 for line in scrape.splitlines() if line and not line.startswith(b"#"))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def scrape_row(
    client: Client, address: str, tmp: Path, workspaces: int, called: int, per_workspace: bool
) -> dict[str, float]:
    root = tmp / f"root-{per_workspace}"
    for n in range(workspaces):
        (root / f"ws{n:05}").mkdir(parents=True)
    for n in range(called):
        (root / f"ws{n:05}" / "a.txt").write_text("needle\n")
    host = f"bench-{uuid.uuid4().hex[:6]}"
    args = ["--workspaces-root", str(root), "--queues", "host", "--address", address]
    args += ["--sample-over-cap-glob-results", "--http", "127.0.0.1:0"]
    if per_workspace:
        args.append("--metrics-per-workspace")
    env = {"FS_SEARCH_HOST_ID": host, "FS_SEARCH_SPILL_URL": f"file://{tmp}/spill"}
    child = Child(args, env, tmp / f"worker-{per_workspace}.log")
    try:
        child.wait_for("serving host queue", 300)
        url = child.url
        deadline = time.monotonic() + 600
        while True:
            text = get(url + "/metrics").decode()
            attached = re.search(r"^fs_search_workspaces_attached (\S+)", text, re.M)
            if attached and float(attached.group(1)) >= workspaces:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the worker never attached every workspace")
            await asyncio.sleep(1)
        limit = asyncio.Semaphore(8)

        async def one(n: int) -> None:
            async with limit:
                result = await FsSearchClient(client, f"ws{n:05}", host=host).grep("needle")
                assert not result.is_error, result.text

        await asyncio.gather(*(one(n) for n in range(called)))
        await asyncio.sleep(1.5)
        times, size, count = [], 0, 0
        for _ in range(20):
            started = time.perf_counter()
            body = await asyncio.to_thread(get, url + "/metrics")
            times.append(time.perf_counter() - started)
            size, count = len(body), series(body)
        return {
            "bytes": size,
            "series": count,
            "p50_ms": statistics.median(times) * 1000,
            "p90_ms": quantile(times, 0.9) * 1000,
        }
    finally:
        child.stop()


async def cost_row(client: Client, address: str, tmp: Path, pairs: int) -> dict[str, float]:
    ws = tmp / "small"
    ws.mkdir()
    for n in range(10):
        (ws / f"f{n}.txt").write_text(f"needle {n}\n")
    children = {}
    for name, extra in (("http", ["--http", "127.0.0.1:0"]), ("plain", [])):
        args = ["--workspace", str(ws), "--workspace-id", f"cost-{name}-{uuid.uuid4().hex[:6]}"]
        args += ["--address", address, "--sample-over-cap-glob-results", *extra]
        children[name] = (
            Child(args, {"FS_SEARCH_SPILL_URL": f"file://{tmp}/spill"}, tmp / f"{name}.log"),
            args[3],
        )
    stop = asyncio.Event()
    scrapes = 0
    try:
        for child, _ in children.values():
            child.wait_for("polling task queue", 120)
        url = children["http"][0].url

        async def scraping() -> None:
            nonlocal scrapes
            while not stop.is_set():
                await asyncio.to_thread(get, url + "/metrics")
                scrapes += 1
                await asyncio.sleep(1.0)

        scraper = asyncio.create_task(scraping())
        times: dict[str, list[float]] = {"http": [], "plain": []}
        for i in range(pairs + 5):
            order = ("http", "plain") if i % 2 == 0 else ("plain", "http")
            for name in order:
                tools = FsSearchClient(client, children[name][1])
                started = time.perf_counter()
                result = await tools.grep("needle")
                took = time.perf_counter() - started
                assert not result.is_error and result.result.total == 10, result.text
                if i >= 5:  # warm-up
                    times[name].append(took)
        stop.set()
        await scraper
    finally:
        stop.set()
        for child, _ in children.values():
            child.stop()
    http, plain = statistics.median(times["http"]), statistics.median(times["plain"])
    return {
        "http_ms": http * 1000,
        "plain_ms": plain * 1000,
        "ratio": http / plain,
        "http_p90_ms": quantile(times["http"], 0.9) * 1000,
        "plain_p90_ms": quantile(times["plain"], 0.9) * 1000,
        "scrapes": scrapes,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspaces", type=int, default=10_000)
    parser.add_argument("--called", type=int, default=500)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--rows", default="scrape,cost")
    args = parser.parse_args()
    rows = set(args.rows.split(","))
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="fs-bench-op-") as tmp_name:
        tmp = Path(tmp_name)
        server = await DevServer().start()
        try:
            client = await Client.connect(
                server.address, plugins=[FsSearchPlugin(spill_url=f"file://{tmp}/spill")]
            )
            if "scrape" in rows:
                for per_workspace in (False, True):
                    row = await scrape_row(
                        client, server.address, tmp, args.workspaces, args.called, per_workspace
                    )
                    label = "--metrics-per-workspace" if per_workspace else "default"
                    print(
                        f"scrape, {args.workspaces} workspaces ({args.called} called), {label}: "
                        f"{row['bytes'] / 1024:.1f} KiB, {row['series']} series, "
                        f"GET /metrics p50 {row['p50_ms']:.1f} ms, p90 {row['p90_ms']:.1f} ms",
                        flush=True,
                    )
            if "cost" in rows:
                row = await cost_row(client, server.address, tmp, args.pairs)
                print(
                    f"small grep (one-off, {args.pairs} interleaved pairs): with --http "
                    f"(scraped every 1 s, {row['scrapes']:.0f} scrapes) {row['http_ms']:.1f} ms "
                    f"(p90 {row['http_p90_ms']:.1f}), without {row['plain_ms']:.1f} ms "
                    f"(p90 {row['plain_p90_ms']:.1f}); ratio {row['ratio']:.3f}",
                    flush=True,
                )
        finally:
            server.stop()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end", flush=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
