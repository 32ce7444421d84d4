"""fs-search's tools for an OpenAI Agents SDK agent run durably under Temporal's plugin.

One line of glue in the agent's workflow::

    agent = Agent(
        name="searcher",
        instructions=instructions(catalogue),
        tools=function_tools(tools, catalogue),
    )

Each tool is a plain ``agents.FunctionTool`` whose invoker runs *in the workflow* and calls
``FsSearchTools.call`` with the catalogue (so only the tools it offers are dispatched, whatever
``tools`` fetched itself): the search is our activity on the workspace's queue
(``fs-search/<workspace_id>``), scheduled with FsSearchTools' options, not a tool activity
on the agent's queue. The model reads the call's ``text``; a failed call, or arguments that
are not a JSON object the tool accepts, reads ``Error: <message>`` (the run goes on). Works
under ``temporalio.openai_agents.OpenAIAgentsPlugin`` with the sandboxed and the unsandboxed
workflow runner; put that plugin before FsSearchPlugin on the client (it accepts no payload
converter but its own, which FsSearchPlugin keeps).

Cancelling the workflow cancels the search, but the Agents SDK does not wait for a tool
call it cancels: the workflow closes as cancelled in the task that requests the activity's
cancellation, and the worker kills rg when its next heartbeat learns of it (within the
heartbeat timeout).

A model's arguments nested thousands of levels deep never reach a tool: the Agents SDK
decodes every call's arguments itself (to tell repeated calls apart) before any tool runs,
and past ~450 levels that decoding raises ``RecursionError`` in the workflow — a workflow
task that fails on every retry (openai-agents 0.22.3). Wrap the plugin's model provider with
:func:`guarded` (``OpenAIAgentsPlugin(model_provider=guarded(OpenAIProvider()))``): it runs
with the model, in its activity, and withholds tool-call arguments nested deeper than
``MAX_ARGUMENT_DEPTH`` before the workflow sees them (our tools answer ``Error: the arguments
are nested too deeply``, other tools get text that is not JSON). Without it, give the agent's
worker ``workflow_failure_exception_types=[RecursionError]`` so such a run fails at once
instead of retrying its task forever.

Needs the ``openai-agents`` extra (``pip install "fs-search-temporal[openai-agents]"``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    from agents import FunctionTool, Model, ModelProvider, ModelResponse, RunContextWrapper
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="openai-agents") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import ToolResult, ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_text, offered_specs
    from fs_search.workflows._arguments import (
        MAX_ARGUMENT_DEPTH,
        NESTED_TOO_DEEPLY,
        nested_too_deeply,
        parse_arguments,
    )
    from fs_search.workflows._tools import FsSearchTools


def function_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[FunctionTool]:
    """One ``FunctionTool`` per catalogue entry (``glob``, ``grep``, ``read_spill`` when offered).

    Names, descriptions and JSON schemas are the catalogue's, unchanged (so the worker's
    over-cap mode shows in glob's description); the schemas are not made "strict" (an
    optional argument stays optional rather than becoming a required nullable one). A
    worker without rg offers no tools: the list is empty and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause instead of running an agent without its tools.
    """
    return [_function_tool(tools, catalogue, spec) for spec in offered_specs(tools, catalogue)]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for ``Agent.instructions``."""
    return kit.instructions(catalogue)


def _function_tool(tools: FsSearchTools, catalogue: ToolsResult, spec: ToolSpec) -> FunctionTool:
    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=copy.deepcopy(spec.input_schema),
        on_invoke_tool=_invoker(tools, catalogue, spec.name),
        strict_json_schema=False,
    )


def _invoker(
    tools: FsSearchTools, catalogue: ToolsResult, name: str
) -> Callable[[RunContextWrapper[Any], str], Awaitable[str]]:
    async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
        # Any arguments the model sends (not JSON, not an object, a number too long to
        # read, nesting too deep) are Error: text, never an exception that would fail the
        # workflow task on every retry.
        parsed = parse_arguments(arguments)
        if isinstance(parsed, ToolResult):
            return parsed.text
        return await call_text(tools, name, parsed, catalogue=catalogue)

    return invoke


def guarded(provider: ModelProvider, *, max_depth: int = MAX_ARGUMENT_DEPTH) -> ModelProvider:
    """``provider`` with every model's tool calls checked before the workflow sees them.

    A function call whose arguments nest objects or arrays deeper than ``max_depth`` gets
    ``NESTED_TOO_DEEPLY`` as its arguments instead (text that is not JSON: no tool runs on
    it; fs-search's tools answer ``Error: the arguments are nested too deeply``). Give it to
    the plugin, which runs the model in an activity::

        OpenAIAgentsPlugin(model_provider=guarded(OpenAIProvider()))

    Streamed responses are checked in their ``response.output_item.done`` and
    ``response.completed`` events (what the Agents SDK builds its calls from).
    """
    return _GuardedProvider(provider, max_depth)


class _GuardedProvider(ModelProvider):
    def __init__(self, provider: ModelProvider, max_depth: int) -> None:
        self._provider = provider
        self._max_depth = max_depth

    def get_model(self, model_name: str | None) -> Model:
        return _GuardedModel(self._provider.get_model(model_name), self._max_depth)

    async def aclose(self) -> None:
        await self._provider.aclose()


class _GuardedModel(Model):
    def __init__(self, model: Model, max_depth: int) -> None:
        self._model = model
        self._max_depth = max_depth

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await self._model.get_response(*args, **kwargs)
        output = [self._checked(item) for item in response.output]
        return dataclasses.replace(response, output=output)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        async for streamed in self._model.stream_response(*args, **kwargs):
            event: Any = streamed
            kind = getattr(event, "type", None)
            if kind == "response.output_item.done":
                event = event.model_copy(update={"item": self._checked(event.item)})
            elif kind == "response.completed":
                output = [self._checked(item) for item in event.response.output]
                response = event.response.model_copy(update={"output": output})
                event = event.model_copy(update={"response": response})
            yield event

    async def close(self) -> None:
        await self._model.close()

    def _checked(self, item: Any) -> Any:
        arguments = getattr(item, "arguments", None)
        if (
            getattr(item, "type", None) == "function_call"
            and isinstance(arguments, str)
            and nested_too_deeply(arguments, self._max_depth)
        ):
            return item.model_copy(update={"arguments": NESTED_TOO_DEEPLY})
        return item


__all__ = ["MAX_ARGUMENT_DEPTH", "NESTED_TOO_DEEPLY", "function_tools", "guarded", "instructions"]
