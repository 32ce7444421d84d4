"""Every Python snippet of README.md and of the docs site (docs/) runs and imports only public
names, each page's install line brings what its snippets import, and the module map names every
module: the docs cannot rot.

A snippet whose first line is ``# <name>.py`` is a file. Each page's files are written into a
directory of their own on ``sys.path`` and imported (so a workflow module is re-imported by the
worker's sandbox exactly as a user's would be), and each ``test_*`` coroutine in them is run: a
page that needs a module of another page fails, so every page stands alone. Any other snippet
is run as a script with top-level ``await``, with the Temporal addresses it names pointing at
the session's dev server.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter

from fs_search.activities._config import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SHELL = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
FILE_NAME = re.compile(r"\A# (?P<module>[a-z_][a-z0-9_]*)\.py\n")
# Until a release is published, every page installs from a clone (the path is the reader's);
# the registry line is said beside it, for after a release.
CLONE = "/path/to/fs-search"
CLONE_INSTALL = re.compile(
    rf'pip install -e "?{re.escape(CLONE)}(?:\[(?P<extras>[a-z0-9,-]+)\])?"?(?=[\s`]|$)'
)
REGISTRY_INSTALL = re.compile(
    rf'pip install "?{DISTRIBUTION}(?:\[(?P<extras>[a-z0-9,-]+)\])?"?(?=[\s`]|$)'
)
# A framework page's "With a real model" block: not run by the page's test (it would call a
# provider), built offline instead (tests below).
REAL_MODEL = re.compile(r'^```python title="With a real model"\n(.*?)^```', re.S | re.M)
FRAMEWORK_PAGES = [p for p in sorted((DOCS / "frameworks").glob("*.md")) if p.name != "index.md"]
# The addresses the docs' client snippets connect to.
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
MODULE_MAP = DOCS / "how-it-works.md"
CODE_DIRS = ("activities", "workflows", "worker")


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def snippets(page: Path) -> list[str]:
    """A page's ```python blocks, in order."""
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def file_snippets(page: Path) -> dict[str, str]:
    """A page's snippets that are files, by module name, in page order."""
    found = {}
    for code in snippets(page):
        named = FILE_NAME.match(code)
        if named:
            found[named["module"]] = code
    return found


def script_snippets() -> list[tuple[Path, str]]:
    return [(page, code) for page in PAGES for code in snippets(page) if not FILE_NAME.match(code)]


# The files each page holds (a renamed one cannot slip out of the tests). Pages not listed
# here (new ones) are run all the same.
EXPECTED = {
    "README.md": ["my_agent", "test_my_agent"],
    "docs/getting-started.md": ["my_agent", "run_my_agent", "test_my_agent"],
    "docs/workflows.md": ["my_agent"],
    "docs/testing.md": ["my_agent", "test_my_agent"],
    "docs/frameworks/openai-agents.md": ["openai_search_agent", "test_openai_search_agent"],
    "docs/frameworks/pydantic-ai.md": ["pydantic_search_agent", "test_pydantic_search_agent"],
    "docs/frameworks/google-genai.md": ["gemini_search_agent", "test_gemini_search_agent"],
    "docs/frameworks/google-adk.md": ["adk_search_agent", "test_adk_search_agent"],
    "docs/frameworks/langgraph.md": ["langgraph_search_agent", "test_langgraph_search_agent"],
    "docs/frameworks/deep-agents.md": ["deep_search_agent", "test_deep_search_agent"],
    "docs/frameworks/strands.md": ["strands_search_agent", "test_strands_search_agent"],
    "docs/frameworks/agent-harness.md": ["harness_search_agent", "test_harness_search_agent"],
}
EXPECTED_TESTS = {
    "README.md": ["test_my_agent_reads_the_real_grep"],
    "docs/getting-started.md": ["test_my_agent_reads_the_real_grep"],
    "docs/testing.md": [
        "test_my_agent_reads_the_real_grep",
        "test_my_agent_with_canned_answers",
        "test_my_agent_without_a_worker",
    ],
}
RUNNABLE = [page for page in PAGES if file_snippets(page)]


