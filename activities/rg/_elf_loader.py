"""The files a program's dynamic loader opens: what the Landlock ruleset grants beside rg.

Read once at start-up: the ELF ``PT_INTERP`` header names the loader, and the loader's own
``--list`` mode (what ``ldd`` runs; it resolves every library without running the program)
names each library it maps. Together with the loader's cache, these are the only files
outside the workspace that rg may read: never a whole system directory.
"""

from __future__ import annotations

import functools
import os
import struct
import subprocess

_PT_INTERP = 3
_LD_CACHE = "/etc/ld.so.cache"
_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


class LoaderUnknown(Exception):
    """The loader's files could not be determined (the message says why)."""


def interpreter(header: bytes) -> tuple[int, int] | None:
    """Pure: the file offset and size of the ``PT_INTERP`` path in an ELF image's first
    bytes, or None for a static executable.

    Raises:
        LoaderUnknown: not an ELF image, or its program headers lie beyond ``header``.
    """
    if header[:4] != b"\x7fELF" or header[4] not in (1, 2) or header[5] not in (1, 2):
        raise LoaderUnknown("not an ELF executable")
    wide = header[4] == 2
    order = "<" if header[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(order + "Q", header, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 0x36)
    else:
        (phoff,) = struct.unpack_from(order + "I", header, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 0x2A)
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + phentsize > len(header):
            raise LoaderUnknown("its program headers lie beyond the first page")
        (p_type,) = struct.unpack_from(order + "I", header, at)
        if p_type != _PT_INTERP:
            continue
        if wide:
            (offset,) = struct.unpack_from(order + "Q", header, at + 8)
            (size,) = struct.unpack_from(order + "Q", header, at + 32)
        else:
            (offset,) = struct.unpack_from(order + "I", header, at + 4)
            (size,) = struct.unpack_from(order + "I", header, at + 16)
        return offset, size
    return None


def listed_libraries(listing: str) -> list[str]:
    """Pure: the absolute paths in a loader's ``--list`` output (``ldd``'s format).

    Raises:
        LoaderUnknown: a library was not found.
    """
    paths = []
    for line in listing.splitlines():
        line = line.strip()
        if "=>" in line:
            name, _, where = line.partition("=>")
            where = where.strip()
            if where.startswith("not found"):
                raise LoaderUnknown(f"library {name.strip()} was not found")
            line = where
        path = line.split(" (", 1)[0].strip()
        if path.startswith("/"):
            paths.append(path)
    return paths


@functools.cache
def loader_files(program: str) -> tuple[str, ...]:
    """Every file the loader of ``program`` opens to start it: itself, the libraries and
    its cache (empty for a static program).

    Raises:
        LoaderUnknown: they could not be determined.
    """
    try:
        with open(program, "rb") as f:
            header = f.read(4096)
            where = interpreter(header)
            if where is None:
                return ()
            f.seek(where[0])
            interp = os.fsdecode(f.read(where[1]).split(b"\0", 1)[0])
    except OSError as e:
        raise LoaderUnknown(f"cannot read {program}: {e.strerror}") from None
    try:
        listed = subprocess.run(
            [interp, "--list", program],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=_ENV,
            cwd="/",
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LoaderUnknown(f"cannot run its loader {interp}: {e}") from None
    if listed.returncode != 0:
        detail = listed.stderr.decode("utf-8", "replace").strip()[:200]
        raise LoaderUnknown(f"its loader {interp} --list failed ({detail})")
    files = [interp, *listed_libraries(listed.stdout.decode("utf-8", "replace"))]
    if os.path.exists(_LD_CACHE):
        files.append(_LD_CACHE)
    return tuple(dict.fromkeys(files))
