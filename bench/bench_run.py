"""Cost of `gpurace run`: each host program timed plain and under `gpurace run`.

The programs (bench/run_programs/) are what a user writes: a pyopencl Jacobi solver
(hundreds of launches of a hand-written kernel and of pyopencl.array's elementwise
and reduction kernels, two grid sizes), pyopencl's ReductionKernel and scans on 1M
elements, and a five-pass wgpu Blelloch scan of 1M u32. Each program is run once
plain and once under `gpurace run` untimed first (the caches: gpurace's, PoCL's,
the drivers'), then the rounds alternate plain and `run`, so both sides see the same
load. Wall and CPU time (user + system of the child and its threads) are medians;
the load average is sampled around each round. Python's bytecode cache is one of
those caches: every child writes and reads its ``.pyc`` files under a private
``PYTHONPYCACHEPREFIX`` (in this sandbox ``PYTHONDONTWRITEBYTECODE`` is set, and every
process would compile gpurace's ~80 modules again: ~0.1 s of CPU that an installed
gpurace does not pay; ``--no-pyc`` measures with the environment as it is). The
program's stdout must be
byte-identical on both sides (the programs print digests of their results), and
`run`'s exit status and summary line are shown.

With ``--per-launch``, only the hooks' cost on a launch that is not checked
(`per_launch`), in microseconds.

    python bench/bench_run.py [--rounds 3] [--only NAME,...] [--per-launch]
                              [--base DIR [--base-python PYTHON]]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
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


def child_env(pyc: bool, **extra: str) -> dict[str, str] | None:
    """The children's environment: with `pyc`, Python's bytecode cache on, in a private
    directory (``PYTHONPYCACHEPREFIX``) so that no tree gets ``__pycache__`` folders."""
    if not pyc and not extra:
        return None
    env = {**os.environ, **extra}
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(
            tempfile.gettempdir(), f"gpurace-bench-pyc-{os.getuid()}"
        )
    return env


def timed(argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> Timing:
    """Run `argv` to the end: wall seconds, and CPU seconds (user + system of the
    child and its threads: the growth of RUSAGE_CHILDREN once it is reaped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, proc.stdout, proc.stderr, proc.returncode)


