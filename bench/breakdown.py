"""``bench/run --breakdown``: where one small grep's time goes, phase by phase.

The in-process worker's spans (``fs_search.check``, ``.resolve``, ``.rg`` with its
``fs_search.spawned`` event, ``.parse``, ``.render``) are collected by an in-memory
OpenTelemetry exporter installed for the run; ``encode`` is the client's data converter
encoding the call's result (what the worker does with it after the activity returns), timed
here, with the encoded size. Alongside, interleaved: the plain rg activity end to end and
the same rg argv spawned directly with ``asyncio.create_subprocess_exec`` (spawn and run).
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field
from typing import Any

import corpus as c
from flows import Call, CallsWorkflow, PlainRg, PlainRgWorkflow
from harness import Env
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stats import percentile

from fs_search.activities import command
from fs_search.activities.models import GrepResult

PHASES = ("check", "resolve", "spawn", "rg", "parse", "render", "encode")
MS = 1000.0


def install_exporter() -> InMemorySpanExporter:
    """A global tracer provider exporting every span to memory (call before the worker is
    built: its tracer is the global proxy)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@dataclass
class Breakdown:
    """Per-call samples (ms) of each phase, and the sizes of the encoded results."""

    phases: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    activity: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    encoded_bytes: list[int] = field(default_factory=list)
    plain_total: list[float] = field(default_factory=list)
    plain_encoded_bytes: list[int] = field(default_factory=list)
    direct_spawn: list[float] = field(default_factory=list)
    direct_run: list[float] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The breakdown as a small table."""

        def cell(values: list[float]) -> str:
            if not values:
                return "-"
            return (
                f"{percentile(values, 50):8.2f}  [{percentile(values, 10):.2f}-"
                f"{percentile(values, 90):.2f}]"
            )

        out = [f"{'per call (small grep)':28} {'median ms':>9}  [p10-p90]"]
        for phase in PHASES:
            out.append(f"  {phase:26} {cell(self.phases[phase])}")
        out.append(f"  {'activity (check..render)':26} {cell(self.activity)}")
        out.append(f"  {'end to end':26} {cell(self.total)}")
        out.append(f"  {'encoded result (bytes)':26} {percentile(self.encoded_bytes, 50):8.0f}")
        out.append("plain rg activity (reference):")
        out.append(f"  {'end to end':26} {cell(self.plain_total)}")
        out.append(
            f"  {'encoded result (bytes)':26} {percentile(self.plain_encoded_bytes, 50):8.0f}"
        )
        out.append("the same rg argv, asyncio.create_subprocess_exec in this process:")
        out.append(f"  {'spawn':26} {cell(self.direct_spawn)}")
        out.append(f"  {'rg (to exit, stdout read)':26} {cell(self.direct_run)}")
        return out

    def as_json(self) -> dict[str, Any]:
        """Medians and spreads of every column."""

        def summary(values: list[float]) -> dict[str, float] | None:
            if not values:
                return None
            return {
                q: round(percentile(values, p), 3)
                for q, p in (("p10", 10), ("median", 50), ("p90", 90))
            }

        return {
            "phases_ms": {p: summary(v) for p, v in self.phases.items()},
            "activity_ms": summary(self.activity),
            "end_to_end_ms": summary(self.total),
            "encoded_bytes": percentile(self.encoded_bytes, 50),
            "plain_end_to_end_ms": summary(self.plain_total),
            "plain_encoded_bytes": percentile(self.plain_encoded_bytes, 50),
            "direct_spawn_ms": summary(self.direct_spawn),
            "direct_rg_ms": summary(self.direct_run),
        }


def _ms(start_ns: int | None, end_ns: int | None) -> float:
    assert start_ns is not None and end_ns is not None
    return (end_ns - start_ns) / 1e6


def _record(out: Breakdown, spans: list[ReadableSpan]) -> None:
    by_name: dict[str, ReadableSpan] = {}
    for span in spans:
        by_name.setdefault(span.name.removeprefix("fs_search."), span)
    missing = {"check", "resolve", "rg", "parse", "render"} - set(by_name)
    if missing:
        raise AssertionError(f"spans missing from the call: {sorted(missing)}")
    for name in ("check", "resolve", "parse", "render"):
        out.phases[name].append(_ms(by_name[name].start_time, by_name[name].end_time))
    rg = by_name["rg"]
    spawned = [e.timestamp for e in rg.events if e.name == "fs_search.spawned"]
    if not spawned:
        raise AssertionError("the rg span has no fs_search.spawned event")
    out.phases["spawn"].append(_ms(rg.start_time, spawned[0]))
    out.phases["rg"].append(_ms(spawned[0], rg.end_time))
    out.activity.append(_ms(by_name["check"].start_time, by_name["render"].end_time))


async def _encode(env: Env, value: Any) -> tuple[float, int]:
    converter = env.client.data_converter
    started = time.perf_counter()
    payloads = await converter.encode([value])
    seconds = time.perf_counter() - started
    return seconds * MS, sum(p.ByteSize() for p in payloads)


async def _direct(argv: list[str], cwd: str) -> tuple[float, float]:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    spawned = time.perf_counter()
    await proc.communicate()
    return (spawned - started) * MS, (time.perf_counter() - spawned) * MS


async def run(
    env: Env, exporter: InMemorySpanExporter, small_matches: int, rg: str, n: int
) -> Breakdown:
    """``n`` small greps (after one warm-up), each followed by the plain activity and a direct
    spawn of the same argv."""
    spec = env.spec(Call(tool="grep", arguments={"pattern": c.SMALL_PATTERN}, cwd="small"))
    argv = command.for_grep(c.SMALL_PATTERN, rg=env.activities.rg.path or rg)
    cwd = str(env.workspace / "small")
    plain = PlainRg(argv=argv, cwd=cwd, task_queue=env.plain_queue)
    out = Breakdown()
    for i in range(n + 1):
        exporter.clear()
        seconds, results = await env.timed(CallsWorkflow, spec)
        [result] = results
        if not isinstance(result.result, GrepResult) or result.result.total != small_matches:
            raise AssertionError(f"small grep failed: {result.text[:300]}")
        spans = list(exporter.get_finished_spans())
        encode_ms, size = await _encode(env, result.result)
        plain_s, stdout = await env.timed(PlainRgWorkflow, plain)
        _, plain_size = await _encode(env, stdout)
        gc.collect()
        spawn_ms, run_ms = await _direct(argv, cwd)
        if i == 0:
            continue  # warm-up
        _record(out, spans)
        out.phases["encode"].append(encode_ms)
        out.encoded_bytes.append(size)
        out.total.append(seconds * MS)
        out.plain_total.append(plain_s * MS)
        out.plain_encoded_bytes.append(plain_size)
        out.direct_spawn.append(spawn_ms)
        out.direct_run.append(run_ms)
    return out
