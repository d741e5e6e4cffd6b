"""Instructions per work-item of the instrumented kernel on PoCL, counted by callgrind.

Wall time on a shared host spreads 1.5x and more between runs; the instructions the
instrumented kernel executes do not depend on the load. For each kernel this runs,
under ``valgrind --tool=callgrind --toggle-collect='_pocl_kernel_<name>_workgroup*'``
(the kernel's work-group function and everything it calls: the runtime's
``_gr_*`` functions), ``--checks`` warm ``gpurace.check`` calls at ``--items``
work-items (bench/bench_opencl.py's launches), after one check outside valgrind that
fills PoCL's and gpurace's program caches (so nothing is compiled under valgrind).
It prints, per kernel, the collected instructions per work-item per check and the
share of each ``_gr_*`` function (inclusive)::

    python bench/callgrind_opencl.py --kernels saxpy,reduce --items 65536

Run it with a tree's own interpreter (bench/ab.py explains why) to count that tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).parent


def child(name: str, items: int, checks: int) -> None:
    """Run ``checks`` checks of kernel ``name`` (the process valgrind watches)."""
    sys.path.insert(0, str(BENCH))
    from bench_opencl import KERNELS, case  # noqa: PLC0415

    from gpurace import api  # noqa: PLC0415
    from gpurace.launch import LaunchSpec  # noqa: PLC0415

    path = KERNELS / f"{name}.cl"
    source = path.read_text()
    spec = LaunchSpec.from_dict({"kernel": name, **case(name, items)}, path=f"{name}.toml")
    verdicts = []
    for _ in range(checks):
        report = api.check(source, spec, path=str(path))
        verdicts.append((report.scope.accesses_logged, len(report.errors), report.scope.complete))
    print(json.dumps({"verdicts": verdicts, "work_items": report.scope.work_items}))


def count(name: str, items: int, checks: int, outdir: Path) -> dict:
    """Callgrind's instructions for kernel ``name``: total and per ``_gr_*`` function."""
    me = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--items", str(items)]
    subprocess.run([*me, "--checks", "1"], check=True, capture_output=True)  # fill caches
    out = outdir / f"callgrind.{name}"
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-instr=yes",
            f"--toggle-collect=_pocl_kernel_{name}_workgroup*",
            f"--callgrind-out-file={out}",
            *me,
            "--checks",
            str(checks),
        ],
        capture_output=True,
        text=True,
        check=True,
        # valgrind runs the kernel 50-100x slower: past the default hang watchdog
        env={**os.environ, "GPURACE_KERNEL_TIMEOUT": "3600"},
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    ann = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    totals = re.search(r"^([\d,]+) .*PROGRAM TOTALS", ann, re.M)
    if totals is None:
        raise SystemExit(f"no PROGRAM TOTALS in callgrind_annotate's output:\n{ann}")
    total = int(totals.group(1).replace(",", ""))
    funcs: dict[str, int] = {}
    for m in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\S*:(_gr_\w+)", ann, re.M):
        funcs[m.group(2)] = funcs.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    per = checks * result["work_items"]
    return {
        "kernel": name,
        "per_item": total / per,
        "funcs": {f: n / per for f, n in sorted(funcs.items(), key=lambda kv: -kv[1])},
        "verdicts": result["verdicts"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="saxpy,reduce,stencil,histogram,matmul")
    ap.add_argument("--items", type=int, default=65536)
    ap.add_argument("--checks", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.items, args.checks)
        return
    with tempfile.TemporaryDirectory() as tmp:
        outdir = args.keep or Path(tmp)
        outdir.mkdir(parents=True, exist_ok=True)
        print(
            f"# {sys.executable}, {args.items} work-items, {args.checks} checks, "
            f"load {os.getloadavg()[0]:.1f}"
        )
        print(
            "| kernel | instructions per work-item | _gr_* (inclusive, per work-item) | verdicts |"
        )
        print("|---|---|---|---|")
        for name in args.kernels.split(","):
            r = count(name, args.items, args.checks, outdir)
            funcs = ", ".join(f"{f} {n:.0f}" for f, n in list(r["funcs"].items())[:6])
            print(f"| {name} | {r['per_item']:.0f} | {funcs} | {r['verdicts'][0]} |", flush=True)


if __name__ == "__main__":
    main()
