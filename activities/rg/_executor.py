"""Run an rg argv: own process group, scrubbed env, streamed byte cap, deadline, kill on cancel."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from opentelemetry import trace

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities._held_root import HeldRoot
from fs_search.activities._progress import Progress
from fs_search.activities.rg._fifo_watch import watch_fifos
from fs_search.activities.rg._fork_client import Failure, Forked, ForkError, ForkServerClient
from fs_search.activities.rg._running_slots import RunningSlots
from fs_search.activities.rg._sandbox import CONFINEMENT_FAILED, Sandbox

log = logging.getLogger(__name__)

_CHUNK = 256 * 1024
_PIPE_BYTES = 1024 * 1024
_STDERR_KEEP = 64 * 1024
_COALESCE_BYTES = 1024 * 1024
# The environment rg sees: nothing from the worker's (no RIPGREP_CONFIG_PATH, no
# RIPGREP_*, no HOME-based git config). argv[0] is absolute, PATH is only for `timeout`.
_SCRUBBED_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
# Exit codes of coreutils `timeout` when it could not run the command at all.
_BACKSTOP_CANNOT_RUN = (126, 127)


def is_abort(returncode: int) -> bool:
    """Whether rg ended by SIGABRT: it aborts when an allocation fails under its
    address-space limit (a negative code from us, 128 + 6 through the backstop)."""
    return returncode in (-signal.SIGABRT, 128 + signal.SIGABRT)


class _Process(Protocol):
    """What the executor reads of a running group's leader: an asyncio ``Process`` (run
    directly) or a :class:`~fs_search.activities.rg._fork_client.Forked` (via the fork server)."""

    @property
    def pid(self) -> int: ...

    @property
    def stdout(self) -> asyncio.StreamReader | None: ...

    @property
    def stderr(self) -> asyncio.StreamReader | None: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@dataclass(frozen=True)
class RgRun:
    """A finished rg process: its exit code (negative: killed by that signal) and output.

    ``chunks`` is stdout in pieces of about 1 MiB (reads joined as they come), never joined
    whole: a consumer can parse it piece by piece without a second copy of the whole output
    in memory.
    """

    returncode: int
    chunks: list[bytes]
    stderr: str
    fifo_refused: bool = False  # killed blocked on a FIFO outside the workspace
    streamed: int = 0  # stdout bytes handed to the run's sink as they came (not in chunks)

    @property
    def stdout(self) -> bytes:
        """stdout as one bytes object (copies: for small outputs)."""
        return b"".join(self.chunks)

    @property
    def aborted(self) -> bool:
        """Whether rg aborted (SIGABRT): an allocation failed under its memory limit."""
        return is_abort(self.returncode)

    @property
    def produced_output(self) -> bool:
        """Whether rg wrote anything to stdout."""
        return self.streamed > 0 or any(self.chunks)


def default_backstop() -> str | None:
    """coreutils ``timeout``, used so rg dies at its budget even if the worker is SIGKILLed.

    Looked up in the fixed system directories only, never relative to a cwd.
    """
    return shutil.which("timeout", path=_SCRUBBED_ENV["PATH"])


class Executor:
    """Runs argvs (never shell strings) as process groups it can always kill.

    With a ``sandbox``, rg is started by the fork server
    (:mod:`~fs_search.activities.rg._fork_client`): spawned by a small process started once,
    confined there, its group killed by that server ``backstop_grace`` after the budget, and
    killed when the worker dies. Without one, the argv runs directly
    (under ``backstop`` when given).

    Args:
        backstop: path of coreutils ``timeout`` for argvs run directly (None: no backstop).
            They run under it with a SIGKILL deadline slightly beyond the call's budget, so
            one orphaned by a killed worker still dies on time.
        kill_grace: seconds between SIGTERM and SIGKILL when a search is cancelled.
        backstop_grace: seconds the backstop adds to a call's budget.
        sandbox: the restrictions (Landlock, limits) of every run; None runs
            the argv directly (tests of the executor itself).
        max_running: process groups running at once (None: no limit). A run beyond it
            waits (``phase: "queued"``) for one of the
            :class:`~fs_search.activities.rg._running_slots.RunningSlots`, round-robin between
            workspaces: however many calls the worker holds, no more
            rg groups run than this.
        max_running_per_key: groups one workspace may run at once (default: max_running).
    """

    def __init__(
        self,
        *,
        backstop: str | None = None,
        kill_grace: float = 0.5,
        backstop_grace: float = 2.0,
        sandbox: Sandbox | None = None,
        max_running: int | None = None,
        max_running_per_key: int | None = None,
    ) -> None:
        self._backstop = backstop
        self.sandbox = sandbox
        self._kill_grace = kill_grace
        self._backstop_grace = backstop_grace
        self._live: set[_Process] = set()
        self.fork_server = ForkServerClient(sandbox) if sandbox is not None else None
        self.max_running = max_running
        self.running_slots = RunningSlots(max_running, max_running_per_key) if max_running else None

    @property
    def live_process_groups(self) -> list[int]:
        """Process group ids of searches still running."""
        return [p.pid for p in self._live]

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | int,
        timeout_s: float,
        max_stdout: int,
        progress: Progress | None = None,
        tree: HeldRoot | None = None,
        nice: int = 0,
        key: str = "",
        queue_s: float = 0.0,
        sink: Callable[[bytes], None] | None = None,
    ) -> RgRun:
        """Run ``argv`` in ``cwd`` and collect its output.

        stdout is only counted while rg runs: output past the cap is rejected without
        having been parsed.

        Args:
            argv: the command; argv[0] is an absolute path.
            cwd: working directory: a descriptor of it (the program starts in exactly that
                directory, whatever its name leads to by then), or a trusted path.
            timeout_s: the budget; when it runs out the group is killed.
            max_stdout: stdout beyond this many bytes kills the group at once.
            progress: updated with the bytes read so far.
            tree: the only directory the program may read (Landlock, from its held
                descriptor), and where a FIFO it blocks on may be unblocked; None: nothing
                beyond the program itself.
            nice: the CPU niceness of the whole process group (0: unchanged).
            key: whose run this is (the workspace), for the running slots' fairness.
            queue_s: how long the run may wait for a slot beyond its own budget (the
                caller's queueing budget); waiting longer than ``queue_s`` eats into
                ``timeout_s``, and a run that gets a slot runs at most ``timeout_s``.
            sink: called on the event loop with each piece of stdout as it is read (within
                the cap), which is then not kept in the run's ``chunks``.

        Raises:
            SearchError: SEARCH_RAW_OUTPUT_OVERFLOW, SEARCH_ABORTED (budget), or
                SEARCH_FAILED (the program could not be started).
            asyncio.CancelledError: after the group was killed.
        """
        if self.running_slots is None:
            return await self._run(argv, cwd, timeout_s, max_stdout, progress, tree, nice, sink)
        waited = time.monotonic()
        wait_s = max(0.0, queue_s) + timeout_s
        if self.running_slots.busy(key) and progress is not None:
            progress.phase = "queued"
        try:
            async with asyncio.timeout(wait_s):
                await self.running_slots.acquire(key)
        except TimeoutError:
            raise _over_budget(wait_s, queued=True) from None
        try:
            if progress is not None:
                progress.phase = "rg"
            remaining = min(timeout_s, wait_s - (time.monotonic() - waited))
            if remaining <= 0:
                raise _over_budget(wait_s, queued=True)
            return await self._run(argv, cwd, remaining, max_stdout, progress, tree, nice, sink)
        finally:
            self.running_slots.release(key)

    async def _run(
        self,
        argv: Sequence[str],
        cwd: str | int,
        timeout_s: float,
        max_stdout: int,
        progress: Progress | None,
        tree: HeldRoot | None,
        nice: int,
        sink: Callable[[bytes], None] | None = None,
    ) -> RgRun:
        proc: _Process
        if self.fork_server is not None:
            proc = await self._fork(argv, cwd, timeout_s, tree, nice)
        else:
            proc = await self._spawn(argv, cwd, timeout_s, tree, nice)
        self._live.add(proc)
        # The breakdown's spawn/rg split (a no-op without an OpenTelemetry SDK).
        trace.get_current_span().add_event("fs_search.spawned")
        if progress is not None and progress.rg_started is None:
            progress.rg_started = time.monotonic()
        try:
            return await self._collect(proc, argv, timeout_s, max_stdout, progress, tree, sink)
        finally:
            self._live.discard(proc)

    async def _fork(
        self, argv: Sequence[str], cwd: str | int, budget_s: float, tree: HeldRoot | None, nice: int
    ) -> Forked:
        """Start ``argv`` through the fork server (sandboxed; backstop in the server)."""
        assert self.fork_server is not None
        opened = None
        if isinstance(cwd, str):
            try:
                opened = os.open(cwd, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                raise _cannot_enter(e.strerror) from e
        try:
            return await self.fork_server.spawn(
                argv,
                cwd=opened if opened is not None else int(cwd),
                readable=[tree.fd] if tree else [],
                env=_SCRUBBED_ENV,
                deadline_s=max(budget_s, 0.001) + self._backstop_grace,
                nice=nice,
                limit=_CHUNK,
                pipe_bytes=_PIPE_BYTES,
            )
        except (ForkError, OSError) as e:
            failure = e.failure if isinstance(e, ForkError) else Failure("spawn", 0, str(e))
            raise _start_failed(failure) from e
        finally:
            if opened is not None:
                os.close(opened)

    async def _spawn(
        self, argv: Sequence[str], cwd: str | int, budget_s: float, tree: HeldRoot | None, nice: int
    ) -> asyncio.subprocess.Process:
        """Start ``argv`` directly (no sandbox), under the backstop when there is one."""
        full = list(argv)
        inherit = [fd for fd in (cwd, tree.fd if tree else None) if isinstance(fd, int)]
        run_in = f"/proc/self/fd/{cwd}" if isinstance(cwd, int) else cwd
        if self._backstop:
            budget = max(budget_s, 0.001) + self._backstop_grace
            full = [self._backstop, "--signal=KILL", f"{budget:.3f}s", *full]
        try:
            proc = await asyncio.create_subprocess_exec(
                *full,
                # The kernel's own link to the open directory: the child changes into it.
                cwd=run_in,
                pass_fds=inherit,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=_SCRUBBED_ENV,
                start_new_session=True,
                limit=_CHUNK,
            )
        except OSError as e:
            if e.filename == run_in:
                # Named in our words: the path is the worker's, not the model's.
                raise _cannot_enter(e.strerror) from e
            # The program's path is the worker's installation: the log has it, the model not.
            log.error("could not start %s: %s", full[0], e)
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                f"ripgrep could not be started on this worker ({e.strerror or 'unknown error'})",
            ) from e
        if nice:
            # The group so far (the backstop; rg inherits it when forked).
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PGRP, proc.pid, nice)
        _widen_pipe(proc)
        return proc

    async def _collect(
        self,
        proc: _Process,
        argv: Sequence[str],
        timeout_s: float,
        max_stdout: int,
        progress: Progress | None,
        tree: HeldRoot | None,
        sink: Callable[[bytes], None] | None = None,
    ) -> RgRun:
        assert proc.stdout is not None and proc.stderr is not None
        stderr_task = asyncio.ensure_future(_read_bounded(proc.stderr, _STDERR_KEEP))
        watch = asyncio.ensure_future(watch_fifos(proc.pid, tree)) if tree else None
        chunks: list[bytes] = []
        # rg's writes arrive as reads of a few KiB: kept as they come, thousands of small
        # objects fragment the heap, which then keeps their memory after they are freed.
        # They are joined into ~1 MiB chunks (served by mmap, returned when freed).
        small: list[bytes] = []
        small_bytes = 0
        read = 0
        try:
            async with asyncio.timeout(timeout_s):
                while chunk := await proc.stdout.read(_CHUNK):
                    read += len(chunk)
                    if progress is not None:
                        progress.raw_bytes = read
                    if read > max_stdout:
                        self._signal_group(proc, signal.SIGKILL)
                        raise SearchError(
                            ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW,
                            f"the search produced more than {max_stdout} bytes of raw output "
                            "and was stopped; narrow the pattern, path or include",
                        )
                    if sink is not None:
                        sink(chunk)
                        continue
                    small.append(chunk)
                    small_bytes += len(chunk)
                    if small_bytes >= _COALESCE_BYTES:
                        chunks.append(_joined(small))
                        small, small_bytes = [], 0
                if small:
                    chunks.append(_joined(small))
                returncode = await proc.wait()
                stderr = await stderr_task
        except TimeoutError:
            await self._kill(proc)
            raise _over_budget(timeout_s, queued=False) from None
        except BaseException:
            # Cancellation (or overflow): the group dies before the error propagates.
            await self._kill(proc)
            raise
        finally:
            for task in (stderr_task, watch):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
        fifo_refused = bool(
            watch is not None and watch.done() and not watch.cancelled() and watch.result()
        )
        if fifo_refused:
            assert watch is not None
            log.warning(
                "rg was stopped blocked on a FIFO outside the workspace: %r", watch.result()
            )
        failure = proc.failure if isinstance(proc, Forked) else None
        if failure is not None:
            raise _start_failed(failure)
        if self.sandbox is not None and returncode == CONFINEMENT_FAILED:
            log.error("rg's confinement failed: %s", stderr.decode("utf-8", "replace")[:500])
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                "ripgrep could not be started in its sandbox on this worker",
            )
        if self._backstop and returncode in _BACKSTOP_CANNOT_RUN:
            log.error("the timeout backstop could not run %s (exit %d)", argv[0], returncode)
            raise SearchError(ErrorCode.SEARCH_FAILED, "ripgrep is not available on this worker")
        return RgRun(
            returncode=returncode,
            chunks=chunks,
            stderr=stderr.decode("utf-8", "replace"),
            fifo_refused=fifo_refused,
            streamed=read if sink is not None else 0,
        )

    async def _kill(self, proc: _Process) -> None:
        """SIGTERM the group, then SIGKILL it after the grace period; always reaps."""
        self._signal_group(proc, signal.SIGTERM)
        # Process.wait() also waits for the pipes to close: keep stdout flowing to its EOF
        # (discarding it), or a full, unread pipe would hold wait() for the whole grace.
        assert proc.stdout is not None
        drain = asyncio.ensure_future(_read_bounded(proc.stdout, 0))
        try:
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), self._kill_grace)
            except TimeoutError:
                pass
        finally:
            # Whatever happened (even a second cancel), nothing of the group survives.
            self._signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.wait())
            drain.cancel()

    @staticmethod
    def _signal_group(proc: _Process, sig: int) -> None:
        if isinstance(proc, Forked) and proc.returncode is not None:
            return  # reaped by the server: its pid may be another process's by now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)

    async def kill_all(self) -> None:
        """Kill every running search's process group (worker shutdown)."""
        procs = list(self._live)
        for proc in procs:
            self._signal_group(proc, signal.SIGKILL)
        for proc in procs:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(proc.wait(), 2)


def _cannot_enter(strerror: str | None) -> SearchError:
    return SearchError(
        ErrorCode.SEARCH_FAILED, f"the search directory cannot be entered: {strerror}"
    )


def _start_failed(failure: Failure) -> SearchError:
    """The contract error for a child that never became rg (details only in the log)."""
    if failure.stage == "chdir":
        return _cannot_enter(os.strerror(failure.errno) if failure.errno else failure.message)
    log.error("rg could not be started (%s): %s", failure.stage, failure.message[:500])
    if failure.stage == "exec":
        reason = os.strerror(failure.errno) if failure.errno else "unknown error"
        return SearchError(
            ErrorCode.SEARCH_FAILED, f"ripgrep could not be started on this worker ({reason})"
        )
    return SearchError(
        ErrorCode.SEARCH_FAILED, "ripgrep could not be started in its sandbox on this worker"
    )


def _over_budget(timeout_s: float, *, queued: bool) -> SearchError:
    if queued:
        return SearchError(
            ErrorCode.SEARCH_ABORTED,
            f"the search waited {_duration(timeout_s)} (its whole budget) for this worker's "
            "other searches to finish and did not run; try again, or narrow the searches",
        )
    return SearchError(
        ErrorCode.SEARCH_ABORTED,
        f"the search did not finish within its {timeout_s * 1000:.0f} ms budget "
        "and was stopped; narrow the pattern or path",
    )


def over_budget(timeout_s: float) -> SearchError:
    """SEARCH_ABORTED: a call's work did not fit its budget of ``timeout_s``."""
    return _over_budget(timeout_s, queued=False)


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads it: ms under 10 s, then s, then min."""
    if seconds < 10:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def _widen_pipe(proc: asyncio.subprocess.Process) -> None:
    """Grow rg's stdout pipe (64 KiB by default) so a fast rg blocks, and we wake, less often."""
    transport = getattr(proc, "_transport", None)
    pipe = transport.get_pipe_transport(1) if transport is not None else None
    fileobj = pipe.get_extra_info("pipe") if pipe is not None else None
    if fileobj is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    with contextlib.suppress(OSError, ValueError):  # ValueError: rg already done, pipe closed
        fcntl.fcntl(fileobj.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)


def _joined(pieces: list[bytes]) -> bytes:
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


async def _read_bounded(stream: asyncio.StreamReader, keep: int) -> bytes:
    """Read a stream to its end, keeping only its first ``keep`` bytes."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return bytes(kept)
