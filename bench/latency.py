"""Latency of small checks as whole processes: gpurace warm and cold vs Oclgrind.

A check earns its place in an edit-check loop only if it costs about what a test
costs (issue 12, item 1: a warm check of a small kernel at most 3x Oclgrind's wall
time on the same launch, a cold one at most 1.5 s on PoCL, a warm WGSL check of
examples/reduce_racy.wgsl at most 0.8 s). Run from a checkout's root::

    python bench/latency.py [--runs 5] [--gpurace "CMD ..."]

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

plus a warm WGSL check (measured only: its latency is the wgpu backend's).

``--gpurace CMD`` times another gpurace (e.g. main's installed script); by default
the ``gpurace`` script beside this interpreter. Every process gets the same
environment. Python's byte-code cache is on (``PYTHONPYCACHEPREFIX`` under the
temporary directory, ``PYTHONDONTWRITEBYTECODE`` dropped), as it is for an installed
package; ``--no-pycache`` keeps the environment as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
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


def _launch_of(kernel: str, launch: str) -> Path:
    return ROOT / (launch or str(Path(kernel).with_suffix(".toml")))


def timed(cmd: list[str], env: dict[str, str], cwd: str, stdin: str | None = None) -> float:
    """Wall seconds of one whole process; exit 0, 1 (races) and 2 are all answers, a
    traceback or another code is a failure of the bench."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, cwd=cwd)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds


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


def measure(gpurace: list[str], runs: int, env: dict[str, str], tmp: Path) -> list[Row]:
    rows = []
    cwd = str(tmp)
    for kernel, launch in OPENCL:
        k, lp = ROOT / kernel, _launch_of(kernel, launch)
        check = [*gpurace, "check", str(k), "--launch", str(lp)]
        grind, job = oclgrind_cmd(k, lp)
        genv = oclgrind_env(env)
        timed(check, env, cwd)  # fill the caches
        row = Row(kernel, [], [], [])
        for _ in range(runs):
            row.warm.append(timed(check, env, cwd))
            row.oclgrind.append(timed(grind, genv, str(ROOT), job))
            fresh = cold_copy(k, tmp)
            row.cold.append(timed([*gpurace, "check", str(fresh), "--launch", str(lp)], env, cwd))
            fresh.unlink()
        rows.append(row)
        print(f"  {kernel}: done", file=sys.stderr)
    k, lp = ROOT / WGSL[0], ROOT / WGSL[1]
    check = [*gpurace, "check", str(k), "--launch", str(lp)]
    timed(check, env, cwd)
    rows.append(Row(WGSL[0], [timed(check, env, cwd) for _ in range(runs)], [], []))
    return rows


def table(rows: list[Row], title: str) -> str:
    def ms(xs: list[float]) -> str:
        return f"{1e3 * statistics.median(xs):.0f}" if xs else "-"

    def ratio(a: list[float], b: list[float]) -> str:
        return f"{statistics.median(a) / statistics.median(b):.1f}x" if a and b else "-"

    out = [
        title,
        "",
        "| kernel | warm ms | cold ms | Oclgrind ms | warm/Oclgrind | cold/Oclgrind |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [ms(r.warm), ms(r.cold), ms(r.oclgrind)]
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
    args = ap.parse_args()
    gpurace = shlex.split(args.gpurace) if args.gpurace else default_gpurace()
    with tempfile.TemporaryDirectory(prefix="gpurace-latency-") as name:
        tmp = Path(name)
        env = dict(os.environ)
        if not args.no_pycache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        rows = measure(gpurace, args.runs, env, tmp)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    title = (
        f"`{shlex.join(gpurace)}`: {platform.machine()}, {os.cpu_count()} cores, "
        f"load {load:.1f}, {when}; median of {args.runs} whole-process runs"
    )
    print(table(rows, title))


if __name__ == "__main__":
    main()
