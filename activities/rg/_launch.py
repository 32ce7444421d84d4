"""Exec rg under resource limits and a Landlock ruleset (run as a script: stdlib only).

Run as ``python -I -S _launch.py [options] -- rg ...``, this process limits itself,
restricts itself with Landlock and then execs rg in place (same pid, same process group), so
rg inherits every restriction and nothing of the multi-threaded worker runs between fork and
exec. The worker's launch server (``_launch_server.py``) loads this file and applies the same
:func:`limit` and :func:`restrict` in each child it forks, without an interpreter per search.

Options:
  --memory-mb N       RLIMIT_AS for rg (no core files and no file writes always)
  --landlock-abi N    restrict with Landlock, using the ABI the worker probed at start-up
                      (0 or absent: no Landlock ruleset)
  --read-fd N         under Landlock, rg may read files and list directories beneath the
                      directory open as descriptor N (inherited from the worker, which holds
                      the workspace root: never a name looked up again here); may repeat;
                      none: rg can read nothing but itself and its loader's files
  --file PATH         under Landlock, rg's loader may read (and map) this one file; may
                      repeat (the worker lists exactly what rg's loader opens)

Every descriptor above 2 is closed before rg runs.

Exit 125 with one line on stderr when a restriction cannot be applied: rg never runs
unconfined by accident.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import struct
import sys

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = (1 << 0) | (1 << 1)  # bind and connect (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets and signals (ABI 6)
_FAILED = 125


@functools.cache
def _libc() -> ctypes.CDLL:
    # Once per process: a child forked by the launch server inherits it ready to call.
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


def restrict(abi: int, readable: list[int], files: list[str], executable: str) -> None:
    """Restrict this process (and what it execs) to reading beneath the directories open as
    ``readable``, reading ``files`` and running ``executable``."""
    enforce(ruleset(abi, readable, files, executable))


def ruleset(abi: int, readable: list[int], files: list[str], executable: str) -> int:
    """A Landlock ruleset (its descriptor) allowing only reading beneath the directories
    open as ``readable``, reading ``files`` and running ``executable``. The launch server
    builds it before forking (in the child, the same work cost ~0.8 ms a search)."""
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
    """Restrict this process (and what it execs) by ``ruleset`` (see :func:`ruleset`),
    which is closed."""
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


def main(argv: list[str]) -> None:
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    readable: list[int] = []
    files: list[str] = []
    memory_mb, abi = 0, 0
    for flag, value in zip(options[::2], options[1::2], strict=True):
        if flag == "--read-fd":
            readable.append(int(value))
        elif flag == "--file":
            files.append(value)
        elif flag == "--memory-mb":
            memory_mb = int(value)
        elif flag == "--landlock-abi":
            abi = int(value)
        else:
            raise ValueError(f"unknown option {flag}")
    if memory_mb:
        limit(memory_mb)
    if abi:
        restrict(abi, readable, files, command[0])
    # rg keeps nothing of the worker's: the workspace and cwd descriptors are done with.
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.execv(command[0], command)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, ValueError) as e:
        sys.stderr.write(f"fs-search sandbox: {e}\n")
        sys.exit(_FAILED)
