"""Whatever arguments a model sends, the adapters answer with text and never raise.

Property tests over JSON values and JSON text (see ``argument_strategies``), with no Temporal:
the searches are canned below ``FsSearchTools.call``, so ``call`` and the argument models'
checks run for real. The tests through a real workflow are in test_openai_agents.py and
test_pydantic_ai.py (``test_any_arguments_are_error_text_and_the_run_goes_on``). Google ADK's
is in test_google_adk.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from fs_search.activities._contract import ErrorCode, ToolResult
from fs_search.workflows import langchain, openai_agents, parse_arguments, pydantic_ai, strands
from tests.workflows.argument_strategies import any_objects, arguments, dump, json_texts, nested
from tests.workflows.canned import CannedTools, catalogue

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOOLS = ["glob", "grep", "read_spill"]
CATALOGUE = catalogue(read_spill=True)


@pytest.fixture(scope="module")
def run() -> Iterator[Any]:
    """Runs a coroutine to completion on a loop of this module's own."""
    loop = asyncio.new_event_loop()

    def run(coro: Coroutine[Any, Any, Any]) -> Any:
        return loop.run_until_complete(coro)

    yield run
    loop.close()


def assert_model_text(text: object, tool: str, *, refused: bool = False) -> None:
    """What a model may read back: our Error: text or the search's, valid UTF-8."""
    assert isinstance(text, str)
    assert text.startswith("Error: ") or (not refused and text == f"ran {tool}"), text
    text.encode("utf-8")  # sent back to the model through Temporal's payloads


@PROPERTY
@given(tool=st.sampled_from(TOOLS), arguments=arguments)
def test_call_answers_any_value_with_text(run, tool, arguments):
    """FsSearchTools.call answers any decoded value with text, refusing all but objects."""
    result = run(CannedTools("ws").call(tool, arguments, catalogue=CATALOGUE))
    assert_model_text(result.text, tool, refused=not isinstance(arguments, dict))
    if result.is_error:
        assert result.error is not None and result.error.code == ErrorCode.INVALID_ARGUMENT


@PROPERTY
@given(text=json_texts)
def test_parse_arguments_never_raises(text):
    """parse_arguments turns any text into an object's fields or INVALID_ARGUMENT text."""
    parsed = parse_arguments(text)
    if isinstance(parsed, ToolResult):
        assert parsed.text.startswith("Error: the arguments ")
        assert parsed.error is not None and parsed.error.code == ErrorCode.INVALID_ARGUMENT
    else:
        assert isinstance(parsed, dict) and all(isinstance(k, str) for k in parsed)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "must be a JSON object, not an array"),
        ('"x"', "must be a JSON object, not a string"),
        ("3", "must be a JSON object, not a number"),
        ("null", "must be a JSON object, not null"),
        ("true", "must be a JSON object, not a boolean"),
        ("{not json", "the arguments are not JSON: "),
        ('{"offset": ' + "9" * 5000 + "}", "a number with too many digits"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (b"\xff", "not UTF-8 text"),
    ],
)
def test_parse_arguments_names_the_problem(text, message):
    """Each way arguments can fail to be an object has its own words."""
    parsed = parse_arguments(text)
    assert isinstance(parsed, ToolResult) and message in parsed.text


@PROPERTY
@given(tool=st.sampled_from(TOOLS), text=json_texts)
def test_openai_agents_invoker_answers_any_text(run, tool, text):
    """The Agents SDK tool's invoker answers any argument text with text, never raising."""
    [invoke] = [
        t for t in openai_agents.function_tools(CannedTools("ws"), CATALOGUE) if t.name == tool
    ]
    assert_model_text(run(invoke.on_invoke_tool(None, text)), tool)  # type: ignore[arg-type]


@PROPERTY
@given(tool=st.sampled_from(TOOLS), args=arguments)
def test_strands_tool_answers_any_input(run, tool, args):
    """A Strands tool is handed the model's tool-use input as it came (any JSON value): it
    yields one result of text, status error when refused, never raising."""
    [agent_tool] = [
        t for t in strands.agent_tools(CannedTools("ws"), CATALOGUE) if t.tool_name == tool
    ]

    async def results() -> list[Any]:
        use = {"toolUseId": "t-1", "name": tool, "input": args}
        return [e async for e in agent_tool.stream(use, {})]  # type: ignore[arg-type]

    [event] = run(results())
    sent = event.tool_result
    assert sent["toolUseId"] == "t-1"
    [content] = sent["content"]
    assert_model_text(content["text"], tool, refused=not isinstance(args, dict))
    assert sent["status"] == ("error" if content["text"].startswith("Error: ") else "success")


