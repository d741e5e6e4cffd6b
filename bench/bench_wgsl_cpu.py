"""CPU time of a gpurace check of each bench_wgsl.py kernel, for bench/ab.py on a busy host.

On the shared 2-core host the wall-clock medians of ``bench_wgsl.py`` spread by half
their value between rounds (docs/performance.md); the CPU time of the process (every
thread's, lavapipe's included; run with ``LP_NUM_THREADS=1`` so that lavapipe does not
spin threads the host has no core for) moves far less with the load. Each kernel is
checked once to warm up (its pipelines and, before a check is timed, the analysis
pipelines that a check compiles on a thread: that thread's CPU time would be counted),
then ``--repeat`` times, each beside a plain launch of the kernel (the same inputs,
no instrumentation); the table gives the least CPU time of each and their ratio.
Run from a tree's root by that tree's interpreter: the kernels and launches are this
file's bench_wgsl.py's, the gpurace the interpreter imports is the tree's::

    LP_NUM_THREADS=1 python bench/ab.py OLD NEW --python-a ... --python-b ... \\
        --column "cpu ms" -- /abs/path/bench/bench_wgsl_cpu.py --scale 0.0625
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import bench_wgsl as B

from gpurace import api
from gpurace.backends import wgpu_backend, wgpu_pipelines
from gpurace.launch import LaunchSpec


def settle(dev: object) -> None:
    """Compile every analysis pipeline now (trees before the compile thread: at once)."""
    order = getattr(wgpu_pipelines, "COMPILE_ORDER", None)
    if order is None:  # the older trees' one call (no compile thread)
        getattr(wgpu_pipelines, "analysis_pipelines", None)(dev)  # type: ignore[misc]
        return
    for kernel in order:
        wgpu_pipelines.analysis_pipeline(dev, kernel)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.0625)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    dev, _ = wgpu_backend.get_device(None)
    rows = []
    for name, launch in B.cases(args.scale):
        source = B.kernel_source(name, args.scale)
        spec = LaunchSpec.from_dict({"entry": "main", **launch}, path=f"{name}.toml")
        path = str(B.KERNELS / f"{name}.wgsl")
        inst = api.instrument(source, path)
        data = {(b.group, b.binding): b.data for b in spec.buffers}

        def plain(source: str = source, inst: Any = inst, data: dict = data, spec: Any = spec,
                  path: str = path) -> None:  # fmt: skip
            grid = tuple(spec.workgroups)
            wgpu_backend.launch(dev, source, path, "main", inst.bindings, data, grid)

        plain()
        report = api.check(source, spec, path=path)
        settle(dev)
        times, plain_times = [], []
        for _ in range(args.repeat):
            start = time.process_time()
            plain()
            plain_times.append(time.process_time() - start)
            start = time.process_time()
            report = api.check(source, spec, path=path)
            times.append(time.process_time() - start)
        s = report.scope
        verdict = "complete" if s.complete else "INCOMPLETE"
        check, base = min(times) * 1e3, min(plain_times) * 1e3
        rows.append(
            f"| {name} | {s.work_items:,} | {s.accesses_logged:,} | {base:.1f} | {check:.1f} | "
            f"{check / base:.1f} | {verdict} |"
        )
    print("| kernel | work-items | records | plain cpu ms | cpu ms | cpu ratio | scope |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
