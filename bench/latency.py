"""Latency of small checks as whole processes: gpurace warm and cold vs Oclgrind.

A check earns its place in an edit-check loop only if it costs about what a test
costs (issue 12, item 1: a warm check of a small kernel at most 3x Oclgrind's wall
time on the same launch, a cold one at most 1.5 s on PoCL, a warm WGSL check of
examples/reduce_racy.wgsl at most 0.8 s). Run from a checkout's root::

    python bench/latency.py [--runs 5] [--gpurace "CMD ..."] [--against "CMD ..."]

For each kernel, side by side in one sitting (the columns of one run interleaved,
so that a busy machine slows them alike), the median of ``--runs`` runs of:

* **warm**: ``gpurace check KERNEL --launch LAUNCH`` after one untimed run, so every
  cache (PoCL's, gpurace's) has the kernel;
* **cold**: the same with a new kernel text (an empty function with a unique name
  appended to a copy in a temporary directory), so every cache keyed by the source
  misses, PoCL's too;
* **Oclgrind**: the same launch under Oclgrind's race detector as tests/oclgrind.py
  runs it (``python -m tests.oclgrind --worker oclgrind``, one case): a whole
  Python process that imports pyopencl, builds the kernel and launches it.

plus a warm WGSL check. Each cell is the median wall time and, after a slash, the
median CPU time (user + system, all threads) of the same runs: on a machine shared
with other jobs the wall time varies with their load, the CPU time much less.

``--gpurace CMD`` times another gpurace (e.g. main's installed script); by default
the ``gpurace`` script beside this interpreter. ``--against CMD`` times a second one
in the same sitting, each run of one followed by the same run of the other (a before
and an after tree under the same load); both tables share the Oclgrind runs.
Every process gets the same environment. Python's byte-code cache is on
(``PYTHONPYCACHEPREFIX`` under the temporary directory, ``PYTHONDONTWRITEBYTECODE``
dropped), as it is for an installed package; ``--no-pycache`` keeps the environment
as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (OpenCL kernel, its launch file), relative to the checkout root
OPENCL = [
    ("examples/opencl/reduce_racy.cl", "examples/opencl/reduce_racy.toml"),
    ("tests/corpus/opencl/local_tile_missing_barrier.cl", ""),
    ("tests/corpus/opencl/inter_group_rw.cl", ""),
    ("tests/corpus/opencl/atomic_vs_plain_intra.cl", ""),
]
WGSL = ("examples/reduce_racy.wgsl", "examples/reduce_racy.toml")


@dataclass
class Row:
    kernel: str
    warm: list[float]
    cold: list[float]
    oclgrind: list[float]
    cpu: dict[str, list[float]] = field(default_factory=dict)  # column -> CPU seconds


def _launch_of(kernel: str, launch: str) -> Path:
    return ROOT / (launch or str(Path(kernel).with_suffix(".toml")))


def timed(cmd: list[str], env: dict[str, str], cwd: str, stdin: str | None = None) -> float:
    """Wall seconds of one whole process; exit 0, 1 (races) and 2 are all answers, a
    traceback or another code is a failure of the bench. Its CPU seconds (user and
    system of all its threads) are left in `last_cpu`."""
    global last_cpu
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=cwd)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds


last_cpu = 0.0  # CPU seconds of the last `timed` process


def timed_into(row: Row, column: str, cmd: list[str], env: dict[str, str], cwd: str,
               stdin: str | None = None) -> None:  # fmt: skip
    """`timed`, its wall time appended to `row`'s `column`, its CPU time beside it."""
    getattr(row, column).append(timed(cmd, env, cwd, stdin))
    row.cpu.setdefault(column, []).append(last_cpu)


def oclgrind_cmd(kernel: Path, launch: Path) -> tuple[list[str], str]:
    """tests/oclgrind.py's worker on one case (its stdin)."""
    job = json.dumps([["case", str(kernel), str(launch)]])
    return [sys.executable, "-m", "tests.oclgrind", "--worker", "oclgrind"], job


def oclgrind_env(env: dict[str, str]) -> dict[str, str]:
    """What tests/oclgrind.py's run_cases gives its worker."""
    out = dict(env, OCLGRIND_DATA_RACES="1", OCLGRIND_MAX_ERRORS="100000000")
    out["PYOPENCL_NO_CACHE"] = "1"
    out.pop("OCLGRIND_UNIFORM_WRITES", None)
    out["PYTHONPATH"] = str(ROOT)
    return out


def cold_copy(kernel: Path, tmp: Path) -> Path:
    """A copy of `kernel` with a function no cache has seen (not a comment: PoCL's
    kernel cache is keyed by the preprocessed source, which has none)."""
    tag = uuid.uuid4().hex
    path = tmp / f"cold_{tag[:12]}_{kernel.name}"
    path.write_text(kernel.read_text() + f"\nvoid latency_bench_{tag}(void) {{}}\n")
    return path


