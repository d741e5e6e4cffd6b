"""The shadow prefilter, shared by the WGSL and OpenCL backends.

A first instrumented run of a launch only marks shadows (which work-items touch
each 4-byte word of the linear address order, and how; and, per work-group, which
local-memory words may conflict in which local epoch); later runs of the same
launch log only the accesses to words where a conflict is possible
(docs/internals.md §2 for WGSL, §5 for OpenCL C). The buffer's layout is the same
on both APIs:

- a header of SHADOW_HEAD words (their names, SHD_*, are gpurace/abi.py's): [0]
  mode, [1] launch-wide words covered `W`, [2] work-items per group, [3] in a build
  run 1 if an access touched a word beyond the shadow, in a filter run the *unseen*
  counter, [4] local words per group `L`, [5] groups covered by the local area `G`,
  [6] the local area's offset in words (`SHADOW_HEAD + 2 W`), [7] 0, which a WGSL
  build run sets on a workgroup access beyond its variable or when its banked local
  states meet accesses out of barrier order (`SHD_LOCAL_OOB`);
- the launch-wide area: one (actor, kinds) pair per word of the linear address
  order, for words `[0, W)`;
- the local area (when `L * G > 0`): `G * L` *state* words (group-major: word
  `[6] + g * L + lw`), then `G * L` *mask* words (at `[6] + G * L + g * L + lw`);
  `lw` is a word of the group's *local order* (the kernel's local/workgroup
  variables in id order, each from a whole word, `ceil(size / 4)` words each).
  A state packs the word's current local epoch's summary: bits 0-12 actor
  (local index + 1; 0 empty; 0x1fff several, or a local index of 0x1ffe or more),
  bits 13-15 kinds (load, store, atomic), bits 16-31 the epoch (mod 2^16). A mask
  has bit `e % 32` set when local epoch `e` of that word may hold a conflict. The
  host zeroes the states before every run; the masks a build run sets are kept.

What differs per backend is how a run gets the buffer and how a built shadow is
searched for a word that may conflict; the run logic is here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpurace.abi import (  # noqa: F401 - MAX_EVENT_SLOT_GROUPS re-exported for the backends
    KB_ATOMIC,
    KB_LOAD,
    KB_STORE,
    MAX_EVENT_SLOT_GROUPS,
    MULTI,
    PAIR_WORDS,
    SHADOW_BUILD,
    SHADOW_FILTER,
    SHADOW_HEAD,
    SHADOW_OFF,
    SHD_LGROUPS,
    SHD_LOCAL_OOB,
    SHD_LOFF,
    SHD_LWORDS,
    SHD_MODE,
    SHD_UNSEEN,
    SHD_WGSIZE,
    SHD_WORDS,
)
from gpurace.backends.common import LaunchResult
from gpurace.model import Space


@dataclass
class Prefilter:
    """Shadows that let an instrumented launch log only the accesses to words where a
    conflict is possible: one run with `mode` SHADOW_BUILD marks them, later runs of
    the same launch filter with them (SHADOW_FILTER). The launch-wide area covers the
    first `words` 4-byte words of the linear address order; accesses beyond are always
    logged. The local area covers `local_words` words of local memory for each of the
    first `groups` work-groups; local accesses of other groups use the launch-wide
    area, unless `shared` (then group 0's local area serves every group). `buf` is
    the backend's buffer (a wgpu.GPUBuffer, a pyopencl.Buffer).

    A backend may leave the buffer's clear to its first run (`pending_clear`: the
    bytes after the header are zeroed in that run's submit, not one of their own),
    and may search the built shadow in the build run's own submit (`conflict`: the
    answer of `may_conflict_words`' test, None until searched; wgpu does both,
    docs/internals.md §2)."""

    buf: Any  # untyped libraries' buffer types
    words: int
    wgsize: int
    mode: int = SHADOW_BUILD
    local_words: int = 0
    groups: int = 0
    pending_clear: bool = False
    conflict: bool | None = None
    # WGSL: the launch's workgroup-memory accesses are the same in every group, and
    # the local area's one group (group 0) stands for all (docs/internals.md §2,
    # "Group-invariant local accesses")
    shared: bool = False
    # OpenCL: the build run's uninitialised-read area, which its filter runs report
    # instead of checking every read again (docs/memcheck.md, "Filter runs")
    uninit: Any = None

    @property
    def local_offset(self) -> int:
        """Word index of the local area's first state word."""
        return SHADOW_HEAD + PAIR_WORDS * self.words

    @property
    def nbytes(self) -> int:
        return (self.local_offset + 2 * self.local_words * self.groups) * 4

    def header(self) -> list[int]:
        """The SHADOW_HEAD header words for a run in this prefilter's mode."""
        head = [0] * SHADOW_HEAD
        head[SHD_MODE], head[SHD_WORDS], head[SHD_WGSIZE] = self.mode, self.words, self.wgsize
        head[SHD_LWORDS] = self.local_words if self.groups else 0
        head[SHD_LGROUPS], head[SHD_LOFF] = self.groups, self.local_offset
        return head