def per_launch(rounds: int, n: int = 2000) -> tuple[float, float, float, float]:
    """The hooks' cost on launches that are not checked, in this process: microseconds
    of wall and CPU per launch of a small kernel (``kernel(queue, ...)``, and a
    quarter as many pyopencl.array ``a * 2``) on PoCL, plain and with the pyopencl
    hooks installed (their first launches, the checked ones, outside the timing);
    medians of `rounds` alternations."""
    import numpy as np
    import pyopencl as cl
    import pyopencl.array as cla

    import gpurace.backends  # noqa: F401  (OpenCL's ICDs first)
    from gpurace.run import hooks_opencl
    from gpurace.run.session import Options, Session

    platforms = cl.get_platforms()
    chosen = [p for p in platforms if "Portable" in p.name] or platforms
    q = cl.CommandQueue(cl.Context(chosen[0].get_devices()))
    text = "__kernel void k(__global float *a, float s) { a[get_global_id(0)] *= s; }"
    a = cla.zeros(q, 1024, np.float32)

    def loop(count: int) -> tuple[float, float]:
        k = cl.Program(q.context, text).build().k
        q.finish()
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            k(q, (1024,), (64,), a.data, np.float32(1.0))
        for _ in range(count // 4):
            a * 2  # noqa: B018  (an elementwise kernel of pyopencl's)
        q.finish()
        done = count + count // 4
        return (time.perf_counter() - wall) / done * 1e6, (time.process_time() - cpu) / done * 1e6

    session = Session(Options())
    sides: dict[str, list[tuple[float, float]]] = {"plain": [], "hooked": []}
    for _ in range(rounds):
        sides["plain"].append(loop(n))
        undo = hooks_opencl.install(session)
        try:
            loop(4)  # selects (checks) the first launch of each kernel and shape
            sides["hooked"].append(loop(n))
        finally:
            undo()
    pw, pc = (statistics.median(x[i] for x in sides["plain"]) for i in (0, 1))
    hw, hc = (statistics.median(x[i] for x in sides["hooked"]) for i in (0, 1))
    return pw, pc, hw, hc


def summary(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith("gpurace run:")]
    return lines[-1] if lines else "(no summary line)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per side")
    ap.add_argument("--only", default="", help="comma list of program names")
    ap.add_argument("--per-launch", action="store_true", help="only the hooks' per-launch cost")
    ap.add_argument(
        "--base",
        default="",
        help="also time `gpurace run` of another checkout of gpurace, run from that "
        "directory (`python -m` imports its gpurace/ first; backends/ stay this tree's): "
        "an A/B of gpurace/ in one sitting",
    )
    ap.add_argument(
        "--base-python",
        default="",
        help="the interpreter of --base's side (another venv, whose editable install maps "
        "gpurace.backends and gpurace.shaders to that checkout: with this tree's python "
        "only gpurace/ is the base's)",
    )
    ap.add_argument(
        "--no-pyc",
        action="store_true",
        help="keep the environment's PYTHONDONTWRITEBYTECODE (no bytecode cache)",
    )
    args = ap.parse_args()
    if args.per_launch:
        pw, pc, hw, hc = per_launch(args.rounds)
        print(f"us per launch not checked (PoCL, {os.getloadavg()[0]:.1f} load):")
        print(f"plain wall {pw:.1f} CPU {pc:.1f}; hooked wall {hw:.1f} CPU {hc:.1f}")
        print(f"hooks add wall {hw - pw:.1f} us, CPU {hc - pc:.1f} us a launch")
        return
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
        base_py = args.base_python or py
        argv = {"plain": plain, "run": under, "base": [base_py, *under[1:]]}
        pyc = not args.no_pyc
        envs: dict[str, dict[str, str] | None] = {
            "plain": child_env(pyc),
            "run": child_env(pyc),
        }
        if args.base:
            envs["base"] = child_env(pyc, PYTHONPATH=os.path.abspath(args.base))
        sides: dict[str, list[Timing]] = {s: [] for s in envs}
        cwd = {s: Path(args.base).resolve() if s == "base" else ROOT for s in envs}
        for side, env in envs.items():  # warm: gpurace's cache, PoCL's, the drivers'
            timed(argv[side], env, cwd[side])
        loads = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            for side, env in envs.items():
                sides[side].append(timed(argv[side], env, cwd[side]))
            loads.append(os.getloadavg()[0])
        same = all(t.stdout == sides["plain"][0].stdout for s in sides.values() for t in s)
        for side in envs:
            last = sides[side][-1]
            if side != "plain":
                print(f"{prog.name} ({side}): exit {last.code}; {summary(last.stderr)}")
        if not same:
            print(f"{prog.name}: STDOUT DIFFERS between plain and run", file=sys.stderr)
        med = {
            s: (statistics.median(t.wall for t in ts), statistics.median(t.cpu for t in ts))
            for s, ts in sides.items()
        }
        rows.append((prog.name, med, same, min(loads), max(loads)))
    print()
    runs = [s for s in ("base", "run") if s in rows[0][1]] if rows else []
    head = "| program | plain wall s | plain CPU s |"
    for s in runs:
        head += f" {s} wall s (ratio) | {s} CPU s (ratio) |"
    print(head + " stdout identical | load |")
    print("|---" * (3 + 2 * len(runs) + 2) + "|")
    for name, med, same, lo, hi in rows:
        pw, pc = med["plain"]
        line = f"| {name} | {pw:.2f} | {pc:.2f} |"
        for s in runs:
            rw, rc = med[s]
            line += f" {rw:.2f} ({rw / pw:.2f}) | {rc:.2f} ({rc / pc:.2f}) |"
        print(line + f" {'yes' if same else 'NO'} | {lo:.1f}-{hi:.1f} |")
    cache = "off (--no-pyc)" if args.no_pyc else "on"
    print(f"\n{args.rounds} rounds, medians; bytecode cache {cache}; {datetime.now(UTC):%H:%M} UTC")


if __name__ == "__main__":
    main()
