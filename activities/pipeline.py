"""The one search pipeline glob and grep share, run over a per-tool :class:`SearchSpec`.

checks → budget → target → rg (the spec's argv and rules) → outcome → digest (offloaded)
→ spill → render → payload check → result.
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from opentelemetry.trace import Span

from fs_search.activities import parse
from fs_search.activities.beneath import Tree, empty_tree
from fs_search.activities.checks import budget_s, check_request
from fs_search.activities.config import FsSearchConfig
from fs_search.activities.errors import (
    PatternSuspect,
    SearchError,
    is_invalid_pattern,
    pattern_error_message,
    rg_outcome,
)
from fs_search.activities.executor import Executor, RgRun
from fs_search.activities.models import ErrorCode, GlobRequest, GrepRequest, SpillRef
from fs_search.activities.offload import Offload
from fs_search.activities.paths import SearchTarget, Workspace
from fs_search.activities.progress import Progress
from fs_search.activities.render import SpillNote
from fs_search.activities.saving import Saver
from fs_search.activities.telemetry import SearchTelemetry

log = logging.getLogger(__name__)

# Under a workspaces root, each further call a workspace has in flight runs rg this much
# nicer (at most 19).
NICE_STEP = 5
# What a call keeps of its activity's start-to-close time for digesting, saving and
# returning its result after rg: the workflow side schedules start-to-close as the
# queueing budget + the call's budget + this.
RESERVE_S = 5.0


def queue_budget_s(remaining_s: float | None, budget_s: float) -> float:
    """How long a call may wait for a running slot beyond its own budget: what is left of
    the activity's time after the budget and :data:`RESERVE_S` (0 when nothing is)."""
    if remaining_s is None:
        return 0.0
    return max(0.0, remaining_s - budget_s - RESERVE_S)


# Runs one argv as this call's rg: in its target, under its budget, reporting progress.
RunRg = Callable[[list[str]], Awaitable[RgRun]]


class Digest(Protocol):
    """What the pipeline reads of a digest: whether it is over the cap, and its artifact."""

    @property
    def truncated(self) -> bool: ...

    @property
    def artifact(self) -> str | None: ...


Req = TypeVar("Req", GlobRequest, GrepRequest)
D = TypeVar("D", bound=Digest)
Res = TypeVar("Res")


@dataclass(frozen=True)
class Searched:
    """The rg run a spec settled on.

    Attributes:
        run: the finished rg process.
        clean_argv: the same search with no file operand: where a suspected pattern
            error is confirmed (an empty directory, so no tree can speak).
        complete: rg's output ended as a finished search.
        note: a line the result's text ends with, when the run differed from the ask.
    """

    run: RgRun
    clean_argv: list[str]
    complete: bool
    note: str | None = None


class SearchSpec(ABC, Generic[Req, D, Res]):
    """What one tool adds to the pipeline: its checks, rg runs, digest, text and result."""

    name: Literal["glob", "grep"]

    def __init__(self, config: FsSearchConfig) -> None:
        self.config = config

    @abstractmethod
    async def search(self, req: Req, *, target: SearchTarget, rg: str, run: RunRg) -> Searched:
        """Run rg for ``req`` (through ``run``) and say which run the result comes from."""

    @abstractmethod
    async def digest(
        self, offload: Offload, chunks: list[bytes], *, target: SearchTarget, req: Req
    ) -> D:
        """rg's output digested off the event loop; ``chunks`` is consumed."""

    @abstractmethod
    def text(self, got: D, *, target: SearchTarget, spill: SpillNote | None, partial: bool) -> str:
        """The model-facing text."""

    @abstractmethod
    def payload_estimate(self, got: D) -> int:
        """About how many bytes every entry of a ``spill: false`` result takes."""

    @abstractmethod
    def result(
        self,
        req: Req,
        got: D,
        *,
        target: SearchTarget,
        text: str,
        partial: bool,
        spill: SpillRef | None,
        spill_error: str | None,
    ) -> Res:
        """The activity's result."""


def empty_dir() -> contextlib.AbstractContextManager[Tree]:
    """Where a suspected pattern error is confirmed: a new empty directory, so rg sees no
    tree there; removed as soon as the run is done, so no exit of the worker leaves it."""
    return empty_tree("fs-search-empty-")


