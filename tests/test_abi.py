"""The device ABI has one home (gpurace/abi.py): the shaders and the runtimes are
compiled with the constants generated from it, define none of them themselves and
use none that it lacks; the backends share one control-word and shadow layout."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpurace import abi, api, shaders
from gpurace.backends import opencl_backend, wgpu_backend
from gpurace.instrument.opencl import runtime as cl_runtime
from gpurace.instrument.wgsl import runtime as wgsl_runtime
from gpurace.launch import LaunchSpec

ROOT = Path(__file__).parent.parent
ALL_NAMES = {n for names in abi.GROUPS.values() for n in names}
# what a C file may use without defining it: OpenCL C's own names
C_BUILTINS = {"CLK_LOCAL_MEM_FENCE", "CLK_GLOBAL_MEM_FENCE"}


def _code(text: str) -> str:
    """`text` without its // and /* */ comments."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)


def _defined(text: str) -> set[str]:
    """Names a WGSL or C text defines at top level (constants, macros, functions,
    bindings, types)."""
    pats = (
        r"^\s*#define\s+(\w+)",
        r"^\s*(?:const|override)\s+(\w+)",
        r"^\s*fn\s+(\w+)",
        r"^\s*struct\s+(\w+)",
        r"^\s*(?:@\w+\(\d+\)\s*)*var(?:<[^>]*>)?\s+(\w+)",  # with its @group/@binding
        r"^\s*}\s*(\w+);",  # typedef struct {...} Name;
        r"^\s*(?!return\b)(?:\w+[\s*]+)+(\w+);",  # a C struct member (Ctx's LOG, P, ...)
        r"^\s*(?:DEVICE_FN|KERNEL|HASH_FN|HASH_KERNEL)\s+\w+\s+(\w+)\s*\(",
    )
    return {m for p in pats for m in re.findall(p, text, re.M)}


