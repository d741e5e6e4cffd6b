"""Cost of `gpurace repeat`: time per replay / time of one plain launch.

The same five kernels and sizes as bench/bench_wgsl.py (its ``cases()``). The plain
side is timed exactly as there: compile, upload the inputs, launch, wait, read the
outputs back (``wgpu_backend.launch``). A replay restores the written buffers from
the device snapshot, launches, hashes the written buffers on the device and reads
back 8 bytes per buffer. "per replay" is the replay loop's time / runs; "total /
runs" also spreads the one-time set-up (compile, upload, snapshot) over the runs.
"dispatch only" is the same replay loop with neither restore nor hash (buffers
already on the device), so "replay / dispatch" is what restoring and hashing add
to the kernel itself. Prints a Markdown table.

    python bench/bench_repeat.py [--scale 1.0] [--runs 10] [--repeat 3] [--device NAME]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from datetime import date

from bench_wgsl import KERNELS, cases, timed

try:  # newer bench_wgsl scales matmul/stencil's compile-time sizes with --scale
    from bench_wgsl import kernel_source
except ImportError:

    def kernel_source(name: str, scale: float) -> str:
        """The bench kernel as written (sizes fixed in the source)."""
        return (KERNELS / f"{name}.wgsl").read_text()


from gpurace import api
from gpurace.backends import wgpu_backend
from gpurace.determinism import repeat_kernel
from gpurace.determinism.replay_wgpu import WgpuReplayer
from gpurace.launch import LaunchSpec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the 16M sizes")
    ap.add_argument("--runs", type=int, default=10, help="replays per repeat call")
    ap.add_argument("--repeat", type=int, default=3, help="median of this many timings")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    dev, dev_name = wgpu_backend.get_device(args.device)
    rows, ratios = [], []
    for name, launch in cases(args.scale):
        path = str(KERNELS / f"{name}.wgsl")
        source = kernel_source(name, args.scale)
        spec = LaunchSpec.from_dict({"entry": "main", **launch}, path=f"{name}.toml")
        bindings = api.instrument(source, path).bindings
        data = {(b.group, b.binding): b.data for b in spec.buffers}

        def plain(source=source, bindings=bindings, data=data, spec=spec, path=path):
            return wgpu_backend.launch(
                dev, source, path, "main", bindings, data, tuple(spec.workgroups)
            )

        def replays(source=source, spec=spec, path=path):
            return repeat_kernel(source, spec, runs=args.runs, path=path, device=args.device)

        writable = [b for b in bindings if b.kind == "storage" and b.access != "read"]
        bare = WgpuReplayer(dev, source, path, "main", bindings, spec, writable, set())
        bare.restore, bare.hash_jobs = [], []  # the kernel alone, buffers on the device

        def dispatch_only(bare=bare):
            for _ in range(args.runs):
                bare.replay()

        plain(), replays(), dispatch_only()  # warm up: shader compilation, allocations
        # Interleaved, so that drift in machine load (other jobs on a shared CPU)
        # hits both sides alike; medians of each.
        t_plain, per_replay, per_total, t_bare, distinct = [], [], [], [], set()
        for _ in range(args.repeat):
            t_plain.append(timed(plain, 1)[0])
            t_bare.append(timed(dispatch_only, 1)[0] / args.runs)
            t0 = time.perf_counter()
            result = replays()
            total = time.perf_counter() - t0
            per_replay.append(result.timings["replays"] / args.runs)
            per_total.append(total / args.runs)
            distinct.add(result.distinct)
        t_pl = statistics.median(t_plain)
        t_rep, t_tot = statistics.median(per_replay), statistics.median(per_total)
        t_disp = statistics.median(t_bare)
        ratio = t_rep / t_pl
        ratios.append(ratio)
        rows.append(
            f"| {name} | {t_pl * 1e3:.1f} | {t_rep * 1e3:.1f} | {ratio:.2f} | "
            f"{t_tot * 1e3:.1f} | {t_tot / t_pl:.2f} | "
            f"{t_disp * 1e3:.1f} | {t_rep / t_disp:.2f} | "
            f"{'/'.join(map(str, sorted(distinct)))} |"
        )
        print(rows[-1], flush=True)
    print()
    print(
        f"Device: {dev_name}; host: {platform.processor() or platform.machine()}, "
        f"{date.today()}; scale {args.scale}, {args.runs} replays per call, "
        f"median of {args.repeat}"
    )
    print(
        "| kernel | plain launch ms | per replay ms | ratio | total / runs ms | "
        "ratio incl. set-up | dispatch only ms | replay / dispatch | distinct |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nmedian ratio: {statistics.median(ratios):.2f}; max: {max(ratios):.2f}")


if __name__ == "__main__":
    main()
