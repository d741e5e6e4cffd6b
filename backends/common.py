"""What every backend hands back from a launch (shared by wgpu and OpenCL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


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
    unseen: int = 0  # WGSL prefilter: words touched in a way the shadow run did not see
