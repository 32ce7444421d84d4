"""The layering contract in pyproject.toml has teeth: over a tree with one upward import it is
broken. (Whether the project keeps it is a lint step of .ci/run: `.venv/bin/lint-imports`.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_the_contract_can_fail(tmp_path):
    """The same contract over a tree with one upward import is broken (the check has teeth)."""
    for package, body in {
        "activities": "",
        "workflows": "",
        "worker": "",
        "activities/leak.py": "from fs_search.worker import app\n",
        "worker/app.py": "",
    }.items():
        name = package if package.endswith(".py") else f"{package}/__init__.py"
        path = tmp_path / "fs_search" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    config = (ROOT / "pyproject.toml").read_text()
    start = config.index("[tool.importlinter]")
    end = config.index("\n[tool.", start + 1)
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
