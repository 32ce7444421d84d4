"""Which directory a workspace is: an opaque identity from its device, inode and birth time.

A search result carries the identity of the directory it ran in (``workspace.root``); a tool
on the same host computes the identity of the directory it is about to read with
:func:`workspace_identity` (``fs_search.worker.workspace_identity``) and follows the result's
paths only when the two agree. The same directory always gives the same value, whatever name
leads to it; a directory removed and re-created at the same path gives a new one (the birth
time differs even when the file system reuses the inode number). Where the kernel or file
system reports no birth time, device and inode alone are used: a re-created directory is
then told apart only while the old one is still held open (as a worker holds the last
directory it served).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import os
import platform
import stat
import struct

# statx(2): the same number on every architecture of the generic syscall table (arm64, riscv).
_SYS_STATX = {"x86_64": 332, "aarch64": 291, "arm64": 291, "riscv64": 291}
_AT_EMPTY_PATH = 0x1000
_STATX_BTIME = 0x800
_BUFFER = 256  # struct statx is 256 bytes
_BTIME_OFFSET = 80  # stx_btime: struct statx_timestamp {__s64 tv_sec; __u32 tv_nsec; ...}

Identity = tuple[int, int]


@functools.cache
def _statx() -> tuple[ctypes.CDLL, int] | None:
    number = _SYS_STATX.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc, number


def birth_ns(fd: int) -> int | None:
    """The birth time of what ``fd`` names (nanoseconds), or None where it is not known."""
    found = _statx()
    if found is None:
        return None
    libc, number = found
    buffer = ctypes.create_string_buffer(_BUFFER)
    done = libc.syscall(
        ctypes.c_long(number),
        ctypes.c_int(fd),
        ctypes.c_char_p(b""),
        ctypes.c_int(_AT_EMPTY_PATH),
        ctypes.c_uint(_STATX_BTIME),
        buffer,
    )
    if done != 0:
        return None
    (mask,) = struct.unpack_from("=I", buffer, 0)
    if not mask & _STATX_BTIME:
        return None
    seconds, nanos = struct.unpack_from("=qI", buffer, _BTIME_OFFSET)
    return seconds * 1_000_000_000 + nanos


def identity_of(fd: int) -> str:
    """The opaque identity of the directory ``fd`` names (any descriptor, ``O_PATH`` too).

    Raises:
        NotADirectoryError: ``fd`` names something else.
    """
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory")
    born = birth_ns(fd)
    basis = f"fs-search directory {st.st_dev} {st.st_ino} {'-' if born is None else born}"
    return hashlib.sha256(basis.encode()).hexdigest()[:32]


def workspace_identity(directory: str | os.PathLike[str] | int) -> str:
    """The opaque identity of a directory, by path (symlinks followed) or by descriptor.

    Compare it with a result's ``workspace.root`` before following the result's paths: equal
    means the search ran in this very directory. To check and then read without a race, open
    the directory once, pass its descriptor here, and open files relative to it
    (``dir_fd=``).

    Raises:
        OSError: it cannot be opened; NotADirectoryError: it is not a directory.
    """
    if isinstance(directory, int):
        return identity_of(directory)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return identity_of(fd)
    finally:
        os.close(fd)
