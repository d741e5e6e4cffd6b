"""A launch that has not finished in time is an error, never a wait for ever.

A kernel whose loop never ends, or whose work-items wait at a barrier others never
reach, keeps the device busy for ever; a check that waits on it never reports. So
every backend waits for each of its launches (instrumented, plain or analysis) through
`finish` or `poll`, which give up after `Options.kernel_timeout_s` seconds
($GPURACE_KERNEL_TIMEOUT, ``--timeout``; default 60) with a `DeviceHang` naming the
kernel and the launch. The device is stuck with the kernel (PoCL's worker threads and
lavapipe's cannot be interrupted, nor can a GPU context be reset from here), so the
error only lets the process report and exit: the command line leaves with
``os._exit`` (cli.py), and an OpenCL check from the command line runs in a child
process (gpurace/isolate.py) that dies with its runaway kernel.

The child also posts each wait's deadline and error on a page shared with its parent
(`Board`): should the child not answer by the deadline and a grace period (a wait that
is not one of these, a runtime that holds the interpreter), the parent kills it and
reports the posted error itself. docs/compatibility.md, "Hangs".
"""

from __future__ import annotations

import mmap
import queue
import struct
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from gpurace.model import DeviceHang

T = TypeVar("T")

#: seconds the parent of an isolated check waits past a posted deadline for the
#: child's own report before it kills the child
GRACE_S = 3.0
_HEAD = struct.Struct("dI")  # the deadline (time.monotonic(), one clock for all
# processes) and the length of the error's text after it
_SIZE = 4096


class Board:
    """A page shared by an isolated child and its parent (made before the fork): the
    deadline of the wait in flight (0: none) and the error to give if it passes."""

    def __init__(self) -> None:
        self.page = mmap.mmap(-1, _SIZE)  # anonymous and shared across fork()

    def post(self, deadline: float, error: DeviceHang | None) -> None:
        """The child: a wait until `deadline` begins (with its error), or ends (0)."""
        text = b""
        if error is not None:
            text = f"{error.file or ''}\0{error.message}".encode()[: _SIZE - _HEAD.size]
            self.page[_HEAD.size : _HEAD.size + len(text)] = text
        self.page[: _HEAD.size] = _HEAD.pack(deadline, len(text))

    def overdue(self, grace: float = GRACE_S) -> DeviceHang | None:
        """The parent: the posted error when the wait in flight is past its deadline
        by more than `grace` seconds, else None."""
        deadline, length = _HEAD.unpack(self.page[: _HEAD.size])
        if not deadline or time.monotonic() < deadline + grace:
            return None
        text = self.page[_HEAD.size : _HEAD.size + length].decode(errors="replace")
        file, _, message = text.partition("\0")
        return DeviceHang(message, file)


board: Board | None = None  # set in an isolated child (isolate.in_child)


#: what usually keeps a CUDA launch from finishing (on a GPU or on sim)
CUDA_HANG_CAUSE = (
    "threads of a block wait at barriers that others never reach (barrier "
    "divergence), or a loop or spin-wait never ends"
)
# and where the kernel uses cooperative groups' grid.sync() (docs/ordering.md)
GRID_HANG_CAUSE = (
    ", or blocks wait at a grid.sync() that another block never reaches (every block "
    "must reach each one: a block that returns first leaves the others waiting)"
)


def hang(
    kernel: str, what: str, timeout: float, path: str, device: str, cause: str, stuck: bool = True
) -> DeviceHang:
    """The error for a launch of `kernel` (`what`: which launch) still running after
    `timeout` seconds on `device`; `cause` says what usually does that; `stuck`: the
    device cannot be used after it (a GPU, a driver's threads; not sim, which stops)."""
    where = f" ({what})" if what else ""
    then = "the device is stuck with it, so nothing" if stuck else "it was stopped and nothing"
    return DeviceHang(
        f"kernel '{kernel}' did not finish within {timeout:g} s on {device}{where}: "
        f"{cause}; {then} was checked "
        "(GPURACE_KERNEL_TIMEOUT=SECONDS or --timeout sets the limit)",
        path,
    )


def poll(done: Callable[[], bool], timeout: float, error: Callable[[], DeviceHang]) -> None:
    """Wait until `done()` (a cheap status query), at most `timeout` seconds, polling
    with a pause that grows from 20 µs to 1 ms; raise `error()` past the deadline."""
    deadline = time.monotonic() + timeout
    posted = _post(deadline, error)
    pause = 2e-5
    try:
        while not done():
            if time.monotonic() > deadline:
                raise error()
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)
    finally:
        if posted:
            _post(0.0, None)


def finish(block: Callable[[], T], timeout: float, error: Callable[[], DeviceHang]) -> T:
    """``block()`` (a blocking wait: ``queue.finish``, wgpu's ``read_buffer`` of a
    launch's results) run on the helper thread, waited for at most `timeout` seconds;
    past the deadline `error()` is raised and the helper is left blocked (a daemon: it
    does not hold the exit up; the next wait starts another). Its exception, if any,
    is raised here."""
    global _helper
    deadline = time.monotonic() + timeout
    posted = _post(deadline, error)
    job = _Job(block)
    try:
        helper = _helper
        if helper is None or not helper.is_alive():  # none yet, stuck, or a forked child's
            helper = _helper = _Helper()
        helper.jobs.put(job)
        if not job.done.wait(timeout):
            if _helper is helper:
                _helper = None  # stuck with the runaway launch
            raise error()
    finally:
        if posted:
            _post(0.0, None)
    if job.failed is not None:
        raise job.failed
    return job.value  # type: ignore[return-value]


class _Job:
    """One blocking wait handed to the helper thread, and what came of it."""

    def __init__(self, block: Callable[[], object]) -> None:
        self.block = block
        self.done = threading.Event()
        self.value: object = None
        self.failed: BaseException | None = None


class _Helper(threading.Thread):
    """The thread that does the blocking waits, kept across launches (starting one per
    wait cost 0.6 ms on a loaded 2-core machine; handing a job over costs tens of µs)."""

    def __init__(self) -> None:
        super().__init__(name="gpurace-wait", daemon=True)
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.start()

    def run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                job.value = job.block()
            except BaseException as exc:  # noqa: BLE001 (re-raised by the waiting thread)
                job.failed = exc
            job.done.set()


_helper: _Helper | None = None  # none yet, or the last one got stuck


def _post(deadline: float, error: Callable[[], DeviceHang] | None) -> bool:
    """Post a wait on the board, in an isolated child; whether there was one."""
    if board is None:
        return False
    board.post(deadline, error() if error is not None else None)
    return True
