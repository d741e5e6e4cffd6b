"""How a ``gpurace`` command ends (gpurace/cli.py): its exit status as design.md §3
fixes it, every failure as one error line on stderr (never a traceback by default),
SIGTERM unwound as Ctrl-C is, and a stuck or interrupted device left without the
interpreter's teardown."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

import click

from gpurace.model import DeviceHang, GpuraceError
from gpurace.options import debug_enabled

EXIT_ERROR = 2


def fail(message: str) -> NoReturn:
    """Print one error line to stderr and exit 2."""
    click.echo(message, err=True)
    sys.exit(EXIT_ERROR)


def exit_now(message: str) -> NoReturn:
    """Print one error line to stderr and exit 2 at once: no interpreter teardown,
    which would release a device that is still running (or stuck in) a launch."""
    click.echo(message, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_ERROR)


def guarded(fn: Callable[[], int]) -> NoReturn:
    """Run ``fn`` and exit with its code; turn every failure into one line and exit 2.

    Unexpected exceptions are bugs in gpurace, not in the user's input, but a CI log
    still reads better as one line; ``GPURACE_DEBUG=1`` shows the traceback.
    """
    _open_closed_streams()
    try:
        with _sigterm_as_interrupt():
            code = fn()
    except BrokenPipeError:  # the reader went away (`gpurace check ... | head -0`)
        _quiet_exit()
    except DeviceHang as err:  # the GPU context is stuck: exiting normally would wait on it
        exit_now(str(err))
    except KeyboardInterrupt as err:  # a launch may still be running (a WGSL check runs
        # in this process): tearing its device down under it can crash the exit (SIGSEGV)
        exit_now(f"error: interrupted{' (SIGTERM)' if isinstance(err, Terminated) else ''}")
    except Exception as err:  # the last line of defence: never a traceback by default
        fail(error_line(err))
    sys.exit(code)


def error_line(err: Exception) -> str:
    """The one line an error is reported as (a batch words each input's error so too).

    Unexpected exceptions are gpurace's bugs; with ``GPURACE_DEBUG=1`` they are raised
    again, to show the traceback."""
    import tomllib  # here, not at the top: `gpurace --help` imports only click and this

    if isinstance(err, GpuraceError):
        if err.file:
            from gpurace.report.common import relpath

            err.file = relpath(err.file)
        return str(err)
    if isinstance(err, tomllib.TOMLDecodeError):
        return f"error: invalid TOML: {err}"
    if isinstance(err, FileNotFoundError):
        return f"{err.filename}: error: file not found" if err.filename else f"error: {err}"
    if isinstance(err, OSError):
        where = f"{err.filename}: " if err.filename else ""
        return f"{where}error: {err.strerror or err}"
    if debug_enabled():
        raise err
    return (
        f"error: internal error: {type(err).__name__}: {err} "
        "(a gpurace bug; GPURACE_DEBUG=1 shows the traceback)"
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that it unwinds as Ctrl-C does: a
    check's child process is ended, the one error line printed, exit 2."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises Terminated while a command runs (signals can only be set from
    the main thread; elsewhere, as under some test runners, nothing changes)."""

    def terminate(signum: int, frame: object) -> None:
        raise Terminated()

    try:
        old = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _open_closed_streams() -> None:
    """A closed stdout or stderr (``>&-``) is None in Python: write to /dev/null
    instead, so that the check still runs and its exit status still says the verdict."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def _quiet_exit() -> NoReturn:
    """Leave without a word when stdout's reader has gone: point stdout at /dev/null
    so the interpreter's last flush does not fail too, and exit 2 (output was lost)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # a test's buffer
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_ERROR)
