"""A framework adapter imported without its extra says which ``pip install`` to run."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Importing the adapter in a fresh interpreter where the framework's package cannot be found,
# as on an install without the extra (``sys.modules[name] = None`` blocks the import).
MISSING = """
import sys
sys.modules[{module!r}] = None
try:
    import {adapter}
except ImportError as e:
    print(type(e).__name__, isinstance(e, ModuleNotFoundError), e.name)
    print(e)
else:
    print("imported")
"""


@pytest.mark.parametrize(
    ("adapter", "module", "extra"),
    [
        ("fs_search.workflows.openai_agents", "agents", "openai-agents"),
        ("fs_search.workflows.pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("fs_search.workflows.google_adk", "google.adk", "google-adk"),
        ("fs_search.workflows.strands", "strands", "strands"),
        ("fs_search.workflows.langchain", "langchain_core", "langgraph"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(adapter, module, extra):
    """The ImportError (a ModuleNotFoundError naming the missing module, so handlers of
    either still catch it) says ``pip install "fs-search-temporal[<extra>]"``."""
    p = subprocess.run(
        [sys.executable, "-c", MISSING.format(module=module, adapter=adapter)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    kind, message = p.stdout.strip().split("\n", 1)
    assert kind == f"ModuleNotFoundError True {module}"
    assert f'pip install "fs-search-temporal[{extra}]"' in message
    assert message.startswith(f"{adapter} needs the {extra} extra"), message


def test_the_extras_named_are_pyprojects():
    """The distribution and extras the messages name are the installed ones (pyproject's)."""
    from importlib.metadata import metadata

    from fs_search.activities._config import DISTRIBUTION

    assert metadata(DISTRIBUTION)["Name"] == DISTRIBUTION == "fs-search-temporal"
    extras = metadata(DISTRIBUTION).get_all("Provides-Extra") or []
    assert {"openai-agents", "pydantic-ai", "google-adk", "strands", "langgraph"} <= set(extras)
