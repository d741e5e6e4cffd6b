"""gpurace on PoCL vs Oclgrind's race detector, and vs the plain PoCL launch.

Side by side in one run on this machine, for each kernel and size:
- plain: the uninstrumented kernel on PoCL (upload, launch, wait, read back);
- gpurace: `gpurace.check` on PoCL (instrumented launch + on-device analysis);
- Oclgrind: the same kernel and inputs under Oclgrind with OCLGRIND_DATA_RACES=1
  (in a subprocess: the ICD reads its settings when it loads), timed inside that
  process around enqueue + finish, so its start-up is not counted against it.
Prints a Markdown table for docs/performance.md.

    python bench/bench_opencl.py [--sizes 65536,262144,1048576,4194304] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from gpurace import api
from gpurace.backends import opencl_backend
from gpurace.launch import LaunchSpec

KERNELS = Path(__file__).parent / "kernels"


def case(name: str, items: int) -> dict:
    """The launch (OpenCL launch-file keys) of kernel `name` at about `items` work-items."""
    if name in ("matmul", "stencil"):
        side = max(16, int(items**0.5) // 16 * 16)
        n = side * side
        if name == "matmul":
            arrays = [{"type": "float", "count": n, "fill": "random", "seed": s} for s in (1, 2)]
            args = [*arrays, {"type": "float", "count": n}, {"value": side}]
        else:
            args = [
                {"type": "float", "count": n, "fill": "random", "seed": 1},
                {"type": "float", "count": n},
                {"value": side},
                {"value": side},
            ]
        return {"global_size": [side, side], "local_size": [16, 16], "arg": args}
    n = items // 256 * 256
    args = {
        "saxpy": [
            {"type": "float", "count": n, "fill": "random", "seed": 1},
            {"type": "float", "count": n, "fill": "random", "seed": 2},
            {"value": 2.0},
        ],
        "reduce": [
            {"type": "float", "count": n, "fill": "random", "seed": 1},
            {"type": "float", "count": n // 256},
        ],
        "histogram": [
            {"type": "uint", "count": n, "fill": "random", "seed": 1},
            {"type": "uint", "count": 256},
        ],
    }[name]
    return {"global_size": [n], "local_size": [256], "arg": args}


# Runs in a subprocess with OCLGRIND_DATA_RACES=1: one launch under Oclgrind, timed.
OCLGRIND_SCRIPT = r"""
import json, sys, time
import numpy as np, pyopencl as cl
from gpurace.launch import LaunchSpec
spec = LaunchSpec.from_dict(json.loads(sys.argv[2]), path="bench.toml")
plat = [p for p in cl.get_platforms() if "oclgrind" in p.name.lower()][0]
ctx = cl.Context(plat.get_devices())
queue = cl.CommandQueue(ctx)
kernel = getattr(cl.Program(ctx, open(sys.argv[1]).read()).build(), sys.argv[3])
args = []
for a in spec.args:
    if a.kind == "buffer":
        args.append(cl.Buffer(ctx, cl.mem_flags.COPY_HOST_PTR, hostbuf=a.buffer.data))
    else:
        scalar = np.float32 if isinstance(a.value, float) else np.uint32
        args.append(scalar(a.value))
t0 = time.perf_counter()
kernel(queue, tuple(spec.global_size), tuple(spec.local_size), *args)
queue.finish()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def oclgrind_seconds(path: Path, launch: dict, kernel: str) -> tuple[float, int]:
    """(seconds of the launch under Oclgrind's race detector, race reports it printed)."""
    env = {**os.environ, "OCLGRIND_DATA_RACES": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", OCLGRIND_SCRIPT, str(path), json.dumps(launch), kernel],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    races = proc.stderr.count("data race at")
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"], races


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(median wall seconds, least CPU seconds, last result) of ``repeat`` calls.

    The CPU time is the process's (PoCL's worker threads included): on a shared host it
    moves far less with the load than the wall clock (bench/bench_wgsl_cpu.py)."""
    times, cpus, result = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(times), min(cpus), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="65536,262144,1048576,4194304")
    ap.add_argument("--kernels", default="saxpy,reduce,matmul,stencil,histogram")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-oclgrind", action="store_true", help="skip the Oclgrind column")
    args = ap.parse_args()
    queue, dev_name = opencl_backend.get_device(None)
    rows = []
    for items in [int(s) for s in args.sizes.split(",")]:
        for name in args.kernels.split(","):
            path = KERNELS / f"{name}.cl"
            source = path.read_text()
            launch = case(name, items)
            spec = LaunchSpec.from_dict({"kernel": name, **launch}, path=f"{name}.toml")
            inst = api.instrument(source, str(path), "opencl")
            params = inst.params[name]
            data = api.opencl_args(spec, params)

            def plain(source=source, path=path, spec=spec, params=params, data=data, name=name):
                return opencl_backend.launch(
                    queue, source, str(path), name, params, data,
                    spec.global_size, spec.local_size,
                )  # fmt: skip

            def checked(source=source, spec=spec, path=path):
                return api.check(source, spec, path=str(path))

            plain(), checked()  # warm up: program builds, allocations
            t_plain, _, _ = timed(plain, args.repeat)
            t_check, cpu_check, report = timed(checked, args.repeat)
            s = report.scope
            grind = "-"
            ratio_grind = "-"
            if not args.no_oclgrind:
                t_grind, _ = oclgrind_seconds(path, launch, name)
                grind = f"{t_grind * 1e3:.0f}"
                ratio_grind = f"{t_grind / t_check:.1f}"
            verdict = "complete" if s.complete else "INCOMPLETE"
            rows.append(
                f"| {name} | {s.work_items:,} | {s.accesses_logged:,} | {t_plain * 1e3:.1f} | "
                f"{t_check * 1e3:.1f} | {cpu_check * 1e3:.1f} | {t_check / t_plain:.1f} | "
                f"{grind} | {ratio_grind} | "
                f"{len(report.errors)} | {verdict} |"
            )
            print(rows[-1], flush=True)
    print()
    print(
        f"Device: {dev_name}; host: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, {date.today()}; median of {args.repeat} "
        f"(cpu ms: the least, this process's CPU time; Oclgrind: 1 run)"
    )
    print(
        "| kernel | work-items | records | plain ms | gpurace ms | cpu ms | gpurace/plain | "
        "Oclgrind ms | Oclgrind/gpurace | races | scope |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
