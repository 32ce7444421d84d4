"""Lookups beneath a held directory: symlinks followed inside, nothing outside looked up."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fs_search.activities import _held_root as held_root
from fs_search.activities._held_root import HeldRoot, Missing, Outside, Unresolvable
from tests.helpers import Link, write_tree


@pytest.fixture(params=["openat2", "openat"])
def walk(request, monkeypatch) -> Iterator[str]:
    """Each test runs with openat2 (RESOLVE_BENEATH) and with the openat fallback."""
    if request.param == "openat" or not held_root.has_openat2():
        monkeypatch.setattr(held_root, "has_openat2", lambda: False)
    yield request.param


@pytest.fixture
def ws(tmp_path: Path, walk) -> Path:
    """A workspace with a nested source tree and a sibling directory outside it."""
    write_tree(tmp_path / "ws", {"src/a/x.py": "x\n", "src/b.py": "b\n", "docs/readme.md": "r\n"})
    write_tree(tmp_path / "outside", {"secret.txt": "s\n", "dir/f": "f\n"})
    return tmp_path / "ws"


def where(tree: HeldRoot, path: str, **kw) -> str:
    """The physical path ``path`` resolves to, relative to the root."""
    found = tree.resolve(path, **kw)
    found.close()
    return "/".join(found.parts)


def test_a_chain_of_symlinks_resolves_to_the_physical_path(ws):
    """Every link of a chain (relative, and absolute into the tree) is followed."""
    write_tree(ws, {"l1": Link("l2"), "l2": Link(ws / "l3"), "l3": Link("src/a")})
    tree = HeldRoot(ws)
    assert where(tree, "l1") == "src/a"
    assert where(tree, "l1/x.py") == "src/a/x.py"


def test_dotdot_after_a_symlink_climbs_from_where_the_link_led(ws):
    """``link/..`` is the link target's parent, as the kernel resolves it, not the link's."""
    write_tree(ws, {"docs/deep": Link(ws / "src" / "a")})
    assert where(HeldRoot(ws), "docs/deep/..") == "src"
    assert os.path.normpath(str(ws / "docs/deep/..")) == str(ws / "docs")  # the lexical trap


def test_a_symlink_loop_is_unresolvable(ws):
    """Two links pointing at each other are refused, not followed forever."""
    write_tree(ws, {"ping": Link("pong"), "pong": Link("ping")})
    with pytest.raises(Unresolvable, match="loop"):
        HeldRoot(ws).resolve("ping/x")


def test_more_than_forty_links_are_unresolvable_and_forty_are_fine(ws):
    """A chain of 41 links is refused (the kernel's MAXSYMLINKS); 40 resolve."""
    write_tree(
        ws, {"link0": Link("src"), **{f"link{i}": Link(f"link{i - 1}") for i in range(1, 41)}}
    )
    tree = HeldRoot(ws)
    assert where(tree, "link39") == "src"
    with pytest.raises(Unresolvable):
        tree.resolve("link40")


def test_a_file_in_the_middle_is_unresolvable(ws):
    """A non-directory before the last component cannot be walked through."""
    with pytest.raises(Unresolvable, match="not a directory"):
        HeldRoot(ws).resolve("src/b.py/x")


def test_a_missing_component_reports_where_the_path_points(ws):
    """A missing name raises Missing with the rest of the path joined lexically."""
    with pytest.raises(Missing) as info:
        HeldRoot(ws).resolve("src/nope/../x")
    assert info.value.parts == ("src", "x")


def test_a_nul_is_unresolvable(ws):
    """A NUL character never reaches the filesystem."""
    with pytest.raises(Unresolvable, match="NUL"):
        HeldRoot(ws).resolve("src\x00/a")


def test_start_is_where_a_relative_path_begins_and_dotdot_may_climb_to_the_root(ws):
    """A path relative to ``start`` may climb out of it, but not out of the tree."""
    tree = HeldRoot(ws)
    assert where(tree, "../docs", start=("src",)) == "docs"
    with pytest.raises(Outside):
        tree.resolve("../../outside", start=("src",))


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../outside/secret.txt",
        "../outside/nope",
        "../outside/secret.txt/x",
        "../outside/nope/x",
        "src/../../outside",
        "out",
        "out/secret.txt",
        "out/nope",
        "abs_out/dir",
        "abs_missing/x",
    ],
)
def test_every_way_out_is_outside_whatever_exists_there(ws, path):
    """``..`` past the root and links out (existing target or not) are Outside, one answer."""
    write_tree(
        ws,
        {
            "out": Link("../outside"),
            "abs_out": Link(ws.parent / "outside"),
            "abs_missing": Link(ws.parent / "nowhere"),
        },
    )
    with pytest.raises(Outside):
        HeldRoot(ws).resolve(path)


def test_absolute_paths_must_name_the_tree_by_its_own_name(ws, tmp_path):
    """An absolute path inside resolves; one that reaches the tree through ``..`` from
    elsewhere, or names anything else, is Outside without being looked up."""
    tree = HeldRoot(ws)
    assert where(tree, f"{ws}/src/a") == "src/a"
    for path in (
        "/etc/passwd",
        "/etc/passwd/x",
        "/etc/no_such/x",
        f"/etc/../{ws}/src",
        f"/no_such/../{ws}/src",
        f"{ws}/../ws/src",
        str(tmp_path / "outside" / "secret.txt"),
    ):
        with pytest.raises(Outside):
            tree.resolve(path)


def test_the_configured_name_of_a_linked_root_is_one_of_its_names(ws, tmp_path):
    """A root given through a symlink answers to that name too."""
    os.symlink(ws, tmp_path / "alias")
    tree = HeldRoot(tmp_path / "alias", names=[str(tmp_path / "alias")])
    assert tree.path == str(ws)
    assert where(tree, f"{tmp_path}/alias/src") == "src"
    assert where(tree, f"{ws}/src") == "src"


def test_the_held_root_keeps_its_meaning_when_its_name_is_replaced(ws, tmp_path):
    """Renaming the root and putting a link to the outside in its place changes nothing."""
    tree = HeldRoot(ws)
    os.rename(ws, tmp_path / "moved")
    os.symlink(tmp_path / "outside", ws)
    found = tree.resolve("src/b.py")
    with os.fdopen(os.open(f"/proc/self/fd/{found.fd}", os.O_RDONLY)) as f:
        assert f.read() == "b\n"
    found.close()
    with pytest.raises(Missing):
        tree.resolve("secret.txt")


def test_a_root_that_is_not_a_directory_is_refused(tmp_path, walk):
    """A file cannot be a tree."""
    write_tree(tmp_path, {"f": ""})
    with pytest.raises(NotADirectoryError):
        HeldRoot(tmp_path / "f")


def test_open_beneath_opens_directories_below_and_nothing_through_a_link_or_up(ws):
    """``open_beneath``: a relative directory below the descriptor; a symlink on the way or
    a ``..`` is refused, whatever it points at (each walk: openat2 and the fallback)."""
    os.symlink(ws.parent / "outside", ws / "out")
    os.symlink("src", ws / "inside")
    root = os.open(ws, os.O_PATH)
    try:
        fd = held_root.open_beneath(root, "src/a")
        try:
            assert os.path.samestat(os.fstat(fd), os.stat(ws / "src" / "a"))
        finally:
            os.close(fd)
        for path in ("out/dir", "inside/a", "../outside", "src/../../outside"):
            with pytest.raises(OSError):
                os.close(held_root.open_beneath(root, path))
    finally:
        os.close(root)
