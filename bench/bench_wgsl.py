"""Overhead of gpurace on wgpu: (instrumented launch + on-device analysis) / plain launch.

Both sides are timed the same way, side by side in one run on one device: upload the
inputs, launch, wait, read the outputs back (the plain side), plus log analysis and
race readback (the gpurace side). Prints a Markdown table for docs/performance.md.

    python bench/bench_wgsl.py [--scale 1.0] [--repeat 3] [--device NAME]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from datetime import date
from pathlib import Path

from gpurace import api
from gpurace.backends import wgpu_backend, wgpu_pipelines
from gpurace.launch import LaunchSpec

KERNELS = Path(__file__).parent / "kernels"


def grid(groups: int) -> list[int]:
    """Split a 1-D group count over x and y (65535 groups per dimension at most)."""
    gy = -(-groups // 32768)
    return [groups // gy, gy, 1]


def sizes(scale: float) -> tuple[int, int, int]:
    """Elements for the 1-D kernels, matmul N and stencil side at this scale of the issue's
    sizes (16M elements, 1024 x 1024 matmul, 2048 x 2048 stencil)."""
    n = int(16 * 1024 * 1024 * scale) // 256 * 256
    side = max(16, int(1024 * scale**0.5) // 16 * 16)
    return n, side, 2 * side


def kernel_source(name: str, scale: float) -> str:
    """The bench kernel with its compile-time size set for this scale."""
    _, side, grid_side = sizes(scale)
    text = (KERNELS / f"{name}.wgsl").read_text()
    text = text.replace("const N: u32 = 1024u;", f"const N: u32 = {side}u;")
    text = text.replace("const W: u32 = 2048u;", f"const W: u32 = {grid_side}u;")
    return text.replace("const H: u32 = 2048u;", f"const H: u32 = {grid_side}u;")


def cases(scale: float) -> list[tuple[str, dict]]:
    n, side, grid_side = sizes(scale)
    return [
        (
            "saxpy",
            {
                "workgroups": grid(n // 256),
                "binding": [
                    {"binding": 0, "type": "f32", "count": n, "fill": "random", "seed": 1},
                    {"binding": 1, "type": "f32", "count": n, "fill": "random", "seed": 2},
                ],
            },
        ),
        (
            "reduce",
            {
                "workgroups": grid(n // 256),
                "binding": [
                    {"binding": 0, "type": "f32", "count": n, "fill": "random", "seed": 1},
                    {"binding": 1, "type": "f32", "count": n // 256},
                ],
            },
        ),
        (
            "matmul",
            {
                "workgroups": [side // 16, side // 16, 1],
                "binding": [
                    {"binding": 0, "type": "f32", "count": side**2, "fill": "random", "seed": 1},
                    {"binding": 1, "type": "f32", "count": side**2, "fill": "random", "seed": 2},
                    {"binding": 2, "type": "f32", "count": side**2},
                ],
            },
        ),
        (
            "stencil",
            {
                "workgroups": [grid_side // 16, grid_side // 16, 1],
                "binding": [
                    {"binding": 0, "type": "f32", "count": grid_side**2, "fill": "random"},
                    {"binding": 1, "type": "f32", "count": grid_side**2},
                ],
            },
        ),
        (
            "histogram",
            {
                "workgroups": grid(n // 256),
                "binding": [
                    {"binding": 0, "type": "u32", "count": n, "fill": "random", "seed": 1},
                    {"binding": 1, "type": "u32", "count": 256},
                ],
            },
        ),
    ]


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the issue's sizes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    dev, dev_name = wgpu_backend.get_device(args.device)
    rows, ratios = [], []
    for name, launch in cases(args.scale):
        source = kernel_source(name, args.scale)
        spec = LaunchSpec.from_dict({"entry": "main", **launch}, path=f"{name}.toml")
        path = str(KERNELS / f"{name}.wgsl")
        inst = api.instrument(source, path)
        data = {(b.group, b.binding): b.data for b in spec.buffers}

        def plain(source=source, inst=inst, data=data, spec=spec, path=path):
            return wgpu_backend.launch(
                dev, source, path, "main", inst.bindings, data, tuple(spec.workgroups)
            )

        def checked(source=source, spec=spec, path=path):
            return api.check(source, spec, path=path, device=args.device)

        plain(), checked()  # warm up: shader compilation, allocations
        # and the analysis pipelines, which a check compiles on a thread and waits for
        # only when it analyses: left running, they would be timed in the checks below
        for kernel in wgpu_pipelines.COMPILE_ORDER:
            wgpu_pipelines.analysis_pipeline(dev, kernel)
        t_plain, _ = timed(plain, args.repeat)
        t_check, report = timed(checked, args.repeat)
        ratio = t_check / t_plain
        ratios.append(ratio)
        s = report.scope
        verdict = "complete" if s.complete else "INCOMPLETE"
        rows.append(
            f"| {name} | {s.work_items:,} | {s.accesses_logged:,} | {t_plain * 1e3:.1f} | "
            f"{t_check * 1e3:.1f} | {ratio:.1f} | {s.device_bytes / 2**20:.0f} | {verdict} |"
        )
        print(rows[-1], flush=True)
    print()
    print(
        f"Device: {dev_name}; host: {platform.processor() or platform.machine()}, "
        f"{date.today()}; scale {args.scale}, median of {args.repeat}"
    )
    print(
        "| kernel | work-items | records | plain ms | gpurace ms | ratio | log+tables MiB | scope |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nmedian ratio: {statistics.median(ratios):.1f}")


if __name__ == "__main__":
    main()