def test_the_docs_have_the_snippets_this_test_runs():
    """Each page holds the files this test runs, and the client snippets are found."""
    found = {name(page): list(file_snippets(page)) for page in PAGES}
    for page, modules in EXPECTED.items():
        assert found.get(page) == modules, page
    assert len(script_snippets()) >= 2


def test_every_copy_of_the_example_agent_is_the_same():
    """The agent README, Getting started, Using it from workflows and Testing show is one."""
    copies = {name(page): file_snippets(page).get("my_agent") for page in PAGES}
    shown = {page: code for page, code in copies.items() if code}
    assert len(shown) >= 4 and len(set(shown.values())) == 1, sorted(shown)


@pytest.mark.parametrize(
    ("page", "index"),
    [(page, i) for page in PAGES for i in range(len(snippets(page)))],
    ids=lambda v: name(v) if isinstance(v, Path) else str(v),
)
def test_snippet_imports_only_public_names(page, index):
    """Each fs_search import in the docs names a package front and a name in its __all__."""
    code = snippets(page)[index]
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(alias.name.startswith("fs_search") for alias in node.names)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fs_search"):
            assert node.module in PUBLIC_MODULES, node.module
            public = importlib.import_module(node.module).__all__
            for alias in node.names:
                assert alias.name in public, f"{alias.name} is not in {node.module}.__all__"


