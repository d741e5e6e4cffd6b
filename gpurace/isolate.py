"""Run a check where a crash of the device runtime cannot take the caller with it.

An OpenCL kernel that writes out of bounds runs on PoCL inside this process, on the
host's memory: it can corrupt the heap (a double free later) or fault (SIGSEGV), and
the whole process goes, with no report and no line. So an OpenCL check runs in a
forked child process; the child sends its Report (or its error) back through a pipe,
and a child that dies of a signal becomes one located GpuraceError (exit 2).

The command line turns this on (``enabled()`` around `gpurace check` and `gpurace
repeat`), where one fork costs a few milliseconds: the child does what the process
would have done, and exits. The Python API runs in-process unless
``GPURACE_ISOLATE=1``: a child per call would start the OpenCL runtime and build the
programs again each time (measured: 2 s a check instead of 0.2 s warm), and a
caller's monkeypatched counters would count in the child. ``GPURACE_ISOLATE=0``
turns the child off everywhere. Forking is only safe while this process has not
started an OpenCL runtime itself (its worker threads would not exist in the child),
so there is no child once ``pyopencl`` has been imported here (`gpurace run`, a
program that uses pyopencl): the check runs in-process, as before.

A kernel that never ends keeps PoCL's worker threads busy for ever; only the end of
their process stops them. So the child waits for each launch at most
$GPURACE_KERNEL_TIMEOUT seconds (`gpurace.watchdog`) and answers with the DeviceHang;
it posts each wait's deadline on a shared `watchdog.Board`, and a child still silent
`watchdog.GRACE_S` seconds past one is killed (SIGKILL) by the parent, which raises
the posted error itself.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import pickle
import select
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpurace import watchdog
from gpurace.model import DeviceHang, GpuraceError

T = TypeVar("T")

_in_child = False  # set in the child: it runs the work itself
_enabled = False  # set by the command line (enabled())


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """OpenCL checks and replays in a child process while the block runs."""
    global _enabled
    old, _enabled = _enabled, True
    try:
        yield
    finally:
        _enabled = old


def wanted() -> bool:
    """Whether the next OpenCL check should run in a child process (see the module)."""
    setting = os.environ.get("GPURACE_ISOLATE", "")
    return (
        (setting == "1" or (_enabled and setting != "0"))
        and hasattr(os, "fork")
        and not _in_child
        and "pyopencl" not in sys.modules
    )


def in_child_process() -> bool:
    """Whether this is a child that runs checks for its parent (``in_child``, `Worker`)."""
    return _in_child


def in_child(fn: Callable[[], T], crashed: Callable[[str], GpuraceError]) -> T:
    """``fn()`` run in a forked child; its result or exception comes back here.

    ``crashed(how)`` makes the error for a child that died without an answer (``how``
    names the signal and the runtime's last words). Ctrl-C or SIGTERM here ends the
    child too. When stderr is not a terminal the child's stderr is kept aside: passed
    on when it answers, dropped when it raises (clang's "1 error generated." after the
    error it explains), and folded into the one error line when it dies (glibc's
    "corrupted size vs. prev_size" would otherwise be a second line).
    """
    read_fd, write_fd = os.pipe()
    kept = None if _is_terminal(2) else tempfile.TemporaryFile()
    board = watchdog.Board()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        if kept is not None:
            os.dup2(kept.fileno(), 2)
        watchdog.board = board
        _serve(fn, write_fd)
    os.close(write_fd)
    try:
        data = _read_answer(read_fd, board)
        _, status = os.waitpid(pid, 0)
    except BaseException:  # interrupted or hung: the child must not outlive us
        _end(pid)
        _read_back(kept)
        raise
    said = _read_back(kept)
    if not data:
        last = [ln.strip() for ln in said.splitlines() if ln.strip()][-1:]
        raise crashed(": ".join([_how(status), *last]))
    kind, payload = pickle.loads(data)
    ok, value = _taken(kind, payload, said)
    if ok:
        return value
    raise value


def _read_answer(read_fd: int, board: watchdog.Board) -> bytes:
    """Everything the child writes to the pipe until it closes it; a DeviceHang (the
    child's posted error) when a launch it waits for is overdue (`watchdog.Board`)."""
    chunks: list[bytes] = []
    try:
        while chunk := _read_some(read_fd, 1 << 16, board):
            chunks.append(chunk)
    finally:
        os.close(read_fd)
    return b"".join(chunks)


def _read_some(fd: int, n: int, board: watchdog.Board) -> bytes:
    """Up to `n` bytes from the child's pipe (b"" once it is closed), waiting for them
    only while the child is not overdue on a launch; past that, its posted DeviceHang."""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.25)
        if ready:
            return os.read(fd, n)
        overdue = board.overdue()
        if overdue is not None:
            raise overdue


def _read_exact(fd: int, n: int, board: watchdog.Board) -> bytes:
    """`n` bytes from the child's pipe, or fewer where it closed it first."""
    chunks: list[bytes] = []
    while n and (chunk := _read_some(fd, n, board)):
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _serve(fn: Callable[[], Any], write_fd: int) -> None:
    """The child's side: run ``fn``, write the pickled outcome, leave at once (no
    atexit handlers or buffered output of the parent's run twice)."""
    global _in_child
    _in_child = True
    faulthandler.disable()  # a fault is reported by the parent, in one line, not as a stack
    try:
        answer = _answer(fn)
        try:
            data = pickle.dumps(answer)
        except Exception as err:  # an exception that does not pickle
            data = pickle.dumps(("raise", RuntimeError(f"{type(err).__name__}: {err}")))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(0)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _read_back(kept: Any) -> str:
    """What the child wrote to its stderr (kept aside in a temporary file)."""
    if kept is None:
        return ""
    with kept:
        kept.seek(0)
        return kept.read().decode("utf-8", errors="replace")


def _how(status: int) -> str:
    """A child's end, for the error: 'SIGSEGV', 'SIGKILL, perhaps out of memory'."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return name + (", perhaps out of memory" if sig == signal.SIGKILL else "")
    return f"exit status {os.WEXITSTATUS(status)}"


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


class Worker:
    """One child process for many checks (`gpurace check A B C`), so that they share
    its OpenCL context and built programs instead of starting them once per check.

    The child is forked at once (before this process starts any device API of its
    own, where the batch can) and runs ``fn`` on every item in turn, writing each
    outcome back as soon as it has it, so it works ahead while the caller does other
    inputs. ``take(i)`` returns item ``i``'s outcome in order: its result or the
    exception it raised (not raised here: the caller reports it and goes on). A child
    that dies on an item makes that item's ``crashed(how)`` error and a new child
    takes the rest; after a DeviceHang (its context is stuck) the child leaves and a
    new one takes the rest too. Each item's stderr is handled as ``in_child`` does.
    """

    def __init__(self, items: list[Any], fn: Callable[[Any], Any]) -> None:
        self.items, self.fn = items, fn
        self.answers: dict[int, tuple[str, Any, str]] = {}
        self.hung = False  # the child's last answer was a DeviceHang: it has left
        self.pid = 0
        self.fd = -1  # the read end of the current child's pipe
        self.board = watchdog.Board()  # its waits' deadlines (shared across the fork)
        self.kept: Any = None
        self._start(0)

    def _start(self, first: int) -> None:
        """Fork a child for items ``first`` onwards."""
        read_fd, write_fd = os.pipe()
        if self.kept is not None:
            self.kept.close()
        self.kept = None if _is_terminal(2) else tempfile.TemporaryFile()
        self.next, self.hung = first, False
        self.board.post(0.0, None)  # a killed child's wait is not the new one's
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            watchdog.board = self.board
            self._serve_all(first, write_fd)
        os.close(write_fd)
        self.pid, self.fd = pid, read_fd

    def _serve_all(self, first: int, write_fd: int) -> None:
        global _in_child
        _in_child = True
        faulthandler.disable()
        try:
            if self.kept is not None:
                os.dup2(self.kept.fileno(), 2)
            with os.fdopen(write_fd, "wb") as pipe:
                for i in range(first, len(self.items)):
                    if self.kept is not None:  # this item's stderr only
                        os.ftruncate(2, 0)
                        os.lseek(2, 0, os.SEEK_SET)
                    answer = _answer(functools.partial(self.fn, self.items[i]))
                    sys.stderr.flush()
                    said = _read_back_at(self.kept)
                    data = _pickled((*answer, said))
                    pipe.write(len(data).to_bytes(8, "little") + data)
                    pipe.flush()
                    if answer[0] == "gpurace" and issubclass(answer[1][0], DeviceHang):
                        break  # the context is stuck: a new child takes the rest
        finally:
            os._exit(0)

    def take(self, i: int, crashed: Callable[[str], GpuraceError]) -> Any:
        """Item ``i``'s result, or the exception it raised (items are taken in order)."""
        while i not in self.answers:
            try:
                size = _read_exact(self.fd, 8, self.board)
                n = int.from_bytes(size, "little") if len(size) == 8 else 0
                data = _read_exact(self.fd, n, self.board) if n else b""
            except DeviceHang as hang:  # the child did not report its own overdue launch
                fields = (type(hang), hang.message, hang.file, hang.line, hang.col)
                self.answers[self.next] = ("gpurace", fields, "")
                self.next += 1
                self.close()
                if self.next < len(self.items):
                    self._start(self.next)
                continue
            if data and len(data) == n:
                self.answers[self.next] = answer = pickle.loads(data)
                self.next += 1
                self.hung = answer[0] == "gpurace" and issubclass(answer[1][0], DeviceHang)
                continue  # else the child has ended: it died, or left after a hang
            status = self._reap()
            if not self.hung:  # died on item `next` (that is, i) without an answer
                words = [ln.strip() for ln in _read_back_at(self.kept).splitlines() if ln.strip()]
                error = crashed(": ".join([_how(status), *words[-1:]]))
                self.answers[self.next] = ("error", error, "")
                self.next += 1
            if self.next < len(self.items):
                self._start(self.next)
        return _taken(*self.answers.pop(i))[1]

    def _reap(self) -> int:
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return status

    def close(self) -> None:
        """End the child (an interrupted batch must not leave it running)."""
        if self.pid:
            os.close(self.fd)
            _end(self.pid)
            self.pid = 0
        if self.kept is not None:
            self.kept.close()


def _answer(fn: Callable[[], Any]) -> tuple[str, Any]:
    """A call's outcome as the child sends it: ("ok", result), ("gpurace", fields) or
    ("raise", exception)."""
    try:
        return ("ok", fn())
    except GpuraceError as err:
        return ("gpurace", (type(err), err.message, err.file, err.line, err.col))
    except BaseException as err:  # noqa: BLE001 (re-raised or reported by the parent)
        return ("raise", err)


def _taken(kind: str, payload: Any, said: str) -> tuple[bool, Any]:
    """An answer as the parent takes it: (True, the result), the child's stderr passed
    on, or (False, the exception it raised, rebuilt where it is gpurace's own)."""
    if kind == "ok":
        if said:
            sys.stderr.write(said)
        return True, payload
    if kind == "gpurace":
        cls, message, file, line, col = payload
        return False, cls(message, file, line, col)
    return False, payload


def _pickled(answer: tuple) -> bytes:
    try:
        return pickle.dumps(answer)
    except Exception as err:  # an exception that does not pickle
        return pickle.dumps(("raise", RuntimeError(f"{type(err).__name__}: {err}"), answer[-1]))


def _read_back_at(kept: Any) -> str:
    """What a child has written to its kept-aside stderr, read without moving the
    file offset the child writes at."""
    if kept is None:
        return ""
    return os.pread(kept.fileno(), 1 << 20, 0).decode("utf-8", errors="replace")
