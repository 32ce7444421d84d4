"""Saves that keep to the attempt's time left: a spill with none is not tried, a payload
upload gives up when the call's kept budget runs out (the arithmetic: test_budget.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._budget import SAVE_FLOOR_S
from fs_search.activities._contract import GlobRequest
from fs_search.activities.storage._payloads import keep_budget, storing_payload
from fs_search.activities.storage._spills import NO_TIME_TO_SAVE
from tests.helpers import write_tree


async def test_a_spill_with_no_time_left_is_not_tried(tmp_path: Path, make_activities):
    """0.5 s left of the attempt: the page comes back at once, saying why it was not saved,
    and nothing is written to the store."""
    ws = write_tree(tmp_path / "ws", {f"f{i:02}.txt": "" for i in range(12)})
    acts = await make_activities(ws, glob_max_results=3)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        started_time=datetime.now(UTC) - timedelta(seconds=5.5),
        start_to_close_timeout=timedelta(seconds=6),
        scheduled_time=datetime.now(UTC) - timedelta(seconds=5.5),
        schedule_to_close_timeout=None,
    )
    r = await env.run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.spill is None and r.spill_error == NO_TIME_TO_SAVE and len(r.paths) == 3
    assert NO_TIME_TO_SAVE in r.text
    assert not list(acts.spill_store.directory.rglob("*.txt"))


async def test_a_kept_budget_bounds_a_payload_upload():
    """A payload upload that hangs gives up when the kept budget (at least the floor) runs
    out, as the contract's SEARCH_FAILED, not at the attempt's deadline."""

    async def upload() -> str:
        keep_budget(time.monotonic() + 0.3)  # what the activity keeps once rg has run

        async def hang() -> str:
            await asyncio.sleep(60)
            return "stored"

        return await storing_payload(hang, size=1_000_000, where="a store")

    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        started_time=datetime.now(UTC),
        start_to_close_timeout=timedelta(minutes=5),
        scheduled_time=datetime.now(UTC),
        schedule_to_close_timeout=None,
    )
    started = time.monotonic()
    with pytest.raises(ApplicationError, match="did not answer in time"):
        await env.run(upload)
    assert SAVE_FLOOR_S - 0.1 <= time.monotonic() - started < SAVE_FLOOR_S + 3
