"""mypy over the installed names: fs_search.activities, .workflows and .worker as one package.

The three directories install under ``fs_search`` through an editable-install import hook
that mypy cannot follow, so a plain ``mypy activities workflows worker`` sees every
cross-module import as ``Any``. Here they are linked under a real ``fs_search`` directory,
so types are checked across modules (a wrong argument to another module's function fails).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("activities", "workflows", "worker")


@pytest.mark.timeout(600)
def test_mypy_checks_types_across_modules(tmp_path: Path) -> None:
    """The package type-checks with cross-module types resolved."""
    (tmp_path / "fs_search").mkdir()
    for name in PACKAGES:
        os.symlink(ROOT / name, tmp_path / "fs_search" / name)
    args = [f"-p=fs_search.{name}" for name in PACKAGES]
    p = subprocess.run(
        [sys.executable, "-m", "mypy", "--explicit-package-bases", *args],
        cwd=ROOT,
        env={**os.environ, "MYPYPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Success" in p.stdout
