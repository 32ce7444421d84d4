"""The four activities: glob and grep run the one pipeline over their specs; tools; read_spill."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from opentelemetry import trace
from temporalio import activity

from fs_search.activities.catalogue import tools_and_prompts
from fs_search.activities.checks import check_request
from fs_search.activities.config import FsSearchConfig
from fs_search.activities.errors import contract, invalid_argument
from fs_search.activities.executor import Executor
from fs_search.activities.models import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    ToolsRequest,
    ToolsResult,
)
from fs_search.activities.offload import Offload
from fs_search.activities.paths import Workspace
from fs_search.activities.pipeline import D, Pipeline, Req, Res, SearchSpec
from fs_search.activities.progress import Progress, heartbeating
from fs_search.activities.saving import Saver, spill_workspace
from fs_search.activities.specs import GlobSpec, GrepSpec
from fs_search.activities.storage import Storage
from fs_search.activities.storage.attempt import time_left
from fs_search.activities.telemetry import SearchTelemetry, mark_failed, outcome_of


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
        storage: Storage,
        rg: RgStatus,
        telemetry: SearchTelemetry | None = None,
        offload: Offload | None = None,
        nice_step: int = 0,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.executor = executor
        self.storage = storage
        self.store = storage.artifacts
        self.rg = rg
        self.telemetry = telemetry or SearchTelemetry(trace_patterns=config.trace_patterns)
        self.offload = offload or Offload(0)
        # Whose artifacts this worker writes and read_spill reads (saving.spill_workspace).
        self.spill_workspace = spill_workspace(self.telemetry.workspace_id, workspace.root)
        self.pipeline = Pipeline(
            config,
            workspace,
            executor=executor,
            offload=self.offload,
            saver=Saver(storage, self.telemetry, workspace=self.spill_workspace),
            telemetry=self.telemetry,
            rg_path=rg.path,
            nice_step=nice_step,
            key=self.telemetry.workspace_id,
        )
        self._glob = GlobSpec(config)
        self._grep = GrepSpec(config)

    def all(self) -> list[object]:
        """Every activity, for ``Worker(activities=...)``: all four are always registered."""
        return [self.glob, self.grep, self.tools, self.read_spill]

    # --- activities ------------------------------------------------------------------

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, req: GlobRequest) -> GlobResult:
        """Find files by glob pattern under the search root, oldest modified first."""
        return await self._observed(self._glob, req)

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, req: GrepRequest) -> GrepResult:
        """Search file contents; matching lines grouped by file."""
        return await self._observed(self._grep, req)

    @activity.defn(name=TOOLS_ACTIVITY)
    async def tools(self, req: ToolsRequest | None = None) -> ToolsResult:
        """The catalogue: tool definitions and prompt segments (empty when rg is missing)."""
        await contract(self._ours(req))
        cfg = self.config
        if self.rg.path is None:
            return ToolsResult(
                available=False,
                reason=self.rg.reason or "ripgrep is not available on this worker",
                sample_over_cap_glob_results=cfg.sample_over_cap_glob_results,
                timeout_ms=cfg.timeout_ms,
                sandbox=self.sandbox,
                workspace_id=self.telemetry.workspace_id,
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
            workspace_id=self.telemetry.workspace_id,
        )

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def read_spill(self, req: ReadSpillRequest) -> ReadSpillResult:
        """A page of a spill artifact of this workspace's, in this worker's store."""

        async def run() -> ReadSpillResult:
            check_request(req)
            await self._ours(req)
            return await self.store.read(
                req.locator, offset=req.offset, limit=req.limit, workspace=self.spill_workspace
            )

        return await contract(run())

    # --- the pipeline --------------------------------------------------------------

    async def _observed(self, spec: SearchSpec[Req, D, Res], req: Req) -> Res:
        """Run a search pipeline: heartbeats, the activity span's attributes, metrics."""
        progress = Progress(phase="checks")
        span = trace.get_current_span()
        span.set_attributes(
            {
                "fs_search.tool": spec.name,
                "fs_search.workspace_id": self.telemetry.workspace_id,
                **self.telemetry.pattern_attributes("pattern", req.pattern),
                **self.telemetry.pattern_attributes("include", getattr(req, "include", None)),
            }
        )
        error: BaseException | None = None
        try:
            await contract(self._ours(req))
            async with heartbeating(progress):
                return await contract(
                    self.pipeline.run(spec, req, progress, remaining_s=time_left())
                )
        except BaseException as e:
            error = e
            mark_failed(span, e)
            raise
        finally:
            self.telemetry.record(
                tool=spec.name,
                outcome=outcome_of(error),
                started=progress.started,
                raw_bytes=progress.raw_bytes,
            )

    # --- helpers ---------------------------------------------------------------------

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
