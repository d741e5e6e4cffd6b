"""Per-kernel time of a batch: one ``gpurace check`` process for a set of small OpenCL
corpus kernels, against one process per kernel, against Oclgrind on the same set.

    python bench/batch.py [--kernels N] [--rounds R] [--json FILE]

Four whole-process timings over the same N kernels (each kernel's launch file is the
``.toml`` beside it), in one run, side by side:

- ``batch``: ``gpurace check K1 ... KN`` (one process, one PoCL context);
- ``single``: ``gpurace check Ki`` once per kernel (N processes);
- ``oclgrind``: Oclgrind's race detector on each launch, one process per kernel (the
  tests' worker, ``python -m tests.oclgrind --worker``: Python, pyopencl, the ICD);
- ``oclgrind-batch``: the same worker running all N launches in one process.

Each figure is seconds per kernel (the total over N), wall and CPU (user + sys of the
process and its children), the median over the rounds; one warm-up batch first, so
PoCL's kernel cache is warm for every column. The machine may be shared: compare the
columns of one run, not figures across runs; CPU time varies less under load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "opencl"


def kernels(n: int) -> list[Path]:
    """The first ``n`` OpenCL corpus kernels (sorted) that have a launch file."""
    found = [p for p in sorted(CORPUS.glob("*.cl")) if p.with_suffix(".toml").is_file()]
    return found[:n]


Timing = tuple[float, float, int]  # wall seconds, CPU seconds (user + sys), exit status


def timed(cmd: list[str], stdin: str | None = None, env: dict | None = None) -> Timing:
    """Wall and CPU time of one whole process (CPU time, its children's included, is
    the steadier figure on a shared machine), and its exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(
        cmd, cwd=ROOT, input=stdin, capture_output=True, text=True, env=env, check=False
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, p.returncode


def gpurace(paths: list[Path]) -> Timing:
    return timed([sys.executable, "-m", "gpurace", "check", *map(str, paths)])


def oclgrind(paths: list[Path]) -> Timing:
    env = dict(os.environ, OCLGRIND_DATA_RACES="1", PYOPENCL_NO_CACHE="1")
    jobs = [[p.stem, str(p), str(p.with_suffix(".toml"))] for p in paths]
    cmd = [sys.executable, "-m", "tests.oclgrind", "--worker", "oclgrind"]
    return timed(cmd, json.dumps(jobs), env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=12, help="how many corpus kernels")
    ap.add_argument("--rounds", type=int, default=1, help="repeat every column R times")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    paths = kernels(args.kernels)
    n = len(paths)
    gpurace(paths)  # warm-up: PoCL's kernel cache, the OS's file cache
    names = ("batch", "single", "oclgrind", "oclgrind-batch")
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    codes: dict[str, int] = {}
    for _ in range(args.rounds):
        for name in names:
            one_process = name in ("batch", "oclgrind-batch")
            tool = gpurace if name in ("batch", "single") else oclgrind
            runs = [tool(paths)] if one_process else [tool([p]) for p in paths]
            wall[name].append(sum(r[0] for r in runs) / n)
            cpu[name].append(sum(r[1] for r in runs) / n)
            codes[name] = max(r[2] for r in runs)
    figures = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in names}
    print(f"{n} kernels from tests/corpus/opencl, {args.rounds} round(s), {platform.node()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")  # fmt: skip
    print(f"{'column':<16}{'wall s/kernel':>14}{'vs oclgrind':>13}{'CPU s/kernel':>14}"
          f"{'vs oclgrind':>13}  exit")  # fmt: skip
    base = figures["oclgrind"]
    for name, (w, c) in figures.items():
        print(f"{name:<16}{w:>14.3f}{w / base[0]:>12.2f}x{c:>14.3f}{c / base[1]:>12.2f}x  "
              f"{codes[name]}")  # fmt: skip
    if args.json:
        doc = {"kernels": [str(p.relative_to(ROOT)) for p in paths],
               "wall_s_per_kernel": wall, "cpu_s_per_kernel": cpu, "exit": codes}  # fmt: skip
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
