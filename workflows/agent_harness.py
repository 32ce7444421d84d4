"""fs-search's tools as tools of Temporal's agent harness (``temporal-agent-harness``).

One line of glue in the agent's turn, through the harness's adapter for its SDK::

    tools=as_openai_agent_tools(runner, harness_tools(fs, catalogue), strict_json_schema=False)

``harness_tools`` gives one inline harness tool (``@agent.tool_defn(inherently_safe=True)``)
per catalogue entry (``glob``, ``grep``, ``read_spill`` when offered): its name, description
and per-argument JSON schemas are the catalogue's, and ``FsSearchTools`` is bound by closure
(no ``Injected[...]`` parameter for the workflow to fill). Each call goes through the harness:
its ``ToolApprovalPolicy`` (read-only searches are inherently safe, so
``ToolApprovalPolicy.allow_inherently_safe()`` runs them without asking) and its
``tool_start`` / ``tool_end`` events. The tool runs *in the workflow* and calls
``FsSearchTools.call`` with the catalogue: the search is our activity on the workspace's
queue (``fs-search/<workspace_id>``) with FsSearchTools' options, whatever queue the agent
runs on. The model reads the call's ``text``; a failed call reads ``Error: <message>`` (the
turn goes on, and ``tool_end`` carries that text).

Cancelling the agent's workflow cancels the search, and the tool raises
``asyncio.CancelledError``: the harness's adapters turn any ``Exception`` of a tool into
``Tool '<name>' failed: ...`` for the model and carry on, which a cancelled workflow must not
do. The harness closes the workflow as cancelled without waiting for the turn, so the worker
kills rg when its next heartbeat learns of the cancellation (within the heartbeat timeout).

When no worker serves the workspace, ``harness_tools`` raises a non-retryable
``ApplicationError`` (``SEARCH_FAILED`` naming the workspace), as every adapter does: the
harness reports it as the turn's ``message_handler_error`` and the session stays open, so
the next turn asks for the catalogue again and finds a worker started meanwhile.

Needs the ``agent-harness`` extra (``pip install "fs-search-temporal[agent-harness]"``), plus the
extra of the SDK the turn runs (``openai-agents`` or ``pydantic-ai``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    from temporal_agent_harness.harness import agent
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="agent-harness") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.activities import TOOL_ARGUMENTS
    from fs_search.workflows import ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_text, offered_specs
    from fs_search.workflows._tools import FsSearchTools

HarnessTool = Callable[..., Awaitable[str]]


def harness_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[HarnessTool]:
    """One inline harness tool per catalogue entry, marked inherently safe (read-only).

    Pass the list to the harness's adapter: ``as_pydantic_ai_tools(...)`` (the catalogue's
    schemas verbatim) or ``as_openai_agent_tools(runner, ..., strict_json_schema=False)``
    (which builds every harness tool's schema strict, each argument listed as required,
    whatever that flag says). Each tool returns the call's text, ``Error: ...`` on
    failure; it never raises but when the workflow is cancelled. A worker without rg offers
    no tools: the list is empty and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the harness ends the
            turn with it (``message_handler_error``) instead of running it without tools.
    """
    return [_harness_tool(tools, catalogue, spec) for spec in offered_specs(tools, catalogue)]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for the SDK agent's
    instructions."""
    return kit.instructions(catalogue)


def _harness_tool(tools: FsSearchTools, catalogue: ToolsResult, spec: ToolSpec) -> HarnessTool:
    name = spec.name

    async def call(**arguments: Any) -> str:
        return await call_text(tools, name, arguments, catalogue=catalogue)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = spec.description
    signature = _signature(name, spec.input_schema)
    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    call.__annotations__["return"] = str
    return agent.tool_defn(inherently_safe=True)(call)


def _signature(name: str, schema: dict[str, Any]) -> inspect.Signature:
    """Keyword parameters that the SDKs' schema builders turn back into the catalogue's.

    Each parameter is ``object`` with a ``Field`` that replaces its JSON schema by the
    catalogue property's: both adapters build the schema with pydantic from the signature
    (the OpenAI one reads only a ``Field`` in ``Annotated``), which then emits the property
    verbatim (plus a title) and accepts any value, so FsSearchTools checks the arguments
    itself. An optional argument defaults to the tool's own default (None for
    ``path``/``include``).
    """
    required = set(schema.get("required", []))
    model = TOOL_ARGUMENTS.get(name)
    fields = model.model_fields if model is not None else {}
    parameters = []
    for arg, property_schema in schema.get("properties", {}).items():
        default: Any = inspect.Parameter.empty
        if arg not in required:
            field = fields.get(arg)
            default = field.default if field is not None else None
        parameters.append(
            inspect.Parameter(
                arg,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[object, Field(json_schema_extra=_verbatim(property_schema))],
            )
        )
    return inspect.Signature(parameters, return_annotation=str)


def _verbatim(property_schema: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` that makes a field's schema ``property_schema``."""

    def replace(schema: dict[str, Any]) -> None:
        schema.clear()
        schema.update(copy.deepcopy(property_schema))

    return replace


__all__ = ["harness_tools", "instructions"]
