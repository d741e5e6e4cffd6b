"""Regenerate the Triton corpus's PTX (tests/corpus/triton/*.ptx) from its kernels.

    /path/to/venv-with-triton/bin/python tools/triton_ptx.py

Triton compiles without a GPU: each kernel of tests/corpus/triton/kernels.py is
compiled for ``GPUTarget("cuda", 80, 32)`` (sm_80: ``ldmatrix``, ``mma.sync``,
``cp.async``; sm_90 would emit ``wgmma``, which sim does not execute) and its PTX
written beside the source with a header naming the Triton version and the
compilation. The kernels are loaded by their path relative to the repository root,
so the PTX's ``.file`` names ``tests/corpus/triton/kernels.py`` (the sites gpurace
reports). Triton is not a gpurace dependency: install it where you run this.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "tests/corpus/triton/kernels.py"

_LN = {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32",
       "mean_ptr": "*fp32", "rstd_ptr": "*fp32", "n_cols": "i32", "eps": "fp32",
       "BLOCK": "constexpr"}  # fmt: skip
_MM = {"M": "i32", "N": "i32", "K": "i32", "BM": "constexpr", "BN": "constexpr",
       "BK": "constexpr"}  # fmt: skip


#: integer parameters the launches keep multiples of 16
ALIGNED = {"M", "N", "K"}


def _ptrs(names: str, t: str) -> dict[str, str]:
    return {n: f"*{t}" for n in names.split()}


#: output name -> (kernel, signature, constexprs, options)
KERNELS: dict[str, tuple[str, dict[str, str], dict[str, int], dict[str, int]]] = {
    "vadd": ("vadd", {**_ptrs("x_ptr y_ptr out_ptr", "fp32"), "n": "i32", "BLOCK": "constexpr"},
             {"BLOCK": 256}, {"num_warps": 4}),
    "cumsum_overlap": ("cumsum_overlap", {**_ptrs("x_ptr out_ptr", "fp32"), "n": "i32",
                                          "BLOCK": "constexpr"},
                       {"BLOCK": 64}, {"num_warps": 2}),
    "softmax": ("softmax", {**_ptrs("x_ptr out_ptr", "fp32"), "n_cols": "i32",
                            "row_stride": "i32", "BLOCK": "constexpr"},
                {"BLOCK": 128}, {"num_warps": 4}),
    "layernorm": ("layernorm", _LN, {"BLOCK": 128}, {"num_warps": 4, "enable_fp_fusion": False}),
    # with FMA contraction the lanes of a warp reach different partial sums of squares
    # and all store theirs to the warp's one shared word: a write-write race
    "layernorm_fma": ("layernorm", _LN, {"BLOCK": 128}, {"num_warps": 4}),
    "matmul_f16": ("matmul", {**_ptrs("a_ptr b_ptr", "fp16"), "c_ptr": "*fp32", **_MM},
                   {"BM": 32, "BN": 32, "BK": 32}, {"num_warps": 4, "num_stages": 3}),
    "matmul_bf16": ("matmul", {**_ptrs("a_ptr b_ptr", "bf16"), "c_ptr": "*fp32", **_MM},
                    {"BM": 32, "BN": 32, "BK": 16}, {"num_warps": 2, "num_stages": 1}),
    "matmul_tf32": ("matmul", {**_ptrs("a_ptr b_ptr c_ptr", "fp32"), **_MM},
                    {"BM": 32, "BN": 32, "BK": 16}, {"num_warps": 4, "num_stages": 2}),
    "matmul_i8": ("matmul", {**_ptrs("a_ptr b_ptr", "i8"), "c_ptr": "*fp32", **_MM},
                  {"BM": 32, "BN": 32, "BK": 32}, {"num_warps": 4, "num_stages": 1}),
    "matmul_f16out": ("matmul", {**_ptrs("a_ptr b_ptr c_ptr", "fp16"), **_MM},
                      {"BM": 32, "BN": 32, "BK": 32}, {"num_warps": 4, "num_stages": 1}),
    "matmul_acc16": ("matmul_acc16", {**_ptrs("a_ptr b_ptr c_ptr", "fp16"), **_MM},
                     {"BM": 32, "BN": 32, "BK": 32}, {"num_warps": 4, "num_stages": 2}),
    "matmul_splitk": ("matmul_splitk", {**_ptrs("a_ptr b_ptr", "fp16"), "c_ptr": "*fp32", **_MM},
                      {"BM": 32, "BN": 32, "BK": 32}, {"num_warps": 4}),
    "attn_softmax": ("attn_softmax", {**_ptrs("q_ptr kt_ptr", "fp16"), "p_ptr": "*fp32",
                                      "scale": "fp32", "D": "constexpr", "BM": "constexpr",
                                      "BN": "constexpr"},
                     {"D": 32, "BM": 32, "BN": 32}, {"num_warps": 2}),
    # num_warps=1: tl.trans passes the tile through the warp's shared memory, ordered
    # only by bar.warp.sync (docs/ordering.md)
    "transpose": ("transpose", {**_ptrs("x_ptr out_ptr", "fp32"), "BLOCK": "constexpr"},
                  {"BLOCK": 32}, {"num_warps": 1}),
}  # fmt: skip


def compile_one(name: str) -> str:
    """The PTX of corpus kernel `name`, with its header."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("gpurace_triton_kernels", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn_name, signature, constexprs, options = KERNELS[name]
    fn = getattr(module, fn_name)
    # what Triton's launcher assumes of aligned tensors: pointers (and the sizes listed
    # in ALIGNED) are multiples of 16, which lets it vectorise and use cp.async
    attrs = {
        (fn.arg_names.index(a),): [["tt.divisibility", 16]]
        for a, t in signature.items()
        if t.startswith("*") or a in ALIGNED
    }
    src = ASTSource(fn, signature=signature, constexprs=constexprs, attrs=attrs)
    # FMA contraction on unless a kernel says otherwise (Triton 3.9's default)
    options = {"enable_fp_fusion": True, **options}
    compiled = triton.compile(src, target=GPUTarget("cuda", 80, 32), options=options)
    header = (
        f'// Triton {triton.__version__}, GPUTarget("cuda", 80, 32), by tools/triton_ptx.py'
        " (.file made relative to the repository):\n"
        f"// {SOURCE}::{fn_name} {constexprs} {options}\n"
        f"// launch with block = [{32 * compiled.metadata.num_warps}], shared_bytes = "
        f"{compiled.metadata.shared} (Triton's dynamic shared memory)\n"
    )
    ptx = compiled.asm["ptx"].replace(f'"{ROOT}/{SOURCE}"', f'"{SOURCE}"')
    return header + ptx


def main(names: list[str]) -> None:
    os.chdir(ROOT)
    for name in names or sorted(KERNELS):
        out = ROOT / "tests" / "corpus" / "triton" / f"{name}.ptx"
        out.write_text(compile_one(name))
        print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
