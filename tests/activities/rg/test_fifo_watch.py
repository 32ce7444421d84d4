"""The FIFO guard's system call tables: the path-opening calls of every architecture we ship."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fs_search.activities.rg._fifo_watch import OPEN_SYSCALLS, blocked_open, open_syscalls

POINTER = 0x7FFDDEADBEEF
AT_FDCWD_HEX = "0xffffff9c"  # -100 as /proc shows an int argument


def line(number: int, *args: int | str) -> str:
    """A /proc/<pid>/task/<tid>/syscall line: number, six arguments, sp, pc."""
    shown = [a if isinstance(a, str) else hex(a) for a in args]
    shown += ["0x0"] * (6 - len(shown))
    return " ".join([str(number), *shown, "0x7ffd00000000", "0x7f0000000000"])


@pytest.mark.parametrize(
    ("machine", "number", "args", "expected"),
    [
        ("x86_64", 2, [POINTER, 0], (-100, POINTER)),  # open(path, flags)
        ("x86_64", 257, [AT_FDCWD_HEX, POINTER, 0], (-100, POINTER)),  # openat
        ("x86_64", 257, [7, POINTER, 0], (7, POINTER)),
        ("x86_64", 437, [7, POINTER, 0x1234, 24], (7, POINTER)),  # openat2
        ("x86_64", 56, [0, 0], None),  # clone on x86_64, not an open
        ("aarch64", 56, [AT_FDCWD_HEX, POINTER, 0], (-100, POINTER)),  # openat on arm64
        ("aarch64", 437, [9, POINTER, 0x1234, 24], (9, POINTER)),
        ("aarch64", 257, [7, POINTER], None),  # not a syscall that opens on arm64
        ("aarch64", 2, [POINTER], None),  # arm64 has no open(2)
        ("arm64", 56, [5, POINTER], (5, POINTER)),  # the name some systems give aarch64
        ("amd64", 257, [5, POINTER], (5, POINTER)),
    ],
)
def test_each_architecture_reads_the_path_from_its_own_calls(machine, number, args, expected):
    """A blocked open is recognised by that architecture's numbers and nobody else's."""
    assert blocked_open(line(number, *args), open_syscalls(machine)) == expected


def test_an_unknown_architecture_recognises_nothing():
    """With no table, no blocked open is ever identified (the guard kills the group instead)."""
    assert open_syscalls("sparc64") == {}
    assert blocked_open(line(257, 5, POINTER), open_syscalls("sparc64")) is None


def test_a_malformed_line_is_not_an_open():
    """Whatever /proc shows for a thread that is not in a system call, nothing is read."""
    for shown in ("running", "-1 0x7ffd 0x7f", ""):
        assert blocked_open(shown, open_syscalls("x86_64")) is None


HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),  # arm64 and riscv64 use the generic table
    "riscv64": Path("/usr/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("machine", sorted(OPEN_SYSCALLS))
def test_the_tables_match_the_kernel_headers(machine):
    """Each table's numbers are the kernel's own (read from the installed UAPI headers)."""
    header = HEADERS[machine]
    if not header.exists():
        pytest.skip(f"{header} is not installed")
    text = header.read_text()
    numbers = {
        name: int(n) for name, n in re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", text)
    }
    names = {"x86_64": ("open", "openat", "openat2")}.get(machine, ("openat", "openat2"))
    assert sorted(OPEN_SYSCALLS[machine]) == sorted(numbers[name] for name in names)