def shadow_words(address_end: int, limit_bytes: int) -> int:
    """Words a shadow covers for an address order ending at `address_end`, in a buffer
    of at most `limit_bytes` (two u32 per word after the header)."""
    return max(1, min(-(-address_end // 4), limit_bytes // (4 * PAIR_WORDS) - SHADOW_HEAD))


def local_groups(words: int, local_words: int, num_groups: int, limit_bytes: int) -> int:
    """Work-groups whose `local_words` words of local memory a shadow with a launch-wide
    area of `words` words can cover in a buffer of at most `limit_bytes` (two u32 per
    group and word): all `num_groups` when they fit, else the first that do."""
    if local_words == 0:
        return 0
    room = limit_bytes // 4 - SHADOW_HEAD - PAIR_WORDS * words
    return max(0, min(num_groups, room // (2 * local_words)))


def local_order_words(variables: Sequence, extents: Sequence[int]) -> int:
    """Words of a group's local order: every tracked local/shared variable with a
    non-zero extent in this launch (the launched kernel's), ceil(bytes / 4) each
    (OpenCL and CUDA; WGSL's variables have static sizes, see `wgsl.runtime.local_order`)."""
    pairs = zip(variables, extents, strict=True)
    return sum(-(-e // 4) for v, e in pairs if v.space == Space.LOCAL)


# a built shadow up to this size is searched on the host (`may_conflict_words`):
# reading it back costs less than compiling the device search (~0.2-0.5 s on lavapipe)
HOST_SEARCH_BYTES = 1 << 20


def may_conflict_words(words: np.ndarray, pre: Prefilter) -> bool:
    """The device search of a built shadow (`shadow_may_conflict`), on its words read
    back: a word beyond the shadow or a workgroup access out of bounds (header), a
    launch-wide word with several actors and a store or atomics beside plain
    accesses, or a local mask word with a bit set."""
    if words[SHD_UNSEEN] or words[SHD_LOCAL_OOB]:
        return True
    pairs = words[SHADOW_HEAD : pre.local_offset].reshape(-1, PAIR_WORDS)
    who, kinds = pairs[:, 0], pairs[:, 1]
    both = KB_LOAD | KB_ATOMIC
    mixed = ((kinds & KB_STORE) != 0) | ((kinds & both) == both)
    if bool(np.any((who == MULTI) & mixed)):
        return True
    masks = pre.local_words * pre.groups
    first = pre.local_offset + masks
    return bool(np.any(words[first : first + masks]))


# launch(lo, hi, capacity, bins, width, prefilter=None) -> LaunchResult
Launch = Callable[..., LaunchResult]


def filtered_run(
    launch: Launch,
    pre: Prefilter | None,
    has_barriers: bool,
    shadow_may_conflict: Callable[[Prefilter], bool],
    full_range: int,
    events_end: int = 0,
    profile: bool = False,
) -> Callable[..., LaunchResult]:
    """The `run(lo, hi, capacity, bins=0, width=0)` of a check's Target on top of a
    backend's `launch`.

    With `pre`, the first run builds the shadows (the whole address range; accesses
    are not logged, barrier and exit events are), then every run filters
    with them; a run that touches memory in a way the build run did not see (`unseen`:
    a kernel whose accesses differ between runs) is repeated unfiltered, so the result
    stays exact. When the built shadows have no word that may conflict, a filter run
    would log only events: the build run stands for it (its events are those of the
    addresses `[0, events_end)`, one per work-group), and a range without events logs
    nothing. Without `pre`, every run logs unfiltered. With `profile`
    ($GPURACE_PROFILE), each launch and the shadow search print their times.
    """
    quiet: list[LaunchResult | None] = []  # the build run, when it stands for every run

    def timed(what: str, lo: int, hi: int, *args: Any) -> LaunchResult:
        t0 = time.perf_counter()
        result = launch(lo, hi, *args)
        if profile:  # every backend's launch returns after the kernel finished
            ms = (time.perf_counter() - t0) * 1e3
            print(
                f"gpurace: {what} [{lo:#x}, {hi:#x}) {result.requested} records: {ms:.1f} ms",
                file=sys.stderr,
            )
        return result

    def searched(p: Prefilter) -> bool:
        t0 = time.perf_counter()
        may = shadow_may_conflict(p)
        if profile:
            ms = (time.perf_counter() - t0) * 1e3
            found = "a word may conflict" if may else "no word may conflict"
            print(f"gpurace: shadow search ({found}): {ms:.1f} ms", file=sys.stderr)
        return may

    def run(lo: int, hi: int, capacity: int, bins: int = 0, width: int = 0) -> LaunchResult:
        if pre is None:
            return timed("run", lo, hi, capacity, bins, width)
        built: LaunchResult | None
        if pre.mode == SHADOW_BUILD:
            built = timed("build run", 0, full_range, capacity if has_barriers else 0, 0, 0, pre)
            pre.mode = SHADOW_FILTER
            stands = built.requested <= built.capacity  # its events all fit
            quiet.append(replace(built, events_only=True) if stands and not searched(pre) else None)
        built = quiet[0]
        if built is not None and bins == 0:
            if lo >= events_end or built.requested == 0:
                return LaunchResult(
                    {},
                    None,
                    0,
                    capacity,
                    unattributed=built.unattributed,
                    copies=built.copies,
                    loops_cut=built.loops_cut,
                    oob=built.oob,
                    uninit=built.uninit,
                    protocol=built.protocol,
                    protocol_search=built.protocol_search,
                )
            if lo == 0 and hi >= events_end and capacity >= built.requested:
                return built
        result = timed("filter run", lo, hi, capacity, bins, width, pre)
        return timed("unfiltered run", lo, hi, capacity, bins, width) if result.unseen else result

    return run
