"""What the backends share: the result of a launch, and how --device picks a device."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from gpurace.model import GpuraceError, ProtocolError

# Bytes allocated after each buffer of an instrumented launch (OpenCL, CUDA and sim;
# docs/memcheck.md): an access that runs up to this far past a buffer's end lands in
# no other buffer, so the runtime names the buffer it overran (the nearest below)
# and not a neighbour.
OOB_GUARD_BYTES = 256


@dataclass
class LaunchResult:
    """Buffers after a launch; `log`/`ctl` are set for instrumented launches."""

    outputs: dict[tuple[int, int], np.ndarray]
    # the backend's device buffer (wgpu, pyopencl, cupy: untyped libraries)
    log: Any = None
    requested: int = 0  # records the kernel tried to append
    capacity: int = 0
    histogram: np.ndarray | None = None  # counting runs: records per address bin
    unattributed: int = 0  # OpenCL: tracked-space accesses that hit no tracked variable
    copies: int = 0  # OpenCL: the async-copy word (gpurace/abi.py's COPY_* bits)
    loops_cut: int = 0  # WGSL: the loop word (bit min(loop, 31): cut short by the driver)
    unseen: int = 0  # WGSL prefilter: words touched in a way the shadow run did not see
    # the control words' out-of-bounds area (gpurace/abi.py's OOB_*; docs/memcheck.md)
    oob: np.ndarray | None = None
    # the uninitialised-read area (abi.UNINIT_*; docs/memcheck.md, initcheck)
    uninit: np.ndarray | None = None
    # sim: the mbarrier protocol errors found, and what the protocol search covered
    # (docs/protocols.md)
    protocol: list[ProtocolError] = field(default_factory=list)
    protocol_search: str = ""
    # a build run that stands for its filter runs: its log holds barrier and exit
    # events, no access (gpurace/analysis/events_only.py)
    events_only: bool = False


class Described(Protocol):
    """A device as a backend's `list_devices` offers it."""

    @property
    def description(self) -> str:
        """What `gpurace devices` shows and --device matches."""
        ...


D = TypeVar("D", bound=Described)


def choose_device(found: Sequence[D], name: str | None, what: str) -> D:
    """The first of `found` (a backend's `list_devices`, best first, not empty) whose
    description contains `name` in any case, or the first of all when no name is
    given; else an error naming the `what` ("OpenCL device") and listing them all."""
    if not name:
        return found[0]
    chosen = [d for d in found if name.lower() in d.description.lower()]
    if not chosen:
        names = ", ".join(d.description for d in found)
        raise GpuraceError(f"no {what} matches '{name}'; available: {names}")
    return chosen[0]
