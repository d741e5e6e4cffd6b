"""Speed of the sim device (gpurace/sim): thread-instructions per second, and the time
of a whole `gpurace check` of a 64K-thread launch.

A thread-instruction is one instruction executed by one thread (a step of the
scheduler counts as many as the lanes it runs). Each kernel (team-written CUDA C++,
compiled by NVRTC once, outside the timing) runs plain and instrumented (the
rewriter's PTX, logging every access through `_gr_rec`). Prints a Markdown table
for docs/performance.md.

    python bench/bench_sim.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpurace import api  # noqa: E402
from gpurace.backends import cuda_backend  # noqa: E402
from gpurace.instrument.ptx import instrument  # noqa: E402
from gpurace.launch.cuda import cuda_launch_from_dict  # noqa: E402
from gpurace.sim import device as sim_device  # noqa: E402

N = 1 << int(__import__("os").environ.get("SIM_BENCH_LOG2", "16"))
KERNELS = {
    "saxpy": (
        r"""extern "C" __global__ void k(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}""",
        [{"type": "float", "count": N, "fill": "random"},
         {"type": "float", "count": N, "fill": "random"}, {"value": 2.0}, {"value": N}],
    ),
    "poly_loop": (
        r"""extern "C" __global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i], acc = 0.0f;
  for (int j = 0; j < n; ++j) acc = acc * v + 0.5f * j;
  y[i] = acc;
}""",
        [{"type": "float", "count": N, "fill": "random"}, {"type": "float", "count": N},
         {"value": 64}],
    ),
    "shared_reduce": (
        r"""extern "C" __global__ void k(const int *x, int *out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 256 + t];
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}""",
        [{"type": "int", "count": N, "fill": "arange"}, {"type": "int", "count": N // 256}],
    ),
    "warp_shuffle": (
        r"""extern "C" __global__ void k(const float *x, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}""",
        [{"type": "float", "count": N, "fill": "random"}, {"type": "float", "count": N // 32}],
    ),
}  # fmt: skip


def _launch(name: str, args: list[dict]):  # type: ignore[no-untyped-def]
    return cuda_launch_from_dict(
        {"kernel": "k", "grid": [N // 256], "block": [256], "arg": args}, f"{name}.toml"
    )


def _run(inst, launch, instrumented: bool):  # type: ignore[no-untyped-def]
    """One launch through the CUDA backend on sim: ((wall, CPU seconds), thread-instructions)."""
    kernel = inst.entry
    params = inst.params[kernel]
    args = cuda_backend.launch_args(launch)
    extra = {}
    if instrumented:
        extra = cuda_backend.instrumented_extras(inst, launch, args, 1 << 20)
    ptx = inst.source if instrumented else inst.original_ptx
    start, cpu = time.perf_counter(), time.process_time()
    cuda_backend.launch(sim_device.DEVICE, ptx, "k.cu", kernel, params, args, launch.grid,
                        launch.block, launch.shared_bytes, **extra)  # fmt: skip
    took = time.perf_counter() - start, time.process_time() - cpu
    fn = cuda_backend.load_module(sim_device.DEVICE, ptx).get_function(kernel)
    assert not fn.stopped, fn.stopped
    return took, fn.lane_steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check-only", action="store_true", help="only the gpurace check timing")
    opts = ap.parse_args()
    print("thread-instructions per second, by wall time (by this process's CPU time)\n")
    print("| kernel | threads | plain | instrumented | instrumented launch, s wall (CPU) |")
    print("|---|---:|---:|---:|---:|")
    for name, (src, args) in KERNELS.items() if not opts.check_only else ():
        launch = _launch(name, args)
        inst = instrument(src, f"{name}.cu")
        rates = []
        for instrumented in (False, True):
            runs = [_run(inst, launch, instrumented) for _ in range(opts.repeat)]
            wall = statistics.median(t[0] for t, _ in runs)
            cpu = statistics.median(t[1] for t, _ in runs)
            rates.append(f"{runs[0][1] / wall:.3g} ({runs[0][1] / cpu:.3g})")
        # the seconds compare across versions; the rates count the instructions run,
        # which native runtime calls (gpurace/sim/intrinsics.py) do not step through
        print(f"| {name} | {N} | {rates[0]} | {rates[1]} | {wall:.2f} ({cpu:.2f}) |")
    name, (src, args) = "shared_reduce", KERNELS["shared_reduce"]
    times, cpus = [], []
    for _ in range(opts.repeat):
        start, cpu = time.perf_counter(), time.process_time()
        report = api.check(src, _launch(name, args), path=f"{name}.cu")
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    print(
        f"\n`gpurace check` of {name} ({N} threads, on '{report.device}', NVRTC included): "
        f"median {statistics.median(times):.2f} s wall, {statistics.median(cpus):.2f} s CPU "
        f"(this process, PoCL's threads included), {len(report.races)} races"
    )


if __name__ == "__main__":
    main()
