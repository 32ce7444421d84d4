"""What the Gemini SDK, Google ADK, Strands and agent-harness adapters offer when no worker
answered the catalogue.

Those adapters never raise for an unserved workspace: the tools are offered anyway, as
a worker describes them by default (glob and grep), and each call reads ``Error:`` text
naming the workspace (``FsSearchTools.call`` finds it unserved, as for any call). The other
adapters raise instead (``offered_specs``).
"""

from __future__ import annotations

import logging

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.activities.catalogue import tools_and_prompts
    from fs_search.activities.config import FsSearchConfig
    from fs_search.activities.contract import ToolsResult
    from fs_search.workflows.tools import FsSearchTools, offered_specs

log = logging.getLogger(__name__)


def offered(tools: FsSearchTools, catalogue: ToolsResult) -> ToolsResult:
    """``catalogue``, or, when no worker answered it, glob and grep with a worker's defaults
    (``stand_in``), and a workflow warning saying which.

    A worker that answered without rg offers nothing, and a workflow warning says why.
    """
    if catalogue.error is None:
        offered_specs(tools, catalogue)  # a warning when the worker has no rg
        return catalogue
    logger = workflow.logger if workflow.in_workflow() else log
    logger.warning(
        "fs-search's catalogue for workspace %r: %s; glob and grep are offered anyway, "
        "and each call reads Error: text until a worker serves it",
        tools.workspace_id,
        catalogue.reason,
    )
    return stand_in(catalogue)


def stand_in(catalogue: ToolsResult) -> ToolsResult:
    """``catalogue``, or, when no worker answered it, glob and grep as a worker with the
    default settings describes them, with their prompt segments.

    The stand-in keeps ``available: false`` and the fetch's ``error``, so
    ``FsSearchTools.call`` dispatches glob and grep (and refuses read_spill) with it.
    """
    if catalogue.error is None:
        return catalogue
    fields = FsSearchConfig.model_fields
    specs, prompts = tools_and_prompts(
        sample_over_cap=False,
        glob_cap=fields["glob_max_results"].default,
        grep_cap=fields["grep_max_matches"].default,
        line_bytes=fields["grep_max_line_bytes"].default,
        read_spill=False,
    )
    return catalogue.model_copy(update={"tools": specs, "system_prompt": prompts})


__all__ = ["offered", "stand_in"]
