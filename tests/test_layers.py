"""The import contracts in pyproject.toml have teeth: over a tree that breaks each one, each is
broken. (Whether the project keeps them is a lint step of .ci/run: `.venv/bin/lint-imports`.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

# One leak per contract: an upward import, a private module read across its front, storage
# running rg, and the budget model calling temporalio.
TREE = {
    "activities": "",
    "workflows": "",
    "worker": "",
    "activities/leak.py": "from fs_search.worker import app\n",
    "activities/rg": "",
    "activities/rg/_command.py": "",
    "activities/results": "",
    "activities/storage": "",
    "activities/storage/spill.py": "from fs_search.activities import rg\n",
    "activities/search.py": "from fs_search.activities.rg import _command\n",
    "activities/contract.py": "",
    "activities/progress.py": "",
    "activities/budget.py": "from temporalio import activity\n",
    "worker/app.py": "",
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
    assert "fs_search.activities.search -> fs_search.activities.rg._command" in p.stdout
    assert "fs_search.activities.storage.spill -> fs_search.activities.rg" in p.stdout
    assert "fs_search.activities.budget -> temporalio" in p.stdout
    assert "0 kept, 4 broken" in p.stdout, p.stdout