@pytest.mark.parametrize("page", RUNNABLE, ids=name)
async def test_a_page_runs_its_tests_alone(page, tmp_path, monkeypatch):
    """A page's agent workflow and its time-skipping tests run, offline, as a user would,
    with nothing but the page's own files."""
    files = file_snippets(page)
    directory = tmp_path / "snippets"
    directory.mkdir()
    for module, code in files.items():
        (directory / f"{module}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    for module in files:
        sys.modules.pop(module, None)  # another page's file of the same name
    ran = []
    try:
        for module_name in files:
            module = importlib.import_module(module_name)
            for test_name, test in vars(module).items():
                if not (test_name.startswith("test_") and inspect.iscoroutinefunction(test)):
                    continue
                kwargs = {}
                if "tmp_path" in inspect.signature(test).parameters:
                    kwargs["tmp_path"] = tmp_path / test_name
                    kwargs["tmp_path"].mkdir()
                await test(**kwargs)
                ran.append(test_name)
    finally:
        for module in files:
            sys.modules.pop(module, None)
    if name(page) in EXPECTED_TESTS:
        assert ran == EXPECTED_TESTS[name(page)]
    assert ran or not any(m.startswith("test_") for m in files), "a test file ran no test"


@pytest.mark.parametrize("index", range(len(script_snippets())))
async def test_script_snippets_connect_a_pydantic_client(index, dev_env, monkeypatch):
    """The docs' client snippets run against a dev server and leave a client with our converter."""
    for variable in ("FS_SEARCH_SPILL_URL", "FS_SEARCH_S3_ENDPOINT_URL"):
        monkeypatch.delenv(variable, raising=False)
    page, code = script_snippets()[index]
    address = dev_env.client.service_client.config.target_host
    assert any(a in code for a in ADDRESSES)
    for a in ADDRESSES:
        code = code.replace(a, address)
    compiled = compile(code, f"{name(page)} snippet", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict = {"__name__": "docs_snippet"}
    awaitable = eval(compiled, namespace)
    if awaitable is not None:
        await awaitable
    client = namespace["client"]
    assert isinstance(client, Client)
    assert client.data_converter.payload_converter_class is PydanticPayloadConverter


@pytest.mark.parametrize("page", FRAMEWORK_PAGES, ids=name)
def test_a_framework_page_shows_a_real_model_that_builds_offline(page, tmp_path, monkeypatch):
    """Each framework page has a "With a real model" section: the provider's key variable by
    name and one block with the line that changes. The block runs offline as written (with
    stand-in keys, the page's own files importable): it builds the real model's plugin or
    model, and sends nothing."""
    text = page.read_text(encoding="utf-8")
    start = text.index("\n## With a real model\n")
    section = text[start : text.index("\n## ", start + 1)]
    [block] = REAL_MODEL.findall(section)
    assert REAL_MODEL.findall(text) == [block]
    keys = set(re.findall(r"`([A-Z][A-Z0-9_]*_API_KEY)`", section))
    assert keys, f"{name(page)} names no key variable"
    for key in keys:
        monkeypatch.setenv(key, "stand-in-key-never-sent")
    directory = tmp_path / "snippets"
    directory.mkdir()
    files = file_snippets(page)
    for module, code in files.items():
        (directory / f"{module}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    try:
        exec(compile(block, f"{name(page)} real model", "exec"), {"__name__": "real_model"})
    finally:
        for module in files:
            sys.modules.pop(module, None)


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


def pytest_settings(page: Path) -> list[str]:
    return [block for block in TOML.findall(page.read_text()) if "asyncio_mode" in block]


def test_every_page_with_a_test_gives_the_pytest_settings_that_run_it(tmp_path):
    """Each page with a test file gives the same pytest settings; they run an async test
    with warnings as errors, and without the loop scope line pytest-asyncio's deprecation
    warning comes back (so this check can fail)."""
    given = {
        name(page): pytest_settings(page)
        for page in RUNNABLE
        if any(module.startswith("test_") for module in file_snippets(page))
    }
    assert given and all(len(blocks) == 1 for blocks in given.values()), given
    [settings] = {blocks[0] for blocks in given.values()}
    ran = _pytest_in(tmp_path / "docs", settings)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr
    assert "warning" not in (ran.stdout + ran.stderr).lower()
    unset = "\n".join(line for line in settings.splitlines() if "loop_scope" not in line)
    ran = _pytest_in(tmp_path / "unset", unset)
    assert "asyncio_default_fixture_loop_scope" in ran.stdout + ran.stderr


def _requirements(distribution: str, extras: set[str]) -> set[str]:
    """The distributions ``distribution[extras]`` installs, itself included (normalised)."""
    seen: set[str] = set()
    todo = [(distribution, frozenset(extras))]
    while todo:
        dist, wanted = todo.pop()
        key = _normal(dist)
        if key in seen and not wanted:
            continue
        seen.add(key)
        for line in importlib.metadata.requires(dist) or []:
            req = Requirement(line)
            markers = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker and not any(req.marker.evaluate(m) for m in markers):
                continue
            if _normal(req.name) not in seen or req.extras:
                todo.append((req.name, frozenset(req.extras)))
    return seen


def _normal(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _third_party_imports(code: str, own: set[str]) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            tops |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module)
    return {
        module
        for module in tops
        if module.split(".")[0] not in sys.stdlib_module_names | own | {"fs_search"}
    }


@pytest.mark.parametrize("page", RUNNABLE, ids=name)
def test_a_pages_install_line_brings_what_its_snippets_import(page):
    """The page's install command, ``pip install -e "/path/to/fs-search[...]"`` (a clone, until
    a release), has extras that install every module its files import ([testing] for its
    tests), and the page gives the registry's ``pip install "fs-search-temporal[...]"`` with
    the same extras for after a release: following the page alone works."""
    files = file_snippets(page)
    text = page.read_text()
    blocks = SHELL.findall(text)
    lines = [m["extras"] or "" for block in blocks for m in CLONE_INSTALL.finditer(block)]
    assert lines, f"{name(page)} has no pip install -e {CLONE}[...] line"
    registry = [m["extras"] or "" for m in REGISTRY_INSTALL.finditer(text)]
    assert lines[0] in registry, f"{name(page)} gives no registry line with [{lines[0]}]"
    extras = set(lines[0].split(",")) - {""}
    declared = set(importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or [])
    assert extras <= declared, extras - declared
    installed = _requirements(DISTRIBUTION, extras)
    for module in sorted(_third_party_imports("\n".join(files.values()), set(files))):
        owner = _distribution_of(module)
        assert owner in installed, f"{module} ({owner}) is not installed by [{','.join(extras)}]"
    if any(module.startswith("test_") for module in files):
        assert "testing" in extras


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_no_command_installs_from_the_registry_before_a_release(page):
    """fs-search-temporal is not on the package registry: no command to run (a shell block)
    installs it from there; pages give that line in prose, labelled for after a release."""
    for block in SHELL.findall(page.read_text(encoding="utf-8")):
        commands = [line.split("#")[0] for line in block.splitlines()]
        found = [c for c in commands if REGISTRY_INSTALL.search(c)]
        assert found == [], f"{name(page)}: {found}"
        for command in commands:
            if "pip install" in command and "/path/to/" in command:
                assert CLONE_INSTALL.search(command), f"{name(page)}: {command}"
    for registry in REGISTRY_INSTALL.finditer(page.read_text(encoding="utf-8")):
        around = page.read_text(encoding="utf-8")[max(0, registry.start() - 400) : registry.end()]
        assert re.search(r"release|published", around), f"{name(page)}: {registry[0]} unlabelled"


@functools.cache
def _files_of_distributions() -> dict[str, str]:
    """Every installed file's absolute path -> the distribution that installed it."""
    owners = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or []:
            owners[str(Path(str(dist.locate_file(file))).resolve())] = _normal(
                dist.metadata["Name"]
            )
    return owners


def _distribution_of(module: str) -> str | None:
    """The distribution that installed ``module`` (by its file, so that namespaces such as
    ``google.*`` and ``temporalio.<integration>`` are told apart)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, module
    path = spec.origin if spec.has_location else None
    if path is None:
        path = str(Path(next(iter(spec.submodule_search_locations or []))) / "__init__.py")
    return _files_of_distributions().get(str(Path(path).resolve()))


def module_map() -> set[str]:
    """The files the module table of how-it-works.md names (`dir/a.py`, `b.py` share a
    directory)."""
    text = MODULE_MAP.read_text(encoding="utf-8")
    table = text[
        text.index("| module | owns |") : text.index("\n\n", text.index("| module | owns |"))
    ]
    named = set()
    for cell in MAP_ROW.findall(table):
        directory = ""
        for file in re.findall(r"`([^`]+)`", cell):
            if "/" in file:
                directory = file.rsplit("/", 1)[0]
                named.add(file)
            else:
                named.add(f"{directory}/{file}")
    return named


def test_module_map_names_every_module():
    """The module table lists exactly the code's modules (package fronts aside)."""
    modules = {
        p.relative_to(ROOT).as_posix()
        for d in CODE_DIRS
        for p in (ROOT / d).rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    }
    named = module_map()
    assert sorted(modules - named) == [], "modules missing from the module map"
    assert sorted(named - modules) == [], "the module map names modules that do not exist"


def test_readme_is_a_landing_page():
    """README stays short, names the distribution and says the registry's fs-search is not
    this project, and links every page of the docs site it lists."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 500
    assert f'pip install "{DISTRIBUTION}' in text
    assert re.search(r"`fs-search` on the package registry is an unrelated project", text)
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), link


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_prose_lines_fit_100_characters(page):
    """Prose lines (outside code blocks and tables) are at most 100 characters."""
    inside = False
    long = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside and not line.startswith("|") and len(line) > 100 and "](" not in line:
            long.append(number)
    assert long == [], f"{name(page)}: lines over 100 characters: {long}"


def test_ci_runs_readmes_test_command():
    """.ci/run installs and tests exactly as README's second quick-start command says."""
    [block] = [b for b in SHELL.findall(README.read_text()) if "-m pytest" in b]
    [command] = [line for line in block.splitlines() if "-m pytest" in line]
    steps = [step.strip() for step in command.split("&&")]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    at = 0
    for step in steps:  # each step in turn, on a line at or after the previous one's
        at = next(i for i in range(at, len(ci)) if step in ci[i].split(" && ") or step == ci[i])
    assert ci[at] == steps[-1], "README's test command is not .ci/run's"
    assert shlex.split(steps[-1])[-2:] == ["-m", "pytest"]


def test_the_cli_page_names_every_command_and_option():
    """docs/cli.md's synopsis names every subcommand and every option the parser has."""
    import argparse

    from fs_search.worker.cli import build_parser

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    missing = []

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    if f"fs-search {command}{sub}".replace("  ", " ") not in text:
                        missing.append(f"{command}{sub}")
                    walk(subparser, f"{command}{sub} ")
            for option in action.option_strings:
                if option.startswith("--") and option != "--help" and option not in text:
                    missing.append(f"{command}{option}")

    walk(build_parser(), "")
    assert missing == []