class Pipeline:
    """Runs a :class:`SearchSpec` for one request, from checks to result.

    Args:
        config: validated settings.
        workspace: the tree this worker owns.
        executor: runs rg as killable process groups.
        offload: where rg output is digested.
        saver: spills over-cap results and checks the payload store.
        telemetry: spans.
        rg_path: the probed rg binary (None: unavailable, searches fail).
    """

    def __init__(
        self,
        config: FsSearchConfig,
        workspace: Workspace,
        *,
        executor: Executor,
        offload: Offload,
        saver: Saver,
        telemetry: SearchTelemetry,
        rg_path: str | None,
        nice_step: int = 0,
        key: str | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.executor = executor
        self.offload = offload
        self.saver = saver
        self.telemetry = telemetry
        self.rg_path = rg_path
        self.running = 0  # this workspace's calls in flight
        self.nice_step = nice_step
        # Whose runs these are, for the executor's fair gate (one per workspace).
        self.key = key or str(workspace.root)

    def _nice(self) -> int:
        """rg's CPU niceness: 0 for a workspace's first call in flight, lower priority for
        each further one, so one workspace's flood yields the CPU to a quiet workspace.

        Only where workspaces share a process (``nice_step`` > 0): a single-workspace
        worker's concurrent calls all run at 0, so they share the cores evenly."""
        return min(19, self.nice_step * max(0, self.running - 1))

    async def run(
        self,
        spec: SearchSpec[Req, D, Res],
        req: Req,
        progress: Progress,
        *,
        remaining_s: float | None = None,
    ) -> Res:
        """Check, search, digest, spill, render: ``req``'s result or its contract error.

        ``remaining_s``: the time left before the activity's start-to-close deadline (None:
        no deadline known). What it leaves beyond the call's own budget and
        :data:`RESERVE_S` is how long the call may wait for a running slot."""
        self.running += 1
        try:
            return await self._run(spec, req, progress, remaining_s)
        finally:
            self.running -= 1

    async def _run(
        self,
        spec: SearchSpec[Req, D, Res],
        req: Req,
        progress: Progress,
        remaining_s: float | None,
    ) -> Res:
        with self.telemetry.span("fs_search.check"):
            check_request(req)
        budget = budget_s(req.timeout_ms, cap_ms=self.config.timeout_ms)
        progress.budget_ms = round(budget * 1000)
        queue_s = queue_budget_s(remaining_s, budget)
        with self._resolved(req, spec.name) as (target, at):
            rg = self._rg()

            async def run_rg(argv: list[str]) -> RgRun:
                return await self.executor.run(
                    argv,
                    cwd=at,
                    timeout_s=budget,
                    max_stdout=self.config.raw_output_max_bytes,
                    progress=progress,
                    tree=self.workspace.tree,
                    nice=self._nice(),
                    key=self.key,
                    queue_s=queue_s,
                )

            with self._rg_span(spec.name, progress) as span:
                searched = await spec.search(req, target=target, rg=rg, run=run_rg)
                span.set_attribute("fs_search.exit_code", searched.run.returncode)
                partial = await self._outcome(
                    searched, budget, file_arg=target.file_arg, pattern=req.pattern
                )
        with self._phase("parse", progress):
            # Parsed once rg is done (overflowing output is never parsed), off the event
            # loop: in a helper process when large, so concurrent searches use every core.
            try:
                got = await spec.digest(self.offload, searched.run.chunks, target=target, req=req)
            except parse.MalformedOutput as e:
                raise SearchError(
                    ErrorCode.SEARCH_FAILED, f"malformed rg --json output: {e}"
                ) from e
        ref, error, note = None, None, None
        if got.truncated and req.spill and got.artifact is not None:
            ref, error, note = await self.saver.spill(spec.name, progress, got.artifact)
        with self._phase("render", progress):
            text = spec.text(got, target=target, spill=note, partial=partial)
            if searched.note:
                text = f"{text}\n{searched.note}"
        if not req.spill:
            await self.saver.ready_for(spec.payload_estimate(got) + len(text))
        return spec.result(
            req, got, target=target, text=text, partial=partial, spill=ref, spill_error=error
        )

    @contextlib.contextmanager
    def _resolved(self, req: Req, tool: str) -> Iterator[tuple[SearchTarget, int]]:
        """``workspace.opened`` for the request, its resolution in an ``fs_search.resolve`` span."""
        with contextlib.ExitStack() as stack:
            with self.telemetry.span("fs_search.resolve"):
                opened = stack.enter_context(
                    self.workspace.opened(cwd=req.cwd, path=req.path, tool=tool)
                )
            yield opened

    def _rg(self) -> str:
        if self.rg_path is None:
            raise SearchError(ErrorCode.SEARCH_FAILED, "ripgrep is not available on this worker")
        return self.rg_path

    @contextlib.contextmanager
    def _rg_span(self, tool: str, progress: Progress) -> Iterator[Span]:
        """The ``fs_search.rg`` span: exit code, raw bytes and outcome of the rg run."""
        progress.phase = "rg"
        with self.telemetry.span(
            "fs_search.rg",
            **{"fs_search.tool": tool, "fs_search.workspace_id": self.telemetry.workspace_id},
        ) as span:
            try:
                yield span
                span.set_attribute("fs_search.outcome", "ok")
            finally:
                span.set_attribute("fs_search.raw_bytes", progress.raw_bytes)

    @contextlib.contextmanager
    def _phase(self, name: str, progress: Progress) -> Iterator[Span]:
        progress.phase = name
        with self.telemetry.span(f"fs_search.{name}") as span:
            yield span

    async def _outcome(
        self, searched: Searched, budget_s: float, *, file_arg: str | None, pattern: str
    ) -> bool:
        """``partial``, or the contract error for rg's exit; rg's stderr is only logged
        (``pattern``: the model's, which a pattern error quotes)."""
        run = searched.run
        if run.stderr.strip():
            log.info(
                "rg exit %d; stderr (not shown to the model): %r", run.returncode, run.stderr[:4096]
            )
        if run.fifo_refused:
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                "rg was stopped: it waited on a FIFO (named pipe) in the workspace that "
                "leads outside it; remove the FIFO",
            )
        try:
            return rg_outcome(
                run.returncode,
                run.stderr,
                produced_output=run.produced_output,
                complete=searched.complete,
                file_arg=file_arg,
            )
        except PatternSuspect:
            pass
        # rg's complaint may come from an ignore file in the tree: only a run that sees
        # nothing but the request (an empty directory) may be quoted to the model.
        with empty_dir() as empty:
            clean = await self.executor.run(
                searched.clean_argv,
                cwd=empty.fd,
                timeout_s=min(budget_s, 5.0),
                max_stdout=64 * 1024,
                tree=empty,
            )
        if clean.returncode == 2 and is_invalid_pattern(clean.stderr):
            raise SearchError(
                ErrorCode.SEARCH_INVALID_PATTERN,
                pattern_error_message(clean.stderr, pattern=pattern),
            )
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            f"rg failed [exit={run.returncode}] before searching; the worker log has details",
        )
