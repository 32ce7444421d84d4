"""The capacity plan: how many searches a worker process runs and calls it holds, and one
workspace's share of each; the executor is sized by it, and a fleet needs a root's plan."""

from __future__ import annotations

import pytest

from fs_search.activities._config import FsSearchConfig
from fs_search.worker import build_services
from fs_search.worker._app import DEFAULT_PER_WORKSPACE, Capacity, capacity_plan
from fs_search.worker._fleet import Fleet


def _config(**values) -> FsSearchConfig:
    return FsSearchConfig.load(
        getenv=lambda _: None, overrides={"sample_over_cap_glob_results": False, **values}
    )


def test_one_workspace_has_the_process_to_itself():
    """A single-workspace worker: no per-workspace share below the process's caps."""
    assert capacity_plan(_config()) == Capacity(False, 16, 16, 256, 256, 256)


def test_a_workspaces_root_shares_the_process_between_workspaces():
    """Under a root (defaults): 4 running per workspace, a quarter of the held calls per
    queue, and a host queue's share as large as a workspace queue's."""
    plan = capacity_plan(_config(), workspaces_root=True)
    assert plan == Capacity(True, 16, DEFAULT_PER_WORKSPACE, 256, 64, 64)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # Few held calls: a queue holds at least what its workspace may run, and a host
        # queue's share is the same (none waiting behind its running searches).
        ({"max_queued_searches": 8, "max_concurrent_searches": 4}, Capacity(True, 4, 4, 8, 4, 4)),
        (
            {"max_queued_searches": 8, "max_concurrent_per_workspace": 2},
            Capacity(True, 16, 2, 16, 4, 4),
        ),
        ({"max_concurrent_per_workspace": 2}, Capacity(True, 16, 2, 256, 64, 64)),
        # The host share never exceeds what the process holds.
        (
            {"max_queued_searches": 1, "max_concurrent_searches": 1},
            Capacity(True, 1, 4, 1, 4, 1),
        ),
    ],
)
def test_the_shares_follow_the_settings(values, expected):
    assert capacity_plan(_config(**values), workspaces_root=True) == expected


async def test_the_executor_is_sized_by_the_plan(tmp_path):
    """build_services sizes the running slots from the plan: the process's cap, and under a
    root one workspace's share of it (clamped to the process's); under a root, a large
    digest keeps to one helper (the offload is shared)."""
    from fs_search.activities.storage import local_storage

    config = _config(max_concurrent_searches=6, max_concurrent_per_workspace=2)
    single = await build_services(config, storage=local_storage(tmp_path / "a"))
    root = await build_services(config, storage=local_storage(tmp_path / "b"), workspaces_root=True)
    try:
        slots, root_slots = single.executor.running_slots, root.executor.running_slots
        assert slots is not None and root_slots is not None
        assert (slots.total, slots.per_key) == (6, 6)
        assert (root_slots.total, root_slots.per_key) == (6, 2)
        assert root.capacity == capacity_plan(config, workspaces_root=True)
        assert (single.offload.shared, root.offload.shared) == (False, True)
    finally:
        for services in (single, root):
            services.offload.shutdown()
            await services.storage.close()


async def test_a_fleet_refuses_services_planned_for_one_workspace(tmp_path):
    """A fleet over services sized for one workspace would let one workspace run every
    search: it says how to build them."""
    from fs_search.activities.storage import local_storage

    services = await build_services(_config(), storage=local_storage(tmp_path / "s"))
    try:
        with pytest.raises(ValueError, match="workspaces_root=True"):
            Fleet(None, services, tmp_path)  # type: ignore[arg-type]
    finally:
        services.offload.shutdown()
        await services.storage.close()