def _upper_names(text: str) -> set[str]:
    return set(re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", _code(text)))


@pytest.mark.parametrize("name", sorted(shaders.ABI_GROUPS))
def test_a_companion_shader_uses_the_generated_abi_and_restates_none_of_it(name):
    text = shaders.text(name)
    header = shaders.abi_header(name)
    generated = set(abi.values(shaders.ABI_GROUPS[name]))
    assert generated <= _defined(header)
    # no copy of an ABI name, whichever group it belongs to
    assert not (_defined(text) & ALL_NAMES), "a shader redefines a name of gpurace/abi.py"
    preludes = "".join(shaders.text(f"prelude_{a}.h") for a in ("opencl", "cuda"))
    known = _defined(text) | _defined(preludes) | generated | C_BUILTINS
    missing = {n for n in _upper_names(text) if n not in known}
    assert not missing, f"{name} uses names gpurace/abi.py lacks: {sorted(missing)}"


def test_what_the_drivers_compile_is_the_file_behind_its_generated_header():
    for name in shaders.ABI_GROUPS:
        src = shaders.source(name, "" if name.endswith(".wgsl") or "hash" in name else "opencl")
        assert shaders.abi_header(name) in src and src.endswith(shaders.text(name))
    assert opencl_backend.c_source("analysis.cl", "cuda") == shaders.source("analysis.cl", "cuda")
    # no module reads a companion file but through shaders.source
    readers = []
    for py in [*(ROOT / "gpurace").rglob("*.py"), *(ROOT / "backends").glob("*.py")]:
        text = py.read_text()
        if re.search(r"joinpath\(\s*f?[\"'][\w{}.]*\.(wgsl|cl|h)[\"']", text):
            readers.append(py.name)
    assert readers == []


def test_the_wgsl_params_struct_is_the_abi_params_in_order():
    text = shaders.text("analysis.wgsl")
    body = re.search(r"struct Params \{(.*?)\}", text, re.S).group(1)
    fields = re.findall(r"^\s*(\w+):", body, re.M)
    p_names = sorted(
        (n for n in abi.GROUPS["analysis"] if n.startswith("P_")), key=abi.values(["analysis"]).get
    )
    assert len(fields) == abi.PARAM_WORDS
    named = [f"P_{f.upper()}" for f in fields]
    # WGSL's two spare words carry the C kernels' arrayLength substitutes
    assert named[:14] == p_names[:14] and fields[14:] == ["pad1", "pad2"]


@pytest.mark.parametrize(
    "runtime, header",
    [
        (wgsl_runtime.prelude(3), abi.runtime_wgsl(3)),
        (wgsl_runtime.prelude(3) + shaders.text("initcheck.wgsl"), abi.runtime_wgsl(3)),
        (cl_runtime.prelude(3, 4), abi.runtime_c(3)),
    ],
    ids=["wgsl", "wgsl-initcheck", "opencl"],
)
def test_a_runtime_uses_only_generated_abi_names(runtime, header):
    assert runtime.startswith(header)
    body = runtime[len(header) :]
    prefixed = {abi.RUNTIME_PREFIX + n for n in abi.values(abi.RUNTIME_GROUPS)}
    per_kernel = {abi.RUNTIME_PREFIX + n for n in abi.per_kernel(3)}
    assert not (_defined(body) & (prefixed | per_kernel))
    used = set(re.findall(r"\b_GR_[A-Z0-9_]+\b", _code(body)))
    assert used - _defined(body) <= prefixed | per_kernel
    assert {"_GR_CTL_BINS0", "_GR_SHD_UNSEEN", "_GR_W_EXTRA"} <= used
    # no literal control-word or shadow-header index is left in the text
    assert not re.search(r"(?:ctl|shd|_gr_par)\[\d", body)


def test_the_control_words_are_one_layout():
    words = abi.control_words(100, (8, 72), 2, 16, [0, 64], [64, 32], 5)
    nv = 2
    assert words[abi.CTL_CAPACITY] == 100 and words[abi.CTL_LO : abi.CTL_HI + 1] == [8, 72]
    assert [words[abi.ctl_base(v)] for v in range(nv)] == [0, 64]
    assert [words[abi.ctl_size(nv, v)] for v in range(nv)] == [64, 32]
    assert words[abi.ctl_unattributed(nv)] == 0
    assert words[abi.ctl_bins(nv) : abi.ctl_bins(nv) + 2] == [0, 0]
    assert words[abi.ctl_event_groups(nv, 2)] == 5
    assert len(words) == abi.ctl_event_slots(nv, 2)
    assert abi.control_words(1, (0, 4), 0, 0, [0])[abi.ctl_size(1, 0)] == 0  # WGSL: no sizes


WIDE_WGSL = """
@group(0) @binding(0) var<storage, read_write> big: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    big[lid] = lid;
    big[4000u + lid / 2u] = lid;
}
"""
WIDE_CL = """
__kernel void wide(__global uint *big) {
    uint lid = get_local_id(0);
    big[lid] = lid;
    big[4000u + lid / 2u] = lid;
}
"""


def _header_words(lang: str, device, pre) -> list[int]:
    """The shadow's header words as the build run left them."""
    if lang == "wgsl":
        raw = device.queue.read_buffer(pre.buf, 0, 4 * abi.SHADOW_HEAD)
        return [int(x) for x in np.frombuffer(raw, np.uint32)]
    import pyopencl as cl

    queue = device
    out = np.empty(abi.SHADOW_HEAD, np.uint32)
    cl.enqueue_copy(queue, out, pre.buf, is_blocking=True)
    return [int(x) for x in out]


@pytest.mark.parametrize("lang", ["wgsl", "opencl"])
def test_a_word_beyond_the_shadow_sets_the_same_header_word_on_both_apis(monkeypatch, lang):
    """A build run whose shadow covers 16 words, of a kernel that also writes far
    beyond: SHD_UNSEEN is 1 and the mode word is the build run's (WGSL once used
    word 0 for this, OpenCL and CUDA word 3); the race beyond is still reported."""
    backend = wgpu_backend if lang == "wgsl" else opencl_backend
    monkeypatch.setattr(backend, "shadow_words", lambda _end, _limit: 16)
    real, seen = backend.shadow_may_conflict, []

    def spy(device, pre):
        seen.append(_header_words(lang, device, pre))
        return real(device, pre)

    monkeypatch.setattr(backend, "shadow_may_conflict", spy)
    if lang == "wgsl":
        spec = {"entry": "main", "workgroups": [1, 1, 1],
                "binding": [{"binding": 0, "type": "u32", "count": 4096}]}  # fmt: skip
        source, path = WIDE_WGSL, "wide.wgsl"
    else:
        spec = {"kernel": "wide", "global_size": [64], "local_size": [64],
                "arg": [{"name": "big", "type": "uint", "count": 4096}]}  # fmt: skip
        source, path = WIDE_CL, "wide.cl"
    report = api.check(source, LaunchSpec.from_dict(spec, path="wide.toml"), path=path)
    assert len(seen) == 1
    head = seen[0]
    assert head[abi.SHD_MODE] == abi.SHADOW_BUILD and head[abi.SHD_UNSEEN] == 1
    assert head[abi.SHD_WORDS] == 16 and head[abi.SHD_LOCAL_OOB] == 0
    assert [(r.cls.name, r.instances) for r in report.races] == [("GLOBAL_INTRA", 32)]
    assert report.scope.complete
