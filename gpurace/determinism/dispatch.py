"""Which replay runs a kernel: ``gpurace repeat``'s files, and ``gpurace run``'s launches.

One path from a kernel's language to its device API's ``repeat_*`` function, shared
by ``repeat_file`` and the ``gpurace run`` session: the registry's backend for the
language, whose ``replayer()`` names its function (`gpurace.interfaces.Backend`).
Each backend looks its function up on the ``gpurace.determinism`` package when
asked, so what a caller substitutes there (the tests replay a WGSL launch with
``keep_state`` through the CLI that way) is what runs; the OpenCL and CUDA replayers
are imported only when first used.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from gpurace import isolate
from gpurace.model import GpuraceError
from gpurace.options import Options

from .results import DEFAULT_RUNS, Progress, RepeatResult

#: Why a kernel of another language is not replayed.
NOT_REPLAYABLE = "determinism replay runs WGSL, OpenCL and CUDA kernels only"


def repeater(language: str, options: Options | None = None) -> Callable[..., RepeatResult]:
    """The ``repeat_*`` function of the device API that runs ``language`` kernels: the
    ``replayer()`` of the backend ``options`` name, else of the language's own."""
    from gpurace import registry

    if language not in registry.LANGUAGE_MODULES:
        raise GpuraceError(NOT_REPLAYABLE)
    return registry.backend_for(registry.language(language), options or Options()).replayer()


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

    def run() -> RepeatResult:
        # the replayer is looked up here, in the child where there is one: a backend
        # module imports its API (pyopencl), and a process that has cannot fork safely
        replay = repeater(language)
        return replay(source, spec, runs=runs, path=os.fspath(kernel_path), device=device,
                      entry=entry, progress=progress)  # fmt: skip

    if language == "opencl" and isolate.wanted():  # a replay that faults must not end us
        return isolate.in_child(run, lambda how: api.crashed(spec, entry, how))
    return run()