def _json_encodable(value: Any) -> bool:
    try:
        json.loads(json.dumps(value))
    except (ValueError, RecursionError):
        return False
    return True


@PROPERTY
@given(tool=st.sampled_from(TOOLS), args=any_objects.filter(_json_encodable))
def test_langchain_tool_answers_any_arguments(run, tool, args):
    """A LangChain tool is handed a tool call's arguments as they came (any object JSON can
    carry): it answers with a ToolMessage of text, status error when refused, never raising.
    (An integer over Python's 4,300-digit limit, or nesting past its recursion limit, cannot
    reach a tool: JSON decoding refuses it, as the model's tool call and Temporal's payloads
    are decoded, and LangChain's own ``str()`` of the input raises before our code runs.)"""
    [lc_tool] = [
        t for t in langchain.structured_tools(CannedTools("ws"), CATALOGUE) if t.name == tool
    ]
    call = {"name": tool, "args": args, "id": "t-1", "type": "tool_call"}
    message = run(lc_tool.ainvoke(call))
    assert message.tool_call_id == "t-1"
    assert_model_text(message.content, tool)
    assert message.status == ("error" if message.content.startswith("Error: ") else "success")


def _once(tool: str, args: Any) -> FunctionModel:
    """A model that calls ``tool`` with ``args`` once, then answers with what it read back."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Usage given, so FunctionModel does not estimate it by serializing the arguments
        # (an object nested past pydantic's depth, or with a lone surrogate, cannot be).
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if part.part_kind in ("tool-return", "retry-prompt")
        ]
        if not returns:
            call = ToolCallPart(tool, args, tool_call_id="call-0")
            return ModelResponse(parts=[call], usage=usage)
        [part] = returns
        assert isinstance(part, ToolReturnPart), part  # no retry prompt: our text
        return ModelResponse(parts=[TextPart(str(part.content))], usage=usage)

    return FunctionModel(model)


def _pydantic_ai_reply(run: Any, tool: str, args: Any) -> str:
    agent = Agent(_once(tool, args))
    toolset = pydantic_ai.toolset(CannedTools("ws"), CATALOGUE)
    return run(agent.run("search", toolsets=[toolset])).output


@PROPERTY
@given(tool=st.sampled_from(TOOLS), text=json_texts)
def test_pydantic_ai_tool_answers_any_json_text(run, tool, text):
    """A pydantic-ai tool call with any argument text reads back our text, never a retry."""
    assert_model_text(_pydantic_ai_reply(run, tool, text), tool)


@PROPERTY
@given(tool=st.sampled_from(TOOLS), args=any_objects)
def test_pydantic_ai_tool_answers_any_object(run, tool, args):
    """A pydantic-ai tool call with any object as its arguments reads back our text."""
    # A model's arguments are JSON text or an object (ToolCallPart.args): other Python
    # values are outside pydantic-ai's own contract.
    assert_model_text(_pydantic_ai_reply(run, tool, args), tool)


@pytest.mark.parametrize(
    "args",
    ["[1]", '"x"', "3", "null", "{not json", '{"pattern": ' + "9" * 5000 + "}", "[" * 10**5],
)
def test_pydantic_ai_refusals_are_our_error_text(run, args):
    """Arguments pydantic-ai itself would retry on or crash with are our Error: text."""
    reply = _pydantic_ai_reply(run, "grep", args)
    assert reply == parse_arguments(args).text  # type: ignore[union-attr]


def test_pydantic_ai_model_is_shown_the_catalogue_schemas(run):
    """With the raw-argument validator the model is still shown the catalogue's schemas."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown = [(t.name, t.parameters_json_schema) for t in info.function_tools]
        return ModelResponse(parts=[TextPart(json.dumps(shown))])

    toolset = pydantic_ai.toolset(CannedTools("ws"), CATALOGUE)
    shown = run(Agent(FunctionModel(model)).run("tools?", toolsets=[toolset])).output
    assert json.loads(shown) == [[s.name, s.input_schema] for s in CATALOGUE.tools]


def test_strategies_reach_the_hard_cases():
    """Sanity: the text strategy's helpers build what the properties rely on."""
    assert dump({"offset": 10**5000}).startswith('{"offset": 1000')
    assert len(str(nested(3))) == len("[[[]]]")
