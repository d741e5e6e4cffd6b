"""Which replay runs a kernel: ``gpurace repeat``'s files, and ``gpurace run``'s launches.

One table from a kernel's language to its device API's ``repeat_*`` function, shared
by ``repeat_file`` and the ``gpurace run`` session. The functions are looked up on
the ``gpurace.determinism`` package when called, so what a caller substitutes there
(the tests replay a WGSL launch with ``keep_state`` through the CLI that way) is
what runs; the OpenCL and CUDA replayers are imported only when first used.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from gpurace import isolate
from gpurace.model import GpuraceError

from .results import DEFAULT_RUNS, Progress, RepeatResult

#: Why a kernel of another language is not replayed.
NOT_REPLAYABLE = "determinism replay runs WGSL, OpenCL and CUDA kernels only"
#: The package attribute that replays a kernel of each language.
REPEATERS = {"wgsl": "repeat_kernel", "opencl": "repeat_opencl", "cuda": "repeat_cuda"}


def repeater(language: str) -> Callable[..., RepeatResult]:
    """The ``repeat_*`` function of the device API that runs ``language`` kernels."""
    import gpurace.determinism as package

    if language not in REPEATERS:
        raise GpuraceError(NOT_REPLAYABLE)
    return getattr(package, REPEATERS[language])


def repeat_file(
    kernel_path: str,
    launch_path: str,
    runs: int = DEFAULT_RUNS,
    device: str | None = None,
    entry: str | None = None,
    progress: Progress | None = None,
) -> RepeatResult:
    """``gpurace repeat``: read the kernel and launch files, then replay the launch on
    the kernel language's device API."""
    from gpurace import api

    language = api.language_of(kernel_path)
    source = api.read_kernel(kernel_path)
    spec = api.read_launch(launch_path, kernel_path)[1]
    run = functools.partial(
        repeater(language), source, spec, runs=runs, path=os.fspath(kernel_path),
        device=device, entry=entry, progress=progress,
    )  # fmt: skip
    if language == "opencl" and isolate.wanted():  # a replay that faults must not end us
        return isolate.in_child(run, lambda how: api.crashed(spec, entry, how))
    return run()
