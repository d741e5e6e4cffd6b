"""The log traffic bound (issue 12 item 4): bytes gpurace moves per byte the kernel
moves, measured on the sim device for bench_cuda.py's kernels and launch shapes.

The byte counts depend on the launch, not on the device, so sim measures them
(gpurace/sim/traffic.py counts every load, store and atomic sim executes, by buffer,
with the runtime's `_gr_rec` interpreted so that its own instructions are counted):

- K: the plain kernel's bytes in the user's buffers (loads, stores, atomics) and in
  shared memory (its own column: on chip, not DRAM traffic);
- G: per instrumented run of a real `api.check` (build run, then a filter run and an
  unfiltered run where the check needs them), the bytes in gpurace's buffers:
  shadow (the prefilter's `_gr_shd`), log, control words, sync log, other global
  memory, and the `.local` bytes the instrumented kernel adds; plus the log the
  analysis reads (records x 32 bytes, read once: at least that) and the bytes the
  host zeroes for each run (log, control words, sync log; reported apart) and once a
  check (the shadow; the search after a build run reads it once more).

A run re-executes the kernel, so a check of R runs moves R x K + G bytes where the
plain launch moves K. By bytes the instructions request, (R x K + G) / K (repeated
reads of a word are cache hits on a GPU: not a floor). By each global buffer's
distinct bytes read plus distinct bytes written (`footprint`, the least that must
cross DRAM once the buffers exceed L2; `.local` apart), the DRAM floor
(R x K' + G') / K': a memory-bound kernel on a GPU is slowed at least that much.
Atomics on the shadow cost more than their bytes (a read-modify-write at L2), so the
floor understates them.
Ratios per access barely depend on the launch size (`--also` shows it); matmul's
per-thread costs (its 5 variables' table entries) shrink with its `n`.

    python bench/log_traffic.py [--scale 0.000244] [--kernels saxpy,...]
        [--also saxpy@0.000977,matmul@0.015625] [--no-prefilter]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cuda import KERNELS, cases  # noqa: E402

from gpurace import api  # noqa: E402
from gpurace.abi import SHADOW_BUILD, SHADOW_FILTER  # noqa: E402
from gpurace.backends import cuda_backend  # noqa: E402
from gpurace.instrument.ptx import compile_cuda, instrument  # noqa: E402
from gpurace.launch.cuda import cuda_launch_from_dict  # noqa: E402
from gpurace.model import RECORD_WORDS  # noqa: E402
from gpurace.options import Options  # noqa: E402
from gpurace.sim import device as sim_device  # noqa: E402
from gpurace.sim.traffic import LaunchTraffic, counting  # noqa: E402

SCALE = 2.0**-12  # saxpy/reduce/histogram 4,096 threads, stencil 1,024, matmul 256
OWN = ("shadow", "log", "ctl", "sync", "global", "local")  # gpurace's places, in order
RUN_NAMES = {SHADOW_BUILD: "build", SHADOW_FILTER: "filter", None: "unfiltered"}


@dataclass
class Run:
    """One instrumented launch of a check: its mode, records and measured bytes."""

    mode: str
    records: int
    moved: dict[str, int]  # gpurace's place -> bytes requested (loads + stores + atomics)
    atomic: dict[str, int]  # of which atomics
    distinct: dict[str, int]  # global places: distinct bytes
    user: int  # bytes in the user's buffers (K again, as the run re-executes the kernel)
    user_distinct: int
    zeroed: int  # bytes the host zeroes for this run (log, control words, sync log)


@dataclass
class Traffic:
    """A kernel's measured traffic: the plain launch (K) and the check's runs (G)."""

    kernel: str
    threads: int
    loads: int
    stores: int
    atomics: int
    shared: int
    distinct: int  # distinct bytes of the user's buffers
    runs: list[Run] = field(default_factory=list)
    records: int = 0  # records the analysis reads
    shadow_bytes: int = 0  # the prefilter's buffer, zeroed once a check

    @property
    def k(self) -> int:
        return self.loads + self.stores + self.atomics

    def g(self) -> int:
        """gpurace's bytes: its places in every run, the analysis' log read, the
        shadow's zeroing and search (not the fixed per-run zeroing: `zeroed`)."""
        return sum(sum(r.moved.values()) for r in self.runs) + self.setup()

    def g_distinct(self) -> int:
        """gpurace's distinct bytes in global memory: its buffers' footprints in every
        run, the log read, the shadow's zeroing and search. Not `.local`: a GPU gives
        each resident thread slot its local memory, which later blocks reuse, so the
        table entries stay in L1/L2 (`local_per_thread`)."""
        own = sum(v for r in self.runs for k, v in r.distinct.items() if k != "local")
        return own + self.setup()

    def local_per_thread(self) -> float:
        return sum(r.moved["local"] for r in self.runs) / len(self.runs) / self.threads

    def zeroed(self) -> int:
        """Bytes the host zeroes for the runs: log, control words, sync log (sizes
        fixed by the check's planning, nearly independent of the launch's size)."""
        return sum(r.zeroed for r in self.runs)

    def setup(self) -> int:
        """The analysis' read of the log, and the shadow zeroed and searched once (2
        words a 4-byte word of the launch's address range, plus the local area)."""
        return self.records * RECORD_WORDS * 4 + 2 * self.shadow_bytes

    def floor(self) -> float:
        """(R K + G) / K: the least slowdown of a memory-bound kernel, bytes requested."""
        return (sum(r.user for r in self.runs) + self.g()) / max(1, self.k)

    def floor_distinct(self) -> float:
        """The same with each global buffer's distinct bytes read and written (the
        DRAM floor: `g_distinct`)."""
        user = sum(r.user_distinct for r in self.runs)
        return (user + self.g_distinct()) / max(1, self.distinct)


