"""The four activities; each reads as its pipeline: check, resolve, rg, parse, render, spill."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span
from temporalio import activity

from fs_search.activities import command, parse, render
from fs_search.activities.catalogue import tools_and_prompts
from fs_search.activities.config import FsSearchConfig
from fs_search.activities.errors import (
    PatternSuspect,
    SearchError,
    invalid_argument,
    is_invalid_pattern,
    pattern_error_message,
    rg_outcome,
)
from fs_search.activities.executor import Executor, Progress, RgRun
from fs_search.activities.lifecycle import check, check_sizes, contract, heartbeating
from fs_search.activities.models import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepMatch,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    ToolsResult,
)
from fs_search.activities.offload import Offload
from fs_search.activities.paths import SearchTarget, Workspace
from fs_search.activities.saving import Saver
from fs_search.activities.spill import SpillStore
from fs_search.activities.telemetry import SearchTelemetry, mark_failed, outcome_of

log = logging.getLogger(__name__)

IGNORE_FILES_SKIPPED = (
    "(ignore files were not applied: one in the workspace could not be read safely, "
    "so files it would hide are included)"
)
T = TypeVar("T")
R = TypeVar("R", GlobRequest, GrepRequest)


@dataclass(frozen=True)
class RgStatus:
    """Result of the start-up probe: the rg to run, or why there is none."""

    path: str | None
    version: str | None = None
    reason: str | None = None


class SearchActivities:
    """glob, grep, tools and read_spill for one workspace.

    Args:
        config: validated settings.
        workspace: the tree this worker owns.
        executor: runs rg as killable process groups.
        store: where over-cap results are saved in full.
        rg: the probed rg binary (``path=None`` when unavailable).
        telemetry: spans and metrics (default: the global OpenTelemetry providers).
        offload: where rg output is digested (default: a thread).
    """

    def __init__(
        self,
        config: FsSearchConfig,
        workspace: Workspace,
        *,
        executor: Executor,
        store: SpillStore,
        rg: RgStatus,
        telemetry: SearchTelemetry | None = None,
        offload: Offload | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.executor = executor
        self.store = store
        self.rg = rg
        self.telemetry = telemetry or SearchTelemetry(trace_patterns=config.trace_patterns)
        self.offload = offload or Offload(0)
        self.saver = Saver(store, self.telemetry)
        # Where a suspected pattern error is confirmed: rg sees no tree there.
        self._empty_dir = tempfile.TemporaryDirectory(prefix="fs-search-empty-")

    def all(self) -> list[object]:
        """Every activity, for ``Worker(activities=...)``: all four are always registered."""
        return [self.glob, self.grep, self.tools, self.read_spill]

    # --- activities ------------------------------------------------------------------

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, req: GlobRequest) -> GlobResult:
        """Find files by glob pattern under the search root, oldest modified first."""
        return await self._observed("glob", req, self._glob)

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, req: GrepRequest) -> GrepResult:
        """Search file contents; matching lines grouped by file."""
        return await self._observed("grep", req, self._grep)

    @activity.defn(name=TOOLS_ACTIVITY)
    async def tools(self) -> ToolsResult:
        """The catalogue: tool definitions and prompt segments (empty when rg is missing)."""
        cfg = self.config
        if self.rg.path is None:
            return ToolsResult(
                available=False,
                reason=self.rg.reason or "ripgrep is not available on this worker",
                sample_over_cap_glob_results=cfg.sample_over_cap_glob_results,
                timeout_ms=cfg.timeout_ms,
                sandbox=self.sandbox,
            )
        tools, prompts = tools_and_prompts(
            sample_over_cap=cfg.sample_over_cap_glob_results,
            glob_cap=cfg.glob_max_results,
            grep_cap=cfg.grep_max_matches,
            line_bytes=cfg.grep_max_line_bytes,
            read_spill=not self.store.model_readable,
        )
        return ToolsResult(
            available=True,
            tools=tools,
            system_prompt=prompts,
            sample_over_cap_glob_results=cfg.sample_over_cap_glob_results,
            timeout_ms=cfg.timeout_ms,
            sandbox=self.sandbox,
        )

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def read_spill(self, req: ReadSpillRequest) -> ReadSpillResult:
        """A page of a spill artifact of this worker's store."""

        async def run() -> ReadSpillResult:
            check_sizes(req)
            return await self.store.read(req.locator, offset=req.offset, limit=req.limit)

        return await contract(run())

    # --- pipelines -------------------------------------------------------------------

    async def _observed(
        self,
        tool: str,
        req: R,
        pipeline: Callable[[R, Progress], Awaitable[T]],
    ) -> T:
        """Run a search pipeline: heartbeats, the activity span's attributes, metrics."""
        progress = Progress(phase="checks")
        span = trace.get_current_span()
        span.set_attributes(
            {
                "fs_search.tool": tool,
                "fs_search.workspace_id": self.telemetry.workspace_id,
                **self.telemetry.pattern_attributes("pattern", req.pattern),
                **self.telemetry.pattern_attributes("include", getattr(req, "include", None)),
            }
        )
        error: BaseException | None = None
        try:
            async with heartbeating(progress):
                return await contract(pipeline(req, progress))
        except BaseException as e:
            error = e
            mark_failed(span, e)
            raise
        finally:
            self.telemetry.record(
                tool=tool,
                outcome=outcome_of(error),
                started=progress.started,
                raw_bytes=progress.raw_bytes,
            )

    async def _glob(self, req: GlobRequest, progress: Progress) -> GlobResult:
        cfg = self.config
        check_sizes(req)
        check(command.pattern_problem(req.pattern))
        budget = self._budget_s(req.timeout_ms)
        target = self.workspace.target(cwd=req.cwd, path=req.path, tool="glob")
        argv = command.for_glob(req.pattern, rg=self._rg())
        with self._rg_span("glob", progress) as span:
            run = await self._run_rg(argv, target, budget, progress)
            span.set_attribute("fs_search.exit_code", run.returncode)
            partial = await self._outcome(run, argv, budget, complete=True)
        with self._phase("parse", progress):
            # Parsed, paged and (over the cap) rendered in full off the event loop.
            got = await self.offload.run(
                "glob",
                run.chunks,
                target=target,
                cap=cfg.glob_max_results,
                sample=cfg.sample_over_cap_glob_results,
                artifact=req.spill,
                every=not req.spill,
            )
        shown, page, total = got.shown, got.page, got.total
        truncated = total > len(shown)
        ref, error, note = None, None, None
        if truncated and req.spill and got.artifact is not None:
            ref, error, note = await self.saver.spill("glob", progress, got.artifact)
        with self._phase("render", progress):
            text = render.glob_text(
                shown, page, total=total, root=target.root, spill=note, partial=partial
            )
        every = got.every or []
        if not req.spill:
            await self.saver.ready_for(
                sum(len(p) + 4 for p in every) + len(text), cfg.payload_threshold_bytes
            )
        return GlobResult(
            root=target.root,
            paths=shown if req.spill else every,
            total=total,
            truncated=truncated,
            sampled=page.sampled,
            text=text,
            spill=ref,
            spill_error=error,
            partial=partial,
        )

    async def _grep(self, req: GrepRequest, progress: Progress) -> GrepResult:
        cfg = self.config
        check_sizes(req)
        check(command.pattern_problem(req.pattern))
        include = req.include if req.include and req.include.strip() else None
        check(command.include_problem(include))
        budget = self._budget_s(req.timeout_ms)
        target = self.workspace.target(cwd=req.cwd, path=req.path, tool="grep")

        def argv_for(ignore_files: bool, file_arg: str | None = target.file_arg) -> list[str]:
            return command.for_grep(
                req.pattern,
                rg=self._rg(),
                include=include,
                file_arg=file_arg,
                threads=cfg.rg_threads,
                ignore_files=ignore_files,
            )

        argv = argv_for(True)
        ignore_note = None
        with self._rg_span("grep", progress) as span:
            run = await self._run_rg(argv, target, budget, progress)
            if run.aborted or run.fifo_refused:
                # An ignore file the tree planted (huge, endless, a FIFO outside) stopped
                # rg: search again without ignore files, and say so.
                log.warning("rg was stopped by an ignore file; searching again without them")
                argv = argv_for(False)
                run = await self._run_rg(argv, target, budget, progress)
                ignore_note = IGNORE_FILES_SKIPPED
                if run.aborted:
                    # Not an ignore file, then: rg holds each file's matches in memory
                    # before writing them, and one file's were too many.
                    raise SearchError(
                        ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW,
                        "the matches in one file needed more memory than rg may use on this "
                        "worker (FS_SEARCH_RG_MEMORY_MB) and the search was stopped; narrow "
                        "the pattern, path or include",
                    )
            span.set_attribute("fs_search.exit_code", run.returncode)
            partial = await self._outcome(
                run,
                argv_for(True, None),
                budget,
                complete=parse.ends_with_summary(run.chunks),
                file_arg=target.file_arg,
            )
        with self._phase("parse", progress):
            # Parsed once rg is done (overflowing output is never parsed), off the event
            # loop: in a helper process when large, so concurrent searches use every core.
            try:
                got = await self.offload.run(
                    "grep",
                    run.chunks,
                    target=target,
                    cap=cfg.grep_max_matches,
                    max_line_bytes=cfg.grep_max_line_bytes,
                    artifact=req.spill,
                    every=not req.spill,
                )
            except parse.MalformedOutput as e:
                raise SearchError(
                    ErrorCode.SEARCH_FAILED, f"malformed rg --json output: {e}"
                ) from e
        total, page = got.total, got.page
        truncated = total > len(page)
        ref, error, note = None, None, None
        if truncated and req.spill and got.artifact is not None:
            ref, error, note = await self.saver.spill("grep", progress, got.artifact)
        with self._phase("render", progress):
            text = render.grep_text(page, total=total, files=got.files, spill=note, partial=partial)
            if ignore_note:
                text = f"{text}\n{ignore_note}"
        if req.spill:
            matches = [
                GrepMatch(
                    path=line.path,
                    line_number=line.line_number,
                    line=line.text,
                    line_truncated=line.truncated,
                )
                for line in page
            ]
        else:
            every = got.every or []
            estimate = sum(len(p) + len(t) + 64 for p, lines in every for _, t in lines)
            await self.saver.ready_for(estimate + len(text), cfg.payload_threshold_bytes)
            # Trusted values straight from the parser: skip per-match validation.
            matches = [
                GrepMatch.model_construct(path=path, line_number=number, line=line)
                for path, lines in every
                for number, line in lines
            ]
        return GrepResult(
            matches=matches,
            total=total,
            files=got.files,
            truncated=truncated,
            partial=partial,
            text=text,
            spill=ref,
            spill_error=error,
        )

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

    # --- helpers ---------------------------------------------------------------------

    @property
    def sandbox(self) -> Literal["landlock", "none"]:
        """How rg is confined: ``"landlock"`` or ``"none"``."""
        sandbox = self.executor.sandbox
        return "landlock" if sandbox is not None and sandbox.landlock_abi else "none"

    def sandbox_description(self) -> str:
        """The start-up log's account of rg's confinement."""
        sandbox = self.executor.sandbox
        if sandbox is None:
            return "none (rg runs without limits)"
        if sandbox.landlock_abi:
            return (
                f"landlock (ABI {sandbox.landlock_abi}): rg reads only {self.workspace.root}; "
                f"memory {sandbox.memory_mb} MiB"
            )
        return f"none (no kernel confinement); memory {sandbox.memory_mb} MiB"

    def _rg(self) -> str:
        if self.rg.path is None:
            raise SearchError(ErrorCode.SEARCH_FAILED, "ripgrep is not available on this worker")
        return self.rg.path

    def _budget_s(self, timeout_ms: int | None) -> float:
        if timeout_ms is not None and timeout_ms <= 0:
            raise invalid_argument(f"timeout_ms must be positive (got {timeout_ms})")
        cap = self.config.timeout_ms
        return min(timeout_ms or cap, cap) / 1000

    async def _outcome(
        self,
        run: RgRun,
        clean_argv: list[str],
        budget_s: float,
        *,
        complete: bool,
        file_arg: str | None = None,
    ) -> bool:
        """``partial``, or the contract error for rg's exit; rg's stderr is only logged.

        ``clean_argv`` is the same search without a file operand, for confirming a
        pattern error where rg sees no tree.
        """
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
                complete=complete,
                file_arg=file_arg,
            )
        except PatternSuspect:
            pass
        # rg's complaint may come from an ignore file in the tree: only a run that sees
        # nothing but the request (an empty directory) may be quoted to the model.
        clean = await self.executor.run(
            clean_argv,
            cwd=self._empty_dir.name,
            timeout_s=min(budget_s, 5.0),
            max_stdout=64 * 1024,
            workspace=self._empty_dir.name,
        )
        if clean.returncode == 2 and is_invalid_pattern(clean.stderr):
            raise SearchError(ErrorCode.SEARCH_INVALID_PATTERN, pattern_error_message(clean.stderr))
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            f"rg failed [exit={run.returncode}] before searching; the worker log has details",
        )

    async def _run_rg(
        self,
        argv: list[str],
        target: SearchTarget,
        budget_s: float,
        progress: Progress,
    ) -> RgRun:
        return await self.executor.run(
            argv,
            cwd=target.run_dir,
            timeout_s=budget_s,
            max_stdout=self.config.raw_output_max_bytes,
            progress=progress,
            workspace=self.workspace.root,
        )
