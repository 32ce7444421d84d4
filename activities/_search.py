"""The four activities. glob and grep each read top to bottom:

check → resolve → rg → outcome → digest → spill → text → result,

over plain shared steps (run rg; its outcome, confirmed in an empty directory; digest off
the event loop; spill; the payload check); tools; read_spill.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Concatenate, Literal, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span
from temporalio import activity

from fs_search.activities import results, rg
from fs_search.activities._budget import budget_s, queue_budget_s
from fs_search.activities._catalogue import tools_and_prompts
from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    SpillRef,
    ToolsRequest,
    ToolsResult,
    WorkspaceRef,
)
from fs_search.activities._errors import SearchError, contract_errors, invalid_argument
from fs_search.activities._glob_listing import GlobListing
from fs_search.activities._held_root import HeldRoot
from fs_search.activities._identity import identity_of
from fs_search.activities._ignore_files import OutOfTime, Vetted, vet
from fs_search.activities._progress import Progress, heartbeating, time_left
from fs_search.activities._telemetry import SearchTelemetry, mark_failed, outcome_of
from fs_search.activities._workspace import SearchTarget, Workspace, this_host
from fs_search.activities.rg import Executor, IgnoreFiles, RgRun
from fs_search.activities.storage import (
    Spills,
    Storage,
    check_payload_room,
    directory_owner,
    spill_workspace,
)

log = logging.getLogger(__name__)
# A digest job's arguments and result, through to Offload.run (typed both ways).
P = ParamSpec("P")
R = TypeVar("R")

# Under a workspaces root, each further call a workspace has in flight runs rg this much
# nicer (at most 19).
NICE_STEP = 5


@dataclass(frozen=True)
class RgStatus:
    """Result of the start-up probe: the rg to run, or why there is none."""

    path: str | None
    version: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Call:
    """One glob or grep call in flight: what its rg runs share, and the directory it runs
    in (held for the whole call)."""

    progress: Progress
    budget_s: float
    queue_s: float
    root: HeldRoot
    workspace: WorkspaceRef


class SearchActivities:
    """glob, grep, tools and read_spill for one workspace.

    Args:
        config: validated settings.
        workspace: the tree this worker owns.
        executor: runs rg as killable process groups.
        storage: where over-cap results are saved in full, and large payloads go.
        rg: the probed rg binary (``path=None`` when unavailable).
        telemetry: spans and metrics (default: the global OpenTelemetry providers).
        offload: where rg output is digested (default: a thread).
        nice_step: how much nicer each further call of this workspace in flight runs rg
            (:data:`NICE_STEP` under a workspaces root; 0: never changed).
        host_id: the host results name (``workspace.host``; default: the host name).
    """

    def __init__(
        self,
        config: FsSearchConfig,
        workspace: Workspace,
        *,
        executor: Executor,
        storage: Storage,
        rg: RgStatus,
        telemetry: SearchTelemetry | None = None,
        offload: results.Offload | None = None,
        nice_step: int = 0,
        host_id: str | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.executor = executor
        self.storage = storage
        self.spill_store = storage.spill_store
        self.rg = rg
        self.telemetry = telemetry or SearchTelemetry(trace_patterns=config.trace_patterns)
        self.offload = offload or results.Offload(0)
        # Whose artifacts this worker writes and read_spill reads (storage.spill_workspace).
        self.spill_workspace = spill_workspace(self.telemetry.workspace_id, workspace.root)
        self.spills = Spills(storage, self.telemetry, workspace=self.spill_workspace)
        self.running = 0  # this workspace's glob and grep calls in flight
        self.nice_step = nice_step
        # Whose runs these are, for the executor's running slots (one per workspace).
        self.key = self.telemetry.workspace_id or str(workspace.root)
        self.host_id = host_id or this_host()

    def all(self) -> list[object]:
        """Every activity, for ``Worker(activities=...)``: all four are always registered."""
        return [self.glob, self.grep, self.tools, self.read_spill]

    # --- activities ------------------------------------------------------------------

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, req: GlobRequest) -> GlobResult:
        """Find files by glob pattern under the search root, oldest modified first."""
        async with self._call("glob", req) as call:
            cfg = self.config
            with self._resolved(req, "glob", call) as (target, at):
                listing = GlobListing(
                    req.pattern,
                    rg_path=self._rg_path(),
                    offload=self.offload,
                    at=at,
                    cap=cfg.raw_output_max_bytes,
                )
                async with listing:
                    with self._rg_span("glob", call.progress) as span:
                        try:
                            run = await self._run_rg(
                                listing.argv,
                                at=at,
                                call=call,
                                max_stdout=listing.max_stdout,
                                sink=listing.sink,
                            )
                        except SearchError as e:
                            if not await listing.fall_back(e):  # too large to sort here?
                                raise
                            run = await self._run_rg(listing.argv, at=at, call=call)
                        span.set_attribute("fs_search.exit_code", run.returncode)
                        # `rg --files` writes no closing message to look for: its exit
                        # code decides; a pattern error is confirmed with the same argv.
                        partial = await rg.check_exit(
                            run,
                            self.executor,
                            complete=True,
                            clean_argv=listing.argv,
                            file_arg=target.file_arg,
                            pattern=req.pattern,
                            budget_s=call.budget_s,
                        )
                    chunks = run.chunks  # rg's own order, unless sorted here:
                    if listing.sorts_here:
                        with self._phase("order", call.progress):
                            chunks = await listing.sorted()
            # Paged and (over the cap) rendered in full in one pass over the bytes.
            got = await self._digest(
                call,
                results.digest_glob,
                chunks,
                target,
                cap=cfg.glob_max_results,
                sample=cfg.sample_over_cap_glob_results,
                artifact=req.spill,
                every=not req.spill,
            )
            ref, error, note = await self._spill("glob", call, got.artifact, req.spill)
            with self._phase("render", call.progress):
                text = results.glob_text(
                    got.shown,
                    got.page,
                    total=got.total,
                    root=target.root,
                    spill=note,
                    partial=partial,
                )
            if not req.spill:
                await check_payload_room(self.storage, got.payload_bytes(text), call.progress)
            return GlobResult(
                root=target.root,
                paths=got.shown if req.spill else got.every or [],
                total=got.total,
                truncated=got.truncated,
                sampled=got.page.sampled,
                text=text,
                spill=ref,
                spill_error=error,
                partial=partial,
                workspace=call.workspace,
            )

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, req: GrepRequest) -> GrepResult:
        """Search file contents; matching lines grouped by file."""
        async with self._call("grep", req) as call:
            cfg = self.config
            with self._resolved(req, "grep", call) as (target, at):
                vetted = await self._ignore_files(target, call)
                argvs = rg.for_grep_call(
                    req.pattern,
                    rg=self._rg_path(),
                    include=req.include,
                    file_arg=target.file_arg,
                    threads=cfg.rg_threads,
                    ignore_files=vetted.ignore_files,
                )
                with self._rg_span("grep", call.progress) as span:
                    # An ignore file that stops rg is skipped, and the text says so.
                    run, skipped = await rg.grep_past_ignore_files(
                        lambda argv: self._run_rg(argv, at=at, call=call), argvs
                    )
                    span.set_attribute("fs_search.exit_code", run.returncode)
                    # A pattern error is confirmed with the same search, no file operand
                    # and no ignore file (in an empty directory: there is nothing to read).
                    partial = await rg.check_exit(
                        run,
                        self.executor,
                        complete=results.ends_with_summary(run.chunks),
                        clean_argv=argvs.clean,
                        file_arg=target.file_arg,
                        pattern=req.pattern,
                        budget_s=call.budget_s,
                    )
            got = await self._digest(
                call,
                results.digest_grep,
                run.chunks,
                target,
                cap=cfg.grep_max_matches,
                max_line_bytes=cfg.grep_max_line_bytes,
                artifact=req.spill,
                every=not req.spill,
            )
            ref, error, note = await self._spill("grep", call, got.artifact, req.spill)
            with self._phase("render", call.progress):
                text = results.grep_text(
                    got.page,
                    total=got.total,
                    files=got.files,
                    spill=note,
                    partial=partial,
                    note=rg.IGNORE_FILES_SKIPPED if skipped else vetted.note,
                )
            if not req.spill:
                await check_payload_room(self.storage, got.payload_bytes(text), call.progress)
            return GrepResult(
                matches=got.matches(every=not req.spill),
                total=got.total,
                files=got.files,
                truncated=got.truncated,
                partial=partial,
                text=text,
                spill=ref,
                spill_error=error,
                workspace=call.workspace,
            )

    @activity.defn(name=TOOLS_ACTIVITY)
    async def tools(self, req: ToolsRequest | None = None) -> ToolsResult:
        """The catalogue: tool definitions and prompt segments (empty when rg is missing)."""
        async with contract_errors():
            await self._ours(req)
        cfg = self.config
        if self.rg.path is None:
            return ToolsResult(
                available=False,
                reason=self.rg.reason or "ripgrep is not available on this worker",
                sample_over_cap_glob_results=cfg.sample_over_cap_glob_results,
                timeout_ms=cfg.timeout_ms,
                sandbox=self.sandbox,
                workspace_id=self.telemetry.workspace_id,
                workspace=self._now(),
            )
        tools, prompts = tools_and_prompts(
            sample_over_cap=cfg.sample_over_cap_glob_results,
            glob_cap=cfg.glob_max_results,
            grep_cap=cfg.grep_max_matches,
            line_bytes=cfg.grep_max_line_bytes,
            read_spill=not self.spill_store.model_readable,
        )
        return ToolsResult(
            available=True,
            tools=tools,
            system_prompt=prompts,
            sample_over_cap_glob_results=cfg.sample_over_cap_glob_results,
            timeout_ms=cfg.timeout_ms,
            sandbox=self.sandbox,
            workspace_id=self.telemetry.workspace_id,
            workspace=self._now(),
        )

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def read_spill(self, req: ReadSpillRequest) -> ReadSpillResult:
        """A page of a spill artifact of this workspace's, in this worker's store."""

        async def run() -> ReadSpillResult:
            req.check()
            await self._ours(req)
            # Only an artifact made in the directory the workspace's path names now is read:
            # the locator is checked against it before the store is touched.
            with self.workspace.held() as root:
                where = identity_of(root.fd)
            self._label("read_spill", where)
            return await self.spill_store.read(
                req.locator,
                offset=req.offset,
                limit=req.limit,
                workspace=directory_owner(self.spill_workspace, where),
            )

        async with contract_errors():
            return await run()

    # --- the shared steps --------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _call(
        self, tool: Literal["glob", "grep"], req: GlobRequest | GrepRequest
    ) -> AsyncIterator[Call]:
        """One glob or grep call: the activity span's attributes, metrics, heartbeats,
        the request's checks and budget; every failure leaves as a contract error."""
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
        self.running += 1
        try:
            async with contract_errors(), heartbeating(progress):
                await self._ours(req)
                with self.telemetry.span("fs_search.check"):
                    req.check()
                budget = budget_s(req.timeout_ms, cap_ms=self.config.timeout_ms)
                progress.budget_ms = round(budget * 1000)
                with self.workspace.held() as root:
                    where = self._ref(identity_of(root.fd))
                    span.set_attribute("fs_search.workspace.root", where.root or "")
                    yield Call(progress, budget, queue_budget_s(time_left(), budget), root, where)
        except BaseException as e:
            error = e
            mark_failed(span, e)
            raise
        finally:
            self.running -= 1
            self.telemetry.record(
                tool=tool,
                outcome=outcome_of(error),
                started=progress.started,
                raw_bytes=progress.raw_bytes,
            )

    @contextlib.contextmanager
    def _resolved(
        self, req: GlobRequest | GrepRequest, tool: str, call: Call
    ) -> Iterator[tuple[SearchTarget, int]]:
        """``workspace.opened`` for the request beneath the call's directory, its resolution
        in an ``fs_search.resolve`` span."""
        with contextlib.ExitStack() as stack:
            with self.telemetry.span("fs_search.resolve"):
                opened = stack.enter_context(
                    self.workspace.opened(cwd=req.cwd, path=req.path, tool=tool, root=call.root)
                )
            yield opened

    async def _ignore_files(self, target: SearchTarget, call: Call) -> Vetted:
        """Which ignore files rg reads for a grep of ``target``: every one as rg applies
        them from the search root up, under Landlock (nothing outside the workspace can
        be opened); without it, only those :func:`~fs_search.activities._ignore_files.vet`
        finds safe. A file target reads none (rg searches a named file whatever they say)."""
        sandbox = self.executor.sandbox
        if target.file_arg is not None or (sandbox is not None and sandbox.landlock_abi):
            return Vetted(IgnoreFiles())
        deadline = time.monotonic() + call.budget_s
        try:
            return await asyncio.to_thread(vet, call.root, target.parts, deadline=deadline)
        except OutOfTime:
            raise rg.over_budget(call.budget_s) from None

    def _ref(self, root: str | None) -> WorkspaceRef:
        """This workspace on this host, in the directory whose identity is ``root``."""
        return WorkspaceRef(id=self.spill_workspace, host=self.host_id, root=root)

    def _now(self) -> WorkspaceRef:
        """This workspace and the directory its path names now (root None: none readable)."""
        try:
            with self.workspace.held() as root:
                where = self._ref(identity_of(root.fd))
        except SearchError:
            where = self._ref(None)
        self._label("tools", where.root)
        return where

    def _label(self, tool: str, root: str | None) -> None:
        """The activity span names the tool, the workspace and its directory."""
        trace.get_current_span().set_attributes(
            {
                "fs_search.tool": tool,
                "fs_search.workspace_id": self.telemetry.workspace_id,
                "fs_search.workspace.root": root or "",
            }
        )

    def _rg_path(self) -> str:
        if self.rg.path is None:
            raise SearchError(ErrorCode.SEARCH_FAILED, "ripgrep is not available on this worker")
        return self.rg.path

    async def _run_rg(
        self,
        argv: list[str],
        *,
        at: int,
        call: Call,
        max_stdout: int | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> RgRun:
        """One rg run of the call: in its target, under its budget, reporting progress."""
        return await self.executor.run(
            argv,
            cwd=at,
            timeout_s=call.budget_s,
            max_stdout=self.config.raw_output_max_bytes if max_stdout is None else max_stdout,
            progress=call.progress,
            tree=call.root,
            # rg's CPU niceness: 0 for a workspace's first call in flight, lower priority
            # for each further one, so one workspace's flood yields the CPU to a quiet
            # workspace. Only where workspaces share a process (``nice_step`` > 0): a
            # single-workspace worker's concurrent calls all run at 0, sharing the cores.
            nice=min(19, self.nice_step * max(0, self.running - 1)),
            key=self.key,
            queue_s=call.queue_s,
            sink=sink,
        )

    async def _digest(
        self,
        call: Call,
        job: Callable[Concatenate[list[bytes], P], R],
        chunks: list[bytes],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """rg's output digested once rg is done (overflowing output is never parsed), off
        the event loop: in a helper process when large, so concurrent searches use every
        core. ``chunks`` is consumed."""
        with self._phase("parse", call.progress):
            try:
                return await self.offload.run(job, chunks, *args, **kwargs)
            except results.MalformedOutput as e:
                raise SearchError(
                    ErrorCode.SEARCH_FAILED, f"malformed rg --json output: {e}"
                ) from e

    async def _spill(
        self, tool: str, call: Call, artifact: str | bytearray | None, wanted: bool
    ) -> tuple[SpillRef | None, str | None, results.SpillNote | None]:
        """The complete result saved when it is over the cap and the caller wants it."""
        if not wanted or artifact is None:
            return None, None, None
        owner = directory_owner(self.spill_workspace, call.workspace.root or "")
        return await self.spills.save(tool, call.progress, artifact, owner=owner)

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
                self.telemetry.record_rg(tool=tool, rg_started=progress.rg_started)

    @contextlib.contextmanager
    def _phase(self, name: str, progress: Progress) -> Iterator[Span]:
        progress.phase = name
        with self.telemetry.span(f"fs_search.{name}") as span:
            yield span

    async def _ours(
        self, req: GlobRequest | GrepRequest | ReadSpillRequest | ToolsRequest | None
    ) -> None:
        """Refuse a request naming another workspace than this one (INVALID_ARGUMENT)."""
        named = req.workspace_id if req is not None else None
        mine = self.telemetry.workspace_id
        if named is not None and mine is not None and named != mine:
            raise invalid_argument(
                f"this call names workspace {named[:200]!r}, but it reached the worker of "
                f"workspace {mine!r}"
            )

    @property
    def sandbox(self) -> Literal["landlock", "none"]:
        """How rg is confined: ``"landlock"`` or ``"none"``."""
        sandbox = self.executor.sandbox
        return sandbox.name if sandbox is not None else "none"

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
