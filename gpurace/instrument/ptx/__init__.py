"""The CUDA rewriter: CUDA C++ -> PTX (NVRTC, line info) -> instrumented PTX.

`instrument(source, path, options=(), name_expressions=())` accepts a ``.cu`` file's
text (compiled with NVRTC) or PTX (a ``.ptx`` path, or text that starts like PTX:
Triton's and Numba's output) and returns an `Instrumented` whose `source` is the
instrumented PTX (docs/internals.md §7).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpurace.model import Instrumented

from .compile import DEFAULT_ARCH, assemble, compile_cuda, cuda_include_dirs, find_ptxas
from .rewriter import instrument_ptx, strip_inserted
from .source import CudaSource

__all__ = [
    "DEFAULT_ARCH",
    "assemble",
    "compile_cuda",
    "cuda_include_dirs",
    "find_ptxas",
    "instrument",
    "instrument_ptx",
    "is_ptx",
    "strip_inserted",
]


def is_ptx(source: str, path: str) -> bool:
    """PTX input: a .ptx file, or text whose first statement is a PTX directive."""
    if path.lower().endswith(".ptx"):
        return True
    for line in source.splitlines():
        s = line.strip()
        if s and not s.startswith("//"):
            return s.startswith((".version", ".target"))
    return False


def instrument(
    source: str,
    path: str,
    options: Sequence[str] = (),
    name_expressions: Sequence[str] = (),
    arch: str = DEFAULT_ARCH,
    initcheck: frozenset[int] | None = None,
) -> Instrumented:
    """Instrument a CUDA or PTX kernel (see the module docstring); `initcheck`: the
    uninitialised pointer parameters when reads of unwritten memory are checked
    (`bounds.checked_vars`, docs/memcheck.md)."""
    if is_ptx(source, path):
        return instrument_ptx(source, path, initcheck=initcheck)
    compiled = compile_cuda(source, path, options, name_expressions, arch)
    if not name_expressions and not re.search(r"(^|\s)\.entry\s", compiled.ptx):
        _uninstantiated(CudaSource(path, source), path)
    inst = instrument_ptx(
        compiled.ptx, path, CudaSource(path, source), user_file=path, initcheck=initcheck
    )
    inst.lowered_names = compiled.lowered  # type: ignore[attr-defined]
    inst.original_ptx = compiled.ptx  # type: ignore[attr-defined]
    return inst


def _uninstantiated(src: CudaSource, path: str) -> None:
    """The module has no kernel: if it is because a ``__global__`` template was never
    instantiated, say which and what to add (else instrument_ptx's 'no .entry')."""
    from gpurace.model import GpuraceError

    templates = src.kernel_templates()
    if templates:
        name, example, line, col = templates[0]
        raise GpuraceError(
            f"kernel template '{name}' is never instantiated, so NVRTC emits no kernel: add "
            f'name_expressions = ["{example}"] to the launch file (cupy: '
            f'RawModule(..., name_expressions=["{example}"])), or an explicit instantiation '
            f"'template __global__ void {example}(...);' to the source",
            path,
            line,
            col,
        )


def resolve_kernel(inst: Instrumented, launch: object) -> str:
    """The PTX entry a CUDA launch names: its ``kernel`` as written (``saxpy``), a
    name expression (``scale<float>``, lowered by NVRTC) or the mangled name itself;
    the only entry when the launch names none."""
    from gpurace.model import GpuraceError

    from .source import _mangled_base

    names = list(inst.entry_points)
    want = getattr(launch, "entry", None)
    path = getattr(launch, "path", "")
    line = getattr(launch, "key_lines", {}).get("kernel", 0)
    if want is None:
        if len(names) == 1:
            return names[0]
        raise GpuraceError(
            f"the module has several kernels ({', '.join(names)}); choose one with kernel = ...",
            path,
        )
    lowered = getattr(inst, "lowered_names", {})
    if want in names:
        return want
    if want in lowered and lowered[want] in names:
        return lowered[want]
    by_base = [n for n in names if _mangled_base(n) == want]
    if len(by_base) == 1:
        return by_base[0]
    hint = '; a template needs name_expressions = ["NAME<T>"]' if not names else ""
    raise GpuraceError(
        f"kernel '{want}' is not a kernel of the module (it has {', '.join(names) or 'none'})"
        + hint,
        path,
        line,
    )
