"""The adapter kit: what every framework adapter (``openai_agents``, ``pydantic_ai``,
``google_genai``, ``google_adk``, ``strands``, ``langchain``, ``agent_harness``) shares.

Each adapter is the catalogue in its framework's shapes; the rest is here, once:

* :func:`missing_extra`: the error an adapter raises when its framework is not installed.
* :func:`offered_specs`: the tools offered, and the one policy for a workspace no worker
  serves: the adapter raises a non-retryable ``SEARCH_FAILED`` naming it (an agent run
  without its tools would only flounder), and a worker without rg offers none, with a
  workflow warning.
* :func:`instructions`: the catalogue's prompt segments, one paragraph each.
* :func:`call_tool` / :func:`call_text`: one tool call through ``FsSearchTools.call``, and
  the cancel rule: every failure is ``Error:`` text, never an exception, except that a
  cancelled workflow re-raises as ``asyncio.CancelledError``. Frameworks hand a tool's
  ``Exception`` to the model and call it again (or leave the run stuck); none of them
  catches ``CancelledError``, so the workflow closes as cancelled, rg dead.

A model's raw arguments are decoded by :mod:`~fs_search.workflows._arguments`.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from fs_search.activities import DISTRIBUTION
    from fs_search.workflows import ToolResult, ToolSpec, ToolsResult
    from fs_search.workflows._tools import FsSearchTools

log = logging.getLogger(__name__)


def missing_extra(error: ModuleNotFoundError, *, adapter: str, extra: str) -> ModuleNotFoundError:
    """``error`` (an import of the framework failing) in words naming the pip command:
    raise it ``from error`` where the adapter imports its framework."""
    return ModuleNotFoundError(
        f'{adapter} needs the {extra} extra ({error}): pip install "{DISTRIBUTION}[{extra}]"',
        name=error.name,
    )


def raise_if_unserved(tools: FsSearchTools, catalogue: ToolsResult) -> None:
    """Raise the failure of a catalogue no worker answered (``catalogue.error``).

    Raises:
        ApplicationError: non-retryable, ``type`` the failure's code (SEARCH_FAILED when no
            worker serves the workspace), its message naming the workspace.
    """
    if catalogue.error is None:
        return
    who = f"workspace {tools.workspace_id!r}"
    code = catalogue.error.code
    reason = catalogue.reason or "no fs-search worker answered"
    message = reason if who in reason else f"fs-search's tools for {who}: {reason}"
    raise ApplicationError(
        message,
        {"name": catalogue.error.name, "code": code.value},
        type=code.value,
        non_retryable=True,
    )


def offered_specs(tools: FsSearchTools, catalogue: ToolsResult) -> list[ToolSpec]:
    """The tools a framework adapter offers the model: the catalogue's.

    A catalogue no worker answered raises (:func:`raise_if_unserved`): an agent run without
    its tools would only flounder (a model calling a tool its framework does not know), so
    the workflow fails at once with the cause. A worker's own unavailable catalogue (no rg
    on that worker) offers nothing, as the seed says, and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable, ``type`` the failure's code (SEARCH_FAILED when no
            worker serves the workspace), its message naming the workspace.
    """
    raise_if_unserved(tools, catalogue)
    if not catalogue.available:
        # workflow.logger in workflow code (not repeated on replay); outside, this module's.
        logger = workflow.logger if workflow.in_workflow() else log
        logger.warning(
            "fs-search offers no tools for workspace %r: %s; the agent runs without glob and grep",
            tools.workspace_id,
            catalogue.reason or "the worker's catalogue is unavailable",
        )
        return []
    return list(catalogue.tools)


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each: what every framework
    adapter's ``instructions()`` gives its agent."""
    return "\n\n".join(catalogue.system_prompt)


async def call_tool(
    tools: FsSearchTools, name: str, arguments: object, *, catalogue: ToolsResult
) -> ToolResult:
    """A model's call of tool ``name``, dispatched by ``FsSearchTools.call`` with
    ``catalogue``: its result, ``Error:`` text on any failure.

    Runs in workflow code: the search is our activity on the workspace's queue.

    Raises:
        asyncio.CancelledError: the workflow is being cancelled (whatever the call raised).
    """
    try:
        return await tools.call(name, arguments, catalogue=catalogue)
    except Exception as e:
        if workflow.in_workflow() and workflow.cancellation_reason() is not None:
            # A framework would hand an Exception to the model and call it again.
            raise asyncio.CancelledError(f"the workflow was cancelled during {name}") from e
        raise


async def call_text(
    tools: FsSearchTools, name: str, arguments: object, *, catalogue: ToolsResult
) -> str:
    """The text the model reads for a call (:func:`call_tool`): the search's, or
    ``Error: <message>``."""
    return (await call_tool(tools, name, arguments, catalogue=catalogue)).text


__all__ = [
    "call_text",
    "call_tool",
    "instructions",
    "missing_extra",
    "offered_specs",
    "raise_if_unserved",
]
