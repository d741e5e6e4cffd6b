"""Overhead of gpurace on CUDA: (instrumented launch + on-device analysis) / plain launch.

Both sides are timed the same way in one run on one GPU: upload the inputs, launch,
wait, read the outputs back (plain), plus the log, its analysis and the race
readback (gpurace). The kernels are compiled to PTX once, outside the timing, and
both sides load that PTX. If `compute-sanitizer` is on the PATH, its racecheck is
timed on the same kernels. Beside each ratio, the kernels' own: the check's
instrumented launches over the plain launch, by CUDA events (no uploads, no
read-backs, no analysis), and the floor that gpurace's memory traffic sets for it
(bench/log_traffic.py, measured on the sim device at a small scale first: the least
slowdown of a memory-bound kernel whose buffers do not fit in L2) and how far above
it the kernel ratio is. Prints a Markdown table for docs/performance.md.

    python bench/bench_cuda.py [--scale 1.0] [--repeat 3] [--device NAME] [--no-floors]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpurace import api  # noqa: E402
from gpurace.backends import cuda_backend  # noqa: E402
from gpurace.instrument.ptx import compile_cuda, instrument  # noqa: E402
from gpurace.launch.cuda import cuda_launch_from_dict  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"
SANITIZER_TIMEOUT = 60  # seconds per kernel (--sanitizer-timeout): hwtests/run.sh is minutes


def cases(scale: float) -> list[tuple[str, dict]]:
    """Launches at `scale` of sizes that fill an H200 (132 SMs) many times over."""
    n = max(256, int((1 << 24) * scale) // 256 * 256)
    side = max(16, int(256 * scale**0.5) // 16 * 16)
    grid_side = max(16, int(2048 * scale**0.5) // 16 * 16)

    def buf(name, typ, count, fill="zeros"):
        return {"name": name, "type": typ, "count": count, "fill": fill, "seed": 1}

    return [
        ("saxpy", {"kernel": "saxpy", "grid": [n // 256], "block": [256], "arg": [
            {"name": "a", "value": 2.0}, buf("x", "float", n, "random"),
            buf("y", "float", n, "random"), {"name": "n", "value": n}]}),
        ("reduce", {"kernel": "reduce", "grid": [n // 256], "block": [256], "arg": [
            buf("in", "float", n, "random"), buf("out", "float", n // 256)]}),
        ("matmul", {"kernel": "matmul", "grid": [side // 16, side // 16], "block": [16, 16],
            "arg": [buf("a", "float", side * side, "random"), buf("b", "float", side * side,
            "random"), buf("c", "float", side * side), {"name": "n", "value": side}]}),
        ("stencil", {"kernel": "stencil", "grid": [grid_side // 16, grid_side // 16],
            "block": [16, 16], "arg": [buf("in", "float", grid_side**2, "random"),
            buf("out", "float", grid_side**2), {"name": "w", "value": grid_side},
            {"name": "h", "value": grid_side}]}),
        ("histogram", {"kernel": "histogram", "grid": [n // 256], "block": [256], "arg": [
            buf("in", "uint", n, "random"), buf("bins", "uint", 256)]}),
    ]  # fmt: skip


@contextmanager
def launch_seconds() -> Iterator[list[float]]:
    """The kernel time (CUDA events, `CudaLaunchResult.seconds`) of every launch made
    through `cuda_backend.launch` in the block (a check's Target looks it up when the
    check starts)."""
    got: list[float] = []
    real = cuda_backend.launch

    def launch(*args, **kw):
        result = real(*args, **kw)
        got.append(result.seconds)
        return result

    cuda_backend.launch = launch
    try:
        yield got
    finally:
        cuda_backend.launch = real


def timed(fn, repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def sanitizer_seconds(name: str, ptx_path: Path, launch: dict, timeout: float) -> str:
    """compute-sanitizer --tool racecheck on the plain kernel (a child python runs it)."""
    exe = shutil.which("compute-sanitizer")
    if not exe:
        return "-"
    code = (
        f"import sys, json; sys.path.insert(0, {str(ROOT)!r})\n"
        "from gpurace.backends import cuda_backend as cb\n"
        "from gpurace.instrument.ptx import instrument_ptx, resolve_kernel\n"
        "from gpurace.launch.cuda import cuda_launch_from_dict\n"
        f"ptx = open({str(ptx_path)!r}).read()\n"
        f"l = cuda_launch_from_dict(json.loads({json.dumps(launch)!r}))\n"
        "inst = instrument_ptx(ptx, 'k.ptx'); k = resolve_kernel(inst, l)\n"
        "dev = cb.get_device()[0]\n"
        "cb.launch(dev, ptx, 'k.ptx', k, inst.params[k], cb.launch_args(l), l.grid, l.block)\n"
    )
    t0 = time.perf_counter()
    try:
        run = subprocess.run(
            [exe, "--tool", "racecheck", sys.executable, "-c", code],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"> {timeout * 1e3:.0f}"
    secs = time.perf_counter() - t0
    if run.returncode:
        return f"failed ({run.stderr.strip().splitlines()[-1:] or run.stdout[-200:]})"
    return f"{secs * 1e3:.0f}"


def traffic_floors(kernels: str) -> dict[str, float]:
    """Each kernel's DRAM floor from bench/log_traffic.py (sim, its default scale: the
    ratios per access barely depend on the size); none if it cannot run here."""
    try:
        from log_traffic import floors

        return {k: t.floor_distinct() for k, t in floors(kernels=kernels).items()}
    except Exception as exc:  # a bench column, not a check: say why and go on
        print(f"(log traffic floors not measured: {type(exc).__name__}: {exc})\n")
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="folder for the compiled PTX")
    ap.add_argument("--kernels", default="saxpy,reduce,matmul,stencil,histogram")
    ap.add_argument("--sanitizer-timeout", type=float, default=SANITIZER_TIMEOUT)
    ap.add_argument("--no-floors", action="store_true", help="skip log_traffic's floors")
    args = ap.parse_args()
    floor = {} if args.no_floors else traffic_floors(args.kernels)
    dev, dev_name = cuda_backend.get_device(args.device)
    arch = cuda_backend.arch_of(dev)
    out = Path(args.out or "/tmp/gpurace-bench")
    out.mkdir(parents=True, exist_ok=True)
    print(f"device: {dev_name}\n")
    print(
        "| kernel | threads | records | plain ms | gpurace ms | ratio | kernel ratio | "
        "traffic floor | kernel ratio / floor | racecheck ms | result |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    ratios = []
    for name, data in cases(args.scale):
        if name not in args.kernels.split(","):
            continue
        ptx = compile_cuda((KERNELS / f"{name}.cu").read_text(), f"{name}.cu", arch=arch).ptx
        ptx_path = out / f"{name}.ptx"
        ptx_path.write_text(ptx)
        launch = cuda_launch_from_dict(data, f"{name}.toml")
        inst = instrument(ptx, str(ptx_path))
        kernel = name
        params = inst.params[kernel]
        kargs = cuda_backend.launch_args(launch)

        def plain(ptx=ptx, params=params, kargs=kargs, launch=launch, kernel=kernel):
            return cuda_backend.launch(
                dev, ptx, "k.ptx", kernel, params, kargs, launch.grid, launch.block
            )

        def checked(ptx=ptx, data=data, name=name):
            return api.check(ptx, cuda_launch_from_dict(data, f"{name}.toml"), path=f"{name}.ptx")

        plain(), checked()  # warm up: module loads, analysis build, allocations
        with launch_seconds() as k_plain:
            t_plain, _ = timed(plain, args.repeat)
        with launch_seconds() as k_check:
            t_check, report = timed(checked, args.repeat)
        ratio = t_check / t_plain
        k_ratio = sum(k_check) / max(1e-12, sum(k_plain))  # both: `repeat` launches or checks
        ratios.append(ratio)
        s = report.scope
        verdict = ("complete" if s.complete else "INCOMPLETE") + (
            f", {len(report.races)} races" if report.races else ""
        )
        san = sanitizer_seconds(name, ptx_path, data, args.sanitizer_timeout)
        f = floor.get(name)
        close = f"{f:.1f} | {k_ratio / f:.2f}" if f else "- | -"
        print(
            f"| {name} | {s.work_items:,} | {s.accesses_logged:,} | {t_plain * 1e3:.1f} | "
            f"{t_check * 1e3:.1f} | {ratio:.1f} | {k_ratio:.1f} | {close} | {san} | {verdict} |",
            flush=True,
        )
    print(f"\nmedian ratio: {statistics.median(ratios):.1f}x (target <= 5x)")


if __name__ == "__main__":
    main()
