"""A Google ADK agent workflow, written as a user would: fs-search's tools in two lines."""

from __future__ import annotations

import json
from datetime import timedelta

from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import BaseModel
from temporalio import workflow
from temporalio.google_adk import TemporalModel

from fs_search.workflows import FsSearchTools
from fs_search.workflows.google_adk import function_tools, instructions


class AdkRun(BaseModel):
    workspace_id: str
    prompt: str
    model: str
    schedule_to_start_s: float = 10.0


class AdkReply(BaseModel):
    """The agent's last text, and every function response the model was sent back (its
    ``result``, or the whole response as JSON when it has none, as ADK's own errors)."""

    answer: str
    tool_outputs: list[str]


@workflow.defn
class AdkSearchAgent:
    """An LlmAgent over a workspace: tools and instructions from the worker's catalogue, its
    model calls activities (``TemporalModel``), its tools run here."""

    @workflow.run
    async def run(self, job: AdkRun) -> AdkReply:
        tools = FsSearchTools(
            job.workspace_id,
            schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
        )
        catalogue = await tools.catalogue()
        agent = LlmAgent(
            name="searcher",
            model=TemporalModel(job.model),
            static_instruction=instructions(catalogue),
            tools=function_tools(tools, catalogue),
        )
        runner = InMemoryRunner(agent=agent, app_name="fs-search")
        session = await runner.session_service.create_session(app_name="fs-search", user_id="u")
        question = types.Content(role="user", parts=[types.Part(text=job.prompt)])
        answer, outputs = "", []
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=question
        ):
            for response in event.get_function_responses():
                sent = response.response or {}
                outputs.append(str(sent["result"]) if "result" in sent else json.dumps(sent))
            if event.is_final_response() and event.content and event.content.parts:
                answer = "".join(p.text or "" for p in event.content.parts)
        return AdkReply(answer=answer, tool_outputs=outputs)
