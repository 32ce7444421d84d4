"""The import contracts in pyproject.toml have teeth: over a tree that breaks each one, each is
broken. (Whether the project keeps them is a lint step of .ci/run: `.venv/bin/lint-imports`.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# One leak per contract: an upward import, private modules read across their fronts (in
# activities/, from workflows/ into activities/, and from worker/ into workflows/ beyond the
# ignored imports), storage running rg, the budget model calling temporalio, and a circle in
# a room.
TREE = {
    "activities": "",
    "workflows": "",
    "worker": "",
    "activities/leak.py": "from fs_search.worker import _app\n",
    "activities/rg": "",
    "activities/rg/_command.py": "",
    "activities/results": "",
    "activities/storage": "",
    "activities/storage/spill.py": "from fs_search.activities import rg\n",
    # A circle in a room: the seam importing a backend that imports the seam.
    "activities/storage/_seam.py": "from fs_search.activities.storage import _backend\n",
    "activities/storage/_backend.py": "from fs_search.activities.storage import _seam\n",
    "activities/_search.py": "from fs_search.activities.rg import _command\n",
    "activities/_contract.py": "",
    "activities/_progress.py": "",
    "activities/_budget.py": "from temporalio import activity\n",
    # The worker reading the workflow side's internals: the ignored imports pass, any
    # other is a leak.
    "workflows/_task_queues.py": "",
    "workflows/_liveness.py": "",
    "workflows/_call.py": "",
    "workflows/_tools.py": "",
    "worker/_queue_owner.py": "from fs_search.workflows import _task_queues\n",
    "worker/_service_handler.py": "from fs_search.workflows import _liveness\n",
    "worker/testing.py": "from fs_search.workflows import _liveness\n",
    "worker/cli": "",
    "worker/cli/_embedded.py": "from fs_search.workflows import _call\n",
    "workflows/_converter.py": "",
    "worker/cli/_address.py": "from fs_search.workflows import _converter\n",
    "worker/_app.py": "from fs_search.workflows import _tools\n",
    # The workflow side reading an activity module past the activities' front.
    "workflows/_arguments.py": "from fs_search.activities import _contract\n",
}


def test_each_contract_can_fail(tmp_path):
    """The same contracts over a tree with one leak each are all broken (the check has teeth)."""
    for package, body in TREE.items():
        name = package if package.endswith(".py") else f"{package}/__init__.py"
        path = tmp_path / "fs_search" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    config = (ROOT / "pyproject.toml").read_text()
    start = config.index("[tool.importlinter]")
    end = config.index("\n[tool.", config.rindex("[[tool.importlinter.contracts]]"))
    (tmp_path / "pyproject.toml").write_text(config[start:end])
    p = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "fs_search.activities.leak -> fs_search.worker" in p.stdout
    assert "fs_search.activities._search -> fs_search.activities.rg._command" in p.stdout
    assert "fs_search.worker._app -> fs_search.workflows._tools" in p.stdout
    assert "fs_search.workflows._arguments -> fs_search.activities._contract" in p.stdout
    assert "fs_search.worker._service_handler ->" not in p.stdout
    assert "fs_search.activities.storage.spill -> fs_search.activities.rg" in p.stdout
    assert "fs_search.activities._budget -> temporalio" in p.stdout
    assert "No cycles are allowed in fs_search.activities.storage." in p.stdout
    assert "0 kept, 5 broken" in p.stdout, p.stdout


# What users import: the fronts, one module per agent framework, the test helpers and the
# console script's module; and the activities' front and its rooms' (rg, results, storage).
# Everything else is private by name, so the private_modules contract above holds it behind
# the fronts.
PUBLIC_MODULES = {
    "fs_search.activities",
    "fs_search.activities.results",
    "fs_search.activities.rg",
    "fs_search.activities.storage",
    "fs_search.workflows",
    "fs_search.workflows.agent_harness",
    "fs_search.workflows.google_adk",
    "fs_search.workflows.google_genai",
    "fs_search.workflows.langchain",
    "fs_search.workflows.openai_agents",
    "fs_search.workflows.pydantic_ai",
    "fs_search.workflows.strands",
    "fs_search.worker",
    "fs_search.worker.cli",
    "fs_search.worker.testing",
}


def _modules(directory: str) -> set[str]:
    names = set()
    for path in (ROOT / directory).rglob("*.py"):
        parts = list(path.relative_to(ROOT / directory).with_suffix("").parts)
        if parts[-1] in ("__init__", "__main__"):
            parts.pop()
        names.add(".".join(["fs_search", directory, *parts]))
    return names


def test_only_the_public_modules_have_public_names():
    """Every module of activities/, workflows/ and worker/ but the public ones is ``_x.py`` (or
    inside a private one), and every public one exists."""
    modules = _modules("activities") | _modules("workflows") | _modules("worker")
    public = {m for m in modules if not any(p.startswith("_") for p in m.split("."))}
    assert public == PUBLIC_MODULES
