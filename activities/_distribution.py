"""Which distribution this is, and whether another one claims the same names.

fs-search installs as ``fs-search-temporal``. The package registry's ``fs-search``
(0.1.x, an unrelated path-listing tool) installs the same import package ``fs_search`` (a
regular package: ``fs_search/__init__.py``, ``core``, ``main``, ``utils``) and the same
``fs-search`` command. fs-search's ``fs_search`` has no ``__init__.py`` of its own (three
portions under one namespace), so a ``fs_search`` with a ``__file__`` is another
distribution's. Installed distributions are found by their ``*.dist-info`` directories' names,
one name at a time: no scan of every installed distribution, and ``fs-search --version``
stays fast.
"""

from __future__ import annotations

import os
import re
import sys
from typing import NamedTuple

# The name to ``pip install``; the import package stays ``fs_search``, the command ``fs-search``.
DISTRIBUTION = "fs-search-temporal"
# Distributions known to install the import package ``fs_search`` and the command ``fs-search``.
CLASHING = ("fs-search",)


class Clash(NamedTuple):
    """Another distribution installed beside this one that claims ``fs_search`` or the
    ``fs-search`` command."""

    name: str
    version: str | None
    location: str | None

    def describe(self) -> str:
        """One line: what it is and where it is installed."""
        at = f" at {self.location}" if self.location else ""
        return f"{self.name} {self.version or '(unknown version)'}{at}"


def installed_version(name: str = DISTRIBUTION) -> str | None:
    """The installed version of ``name`` (None when it is not installed, e.g. a source tree)."""
    found = _dist_infos(name)
    if found:
        return found[0][0]
    import importlib.metadata  # not a *.dist-info directory (an .egg-info, say): ask it

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def clashes() -> list[Clash]:
    """The other distributions in this environment that install ``fs_search`` or the
    ``fs-search`` command (the registry's ``fs-search``)."""
    return [
        Clash(name, version, os.path.dirname(path))
        for name in CLASHING
        for version, path in _dist_infos(name)[:1]
    ]


def _dist_infos(name: str) -> list[tuple[str, str]]:
    """(version, path) of each ``<name>-<version>.dist-info`` directory on ``sys.path``, in
    path order: what pip installs (the name normalised to lowercase and underscores), read
    from the directories' names as ``importlib.metadata`` finds them, without importing it
    (it loads ``email``, ``csv`` and ``zipfile``: most of ``--version``'s time)."""
    prefix = re.sub(r"[-_.]+", "_", name).lower() + "-"
    found: list[tuple[str, str]] = []
    for entry in dict.fromkeys(sys.path):
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, a directory gone
            continue
        for candidate in names:
            lowered = candidate.lower()
            if lowered.startswith(prefix) and lowered.endswith(".dist-info"):
                version = candidate[len(prefix) : -len(".dist-info")]
                if version and "-" not in version:
                    found.append((version, os.path.join(entry or ".", candidate)))
    return found


def foreign_fs_search() -> str | None:
    """Where the ``fs_search`` Python imports is another project's regular package (its
    ``__init__.py``), or None when ``fs_search`` is fs-search's own namespace.

    Only the already-imported module is looked at: nothing is imported here.
    """
    package = sys.modules.get("fs_search")
    return getattr(package, "__file__", None) if package is not None else None


def clash_warning() -> str | None:
    """What ``fs-search --version`` warns about another distribution (None: no clash)."""
    others = clashes()
    foreign = foreign_fs_search()
    if not others and not foreign:
        return None
    lines = []
    if others:
        named = "; ".join(other.describe() for other in others)
        lines.append(
            f"warning: {named} is also installed here: an unrelated project with the same "
            "import package fs_search and the same command fs-search (whichever was "
            "installed last owns the command)"
        )
    if foreign:
        lines.append(
            f"warning: the import package fs_search is another project's ({foreign}); "
            f"{DISTRIBUTION}'s modules are fs_search.workflows, fs_search.worker and "
            "fs_search.activities"
        )
    lines.append(
        f"to keep {DISTRIBUTION} alone: pip uninstall {' '.join(CLASHING)}, then reinstall "
        f"{DISTRIBUTION} (pip install --force-reinstall --no-deps ...) to get its command "
        "back; `python -m fs_search.worker.cli` always runs this one"
    )
    return "\n".join(lines)


__all__ = [
    "CLASHING",
    "DISTRIBUTION",
    "Clash",
    "clash_warning",
    "clashes",
    "foreign_fs_search",
    "installed_version",
]
