"""A load whose store follows (docs/internals.md §5, `ACC_THEN_STORE`): the rewriter
marks the load of an lvalue that the same assignment stores to afterwards and nothing
else in it changes, and the store may then skip `_gr_acc` (`_gr_marked`); a build run's
marks with both are the marks without them, word for word, and so are the filter and
logging runs that follow; logs never carry the bit."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gpurace import abi, api
from gpurace.abi import ACC_THEN_STORE
from gpurace.backends import opencl_backend
from gpurace.backends.prefilter import SHADOW_FILTER, local_order_words
from gpurace.instrument import opencl
from gpurace.launch import LaunchSpec
from gpurace.model import Kind
from gpurace.target import kernel_shadows

FLAG = f"{ACC_THEN_STORE}u"


def _call_text(src: str, at: int) -> str:
    """The pointer text of the helper call whose `(&(` opens at `at`."""
    i, depth = at + 3, 1
    while depth:
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    return src[at + 3 : i - 1]


def marked_lvalues(source: str, needle: str = FLAG) -> list[str]:
    """The lvalues, in the kernel's order, whose helper holds `needle`: ACC_THEN_STORE
    (a marked load), `_gr_marked(` (a store that may skip _gr_acc)."""
    src = opencl.instrument(source, "k.cl").source
    kernel = src.index("__kernel")
    marked = set()
    for m in re.finditer(r"^[\w ]+ (_gr_h\d+)\(", src[:kernel], re.M):
        if needle in src[m.start() : src.index("\n}\n", m.start())]:
            marked.add(m.group(1))
    out = []
    for name in sorted(marked):
        at = src.find(name + "(&(", kernel)
        while at >= 0:
            out.append((at, "".join(_call_text(src, at + len(name)).split())))
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
    source = KERNEL.format(stmt=stmt)
    assert marked_lvalues(source) == marked
    assert marked_lvalues(source, "_gr_marked(") == marked  # and its store may skip


RACY = """
__kernel void k(__global float *y, __global const uint *idx, __global uint *hits) {
    __local float tile[16], sum[16];
    uint i = get_global_id(0), lid = get_local_id(0);
    tile[lid] = y[i];
    sum[lid] = sum[lid] + 1.0f;  /* an uninitialised read: the store then writes it */
    barrier(CLK_LOCAL_MEM_FENCE);
    y[i] += sum[lid];
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


def _run(source: str, options: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Of the instrumented `source`: a build run's whole shadow (header, pairs, local
    states and masks) and uninitialised-read area, then a filter run's log and unseen
    count, and an unfiltered run's log; __local variables are initchecked."""
    queue, _ = opencl_backend.get_device()
    inst = opencl.instrument(RACY, "k.cl")
    spec = _spec()
    params = inst.params["k"]
    extents = api.opencl_extents(inst, "k", spec)
    bases, total = api.linear_layout(extents, 16)
    pre = opencl_backend.prefilter(queue, total, 16, local_order_words(inst.variables, extents), 4)
    shadows = kernel_shadows(inst, "k", spec.args, "k.toml", extents, 4)

    def launch(prefilter=None):
        return opencl_backend.launch(
            queue, source, "k.cl", "k", params, api.opencl_args(spec, params), (64, 1, 1),
            (16, 1, 1), var_bases=bases, var_sizes=extents, log_capacity=1 << 12,
            prefilter=prefilter, initcheck=shadows, options=options,
        )  # fmt: skip

    built = launch(pre)
    words = np.empty(pre.nbytes // 4, np.uint32)
    opencl_backend._cl().enqueue_copy(queue, words, pre.buf)
    pre.mode = SHADOW_FILTER
    filtered = launch(pre)
    return {
        "shadow": words,
        "uninit": _uninit(built.uninit),
        "filtered": _sorted(opencl_backend.read_log(queue, filtered)),
        "unseen": np.array([filtered.unseen]),
        "unfiltered": _sorted(opencl_backend.read_log(queue, launch())),
    }


def _uninit(area: np.ndarray) -> np.ndarray:
    """The uninitialised-read area's count, then its records in order (the groups'
    threads fill the slots in either order)."""
    n = min(int(area[0]), abi.UNINIT_SLOTS)
    records = area[1 : 1 + n * abi.RECORD_WORDS].reshape(n, abi.RECORD_WORDS)
    return np.concatenate([area[:1], _sorted(records, drop_values=False).reshape(-1)])


def _sorted(log: np.ndarray, drop_values: bool = True) -> np.ndarray:
    """A log's records in order, by default without the stored values: the racy
    stores' values depend on how the groups interleave, which differs from run to run."""
    log = log.copy()
    if drop_values:
        log[:, abi.W_VALUE] = 0
    return np.array(sorted(map(tuple, log.tolist())), np.uint32).reshape(-1, 8)


@pytest.mark.parametrize(
    "serial, pair64",
    [(True, 1), (False, 1), (True, 0)],
    ids=["group-serial", "atomics", "32-bit-pairs"],
)
def test_marks_made_early_are_the_marks_made_at_the_store(serial, pair64, monkeypatch):
    """The same runs with the loads unmarked (so every store marks its own words):
    the same shadow, the same uninitialised reads, the same logs; with PoCL's
    group-serial updates (a local store may skip too) and without (global only), and
    with a pair marked by two 32-bit atomics (a device without 64-bit ones), where the
    load sets two kind bits of which one may be set already."""
    monkeypatch.setattr(opencl_backend, "group_serial", lambda device: serial)
    source = opencl.instrument(RACY, "k.cl").source
    assert source.count(FLAG) == 4  # the helpers of tile's, y's, y's += and hits' loads
    options = (f"-D_GR_PAIR64={pair64}",)
    marked, plain = _run(source, options), _run(source.replace(FLAG, "0u"), options)
    # the race on tile and y's shared words: the build run notes a possible conflict
    assert marked["shadow"][abi.SHD_CONFLICT] & abi.CONFLICT_SEEN
    assert marked["uninit"][0] == 64 and marked["unseen"][0] == 0  # sum's first reads
    assert len(marked["filtered"]) > 0
    for what in marked:
        assert (marked[what] == plain[what]).all(), what
    # logs never carry the bit
    log = marked["unfiltered"]
    accesses = log[(log[:, abi.W_FLAGS] & abi.F_KIND_MASK) != Kind.EVENT]
    assert len(accesses) > 0 and not (accesses[:, abi.W_FLAGS] >> 24).any()
