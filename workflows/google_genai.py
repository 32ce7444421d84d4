"""fs-search's tools for the Gemini SDK's automatic function calling under Temporal.

Two lines of glue in the agent's workflow::

    response = await TemporalAsyncClient().models.generate_content(
        model="gemini-2.5-flash",
        contents=question,
        config=types.GenerateContentConfig(
            system_instruction=instructions(catalogue),
            tools=function_tools(tools, catalogue),
        ),
    )

Each tool is a plain async function that the SDK's automatic function calling (AFC) loop
calls *in the workflow* (``temporalio.google_genai`` runs only the model calls as
activities): it calls ``FsSearchTools.call`` with the catalogue, so the search is our
activity on the workspace's queue (``fs-search/<workspace_id>``) with FsSearchTools'
options. The SDK declares a function from its signature and docstring: here the catalogue's
name, description and per-argument JSON schemas (each optional argument gets
``"default": null``, which is how the SDK marks it not required). The model reads the call's
``text`` as the function's ``result``; a failed call reads ``Error: <message>`` there and
the loop goes on. The functions never raise, except when the workflow is cancelled: the SDK
turns any ``Exception`` of a tool into ``{"error": ...}`` and calls the model again, so a
cancelled search re-raises as ``asyncio.CancelledError`` (which it does not catch); the
workflow closes as cancelled, rg dead (FsSearchTools waits for the cancellation), and the
model is not called again.

When no worker serves the workspace, ``function_tools`` raises a non-retryable
``ApplicationError`` (``SEARCH_FAILED`` naming the workspace), as every adapter does: the
workflow fails with the cause instead of running the model without its tools.

Needs the ``google-genai`` extra (``pip install "fs-search-temporal[google-genai]"``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import WithJsonSchema
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    import google.genai  # noqa: F401  (the SDK these functions are shaped for)
    import temporalio.google_genai  # noqa: F401
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="google-genai") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_text, offered_specs
    from fs_search.workflows._tools import FsSearchTools

Tool = Callable[..., Awaitable[str]]


def function_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[Tool]:
    """One async function per catalogue entry (``glob``, ``grep``, ``read_spill`` when
    offered), for ``GenerateContentConfig(tools=...)``.

    Each is named and documented as the catalogue says and takes its arguments as keywords
    with the catalogue's JSON schemas; it returns the call's text, ``Error: ...`` on
    failure. Arguments outside the schema are dropped by the SDK before the call (it passes
    only the parameters a function declares). A worker without rg offers no tools: the list
    is empty and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause instead of running the model without its tools.
    """
    return [_function(tools, catalogue, spec) for spec in offered_specs(tools, catalogue)]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for ``system_instruction``."""
    return kit.instructions(catalogue)


def _function(tools: FsSearchTools, catalogue: ToolsResult, spec: ToolSpec) -> Tool:
    name = spec.name

    async def call(**arguments: Any) -> str:
        return await call_text(tools, name, arguments, catalogue=catalogue)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = spec.description
    properties: dict[str, Any] = spec.input_schema.get("properties", {})
    required = set(spec.input_schema.get("required", []))
    # The SDK reads a parameter's type from the signature, or, when that is a string (a
    # postponed annotation), from the function's type hints: as a declaration it takes
    # them with their extras, so ``WithJsonSchema`` gives it the catalogue's schema
    # verbatim; to check a model's value before the call it takes them without, ``object``,
    # which anything passes (FsSearchTools checks the arguments itself). A parameter with
    # no default is declared required.
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                arg,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if arg in required else None,
                annotation="object",
            )
            for arg in properties
        ]
    )
    call.__annotations__ = {
        arg: Annotated[object, WithJsonSchema(copy.deepcopy(schema))]
        for arg, schema in properties.items()
    }
    return call


__all__ = ["function_tools", "instructions"]
