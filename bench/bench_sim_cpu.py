"""CPU time of a whole gpurace check of each bench_sim.py kernel on the sim device, for
bench/ab.py on a busy host.

bench_sim.py prints rates and one check's time, not a table bench/ab.py can read per
kernel; this prints one: for each of its kernels (65,536 threads, 256 per block), the
thread-instructions of one instrumented launch (``steps``: what the sim executed, a count
that does not depend on the load), then `api.check` once to warm up (NVRTC, PoCL's
analysis programs) and ``--repeat`` times: the median wall time and the least CPU time
of the process (PoCL's threads included). Run by a tree's interpreter; the kernels are
this file's bench_sim.py's, the gpurace is the one the interpreter imports::

    python bench/ab.py OLD NEW --python-a ... --python-b ... --column "cpu ms" \\
        --column steps -- /abs/path/bench/bench_sim_cpu.py
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from pathlib import Path

import gpurace
from gpurace import api
from gpurace.instrument.ptx import instrument

# after gpurace: bench_sim puts its own tree first on sys.path, and the gpurace already
# imported (the interpreter's tree) must stay the one its imports find
B = importlib.import_module("bench_sim")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernels", default=",".join(B.KERNELS))
    args = ap.parse_args()
    here = Path(gpurace.__file__).parent
    if not Path(api.__file__).is_relative_to(here):
        raise SystemExit(f"gpurace.api from {api.__file__}, not from {here}")
    rows = []
    for name in args.kernels.split(","):
        src, kernel_args = B.KERNELS[name]
        launch = B._launch(name, kernel_args)
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
