"""Cost of `gpurace run`: each host program timed plain and under `gpurace run`.

The programs (bench/run_programs/) are what a user writes: a pyopencl Jacobi solver
(hundreds of launches of a hand-written kernel and of pyopencl.array's elementwise
and reduction kernels, two grid sizes), pyopencl's ReductionKernel and scans on 1M
elements, and a five-pass wgpu Blelloch scan of 1M u32. Each program is run once
plain and once under `gpurace run` untimed first (the caches: gpurace's, PoCL's,
the drivers'), then the rounds alternate plain and `run`, so both sides see the same
load. Wall and CPU time (user + system of the child and its threads) are medians;
the load average is sampled around each round. The program's stdout must be
byte-identical on both sides (the programs print digests of their results), and
`run`'s exit status and summary line are shown.

    python bench/bench_run.py [--rounds 3] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "run_programs"
ROOT = HERE.parent
#: pyopencl's scans' known race and unloaded-__local reads (tests/run_programs/)
SCAN_SUPPRESS = ROOT / "tests" / "run_programs" / "pyopencl_scan.toml"


@dataclass
class Program:
    name: str
    script: str
    run_options: list[str] = field(default_factory=list)


PROGRAMS_RUN = [
    Program("cl_jacobi", "cl_jacobi.py"),
    Program("cl_library_1m", "cl_library_1m.py", ["--suppress", str(SCAN_SUPPRESS)]),
    Program("wgpu_scan", "wgpu_scan.py"),
]


@dataclass
class Timing:
    wall: float
    cpu: float
    stdout: str
    stderr: str
    code: int


def timed(argv: list[str]) -> Timing:
    """Run `argv` to the end: wall seconds, and CPU seconds (user + system of the
    child and its threads: the growth of RUSAGE_CHILDREN once it is reaped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, proc.stdout, proc.stderr, proc.returncode)


def summary(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith("gpurace run:")]
    return lines[-1] if lines else "(no summary line)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per side")
    ap.add_argument("--only", default="", help="comma list of program names")
    args = ap.parse_args()
    chosen = [p for p in PROGRAMS_RUN if not args.only or p.name in args.only.split(",")]
    py = sys.executable
    rows = []
    start = datetime.now(UTC)
    cpu = platform.processor() or platform.machine()
    print(f"{cpu}, {os.cpu_count()} cores, {start:%Y-%m-%d %H:%M} UTC")
    for prog in chosen:
        script = str(PROGRAMS / prog.script)
        plain = [py, script]
        under = [py, "-m", "gpurace", "run", *prog.run_options, "--", "python", script]
        timed(plain), timed(under)  # warm: gpurace's cache, PoCL's, the drivers'
        sides: dict[str, list[Timing]] = {"plain": [], "run": []}
        loads = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            sides["plain"].append(timed(plain))
            sides["run"].append(timed(under))
            loads.append(os.getloadavg()[0])
        same = all(t.stdout == sides["plain"][0].stdout for s in sides.values() for t in s)
        last = sides["run"][-1]
        print(f"{prog.name}: run exit {last.code}; {summary(last.stderr)}")
        if not same:
            print(f"{prog.name}: STDOUT DIFFERS between plain and run", file=sys.stderr)
        med = {
            s: (statistics.median(t.wall for t in ts), statistics.median(t.cpu for t in ts))
            for s, ts in sides.items()
        }
        rows.append((prog.name, med, same, min(loads), max(loads)))
    print()
    print("| program | plain wall s | run wall s | wall ratio | plain CPU s | run CPU s "
          "| CPU ratio | stdout identical | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, med, same, lo, hi in rows:
        (pw, pc), (rw, rc) = med["plain"], med["run"]
        print(
            f"| {name} | {pw:.2f} | {rw:.2f} | {rw / pw:.2f} | {pc:.2f} | {rc:.2f} "
            f"| {rc / pc:.2f} | {'yes' if same else 'NO'} | {lo:.1f}-{hi:.1f} |"
        )
    print(f"\n{args.rounds} rounds, medians; {datetime.now(UTC):%H:%M} UTC")


if __name__ == "__main__":
    main()
