"""Compile the Numba kernels of tests/corpus/ptx/numba/kernels.py to the PTX beside
them (one ``NAME.ptx`` per kernel), or check that the shipped PTX is what Numba
compiles now.

    pip install numba numba-cuda      # not a gpurace dependency; no GPU needed
    python tools/numba_ptx.py [--check]

Numba compiles with NVVM (from the nvidia-nvvm wheel) for sm_80. The PTX's ``.file``
directives name the kernels' source by its absolute path; they are rewritten to the
path relative to the repository root, so that reports name
``tests/corpus/ptx/numba/kernels.py`` wherever the repository is. Exit status 1 with
``--check`` when a shipped file differs (or is missing).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "tests", "corpus", "ptx", "numba")
CC = (8, 0)


def compile_all() -> dict[str, str]:
    """name -> PTX of every kernel in kernels.py, paths made relative to the root."""
    from numba import cuda

    path = os.path.join(FOLDER, "kernels.py")
    spec = importlib.util.spec_from_file_location("gpurace_numba_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = {}
    for name, (fn, sig) in module.KERNELS.items():
        ptx, _ = cuda.compile_ptx(fn, sig, cc=CC, lineinfo=True)
        out[name] = ptx.replace(f'"{path}"', f'"{os.path.relpath(path, ROOT)}"')
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    stale = []
    for name, ptx in compile_all().items():
        target = os.path.join(FOLDER, f"{name}.ptx")
        if args.check:
            current = open(target).read() if os.path.exists(target) else None
            if current != ptx:
                stale.append(name)
            continue
        with open(target, "w") as f:
            f.write(ptx)
        print(f"wrote {os.path.relpath(target, ROOT)}")
    for name in stale:
        print(f"{name}.ptx differs from what Numba compiles now: run tools/numba_ptx.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
