"""Replaying one launch on a device: what every device API's ``repeat_*`` shares
(``ReplayOptions``, ``repeat_launch``), the ``Replayer`` protocol each implements, the
replay loop and comparison, and the 64-bit buffer hash the device computes after each
replay.

A device API's ``repeat_*`` is its ``prepare`` (instrument, validate, choose the
compared buffers, open the device) handed to ``repeat_launch``, which fills in the
defaults, checks ``runs``, says the progress lines and times the set-up.

A replayer (``replay_wgpu``, ``replay_opencl``, ``replay_cuda``) sets one launch up
once: every compared buffer gets a working buffer and an on-device snapshot. Each
``replay`` restores the working buffers from the snapshots, launches the **plain**
kernel and hashes the compared buffers **on the device** (``shaders/hash.wgsl``, or
``shaders/hash.cl`` for OpenCL and CUDA), so only 8 bytes per buffer come back: on a
discrete GPU a read-back of every output, not the kernel, would dominate a replay.
``replay_and_compare`` groups the replays by their hashes, keeps a device copy of
the first replay of each distinct result and reads those copies back only when the
replays differ, for ``statistics.diff_outputs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

import numpy as np

from gpurace import abi
from gpurace.model import GpuraceError

from .results import DEFAULT_RUNS, MAX_KEPT, DistinctResult, OutputDiff, Progress, RepeatResult
from .statistics import diff_outputs

HASH_WORKGROUP = abi.HASH_WORKGROUP  # shaders/hash.* are compiled with gpurace/abi.py's
#: At most this many work-groups per hash dispatch (a grid-stride loop covers the
#: rest), and at least this many words per work-item: the CPU driver pays per
#: work-group (each barrier of the reduction switches between all its work-items),
#: so 1 word per work-item made hashing 4x slower there, while a GPU still gets
#: 1024 x 256 work-items for a 16M-word buffer.
HASH_GROUPS = 1024
HASH_WORDS = 64

_M32 = 0xFFFFFFFF
_GOLDEN, _LANE_B = abi.HASH_GOLDEN, abi.HASH_LANE_B  # the device hash's (gpurace/abi.py)


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def hash_words(words: np.ndarray) -> int:
    """The 64-bit hash ``shaders/hash.wgsl`` computes, on the host (tests use this).

    Lane a is the low 32 bits, lane b the high 32 bits.
    """
    w = np.ascontiguousarray(words).reshape(-1).view(np.uint32)
    p = np.arange(w.size, dtype=np.uint32) * np.uint32(_GOLDEN)
    with np.errstate(over="ignore"):
        a = _fmix32(w ^ p)
        b = _fmix32(((w << np.uint32(16)) | (w >> np.uint32(16))) ^ (p + np.uint32(_LANE_B)))
    lane_a = int(a.sum(dtype=np.uint64)) & _M32
    lane_b = int(b.sum(dtype=np.uint64)) & _M32
    return lane_a | (lane_b << 32)


def hash_groups(n_words: int) -> int:
    """Work-groups of ``HASH_WORKGROUP`` for one hash dispatch over ``n_words`` words."""
    return min(HASH_GROUPS, max(1, -(-n_words // (HASH_WORKGROUP * HASH_WORDS))))


def padded(nbytes: int) -> int:
    """Device buffer size: 16-byte multiple, at least 16 (as the backends pad)."""
    return max(16, (nbytes + 15) // 16 * 16)


def words_of(arr: np.ndarray) -> np.ndarray:
    """The buffer contents as the device holds them: bytes padded to whole u32 words."""
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    pad = (-raw.size) % 4
    if pad:
        raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
    return raw.view(np.uint32)


def open_device(backend: Any, device: str | None) -> tuple[Any, str]:
    """The device a replay runs on, chosen as `check` chooses it (--device, else the
    backend's $GPURACE_*DEVICE, else its default: `registry.open_device`)."""
    from gpurace import registry
    from gpurace.options import Options

    return registry.open_device(backend, Options.from_env(device=device))


def check_runs(runs: object) -> None:
    """``runs`` must be a positive integer (``--runs``)."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise GpuraceError(f"--runs must be a positive integer, not {runs!r}")


@dataclass
class ReplayOutput:
    """One compared buffer of a device replay: its name, where it is bound, its
    launch-file element type and its shape (as ``Replayer.read`` returns it)."""

    name: str
    where: str
    type: str
    shape: tuple[int, ...]


class Replayer(Protocol):
    """One launch set up on one device API, replayed N times by ``replay_and_compare``."""

    #: The compared buffers, in the order of ``replay``'s hashes.
    outputs: list[ReplayOutput]

    def replay(self) -> tuple[int, ...]:
        """Restore the snapshot, launch, hash: one 64-bit hash per compared output."""

    def keep(self) -> Any:
        """Device copies of the compared outputs as they are now."""

    def read(self, copies: Any) -> dict[str, np.ndarray]:
        """One kept result on the host: each output by name, shaped as its ReplayOutput."""


class ReplayOptions(TypedDict, total=False):
    """The keyword arguments every device API's ``repeat_*`` takes, in one place.

    ``runs`` replays (default ``DEFAULT_RUNS``) of the kernel in file ``path`` on the
    device whose description contains ``device`` (default: the API's), entry point
    ``entry`` (default: the launch file's). ``keep_state`` lists buffers that are
    neither restored nor compared - state carried from replay to replay, as a real
    program's step counter would be (tests use it to make replays differ on purpose);
    each API names them its own way. ``keep_outputs`` reads the representative back
    even when all replays agree; at most ``max_kept`` distinct results are kept.
    """

    runs: int
    path: str
    device: str | None
    entry: str | None
    keep_state: Iterable[Any]
    keep_outputs: bool
    max_kept: int
    progress: Progress | None


@dataclass(frozen=True)
class Request:
    """What a device API's ``prepare`` is asked for: ``ReplayOptions`` with the
    defaults filled in (``repeat_launch``)."""

    path: str
    device: str | None
    entry: str | None
    keep_state: tuple[Any, ...]


@dataclass
class Setup:
    """What a device API's ``prepare`` found before the device work: the kernel's name
    (``shown`` in the result where it differs: CUDA's "scale<float>" for a mangled
    name), the device's description, and how to build the Replayer."""

    name: str
    device: str
    build: Callable[[], Replayer]
    shown: str = ""


#: A device API's own part of a replay: instrument or parse the kernel, validate the
#: launch, pick what is compared and open the device.
Prepare = Callable[[str, Any, Request], Setup]


def repeat_launch(
    prepare: Prepare, default_path: str, source: str, launch: Any, options: ReplayOptions
) -> RepeatResult:
    """The replay of one launch on one device API, shared by every API's ``repeat_*``:
    ``prepare`` is what is the API's own, the rest (defaults, the ``runs`` check,
    progress lines, the replay loop, timings) is here."""
    runs = options.get("runs", DEFAULT_RUNS)
    check_runs(runs)
    say = options.get("progress") or (lambda _msg: None)
    path = options.get("path", default_path)
    t0 = time.perf_counter()
    request = Request(
        path, options.get("device"), options.get("entry"), tuple(options.get("keep_state", ()))
    )
    setup = prepare(source, launch, request)
    say(f"setting up '{setup.name}' on {setup.device}")
    replayer = setup.build()
    t1 = time.perf_counter()
    max_kept = options.get("max_kept", MAX_KEPT)
    keep_outputs = options.get("keep_outputs", False)
    result = replay_and_compare(
        replayer, setup.shown or setup.name, runs, max_kept, keep_outputs, say
    )
    result.file, result.device = path, setup.device
    result.timings = {"setup": t1 - t0, **result.timings}
    return result


def hashes_of(words: np.ndarray, n: int) -> tuple[int, ...]:
    """The ``n`` 64-bit hashes of a read-back hash accumulator (u32 words: lane a, lane
    b of each buffer in turn)."""
    return tuple(int(words[2 * i]) | (int(words[2 * i + 1]) << 32) for i in range(n))


def replay_and_compare(
    replayer: Replayer, name: str, runs: int, max_kept: int, keep_outputs: bool, say: Progress
) -> RepeatResult:
    """The replay loop and the comparison, shared by every device API.

    ``runs`` replays are grouped by their hashes; the first replay of each new result
    keeps a device copy (at most ``max_kept``), read back only when the replays differ
    (or ``keep_outputs``) and compared by ``diff_outputs``.
    """
    outputs = replayer.outputs
    t1 = time.perf_counter()
    groups: dict[tuple[int, ...], list[int]] = {}
    kept: list[Any] = []
    per_output: list[set[int]] = [set() for _ in outputs]
    for run in range(runs):
        if run % 10 == 0:
            say(f"replay {run + 1}/{runs} of '{name}'")
        key = replayer.replay()
        for i, h in enumerate(key):
            per_output[i].add(h)
        if key not in groups:
            groups[key] = []
            if len(kept) < max_kept:
                kept.append(replayer.keep())
        groups[key].append(run)
    t2 = time.perf_counter()
    reps: list[dict[str, np.ndarray]] = []
    if len(groups) > 1 or keep_outputs:
        say("reading back one output per distinct result")
        reps = [replayer.read(copies) for copies in kept]
    results = [DistinctResult("".join(f"{h:016x}" for h in k), r) for k, r in groups.items()]
    diffs = []
    for i, o in enumerate(outputs):
        if reps and len(per_output[i]) > 1:
            diff = diff_outputs(
                o.name,
                [rep[o.name] for rep in reps],
                distinct=len(per_output[i]),
                where=o.where,
                elem_type=o.type,
            )
        else:
            diff = OutputDiff(o.name, o.type, o.shape, o.where, len(per_output[i]))
            diff.compared = len(reps) or 1
        diffs.append(diff)
    t3 = time.perf_counter()
    timings = {"replays": t2 - t1, "compare": t3 - t2}
    return RepeatResult(name, runs, results, diffs, reps, timings=timings)