def default_gpurace() -> list[str]:
    beside = Path(sys.executable).with_name("gpurace")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "gpurace"]


def measure(
    gpuraces: list[list[str]], runs: int, env: dict[str, str], tmp: Path, opencl: bool = True
) -> list[list[Row]]:
    """The rows of each command in `gpuraces`, their runs alternating (one run of each
    in turn, and one Oclgrind run that every command's row shares), so that a load
    that comes and goes slows them alike."""
    tables: list[list[Row]] = [[] for _ in gpuraces]
    cwd = str(tmp)
    for kernel, launch in OPENCL if opencl else []:
        k, lp = ROOT / kernel, _launch_of(kernel, launch)
        grind, job = oclgrind_cmd(k, lp)
        genv = oclgrind_env(env)
        checks = [[*g, "check", str(k), "--launch", str(lp)] for g in gpuraces]
        for check in checks:
            timed(check, env, cwd)  # fill the caches
        rows = [Row(kernel, [], [], []) for _ in gpuraces]
        for _ in range(runs):
            timed_into(rows[0], "oclgrind", grind, genv, str(ROOT), job)
            for row, g, check in zip(rows, gpuraces, checks, strict=True):
                row.oclgrind, row.cpu["oclgrind"] = rows[0].oclgrind, rows[0].cpu["oclgrind"]
                timed_into(row, "warm", check, env, cwd)
                fresh = cold_copy(k, tmp)
                timed_into(row, "cold", [*g, "check", str(fresh), "--launch", str(lp)], env, cwd)
                fresh.unlink()
        for table_rows, row in zip(tables, rows, strict=True):
            table_rows.append(row)
        print(f"  {kernel}: done", file=sys.stderr)
    k, lp = ROOT / WGSL[0], ROOT / WGSL[1]
    checks = [[*g, "check", str(k), "--launch", str(lp)] for g in gpuraces]
    for check in checks:
        timed(check, env, cwd)
    rows = [Row(WGSL[0], [], [], []) for _ in gpuraces]
    for _ in range(runs):
        for row, check in zip(rows, checks, strict=True):
            timed_into(row, "warm", check, env, cwd)
    for table_rows, row in zip(tables, rows, strict=True):
        table_rows.append(row)
    return tables


def table(rows: list[Row], title: str) -> str:
    def ms(xs: list[float], cpu: list[float] | None = None) -> str:
        if not xs:
            return "-"
        wall = f"{1e3 * statistics.median(xs):.0f}"
        return f"{wall} / {1e3 * statistics.median(cpu):.0f}" if cpu else wall

    def ratio(a: list[float], b: list[float]) -> str:
        return f"{statistics.median(a) / statistics.median(b):.1f}x" if a and b else "-"

    out = [
        title,
        "",
        "| kernel | warm ms wall / CPU | cold ms wall / CPU | Oclgrind ms wall / CPU "
        "| warm/Oclgrind | cold/Oclgrind |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [ms(getattr(r, c), r.cpu.get(c)) for c in ("warm", "cold", "oclgrind")]
        cells += [ratio(r.warm, r.oclgrind), ratio(r.cold, r.oclgrind)]
        out.append(f"| {r.kernel} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per column (median)")
    ap.add_argument("--gpurace", help="the gpurace command to time (shell-quoted)")
    ap.add_argument(
        "--no-pycache", action="store_true", help="leave PYTHONDONTWRITEBYTECODE as it is"
    )
    ap.add_argument("--wgsl-only", action="store_true", help="only the warm WGSL check")
    ap.add_argument(
        "--against",
        metavar="CMD",
        help="a second gpurace (a before tree's script), its runs alternating with the first's",
    )
    args = ap.parse_args()
    gpurace = shlex.split(args.gpurace) if args.gpurace else default_gpurace()
    gpuraces = [gpurace] + ([shlex.split(args.against)] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="gpurace-latency-") as name:
        tmp = Path(name)
        env = dict(os.environ)
        if not args.no_pycache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        start = os.getloadavg()[0]
        t0 = time.perf_counter()
        tables = measure(gpuraces, args.runs, env, tmp, opencl=not args.wgsl_only)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    loads = f"load {start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    for g, rows in zip(gpuraces, tables, strict=True):
        title = (
            f"`{shlex.join(g)}`: {platform.machine()}, {os.cpu_count()} cores, {loads}, "
            f"{when} ({time.perf_counter() - t0:.0f} s); median of {args.runs} "
            "whole-process runs"
            + (", alternating with the other command" if len(tables) > 1 else "")
        )
        print(table(rows, title) + "\n")


if __name__ == "__main__":
    main()
