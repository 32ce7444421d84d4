"""The documented install forms work from a user's own project directory, and the name clash
with the registry's unrelated ``fs-search`` is what the docs say it is.

One throwaway virtual environment (``--no-deps``: the forms are under test, not the
dependencies; ``fs-search --version`` needs none of them). The other project is a stand-in
built here with the same shape as ``fs-search`` 0.1.2 on the registry (its distribution name,
its regular package ``fs_search`` with ``__init__.py``, its ``fs-search`` command), so
nothing is downloaded but the build backend.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

from fs_search.activities._distribution import DISTRIBUTION, installed_version
from tests.test_readme import CLONE, CLONE_INSTALL, PAGES, SHELL

ROOT = Path(__file__).resolve().parents[1]
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
VERSION_LINE = f"fs-search ({DISTRIBUTION}) {installed_version()}"
# What the registry's fs-search 0.1.2 answers to `--version` (its argparse has no such option).
OTHER_USAGE = "usage: fs-search [-h] [-b BASE_PATH]"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, Path]:
    """An empty virtual environment and a project directory outside the clone."""
    root = tmp_path_factory.mktemp("install")
    venv.create(root / "venv", with_pip=True)
    (root / "project").mkdir()
    return {"venv": root / "venv", "project": root / "project", "root": root}


def run(env: dict[str, Path], *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command from the user's project directory, with the venv's bin/ first on PATH."""
    bin_dir = env["venv"] / "bin"
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PIP_REQUIRE")
    }
    clean["PATH"] = f"{bin_dir}{os.pathsep}{clean.get('PATH', '')}"
    clean["VIRTUAL_ENV"] = str(env["venv"])
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]] if (bin_dir / argv[0]).exists() else list(argv),
        cwd=env["project"],
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def documented_clone_forms() -> list[str]:
    """Every ``pip install -e "/path/to/fs-search[...]"`` command of the docs, as written."""
    forms = set()
    for page in PAGES:
        for block in SHELL.findall(page.read_text(encoding="utf-8")):
            forms |= {m[0] for m in CLONE_INSTALL.finditer(block)}
    return sorted(forms)


def test_the_docs_install_forms_are_the_ones_tested_here():
    """The pages' commands are the clone form (README's among them), and getting-started gives
    the other two forms this module runs."""
    forms = documented_clone_forms()
    assert 'pip install -e "/path/to/fs-search[testing]"' in forms, forms
    text = " ".join(GETTING_STARTED.read_text().split())
    assert 'pip install "/path/to/fs-search[testing]"' in text
    assert "fs-search-temporal[testing] @ file:///path/to/fs-search" in text


@pytest.fixture(scope="module")
def installed(env) -> dict[str, Path]:
    """README's command, as written but for the clone's path, run from the user's project."""
    [command] = [f for f in documented_clone_forms() if f.endswith('[testing]"')]
    argv = command.replace(CLONE, str(ROOT)).replace('"', "").split()
    assert argv[:3] == ["pip", "install", "-e"]
    p = run(env, *argv[:2], "--no-deps", *argv[2:])
    assert p.returncode == 0, p.stdout + p.stderr
    return env


def test_the_clone_form_installs_from_the_users_project(installed):
    """README's command, from a directory outside the clone, into an empty environment:
    ``fs-search --version`` names the distribution, with no warning (nothing else is there)."""
    env = installed
    answer = run(env, "fs-search", "--version")
    assert (answer.returncode, answer.stdout.strip(), answer.stderr) == (0, VERSION_LINE, "")
    module = run(env, "python", "-m", "fs_search.worker.cli", "--version")
    assert (module.returncode, module.stdout.strip()) == (0, VERSION_LINE), module.stderr


@pytest.mark.parametrize(
    "form",
    [f"{ROOT}[testing]", f"{DISTRIBUTION}[testing] @ file://{ROOT}"],
    ids=["path", "requirement-line"],
)
def test_the_other_clone_forms_resolve(env, form):
    """Getting started's copy install and its requirement line resolve to this clone."""
    p = run(env, "pip", "install", "--dry-run", "--no-deps", form)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"Would install {DISTRIBUTION}-{installed_version()}" in p.stdout, p.stdout


def _stand_in_wheel(directory: Path) -> Path:
    """A wheel shaped like the registry's fs-search 0.1.2: dist ``fs-search``, a regular
    package ``fs_search`` (``__init__``, ``main``), the command ``fs-search``."""
    dist_info = "fs_search-0.1.2.dist-info"
    files = {
        "fs_search/__init__.py": "",
        "fs_search/main.py": (
            "import sys\n\n\ndef main():\n"
            f"    print({OTHER_USAGE!r} + ' [-e EXCLUDE_EXTS] ...', file=sys.stderr)\n"
            "    print('fs-search: error: unrecognized arguments: ' + ' '.join(sys.argv[1:]),"
            " file=sys.stderr)\n"
            "    sys.exit(2)\n"
        ),
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\nName: fs-search\nVersion: 0.1.2\n"
            "Summary: CLI tool for listing paths in the base directory\n"
        ),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: fs-search-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
        f"{dist_info}/entry_points.txt": "[console_scripts]\nfs-search = fs_search.main:main\n",
        f"{dist_info}/top_level.txt": "fs_search\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / "fs_search-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


def test_the_name_clash_is_as_the_docs_say(installed):
    """With the other fs-search installed after this one: its command owns ``fs-search``;
    ``python -m fs_search.worker.cli --version`` still answers for this one and warns, naming
    it; imports of this project's modules keep working while ``fs_search`` itself is the
    other's; the documented recovery gives the command back."""
    env = installed
    other = run(env, "pip", "install", "--no-deps", str(_stand_in_wheel(env["root"])))
    assert other.returncode == 0, other.stdout + other.stderr

    theirs = run(env, "fs-search", "--version")
    assert theirs.returncode == 2 and theirs.stderr.startswith(OTHER_USAGE), theirs
    ours = run(env, "python", "-m", "fs_search.worker.cli", "--version")
    assert ours.returncode == 0 and ours.stdout.strip() == VERSION_LINE, ours
    assert re.search(r"warning: fs-search 0\.1\.2 at .* is also installed here", ours.stderr)
    assert "pip uninstall fs-search" in ours.stderr
    imports = run(
        env, "python", "-c",
        "import fs_search.worker.cli._parser as ours, fs_search; print(fs_search.__file__)",
    )  # fmt: skip
    assert imports.returncode == 0, imports.stderr
    assert imports.stdout.strip().endswith("site-packages/fs_search/__init__.py")

    # Getting started's recovery: uninstall the other, reinstall this one.
    for argv in (
        ("pip", "uninstall", "-y", "fs-search"),
        ("pip", "install", "--force-reinstall", "--no-deps", "-e", str(ROOT)),
    ):
        p = run(env, *argv)
        assert p.returncode == 0, p.stdout + p.stderr
    back = run(env, "fs-search", "--version")
    assert (back.returncode, back.stdout.strip(), back.stderr) == (0, VERSION_LINE, "")


def test_getting_started_quotes_the_answers_tested_here():
    """The clash section quotes the two answers of ``fs-search --version`` tested above."""
    text = " ".join(GETTING_STARTED.read_text().split())
    assert f"`{VERSION_LINE}`" in text
    assert f"`{OTHER_USAGE} ...`" in text
