"""CPU time of a whole gpurace check of each bench_sim.py kernel on the sim device, for
bench/ab.py on a busy host.

bench_sim.py prints rates and one check's time, not a table bench/ab.py can read per
kernel; this prints one. For each of its kernels (65,536 threads, 256 per block; with
``--cuda-scale S``, the five barrier-only kernels bench/kernels/*.cu of bench_cuda.py
at its scale S): the thread-instructions of one instrumented launch (``steps``: what the
sim executed, a count that does not depend on the load), then `api.check` once to warm
up (NVRTC, PoCL's analysis programs) and ``--repeat`` times: the median wall time and
the least CPU time of the process (PoCL's threads included). ``SIM_INTERPRET=1`` turns
the native runtime calls off (gpurace/sim/values.py's Intrinsics, which older trees
lack), so that the steps count the rewriter's and runtime.ptx's instructions alike in
every tree. Run by a tree's interpreter: the kernels are this file's, the gpurace is
the one the interpreter imports::

    python bench/ab.py OLD NEW --python-a ... --python-b ... --column "cpu ms" \\
        --column steps -- /abs/path/bench/bench_sim_cpu.py
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time
from pathlib import Path

import gpurace
from gpurace import api
from gpurace.instrument.ptx import instrument
from gpurace.launch.cuda import cuda_launch_from_dict

# after gpurace: bench_sim puts its own tree first on sys.path, and the gpurace already
# imported (the interpreter's tree) must stay the one its imports find
B = importlib.import_module("bench_sim")
C = importlib.import_module("bench_cuda")


def cases(cuda_scale: float | None) -> list[tuple[str, str, object]]:
    """(name, CUDA C++ source, launch) of each kernel benchmarked."""
    if cuda_scale is None:
        return [(n, src, B._launch(n, args)) for n, (src, args) in B.KERNELS.items()]
    return [
        (n, (C.KERNELS / f"{n}.cu").read_text(), cuda_launch_from_dict(data, f"{n}.toml"))
        for n, data in C.cases(cuda_scale)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernels", default=None, help="a comma-separated subset")
    ap.add_argument("--cuda-scale", type=float, default=None, help="bench_cuda.py's kernels")
    args = ap.parse_args()
    if os.environ.get("SIM_INTERPRET") == "1":
        values = importlib.import_module("gpurace.sim.values")
        if hasattr(values, "Intrinsics"):
            values.Intrinsics.on = False
    here = Path(gpurace.__file__).parent
    if not Path(api.__file__).is_relative_to(here):
        raise SystemExit(f"gpurace.api from {api.__file__}, not from {here}")
    rows = []
    for name, src, launch in cases(args.cuda_scale):
        if args.kernels and name not in args.kernels.split(","):
            continue
        _took, steps = B._run(instrument(src, f"{name}.cu"), launch, True)
        report = api.check(src, launch, path=f"{name}.cu")
        times, cpus = [], []
        for _ in range(args.repeat):
            start, cpu = time.perf_counter(), time.process_time()
            report = api.check(src, launch, path=f"{name}.cu")
            times.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
        s = report.scope
        verdict = "complete" if s.complete else "INCOMPLETE"
        rows.append(
            f"| {name} | {s.work_items:,} | {s.accesses_logged:,} | {steps} | "
            f"{statistics.median(times) * 1e3:.1f} | {min(cpus) * 1e3:.1f} | "
            f"{len(report.races)} | {verdict} |"
        )
        print(rows[-1], flush=True)
    print(f"\ndevice: {report.device}; median wall / least CPU of {args.repeat} checks")
    print("| kernel | threads | records | steps | check ms | cpu ms | races | scope |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
