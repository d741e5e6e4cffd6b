"""gpurace: data-race detection for GPU compute kernels, on the GPU.

``gpurace.check(source, launch)`` checks one launch and returns a Report (its knobs
in ``gpurace.Options``);
``gpurace.repeat(fn, runs=N)`` replays a function and compares its outputs bit for bit.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy, so that ``import gpurace`` (and the CLI's --help) does not load NumPy or
    # a GPU API until one of these is actually used.
    if name == "repeat":
        from gpurace.determinism import repeat

        return repeat
    if name == "check":
        from gpurace.api import check

        return check
    if name == "Options":
        from gpurace.options import Options

        return Options
    if name == "LaunchSpec":
        from gpurace.launch import LaunchSpec

        return LaunchSpec
    raise AttributeError(f"module 'gpurace' has no attribute {name!r}")