def _places(t: LaunchTraffic, nparams: int) -> dict[str, str]:
    """The instrumented entry's arguments: the user's, then `_gr_log`, `_gr_ctl`,
    `_gr_sync`, `_gr_shd` (docs/internals.md §7)."""
    names = {f"arg{i}": "user" for i in range(nparams)}
    for k, own in enumerate(("log", "ctl", "sync", "shadow")):
        names[f"arg{nparams + k}"] = own
    return names


def _run(t: LaunchTraffic, mode: str, records: int, nparams: int, local0: int) -> Run:
    names = _places(t, nparams)
    moved = dict.fromkeys(OWN, 0)
    atomic = dict.fromkeys(OWN, 0)
    distinct = dict.fromkeys(OWN, 0)
    user = user_distinct = 0
    for place in {p for p, _ in t.bytes}:
        own = names.get(place, place)
        if own == "user":
            user += t.moved(place)
            user_distinct += t.footprint(place)
        elif own != "shared":
            moved[own] += t.moved(place)
            atomic[own] += t.moved(place, "atomic")
            distinct[own] += t.footprint(place)
    moved["local"] -= local0  # the plain kernel's own .local bytes (none here) stay K's
    zeroed = sum(t.sizes.get(f"arg{nparams + k}", 0) for k in range(3))
    return Run(mode, records, moved, atomic, distinct, user, user_distinct, zeroed)


@contextmanager
def _modes() -> Iterator[list[tuple[str, int]]]:
    """Each instrumented launch's mode and records, in order (cuda_backend.launch
    wrapped: the check's Target looks it up when the check starts)."""
    seen: list[tuple[str, int]] = []
    real = cuda_backend.launch

    def launch(*args: Any, **kw: Any) -> Any:
        pre = kw.get("prefilter")
        mode = RUN_NAMES.get(pre.mode if pre is not None else None, "?")
        result = real(*args, **kw)
        seen.append((mode, int(result.requested)))
        return result

    cuda_backend.launch = launch
    try:
        yield seen
    finally:
        cuda_backend.launch = real


def measure(name: str, data: dict, prefilter: bool = True) -> Traffic:
    """K and G of one bench_cuda launch on sim (a real check, the runtime interpreted)."""
    dev = sim_device.DEVICE
    ptx = compile_cuda((KERNELS / f"{name}.cu").read_text(), f"{name}.cu").ptx
    launch: Any = cuda_launch_from_dict(data, f"{name}.toml")

    inst = instrument(ptx, f"{name}.ptx")
    params = inst.params[name]
    with counting() as plain:
        cuda_backend.launch(dev, ptx, "k.ptx", name, params, cuda_backend.launch_args(launch),
                            launch.grid, launch.block, launch.shared_bytes)  # fmt: skip
    (p,) = plain.launches
    users = [f"arg{i}" for i in range(len(params))]
    ops = {op: sum(p.moved(u, op) for u in users) for op in ("load", "store", "atomic")}
    threads = 1
    for d in (*launch.grid, *launch.block):
        threads *= d
    out = Traffic(name, threads, ops["load"], ops["store"], ops["atomic"], p.moved("shared"),
                  sum(p.footprint(u) for u in users))  # fmt: skip
    options = Options(prefilter=prefilter)
    with counting() as counted, _modes() as modes:
        report = api.check(ptx, launch, path=f"{name}.ptx", device="sim", options=options)
    checks = [t for t in counted.launches if t.kernel == name]
    if len(checks) != len(modes):
        raise RuntimeError(f"{name}: {len(checks)} launches counted, {len(modes)} made")
    local0 = p.moved("local")
    out.runs = [_run(t, m, r, len(params), local0) for t, (m, r) in zip(checks, modes, strict=True)]
    out.records = report.scope.accesses_logged
    out.shadow_bytes = max((t.sizes.get(f"arg{len(params) + 3}", 0) for t in checks), default=0)
    if out.shadow_bytes <= 32:  # no prefilter: the 8 header words, written not searched
        out.shadow_bytes = 0
    return out


