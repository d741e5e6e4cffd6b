"""A load whose store follows (docs/internals.md §5, `ACC_THEN_STORE`): the rewriter
marks the load of an lvalue that the same assignment stores to afterwards and nothing
else in it changes, and a build run's marks with it are the marks without it, word for
word; logging runs never see the bit."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.abi import ACC_THEN_STORE
from gpurace.backends import opencl_backend
from gpurace.backends.prefilter import local_order_words
from gpurace.instrument import opencl
from gpurace.launch import LaunchSpec
from gpurace.model import Kind

FLAG = f"{ACC_THEN_STORE}u"


def _call_text(src: str, at: int) -> str:
    """The pointer text of the helper call whose `(&(` opens at `at`."""
    i, depth = at + 3, 1
    while depth:
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    return src[at + 3 : i - 1]


def marked_lvalues(source: str) -> list[str]:
    """The lvalues, in the kernel's order, whose load helper carries ACC_THEN_STORE."""
    src = opencl.instrument(source, "k.cl").source
    kernel = src.index("__kernel")
    marked = set()
    for m in re.finditer(r"^[\w ]+ (_gr_h\d+)\(", src[:kernel], re.M):
        if FLAG in src[m.start() : src.index("\n}\n", m.start())]:
            marked.add(m.group(1))
    out = []
    for name in sorted(marked):
        at = src.find(name + "(&(", kernel)
        while at >= 0:
            out.append((at, _call_text(src, at + len(name))))
            at = src.find(name + "(&(", at + 1)
    return [text for _, text in sorted(out)]


KERNEL = """
float twice(float v) {{ return 2.0f * v; }}
__kernel void k(__global float *y, __global float *z, __global float4 *v, float a) {{
    __local float tile[16];
    uint i = get_global_id(0), j = i, lid = get_local_id(0);
    tile[lid] = (float)lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    {stmt}
}}
"""


@pytest.mark.parametrize(
    "stmt, marked",
    [
        ("y[i] = a * z[i] + y[i];", ["y[i]"]),
        ("y[ i ] = (y[i]) * a;", ["y[i]"]),
        ("y[get_global_id(0)] = y[get_global_id(0)] * a;", ["y[get_global_id(0)]"]),
        ("y[i] += a;", ["y[i]"]),
        ("y[i]++;", ["y[i]"]),
        ("v[i].x += a;", ["v[i]"]),  # a component's compound assignment
        ("tile[lid] = tile[lid] + tile[lid ^ 1u];", ["tile[lid]"]),
        ("y[i] = y[i + 1u] * a;", []),  # another element
        ("z[i] = y[i] * a;", []),  # another variable
        ("y[i] = twice(y[i]);", []),  # a call that could do anything
        ("y[i] = sqrt(y[i]);", []),  # only work-item functions are let through
        ("y[i] = y[i] + y[j++];", []),  # an index changed on the way
        ("y[i] = (z[j] = a) + y[i];", []),  # another store on the way
        ("v[i].x = v[i].x * a;", []),  # components are not matched
    ],
)
def test_the_load_of_the_stored_lvalue_is_marked_and_nothing_else(stmt, marked):
    assert marked_lvalues(KERNEL.format(stmt=stmt)) == marked


RACY = """
__kernel void k(__global float *y, __global const uint *idx, __global uint *hits) {
    __local float tile[16];
    uint i = get_global_id(0), lid = get_local_id(0);
    tile[lid] = y[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    tile[lid] = tile[lid] + tile[(lid + 1u) % 16u];  /* reads a word its owner writes */
    y[i] = y[i] * 2.0f + tile[lid];
    y[idx[i]] = y[idx[i]] + 1.0f;  /* duplicates in idx: several work-items a word */
    hits[idx[i] % 4u] += 1u;
}
"""


def _spec() -> LaunchSpec:
    idx = (np.arange(64, dtype=np.uint32) * 7) % 48  # 16 words written twice
    return LaunchSpec.from_dict(
        {"kernel": "k", "global_size": [64], "local_size": [16],
         "arg": [{"name": "y", "type": "float", "count": 64, "fill": "arange"},
                 {"name": "idx", "type": "uint", "fill": idx},
                 {"name": "hits", "type": "uint", "count": 4}]},
        path="k.toml",
    )  # fmt: skip


def _run(source: str) -> tuple[np.ndarray, np.ndarray]:
    """A build run's whole shadow (header, pairs, local states and masks) and an
    unfiltered run's log, of the instrumented `source`."""
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(RACY, "k.cl")
    spec = _spec()
    params = inst.params["k"]
    extents = api.opencl_extents(inst, "k", spec)
    bases, total = api.linear_layout(extents, 16)
    pre = opencl_backend.prefilter(queue, total, 16, local_order_words(inst.variables, extents), 4)

    def launch(prefilter=None):
        return opencl_backend.launch(
            queue, source, "k.cl", "k", params, api.opencl_args(spec, params), (64, 1, 1),
            (16, 1, 1), var_bases=bases, var_sizes=extents, log_capacity=1 << 12,
            prefilter=prefilter,
        )  # fmt: skip

    launch(pre)
    words = np.empty(pre.nbytes // 4, np.uint32)
    opencl_backend._cl().enqueue_copy(queue, words, pre.buf)
    log = opencl_backend.read_log(queue, launch())
    return words, log


def test_marks_made_early_are_the_marks_made_at_the_store():
    source = opencl.instrument(RACY, "k.cl").source
    assert source.count(FLAG) == 3  # the helpers of tile's, y's and hits' loads
    shadow, log = _run(source)
    plain_shadow, plain_log = _run(source.replace(FLAG, "0u"))
    # the race on tile and y's shared words: the build run notes a possible conflict
    assert shadow[abi.SHD_CONFLICT] & abi.CONFLICT_SEEN
    assert (shadow == plain_shadow).all()
    # an unfiltered run logs what it did without the bit, and never the bit itself
    assert sorted(map(tuple, log.tolist())) == sorted(map(tuple, plain_log.tolist()))
    accesses = log[(log[:, abi.W_FLAGS] & abi.F_KIND_MASK) != Kind.EVENT]
    assert len(accesses) > 0 and not (accesses[:, abi.W_FLAGS] >> 24).any()
