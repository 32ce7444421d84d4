"""What confines each rg before the fork server starts it: resource limits and a Landlock
ruleset (stdlib only: the fork server, ``_fork_server.py``, loads this file); and the
kernel's Landlock ABI, probed once by the worker.

The fork server builds each search's ruleset (:func:`ruleset`: rg may read beneath the
directory it searches, held by descriptor, read the files its loader opens and run itself;
nothing else, and no write anywhere), and a thread of its own, started for that search,
enforces it on itself (:func:`enforce`: Landlock and ``no_new_privs`` hold for the calling
thread and whatever it starts) before it starts rg with ``posix_spawn``; the limits
(:func:`limit`) are the server's own, set once, and every rg inherits them. So rg inherits
every restriction, and nothing of the multi-threaded worker runs in between.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import struct

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = (1 << 0) | (1 << 1)  # bind and connect (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets and signals (ABI 6)


@functools.cache
def _libc() -> ctypes.CDLL:
    # Once per process: the fork server's threads share it, ready to call.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when it has none (or it is disabled)."""
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        got = libc.syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    except (OSError, AttributeError):
        return 0
    return max(int(got), 0)


def _fs_rights(abi: int) -> int:
    return _FS_RIGHTS_BY_ABI[max(k for k in _FS_RIGHTS_BY_ABI if k <= abi)]


def _check(libc: ctypes.CDLL, result: int, what: str) -> int:
    if result < 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def ruleset(abi: int, readable: list[int], files: list[str], executable: str) -> int:
    """A Landlock ruleset (its descriptor) allowing only reading beneath the directories
    open as ``readable``, reading ``files`` and running ``executable``."""
    libc = _libc()
    handled = _fs_rights(abi)
    attr = struct.pack("=Q", handled)
    if abi >= 4:
        attr += struct.pack("=Q", _NET_TCP)
    if abi >= 6:
        attr += struct.pack("=Q", _SCOPES)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd_ruleset = _check(
        libc,
        libc.syscall(
            ctypes.c_long(_SYS_CREATE_RULESET), buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)
        ),
        "landlock_create_ruleset",
    )

    def add(fd: int, rights: int, what: str) -> None:
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
        _check(
            libc,
            libc.syscall(
                ctypes.c_long(_SYS_ADD_RULE),
                ctypes.c_int(fd_ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                rule,
                ctypes.c_uint32(0),
            ),
            f"landlock_add_rule({what})",
        )

    try:
        for fd in readable:
            add(fd, _READ_FILE | _READ_DIR, f"descriptor {fd}")
        # Files only (a rule on a file takes file rights only): rg and its loader's files.
        for path, rights in [(executable, _EXECUTE | _READ_FILE)] + [
            (p, _EXECUTE | _READ_FILE) for p in files
        ]:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                add(fd, rights, path)
            finally:
                os.close(fd)
    except BaseException:
        os.close(fd_ruleset)
        raise
    return fd_ruleset


def enforce(ruleset: int) -> None:
    """Restrict the calling thread (and what it starts) by ``ruleset`` (see
    :func:`ruleset`), which is closed."""
    libc = _libc()
    try:
        _check(libc, libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(
            libc,
            libc.syscall(
                ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)
            ),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)


def limit(memory_mb: int) -> None:
    """Address space, no core files, no writes to regular files."""
    size = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