def table(rows: list[Traffic]) -> list[str]:
    """The Markdown tables for docs/performance.md: the summary, then each run."""
    lines = [
        "| kernel | threads | K: loads / stores / atomics (B) | K distinct | shared (B) | runs "
        "| records | G (B) | G/K | (R K + G) / K | G distinct, global | DRAM floor | "
        ".local B/thread | zeroed per run |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in rows:
        runs = " + ".join(r.mode for r in t.runs)
        lines.append(
            f"| {t.kernel} | {t.threads:,} | {t.loads:,} / {t.stores:,} / {t.atomics:,} | "
            f"{t.distinct:,} | {t.shared:,} | {runs} | {t.records:,} | {t.g():,} | "
            f"{t.g() / max(1, t.k):.1f} | {t.floor():.1f} | {t.g_distinct():,} | "
            f"{t.floor_distinct():.2f} | {t.local_per_thread():.0f} | "
            f"{t.zeroed() / len(t.runs):,.0f} |"
        )
    lines += [
        "",
        "| kernel | run | records | " + " | ".join(f"{o} (atomic; distinct)" for o in OWN)
        + " | user |",
        "|---|---|---:|" + "---:|" * (len(OWN) + 1),
    ]  # fmt: skip
    for t in rows:
        for r in t.runs:
            cells = " | ".join(f"{r.moved[o]:,} ({r.atomic[o]:,}; {r.distinct[o]:,})" for o in OWN)
            lines.append(f"| {t.kernel} | {r.mode} | {r.records:,} | {cells} | {r.user:,} |")
    lines += [
        "",
        "DRAM floor's terms, distinct bytes per byte of K' (runs summed):",
        "",
        "| kernel | K' again (R) | shadow | log | ctl, sync, other | log read by the analysis "
        "| shadow zeroed and searched | floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in rows:
        k = max(1, t.distinct)
        part = {o: sum(r.distinct[o] for r in t.runs) / k for o in OWN}
        again = sum(r.user_distinct for r in t.runs) / k
        lines.append(
            f"| {t.kernel} | {again:.2f} | {part['shadow']:.2f} | {part['log']:.2f} | "
            f"{part['ctl'] + part['sync'] + part['global']:.2f} | "
            f"{t.records * RECORD_WORDS * 4 / k:.2f} | {2 * t.shadow_bytes / k:.2f} | "
            f"{t.floor_distinct():.2f} |"
        )
    return lines


def floors(scale: float = SCALE, kernels: str = "") -> dict[str, Traffic]:
    """Every bench_cuda kernel's traffic at `scale` on sim (bench_cuda.py prints the
    floors beside its GPU ratios)."""
    want = kernels.split(",") if kernels else None
    return {n: measure(n, d) for n, d in cases(scale) if want is None or n in want}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=SCALE)
    ap.add_argument("--also", default="", help="more launches: KERNEL@SCALE,...")
    ap.add_argument("--kernels", default="saxpy,reduce,matmul,stencil,histogram")
    ap.add_argument("--no-prefilter", action="store_true", help="every access logged")
    args = ap.parse_args()
    want = [(k, args.scale) for k in args.kernels.split(",")]
    want += [(k, float(s)) for k, s in (x.split("@") for x in args.also.split(",") if x)]
    rows = []
    for kernel, scale in want:
        data = dict(cases(scale))[kernel]
        rows.append(measure(kernel, data, not args.no_prefilter))
    print(f"sim, scale {args.scale:g}, prefilter {'off' if args.no_prefilter else 'on'}\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
