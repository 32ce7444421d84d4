"""docs/workspace-identity.md: its Python snippets import only public names and its file
snippets run (a read tool that checks a result's directory, an agent and their test, on the
time-skipping server with the real search activities), so the page cannot rot. The same rules
as tests/test_readme.py."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest

from tests.test_readme import BLOCK, FILE_NAME, PUBLIC_MODULES

PAGE = Path(__file__).resolve().parents[1] / "docs" / "workspace-identity.md"


def snippets() -> list[str]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_has_its_snippets():
    """The tool, the agent and the test are files (a renamed one cannot slip out)."""
    names = [m["module"] for code in snippets() if (m := FILE_NAME.match(code))]
    assert names == ["read_tool", "read_agent", "test_read_agent"]
    assert PAGE.read_text().startswith("# ")


@pytest.mark.parametrize("index", range(len(snippets())))
def test_snippets_import_only_public_names(index):
    """Each fs_search import names a package front and a name in its __all__."""
    for node in ast.walk(ast.parse(snippets()[index])):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fs_search"):
            assert node.module in PUBLIC_MODULES, node.module
            public = importlib.import_module(node.module).__all__
            for alias in node.names:
                assert alias.name in public, f"{alias.name} is not in {node.module}.__all__"


async def test_the_file_snippets_run(tmp_path, monkeypatch):
    """The page's read tool and agent run under its own test, as a user would run it."""
    directory = tmp_path / "snippets"
    directory.mkdir()
    files = {m["module"]: code for code in snippets() if (m := FILE_NAME.match(code))}
    for module, code in files.items():
        (directory / f"{module}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    ran = []
    try:
        for module_name in files:
            module = importlib.import_module(module_name)
            for name, test in vars(module).items():
                if name.startswith("test_") and inspect.iscoroutinefunction(test):
                    (tmp_path / name).mkdir()
                    await test(tmp_path=tmp_path / name)
                    ran.append(name)
    finally:
        for module in files:
            sys.modules.pop(module, None)
    assert ran == ["test_read_follows_a_path_only_in_the_searched_directory"]
