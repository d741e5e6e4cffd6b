"""`gpurace run`'s OpenCL snapshots reach the check without further copies (a buffer is
read back once, then viewed as its parameter's type and kept by the launch spec), and
any other array given as a fill is still copied."""

import numpy as np

from gpurace.launch import LaunchSpec
from gpurace.launch.fills import Kept

SPEC = {"kernel": "k", "global_size": [4], "local_size": [4]}


def _spec(fill: np.ndarray) -> LaunchSpec:
    return LaunchSpec.from_dict({**SPEC, "arg": [{"type": "int", "fill": fill}]}, path="k.toml")


def test_a_kept_snapshot_is_the_launchs_data():
    host = np.arange(16, dtype=np.uint8).view(Kept)  # as hooks_opencl._snapshot reads it
    typed = host[:16].view(np.int32)
    assert isinstance(typed, Kept)
    data = _spec(typed).args[0].buffer.data
    assert np.shares_memory(data, host) and data.dtype == np.int32
    assert data.tolist() == np.arange(16, dtype=np.uint8).view(np.int32).tolist()


def test_any_other_array_is_copied():
    mine = np.arange(4, dtype=np.int32)
    data = _spec(mine).args[0].buffer.data
    mine[:] = 7  # the caller's later writes do not reach the launch
    assert not np.shares_memory(data, mine) and data.tolist() == [0, 1, 2, 3]
