"""``bench/run --breakdown``: where one small grep's time goes, phase by phase.

The in-process worker's spans (``fs_search.check``, ``.resolve``, ``.rg`` with its
``fs_search.spawned`` event, ``.parse``, ``.render``) are collected by an in-memory
OpenTelemetry exporter installed for the run; ``encode`` is the client's data converter
encoding the call's result (what the worker does with it after the activity returns), timed
here, with the encoded size. Alongside, interleaved: the plain rg activity end to end (small
grep only) and the same rg argv spawned directly with ``asyncio.create_subprocess_exec`` (spawn
and run). Also for the output-heavy grep and the big glob (``spill``: saving the full result).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from dataclasses import dataclass, field
from typing import Any

import corpus as c
import references
import repo_corpus as rc
from flows import Call, CallsWorkflow, PlainRg, PlainRgWorkflow
from harness import Env
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stats import percentile

from fs_search.activities.rg import _command as command

PHASES = ("check", "resolve", "spawn", "rg", "order", "parse", "spill", "render", "encode")
MS = 1000.0
PARTS = {"small", "heavy", "glob", "repo"}


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

    name: str = "small grep"
    phases: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    activity: list[float] = field(default_factory=list)
    server_activity: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    encoded_bytes: list[int] = field(default_factory=list)
    plain_total: list[float] = field(default_factory=list)
    plain_server_activity: list[float] = field(default_factory=list)
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

        out = [f"{'per call (' + self.name + ')':28} {'median ms':>9}  [p10-p90]"]
        for phase in PHASES:
            if self.phases[phase]:
                out.append(f"  {phase:26} {cell(self.phases[phase])}")
        out.append(f"  {'activity (check..render)':26} {cell(self.activity)}")
        out.append(f"  {'activity (server events)':26} {cell(self.server_activity)}")
        out.append(f"  {'end to end':26} {cell(self.total)}")
        out.append(f"  {'encoded result (bytes)':26} {percentile(self.encoded_bytes, 50):8.0f}")
        if self.plain_total:
            out.append("plain rg activity (reference):")
            out.append(f"  {'activity (server events)':26} {cell(self.plain_server_activity)}")
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
            "call": self.name,
            "phases_ms": {p: summary(v) for p, v in self.phases.items()},
            "activity_ms": summary(self.activity),
            "server_activity_ms": summary(self.server_activity),
            "plain_server_activity_ms": summary(self.plain_server_activity),
            "end_to_end_ms": summary(self.total),
            "encoded_bytes": percentile(self.encoded_bytes, 50),
            "plain_end_to_end_ms": summary(self.plain_total),
            "plain_encoded_bytes": (
                percentile(self.plain_encoded_bytes, 50) if self.plain_encoded_bytes else None
            ),
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
    for name in ("check", "resolve", "order", "parse", "spill", "render"):
        if name in by_name:
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


@dataclass(frozen=True)
class Case:
    """One call to break down: its tool call, rg argv, what it must find, and the sample count."""

    name: str
    call: Call
    argv: list[str]
    cwd: str
    total: int
    n: int
    plain: bool = False  # also the plain rg activity (small outputs only)


def cases(env: Env, corpus: c.Corpus, rg: str, *, quick: bool) -> list[Case]:
    """Small grep (with the plain activity), the output-heavy grep and the big glob; on the
    repository, a small grep with ``path`` (with the plain activity, naive argv) and the big
    glob with ``path``."""
    rg = env.activities.rg.path or rg
    ws = env.workspace
    return [
        Case(
            "small grep",
            Call(tool="grep", arguments={"pattern": c.SMALL_PATTERN}, cwd="small"),
            command.for_grep(c.SMALL_PATTERN, rg=rg),
            str(ws / "small"),
            corpus.small_matches,
            15 if quick else 30,
            plain=True,
        ),
        Case(
            "output-heavy grep",
            Call(tool="grep", arguments={"pattern": c.HEAVY_PATTERN}, cwd="heavy"),
            command.for_grep(c.HEAVY_PATTERN, rg=rg),
            str(ws / "heavy"),
            corpus.heavy_matches,
            3 if quick else 9,
        ),
        Case(
            "big glob",
            Call(tool="glob", arguments={"pattern": "*.txt"}, cwd="glob"),
            command.for_glob("*.txt", rg=rg),
            str(ws / "glob"),
            corpus.glob_files,
            3 if quick else 9,
        ),
        Case(
            "repo: small grep, path",
            Call(
                tool="grep",
                arguments={"pattern": rc.REPO_SMALL_PATTERN, "path": rc.REPO_SMALL_PACKAGE},
                cwd=c.REPO_CWD,
            ),
            references.grep_argv(rg, rc.REPO_SMALL_PATTERN),
            str(ws / c.REPO_CWD / rc.REPO_SMALL_PACKAGE),
            corpus.repo_small_matches,
            15 if quick else 30,
            plain=True,
        ),
        Case(
            "repo: big glob, path",
            Call(
                tool="glob",
                arguments={"pattern": c.REPO_GLOB_PATTERN, "path": c.REPO_GLOB_PATH},
                cwd=c.REPO_CWD,
            ),
            command.for_glob(c.REPO_GLOB_PATTERN, rg=rg),
            str(ws / c.REPO_CWD / c.REPO_GLOB_PATH),
            corpus.repo_glob_files,
            3 if quick else 9,
        ),
    ]


async def run(env: Env, exporter: InMemorySpanExporter, case: Case) -> Breakdown:
    """``case.n`` calls (after one warm-up), each followed by the plain activity (small
    outputs) and a direct spawn of the same argv."""
    spec = env.spec(case.call)
    plain = PlainRg(argv=case.argv, cwd=case.cwd, task_queue=env.plain_queue)
    out = Breakdown(name=case.name)
    for i in range(case.n + 1):
        exporter.clear()
        seconds, server_s, results = await env.timed_activity(CallsWorkflow, spec)
        [result] = results
        if result.result is None or result.result.total != case.total:
            raise AssertionError(f"{case.name} failed: {result.text[:300]}")
        spans = list(exporter.get_finished_spans())
        encode_ms, size = await _encode(env, result.result)
        spill = getattr(result.result, "spill", None)
        if spill is not None:
            with contextlib.suppress(OSError):
                os.unlink(spill.locator)
        plain_s, plain_server_s, plain_size = 0.0, 0.0, 0
        if case.plain:
            plain_s, plain_server_s, stdout = await env.timed_activity(PlainRgWorkflow, plain)
            _, plain_size = await _encode(env, stdout)
        gc.collect()
        spawn_ms, run_ms = await _direct(case.argv, case.cwd)
        if i == 0:
            continue  # warm-up
        _record(out, spans)
        out.phases["encode"].append(encode_ms)
        out.encoded_bytes.append(size)
        out.total.append(seconds * MS)
        out.server_activity.append(server_s * MS)
        if case.plain:
            out.plain_total.append(plain_s * MS)
            out.plain_server_activity.append(plain_server_s * MS)
            out.plain_encoded_bytes.append(plain_size)
        out.direct_spawn.append(spawn_ms)
        out.direct_run.append(run_ms)
    return out
