"""The launch-wide shadow prefilter, shared by the WGSL and OpenCL backends.

A first instrumented run of a launch only marks a shadow (which work-items touch
each 4-byte word of the linear address order, and how); later runs of the same
launch log only the accesses to words where a conflict is possible (docs/internals.md
§2 for WGSL, §5 for OpenCL C). The shadow's layout is the same on both: a header of
SHADOW_HEAD words (mode, words covered, work-group size, a counter) and one (actor,
kinds) pair per word. What differs per backend is how a run gets the buffer and how
a built shadow is searched for a word that may conflict; the run logic is here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpurace.backends.common import LaunchResult

SHADOW_HEAD = 4  # the shadow's header: mode, words covered, work-group size, counter
SHADOW_OFF, SHADOW_BUILD, SHADOW_FILTER = 0, 1, 2


@dataclass
class Prefilter:
    """A launch-wide shadow that lets an instrumented launch log only the accesses to
    words where a conflict is possible: one run with `mode` SHADOW_BUILD marks it,
    later runs of the same launch filter with it (SHADOW_FILTER). It covers the first
    `words` 4-byte words of the linear address order; accesses beyond are always
    logged. `buf` is the backend's buffer (a wgpu.GPUBuffer, a pyopencl.Buffer)."""

    buf: object
    words: int
    wgsize: int
    mode: int = SHADOW_BUILD

    @property
    def nbytes(self) -> int:
        return (SHADOW_HEAD + 2 * self.words) * 4


def shadow_words(address_end: int, limit_bytes: int) -> int:
    """Words a shadow covers for an address order ending at `address_end`, in a buffer
    of at most `limit_bytes` (two u32 per word after the header)."""
    return max(1, min(-(-address_end // 4), limit_bytes // 8 - SHADOW_HEAD))


# launch(lo, hi, capacity, bins, width, prefilter=None) -> LaunchResult
Launch = Callable[..., LaunchResult]


def filtered_run(
    launch: Launch,
    pre: Prefilter | None,
    has_barriers: bool,
    shadow_may_conflict: Callable[[Prefilter], bool],
    full_range: int,
) -> Callable[..., LaunchResult]:
    """The `run(lo, hi, capacity, bins=0, width=0)` of a check's Target on top of a
    backend's `launch`.

    With `pre`, the first run builds the shadow (the whole address range, nothing
    logged), then every run filters with it; a run that touches memory in a way the
    build run did not see (`unseen`: a kernel whose accesses differ between runs) is
    repeated unfiltered, so the result stays exact. A kernel without barriers (no
    events) whose shadow has no word that may conflict would log nothing at all: the
    filter runs are skipped and report an empty log (with the build run's count of
    unattributed accesses). Without `pre`, every run logs unfiltered.
    """
    quiet: list[LaunchResult | None] = []  # the build run, when nothing needs logging

    def run(lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0) -> LaunchResult:
        if pre is None:
            return launch(lo, hi, capacity, bins, width)
        if pre.mode == SHADOW_BUILD:
            built = launch(0, full_range, 0, 0, 0, pre)
            pre.mode = SHADOW_FILTER
            quiet.append(None if has_barriers or shadow_may_conflict(pre) else built)
        if quiet[0] is not None:
            return LaunchResult({}, None, 0, capacity, unattributed=quiet[0].unattributed)
        result = launch(lo, hi, capacity, bins, width, pre)
        return launch(lo, hi, capacity, bins, width) if result.unseen else result

    return run
