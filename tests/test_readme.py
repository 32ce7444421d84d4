"""Every Python snippet of README.md runs and imports only public names, and its module map
names every module: the docs cannot rot.

A snippet whose first line is ``# <name>.py`` is a file: it is written under that name into
a directory on ``sys.path`` and imported (so a workflow module is re-imported by the worker's
sandbox exactly as a user's would be), and each ``test_*`` coroutine in it is run. Any other
snippet is run as a script with top-level ``await``, with the Temporal addresses it names
pointing at the session's dev server.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FILE_NAME = re.compile(r"\A# (?P<module>[a-z_][a-z0-9_]*)\.py\n")
# The addresses README's client snippets connect to.
ADDRESSES = ("localhost:7233", "temporal.example:7233")
PUBLIC_MODULES = (
    "fs_search.workflows",
    "fs_search.worker",
    "fs_search.worker.testing",
    "fs_search.workflows.openai_agents",
    "fs_search.workflows.pydantic_ai",
    "fs_search.workflows.google_genai",
    "fs_search.workflows.agent_harness",
    "fs_search.workflows.google_adk",
    "fs_search.workflows.strands",
    "fs_search.workflows.langchain",
)


MAP_ROW = re.compile(r"^\| (`[^|]*`) \|", re.M)
CODE_DIRS = ("activities", "workflows", "worker")


def snippets() -> list[str]:
    """README's ```python blocks, in order."""
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def file_snippets() -> dict[str, str]:
    """The snippets that are files, by module name, in README order."""
    found = {}
    for code in snippets():
        named = FILE_NAME.match(code)
        if named:
            found[named["module"]] = code
    return found


def script_snippets() -> list[str]:
    return [code for code in snippets() if not FILE_NAME.match(code)]


def test_readme_has_the_snippets_this_test_runs():
    """The split into files and scripts finds README's examples (a renamed one cannot slip out)."""
    assert list(file_snippets()) == [
        "my_agent",
        "test_my_agent",
        "openai_search_agent",
        "test_openai_search_agent",
        "pydantic_search_agent",
        "test_pydantic_search_agent",
        "gemini_search_agent",
        "test_gemini_search_agent",
        "harness_search_agent",
        "test_harness_search_agent",
        "adk_search_agent",
        "test_adk_search_agent",
        "langgraph_search_agent",
        "test_langgraph_search_agent",
        "deep_search_agent",
        "test_deep_search_agent",
        "strands_search_agent",
        "test_strands_search_agent",
    ]
    assert len(script_snippets()) == 2
    assert len(snippets()) == 20


@pytest.mark.parametrize("index", range(len(snippets())))
def test_snippet_imports_only_public_names(index):
    """Each fs_search import in README names a package front and a name in its __all__."""
    tree = ast.parse(snippets()[index])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(alias.name.startswith("fs_search") for alias in node.names)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fs_search"):
            assert node.module in PUBLIC_MODULES, node.module
            public = importlib.import_module(node.module).__all__
            for alias in node.names:
                assert alias.name in public, f"{alias.name} is not in {node.module}.__all__"


@pytest.fixture
def snippet_dir(tmp_path, monkeypatch):
    """README's file snippets written out and importable; forgotten again afterwards."""
    directory = tmp_path / "snippets"
    directory.mkdir()
    files = file_snippets()
    for module, code in files.items():
        (directory / f"{module}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    yield files
    for module in files:
        sys.modules.pop(module, None)


async def test_file_snippets_run_their_tests(snippet_dir, tmp_path):
    """README's agent workflow and its time-skipping tests run, offline, as a user would."""
    ran = []
    for module_name in snippet_dir:
        module = importlib.import_module(module_name)
        for name, test in vars(module).items():
            if not (name.startswith("test_") and inspect.iscoroutinefunction(test)):
                continue
            kwargs = {}
            if "tmp_path" in inspect.signature(test).parameters:
                kwargs["tmp_path"] = tmp_path / name
                kwargs["tmp_path"].mkdir()
            await test(**kwargs)
            ran.append(name)
    assert ran == [
        "test_my_agent_reads_the_real_grep",
        "test_my_agent_with_canned_answers",
        "test_openai_agent_searches_the_workspace",
        "test_pydantic_agent_searches_the_workspace",
        "test_gemini_agent_searches_the_workspace",
        "test_harness_agent_searches_the_workspace",
        "test_adk_agent_searches_the_workspace",
        "test_langgraph_agent_searches_the_workspace",
        "test_deep_agent_searches_the_workspace",
        "test_strands_agent_searches_the_workspace",
    ]


@pytest.mark.parametrize("index", range(len(script_snippets())))
async def test_script_snippets_connect_a_pydantic_client(index, dev_env, monkeypatch):
    """README's client snippets run against a dev server and leave a client with our converter."""
    for name in ("FS_SEARCH_SPILL_URL", "FS_SEARCH_S3_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    code = script_snippets()[index]
    address = dev_env.client.service_client.config.target_host
    assert any(a in code for a in ADDRESSES)
    for a in ADDRESSES:
        code = code.replace(a, address)
    compiled = compile(code, f"README.md snippet {index}", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict = {"__name__": "readme_snippet"}
    awaitable = eval(compiled, namespace)
    if awaitable is not None:
        await awaitable
    client = namespace["client"]
    assert isinstance(client, Client)
    assert client.data_converter.payload_converter_class is PydanticPayloadConverter


TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
ASYNC_TEST = "async def test_runs():\n    assert True\n"


def _pytest_in(directory: Path, settings: str) -> subprocess.CompletedProcess[str]:
    """pytest on one async test under ``settings`` (a pyproject.toml), warnings as errors."""
    directory.mkdir()
    (directory / "pyproject.toml").write_text(settings, encoding="utf-8")
    (directory / "test_settings.py").write_text(ASYNC_TEST, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_readme_pytest_settings_run_async_tests_without_warnings(tmp_path):
    """README's pytest settings run an async test with warnings as errors; without the loop
    scope line pytest-asyncio's deprecation warning comes back (so this check can fail)."""
    [settings] = [block for block in TOML.findall(README.read_text()) if "asyncio_mode" in block]
    ran = _pytest_in(tmp_path / "readme", settings)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr
    assert "warning" not in (ran.stdout + ran.stderr).lower()
    unset = "\n".join(line for line in settings.splitlines() if "loop_scope" not in line)
    ran = _pytest_in(tmp_path / "unset", unset)
    assert "asyncio_default_fixture_loop_scope" in ran.stdout + ran.stderr


def module_map() -> set[str]:
    """The files README's module table names (`dir/a.py`, `b.py` share a directory)."""
    text = README.read_text(encoding="utf-8")
    table = text[
        text.index("| module | owns |") : text.index("\n\n", text.index("| module | owns |"))
    ]
    named = set()
    for cell in MAP_ROW.findall(table):
        directory = ""
        for name in re.findall(r"`([^`]+)`", cell):
            if "/" in name:
                directory = name.rsplit("/", 1)[0]
                named.add(name)
            else:
                named.add(f"{directory}/{name}")
    return named


def test_module_map_names_every_module():
    """README's module table lists exactly the code's modules (package fronts aside)."""
    root = README.parent
    modules = {
        p.relative_to(root).as_posix()
        for d in CODE_DIRS
        for p in (root / d).rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    }
    named = module_map()
    assert sorted(modules - named) == [], "modules missing from README's module map"
    assert sorted(named - modules) == [], "README's module map names modules that do not exist"
