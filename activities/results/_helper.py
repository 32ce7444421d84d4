"""A digest helper process: ``python -m fs_search.activities.results._helper [FD [SOCK]]``.

Reads requests from stdin and writes answers to stdout, one at a time. A request is a
length-prefixed pickle ``(job name, args, kwargs)`` followed by the raw rg output's length;
the output itself, sent as is (no pickling of megabytes), follows on the pipe whose
descriptor is the argument ``FD`` (on stdin when there is none). The answer is a
length-prefixed pickle ``("ok", result)`` or ``("error", exception)``. A helper runs only
the functions registered in :data:`JOBS` (the pure digests of
:mod:`fs_search.activities.results._digest`, and the modification times of a glob's
listing), looked up by name and called as ``job([raw], *args, **kwargs)``. A keyword
argument whose value is :data:`PASSED_FD` is a descriptor (a directory the job reads
beneath) that arrives first on the Unix socket ``SOCK`` (``SCM_RIGHTS``); the helper closes
it after the job. It exits when stdin closes, so it never outlives the worker that started
it.
"""

from __future__ import annotations

import gc
import os
import pickle
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _modified as modified

HEADER = struct.Struct("!Q")
# The value of a job's keyword argument that is a descriptor passed on the helper's socket.
PASSED_FD = "<descriptor passed on the socket>"


def job_name(job: Callable[..., Any]) -> str:
    """The name a job crosses the pipe as: its module and qualified name."""
    return f"{job.__module__}.{job.__qualname__}"


# The functions a helper may run, by name; nothing else from a request is ever called.
# Only grep's digest (and its part): a glob digest is bulk work on bytes (~0.1-0.4 s for
# 20 MB), which a helper did not speed up under concurrency while holding the output and
# its artifact several times over to ship them; any job not here runs in a thread.
JOBS: dict[str, Callable[..., Any]] = {
    job_name(job): job for job in (digest.digest_grep, digest.grep_part, modified.times)
}
# Jobs whose output may be split when one runs alone: the job's remainder-parsing part, run
# in a helper while the job parses the head in a thread (the job's ``rest`` argument).
SPLITS: dict[str, Callable[..., Any]] = {job_name(digest.digest_grep): digest.grep_part}


def frame(value: object) -> bytes:
    """A length-prefixed pickle."""
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)  # a buffered reader reads until it has `size` bytes or EOF
    return data if len(data) == size else None


def serve(
    stdin: BinaryIO,
    stdout: BinaryIO,
    data: BinaryIO | None = None,
    fds: socket.socket | None = None,
) -> None:
    """Answer requests until stdin closes; each request's output is read from ``data``
    (default: from stdin, after the request), its descriptors (:data:`PASSED_FD`) from
    ``fds``."""
    while True:
        header = _read_exactly(stdin, HEADER.size)
        if header is None:
            return
        body = _read_exactly(stdin, HEADER.unpack(header)[0])
        size = _read_exactly(stdin, HEADER.size)
        raw = _read_exactly(data or stdin, HEADER.unpack(size)[0]) if size is not None else None
        if body is None or raw is None:
            return
        name, args, kwargs = pickle.loads(body)
        passed = [k for k, v in kwargs.items() if isinstance(v, str) and v == PASSED_FD]
        received: list[int] = []
        if passed:
            received = _receive(fds, len(passed))
            if len(received) != len(passed):
                return  # the worker went away, or broke the protocol
            kwargs.update(zip(passed, received, strict=True))
        # A digest allocates a tuple or two per match and frees nothing cyclic: the cyclic
        # collector would only walk them over and over (a fifth of a large parse's time).
        gc.disable()
        try:
            answer: tuple[str, object] = ("ok", JOBS[name]([raw], *args, **kwargs))
        except Exception as e:  # noqa: BLE001 - every failure goes back to the caller
            answer = ("error", e)
        finally:
            gc.enable()
            for fd in received:
                os.close(fd)
        stdout.write(frame(answer))
        stdout.flush()


def _receive(fds: socket.socket | None, count: int) -> list[int]:
    """``count`` descriptors from the socket (fewer: it closed or sent others)."""
    if fds is None:
        return []
    got: list[int] = []
    while len(got) < count:
        message, passed, _, _ = socket.recv_fds(fds, 1, count - len(got))
        got += passed
        if not message:
            break
    return got


if __name__ == "__main__":
    # The arguments, when given: the descriptor of the pipe the output comes through, and
    # of the socket descriptors come through.
    serve(
        sys.stdin.buffer,
        sys.stdout.buffer,
        open(int(sys.argv[1]), "rb") if len(sys.argv) > 1 else None,  # noqa: SIM115
        socket.socket(fileno=int(sys.argv[2])) if len(sys.argv) > 2 else None,
    )
