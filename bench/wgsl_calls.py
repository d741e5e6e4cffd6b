"""What a warm WGSL check asks of wgpu, counted: numbers that do not depend on load.

A check's fixed cost on lavapipe is mostly calls into wgpu-native, submits and
read-backs (each maps a buffer and waits for the device), and bytes cleared, written
and copied. This script runs each bench_wgsl.py case once to warm every cache, then
counts, over ``--checks`` further checks, per check: the wgpu-native calls (all but
the poll thread's ``wgpuDevicePoll``, whose number depends on timing; by name with
``--names``), queue submits, buffer maps (read-backs), buffers
created and their bytes, bind groups created, and the bytes of clear_buffer,
write_buffer and copy_buffer_to_buffer (read_buffer's copies included). It also
prints the CPU time of the checking thread (the host's share: lavapipe's own
threads, which run the kernels, are not counted; less load-dependent than wall time)
and the check's report (verdict, races, records) so that two trees can be compared.
Run from a checkout's root with that tree's interpreter::

    python bench/wgsl_calls.py [--scale 0.0625] [--checks 3] [--names] [CASE ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_wgsl import cases, kernel_source  # noqa: E402
from wgpu.backends.wgpu_native import _api  # noqa: E402

from gpurace import api  # noqa: E402
from gpurace.backends import wgpu_backend, wgpu_pipelines  # noqa: E402
from gpurace.launch import LaunchSpec  # noqa: E402

COUNTS: Counter[str] = Counter()


def _count_native() -> None:
    """Wrap every wgpu-native function wgpu-py calls (its `libf` proxies)."""
    libf = _api.libf
    for name in dir(libf):
        if name.startswith("wgpu"):
            fn = getattr(libf, name)

            def counted(*args: Any, _fn: Callable[..., Any] = fn, _name: str = name) -> Any:
                if _name != "wgpuDevicePoll":  # the poll thread's: depends on timing
                    COUNTS["native"] += 1
                COUNTS["native:" + _name] += 1
                return _fn(*args)

            setattr(libf, name, counted)


def _size(args: tuple, kwargs: dict, index: int, key: str) -> int:
    value = kwargs.get(key, args[index] if len(args) > index else None)
    return int(value or 0)


def _count_bytes() -> None:
    """Wrap the Python-level methods whose sizes are counted."""
    enc, queue, device = _api.GPUCommandEncoder, _api.GPUQueue, _api.GPUDevice

    def wrap(cls: type, method: str, what: Callable[..., int]) -> None:
        original = getattr(cls, method)

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            COUNTS[method] += 1
            COUNTS[method + " bytes"] += what(self, args, kwargs)
            return original(self, *args, **kwargs)

        setattr(cls, method, counted)

    def clear_size(_self: Any, a: tuple, k: dict) -> int:
        buf = k.get("buffer", a[0])
        size = k.get("size", a[2] if len(a) > 2 else None)
        return int(size) if size is not None else int(buf.size) - _size(a, k, 1, "offset")

    wrap(enc, "clear_buffer", clear_size)
    wrap(enc, "copy_buffer_to_buffer", lambda s, a, k: _size(a, k, 4, "size"))
    wrap(queue, "write_buffer", lambda s, a, k: memoryview(k.get("data", a[2])).nbytes)
    wrap(queue, "submit", lambda s, a, k: 0)
    wrap(device, "_create_buffer", lambda s, a, k: int(a[1]))
    wrap(device, "create_bind_group", lambda s, a, k: 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.0625)
    ap.add_argument("--checks", type=int, default=3)
    ap.add_argument("--names", action="store_true", help="count each native function")
    ap.add_argument("case", nargs="*", help="bench_wgsl.py cases (default: all)")
    args = ap.parse_args()
    _count_native()
    _count_bytes()
    rows = []
    for name, launch in cases(args.scale):
        if args.case and name not in args.case:
            continue
        source = kernel_source(name, args.scale)
        spec = LaunchSpec.from_dict({"entry": "main", **launch}, path=f"{name}.toml")

        def check(source: str = source, spec: LaunchSpec = spec, name: str = name) -> Any:
            return api.check(source, spec, path=f"{name}.wgsl")

        check()
        for kernel in wgpu_pipelines.COMPILE_ORDER:  # else compiled on a thread meanwhile
            wgpu_pipelines.analysis_pipeline(wgpu_backend.get_device(None)[0], kernel)
        COUNTS.clear()
        cpu = time.thread_time()
        for _ in range(args.checks):
            report = check()
        cpu_ms = (time.thread_time() - cpu) * 1e3 / args.checks
        per = {k: v / args.checks for k, v in COUNTS.items()}
        s = report.scope
        rows.append(
            f"| {name} | {per.get('native', 0):.0f} | {per.get('submit', 0):.0f} | "
            f"{per.get('native:wgpuBufferMapAsync', 0):.0f} | "
            f"{per.get('_create_buffer', 0):.0f} / {per.get('_create_buffer bytes', 0):,.0f} | "
            f"{per.get('create_bind_group', 0):.0f} | "
            f"{per.get('clear_buffer', 0):.0f} / {per.get('clear_buffer bytes', 0):,.0f} | "
            f"{per.get('write_buffer', 0):.0f} / {per.get('write_buffer bytes', 0):,.0f} | "
            f"{per.get('copy_buffer_to_buffer', 0):.0f} / "
            f"{per.get('copy_buffer_to_buffer bytes', 0):,.0f} | "
            f"{cpu_ms:.1f} | {'complete' if s.complete else 'INCOMPLETE'}, "
            f"{len(report.races)} races, {s.accesses_logged} records |"
        )
        if args.names:
            for key, value in sorted(per.items()):
                if key.startswith("native:"):
                    print(f"  {name} {key[7:]}: {value:g}")
    print(f"per warm check (mean of {args.checks}), scale {args.scale}")
    print(
        "| kernel | native calls | submits | maps | buffers made / bytes | bind groups "
        "| clears / bytes | writes / bytes | copies / bytes | main thread CPU ms | report |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
