"""Determinism checks: run the same work many times from the same state, compare bits.

A race detector only sees the races a launch exposes; the cheaper, complementary
question is whether repeated runs give the same bits at all. Tolerance tests let
run-to-run differences pass as "precision" (docs/determinism.md tells the story),
so this package answers that question directly and, when runs differ, says where
and by how much.

Two entry points, both returning a ``RepeatResult`` (``results``) whose statistics
come from ``statistics.diff_outputs`` and whose text and JSON are ``formatting``'s:

* ``repeat`` (``gpurace.repeat``; ``function``) calls any Python function N times
  and compares the arrays it returns, for whole multi-kernel solves in a test suite.
* ``repeat_file`` (``gpurace repeat``; ``dispatch``) replays one launch on the
  device API of the kernel's language: ``replay_wgpu.repeat_kernel`` (WGSL),
  ``replay_opencl.repeat_opencl`` (OpenCL C), ``replay_cuda.repeat_cuda`` (CUDA,
  PTX), as each backend's ``replayer()`` names it (``dispatch.repeater``). Each is
  a ``replay.Replayer`` and a ``prepare`` driven by the shared ``replay.repeat_launch``.

Modules import only downwards (results/formatting, statistics, function, replay,
the replayers, dispatch), never this package, so there is no import cycle;
``repeat_opencl`` and ``repeat_cuda`` are loaded on first use (the CUDA one loads
the PTX rewriter).
"""

from __future__ import annotations

from typing import Any

from .dispatch import NOT_REPLAYABLE, repeat_file, repeater
from .formatting import format_text, write_json
from .function import RepeatSummary, assert_deterministic, repeat, repeat_each
from .replay import (
    HASH_GROUPS,
    HASH_WORDS,
    HASH_WORKGROUP,
    Replayer,
    ReplayOptions,
    ReplayOutput,
    hash_words,
    repeat_launch,
    replay_and_compare,
    words_of,
)
from .replay_wgpu import repeat_kernel
from .results import (
    DEFAULT_RUNS,
    MAX_KEPT,
    Difference,
    DistinctResult,
    OutputDiff,
    Progress,
    RepeatResult,
)
from .statistics import diff_outputs, type_name

__all__ = [
    "DEFAULT_RUNS",
    "HASH_GROUPS",
    "HASH_WORDS",
    "HASH_WORKGROUP",
    "MAX_KEPT",
    "NOT_REPLAYABLE",
    "Difference",
    "DistinctResult",
    "OutputDiff",
    "Progress",
    "RepeatResult",
    "RepeatSummary",
    "ReplayOptions",
    "ReplayOutput",
    "Replayer",
    "assert_deterministic",
    "diff_outputs",
    "format_text",
    "hash_words",
    "repeat",
    "repeat_cuda",
    "repeat_each",
    "repeat_file",
    "repeat_kernel",
    "repeat_opencl",
    "repeat_launch",
    "repeater",
    "replay_and_compare",
    "type_name",
    "words_of",
    "write_json",
]


def __getattr__(name: str) -> Any:
    # Lazy: the CUDA replayer imports the PTX rewriter (a second of start-up), and
    # neither is needed to replay WGSL or to repeat a function.
    if name == "repeat_opencl":
        from .replay_opencl import repeat_opencl

        return repeat_opencl
    if name == "repeat_cuda":
        from .replay_cuda import repeat_cuda

        return repeat_cuda
    raise AttributeError(f"module 'gpurace.determinism' has no attribute {name!r}")
