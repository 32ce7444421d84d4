"""A Gemini SDK agent workflow, written as a user would: fs-search's tools in two lines."""

from __future__ import annotations

from datetime import timedelta

from google.genai import types
from pydantic import BaseModel
from temporalio import workflow
from temporalio.google_genai import TemporalAsyncClient

from fs_search.workflows import FsSearchTools
from fs_search.workflows.google_genai import function_tools, instructions


class GeminiRun(BaseModel):
    workspace_id: str
    prompt: str
    schedule_to_start_s: float = 10.0


@workflow.defn
class GeminiSearchAgent:
    """An agent over a workspace: tools and instructions from the worker's catalogue, the
    SDK's automatic function calling driving the turns."""

    @workflow.run
    async def run(self, job: GeminiRun) -> str:
        tools = FsSearchTools(
            job.workspace_id,
            schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
        )
        catalogue = await tools.catalogue()
        response = await TemporalAsyncClient().models.generate_content(
            model="gemini-2.5-flash",
            contents=job.prompt,
            config=types.GenerateContentConfig(
                system_instruction=instructions(catalogue),
                tools=function_tools(tools, catalogue),
            ),
        )
        return response.text or ""
