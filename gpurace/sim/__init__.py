"""`sim`: a PTX simulator, gpurace's CUDA device where there is no NVIDIA GPU.

It executes the instrumented PTX (the rewrite and `_gr_rec` of
gpurace.instrument.ptx, so the log is the one a GPU writes) over NumPy lane arrays:
docs/internals.md ("The sim device") describes the execution model.
"""

from gpurace.sim.scheduler import Simulator
from gpurace.sim.values import SimError, SimUnsupported

__all__ = ["SimError", "SimUnsupported", "Simulator"]
