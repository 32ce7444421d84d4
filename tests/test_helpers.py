"""write_tree, the one workspace fixture builder: files, links, FIFOs and directories."""

from __future__ import annotations

import os
import stat

import pytest

from tests.helpers import Dir, Fifo, Link, write_tree


def test_files_get_content_and_mtimes_increasing_in_mapping_order(tmp_path):
    """str and bytes are written as given (no newline translation); mtimes step by 1 s."""
    root = write_tree(
        tmp_path / "ws",
        {"z.txt": "one\r\n", "a/b/c.bin": b"\x00\xff", "m.txt": "", "a/é.txt": "é\n"},
        start_mtime=1_700_000_000,
    )
    assert root == tmp_path / "ws"
    assert (root / "z.txt").read_bytes() == b"one\r\n"
    assert (root / "a/b/c.bin").read_bytes() == b"\x00\xff"
    assert (root / "m.txt").read_bytes() == b""
    assert (root / "a/é.txt").read_bytes() == "é\n".encode()
    mtimes = [os.stat(root / rel).st_mtime for rel in ("z.txt", "a/b/c.bin", "m.txt", "a/é.txt")]
    assert mtimes == [1_700_000_000, 1_700_000_001, 1_700_000_002, 1_700_000_003]


def test_nested_and_empty_directories(tmp_path):
    """Parents are made as needed; Dir is an empty directory, with its mode if given."""
    root = write_tree(
        tmp_path,
        {"deep/er/still/f.txt": "x", "empty": Dir(), "locked": Dir(mode=0o500), "deep/d": Dir()},
    )
    assert (root / "deep/er/still/f.txt").read_text() == "x"
    for rel in ("empty", "locked", "deep/d"):
        assert (root / rel).is_dir() and not (root / rel).is_symlink()
        assert list((root / rel).iterdir()) == []
    assert stat.S_IMODE(os.stat(root / "locked").st_mode) == 0o500


def test_a_dir_mode_is_set_after_its_contents_are_written(tmp_path):
    """A read-only Dir can still be given contents listed after it."""
    write_tree(tmp_path, {"ro": Dir(mode=0o555), "ro/inner": Dir(mode=0o500), "ro/f.txt": "x"})
    try:
        assert (tmp_path / "ro/f.txt").read_text() == "x"
        assert stat.S_IMODE(os.stat(tmp_path / "ro").st_mode) == 0o555
        assert stat.S_IMODE(os.stat(tmp_path / "ro/inner").st_mode) == 0o500
    finally:
        os.chmod(tmp_path / "ro", 0o755)


def test_links_are_created_as_given_and_never_followed(tmp_path):
    """Relative and absolute targets are stored verbatim; setting mtimes leaves targets alone."""
    outside = write_tree(tmp_path / "outside", {"secret.txt": "s\n"}, start_mtime=1_000)
    root = write_tree(
        tmp_path / "ws",
        {
            "a.txt": "a\n",
            "rel": Link("../outside/secret.txt"),
            "abs": Link(outside / "secret.txt"),
            "dir": Link(outside),
            "b.txt": "b\n",
        },
    )
    assert os.readlink(root / "rel") == "../outside/secret.txt"
    assert os.readlink(root / "abs") == str(outside / "secret.txt")
    assert os.readlink(root / "dir") == str(outside)
    for rel in ("rel", "abs", "dir"):
        assert stat.S_ISLNK(os.lstat(root / rel).st_mode)
    # The target keeps its own content and mtime: nothing wrote or touched it through a link.
    assert (outside / "secret.txt").read_text() == "s\n"
    assert os.stat(outside / "secret.txt").st_mtime == 1_000
    assert os.stat(root / "b.txt").st_mtime == 1_600_000_004


def test_dangling_and_looping_links(tmp_path):
    """A link to nothing, to itself or in a cycle is created all the same."""
    root = write_tree(
        tmp_path,
        {"nowhere": Link("no/such/file"), "loop": Link("loop"), "a": Link("b"), "b": Link("a")},
    )
    for rel, target in (("nowhere", "no/such/file"), ("loop", "loop"), ("a", "b"), ("b", "a")):
        assert os.readlink(root / rel) == target
        assert not (root / rel).exists()  # dangling or looping: nothing behind it


def test_fifos(tmp_path):
    """Fifo is a named pipe, anywhere in the tree."""
    root = write_tree(tmp_path, {"pipe": Fifo(), "sub/.ignore": Fifo()})
    for rel in ("pipe", "sub/.ignore"):
        assert stat.S_ISFIFO(os.lstat(root / rel).st_mode)


def test_non_utf8_names(tmp_path):
    """A name that is not UTF-8 is given through os.fsdecode."""
    write_tree(tmp_path, {os.fsdecode(b"caf\xe9.txt"): b"x"})
    assert os.listdir(os.fsencode(tmp_path)) == [b"caf\xe9.txt"]


def test_adding_to_an_existing_tree(tmp_path):
    """A second call adds to the tree and may overwrite a regular file."""
    write_tree(tmp_path, {"a.txt": "old", "b.txt": "b"})
    write_tree(tmp_path, {"a.txt": "new", "c/d.txt": "d"}, start_mtime=1_700_000_000)
    assert [(tmp_path / n).read_text() for n in ("a.txt", "b.txt", "c/d.txt")] == ["new", "b", "d"]
    assert os.stat(tmp_path / "a.txt").st_mtime == 1_700_000_000


def test_nothing_is_written_through_a_planted_link(tmp_path):
    """A file, a link or a parent directory through a planted link is refused; outside is
    untouched."""
    outside = write_tree(tmp_path / "outside", {"secret.txt": "s\n"})
    ws = write_tree(
        tmp_path / "ws", {"leak.txt": Link(outside / "secret.txt"), "out": Link(outside)}
    )
    with pytest.raises(OSError):  # O_NOFOLLOW: ELOOP
        write_tree(ws, {"leak.txt": "overwritten\n"})
    for rel in ("out/new.txt", "out/x/y.txt"):
        with pytest.raises(ValueError, match="symlink"):
            write_tree(ws, {rel: "x"})
    with pytest.raises(ValueError, match="symlink"):
        write_tree(ws, {"out/link": Link("/")})
    assert (outside / "secret.txt").read_text() == "s\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


@pytest.mark.parametrize("rel", ["/abs.txt", "../up.txt", "a/../../up.txt", "", "."])
def test_keys_must_name_a_place_inside_the_tree(tmp_path, rel):
    """Absolute keys, `..` and the root itself are refused before anything is made."""
    with pytest.raises(ValueError, match="inside the tree"):
        write_tree(tmp_path / "ws", {rel: "x"})
    assert not (tmp_path / "ws").exists() and not (tmp_path / "up.txt").exists()


@pytest.mark.parametrize("entry", [Link("x"), Fifo(), Dir()])
def test_special_entries_must_be_new(tmp_path, entry):
    """A link, FIFO or directory is never laid over an existing name."""
    write_tree(tmp_path, {"taken": "x"})
    with pytest.raises(FileExistsError):
        write_tree(tmp_path, {"taken": entry})
    assert (tmp_path / "taken").read_text() == "x"


def test_an_unknown_value_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="not a tree entry"):
        write_tree(tmp_path, {"n": 3})  # type: ignore[dict-item]
