"""FsSearchTools with canned searches, and catalogues, for tests that run no Temporal."""

from __future__ import annotations

from typing import Any

from fs_search.activities._catalogue import tools_and_prompts
from fs_search.activities._contract import ToolResult, ToolsResult
from fs_search.workflows import FsSearchTools


class CannedTools(FsSearchTools):
    """FsSearchTools whose searches answer ``ran <tool>`` without Temporal: ``call`` and the
    argument checks are the real ones."""

    async def glob(self, pattern: str, path: str | None = None) -> ToolResult:
        return ToolResult(text="ran glob")

    async def grep(
        self, pattern: str, path: str | None = None, include: str | None = None
    ) -> ToolResult:
        return ToolResult(text="ran grep")

    async def read_spill(self, locator: str, offset: int = 0, limit: int = 2000) -> ToolResult:
        return ToolResult(text="ran read_spill")


def catalogue(*, read_spill: bool = True, **fields: Any) -> ToolsResult:
    """An available catalogue: glob and grep, and read_spill when asked (an S3 store);
    ``fields`` replace any of its fields (e.g. a worker without rg)."""
    specs, prompts = tools_and_prompts(
        sample_over_cap=False, glob_cap=100, grep_cap=250, line_bytes=2000, read_spill=read_spill
    )
    defaults: dict[str, Any] = {
        "available": True,
        "tools": specs,
        "system_prompt": prompts,
        "sample_over_cap_glob_results": False,
        "timeout_ms": 30_000,
    }
    return ToolsResult(**{**defaults, **fields})


UNAVAILABLE = ToolsResult(
    available=False, reason="no worker", sample_over_cap_glob_results=False, timeout_ms=1
)
