"""Run the C analysis kernels under Oclgrind's checkers on a few random logs.

`python -m tests.oclgrind_check` prints one line per log (whether the races equal
the reference) and leaves Oclgrind's reports on stderr. It runs in its own process:
Oclgrind's LLVM crashes in a process where lavapipe's is loaded.
"""

import os

import pyopencl

from gpurace.analysis import analyse
from gpurace.backends import opencl_backend
from tests.logs import VAR_BASES, VAR_SPACES, random_log


def main() -> None:
    os.environ.setdefault("OCLGRIND_DATA_RACES", "1")  # read when a context is made
    (platform,) = [p for p in pyopencl.get_platforms() if "oclgrind" in p.name.lower()]
    queue = pyopencl.CommandQueue(pyopencl.Context(platform.get_devices()))
    for seed in range(3):
        uniform = seed == 2
        log = random_log(600 + seed, n=120, spread=16 if seed % 2 else 200, ordinals=24)
        got = opencl_backend.analyse_records(queue, log, VAR_BASES, uniform)
        same = got.races == analyse(log, VAR_SPACES, uniform_writes_race=uniform)
        print(f"log {seed}: {len(got.races)} races, equal to the reference: {same}")


if __name__ == "__main__":
    main()
