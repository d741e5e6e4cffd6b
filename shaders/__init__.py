"""The companion shader files, each behind the device ABI it is written against.

No shader restates a layout: `source` prepends the constants that gpurace/abi.py
generates (WGSL ``const``s or C ``#define``s) to the file, so that what a driver
compiles is this text and nothing else (tests/test_abi.py checks both halves).
"""

from __future__ import annotations

from importlib import resources

from gpurace import abi

# the ABI groups each companion file is written against
ABI_GROUPS: dict[str, tuple[str, ...]] = {
    "analysis.wgsl": ("record", "shadow", "analysis"),
    "analysis.cl": ("record", "shadow", "analysis"),
    "hash.wgsl": ("hash",),
    "hash.cl": ("hash",),
}


def text(name: str) -> str:
    """The file `name` of this package as written."""
    return resources.files(__name__).joinpath(name).read_text()


def abi_header(name: str) -> str:
    """The generated constants that file `name` is compiled with."""
    groups = ABI_GROUPS[name]
    if name.endswith(".wgsl"):
        return abi.wgsl_consts(groups)
    return abi.c_defines(groups)


def source(name: str, api: str = "") -> str:
    """File `name` as a driver compiles it: a C file behind the prelude of `api`
    ("opencl", "cuda"; none for a self-contained one) and its ABI header, a WGSL file
    behind its ABI header. `#line` keeps a C compiler's messages on the file's lines."""
    prelude = text(f"prelude_{api}.h") if api else ""
    if name.endswith(".wgsl"):
        return abi_header(name) + text(name)
    return prelude + abi_header(name) + f'#line 1 "{name}"\n' + text(name)
