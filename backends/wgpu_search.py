"""The device search of a built shadow (`backends/prefilter.py`) on wgpu: whether a
word may conflict, found by two passes recorded into a launch's encoder
(`wgpu_backend.launch`, `wgpu_backend.shadow_may_conflict`; docs/internals.md §2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import wgpu

from gpurace.abi import wgsl_consts
from gpurace.backends.prefilter import Prefilter
from gpurace.backends.wgpu_pipelines import cached_module_pipeline

WORKGROUP = 64
ROW_GROUPS = 32768  # work-groups per dispatch row

_SEARCH_PER = 8  # shadow words each invocation of the device search tests

_SHADOW_ANY = (
    wgsl_consts(("shadow",))
    + f"const PER: u32 = {_SEARCH_PER}u;\n"
    + """
@group(0) @binding(0) var<storage, read> shd: array<u32>;
@group(0) @binding(1) var<storage, read_write> found: array<u32>;
// the launch-wide words W, the local area's masks G * L and their first word
@group(0) @binding(2) var<uniform> span: vec4<u32>;

// found[0] = 1 if some word of the shadow may hold a conflict: a launch-wide pair
// with several actors, and a store or atomics beside plain accesses (the filter's
// and the analysis' test), or a mask word of the local area with a bit set. Two
// entry points: lavapipe runs a branch's body under a lane mask even when no lane
// takes it, so a launch without a local area does not pay for its scan. Plain loads
// and stores, no atomics: the pass reads a finished shadow (an earlier pass of the
// submit built it), and every store writes the same 1; lavapipe runs an atomic lane
// by lane, a plain load for all lanes at once.
// PER (_SEARCH_PER): words each invocation tests; fewer invocations and groups,
// which cost lavapipe more than the loads (a 16 MiB shadow: ~20 ms with one word
// each and atomic loads, ~3 ms so)
fn pair_may_conflict(w: u32) -> bool {
  let who = shd[SHADOW_HEAD + PAIR_WORDS * w];
  let kinds = shd[SHADOW_HEAD + PAIR_WORDS * w + 1u];
  let mixed = (kinds & KB_STORE) != 0u || (kinds & (KB_LOAD | KB_ATOMIC)) == (KB_LOAD | KB_ATOMIC);
  return w < span.x && who == MULTI && mixed;
}

@compute @workgroup_size(64)
fn pairs(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = gid.x + gid.y * n.x * 64u;
  if (i == 0u && (shd[SHD_UNSEEN] != 0u || shd[SHD_LOCAL_OOB] != 0u)) {
    found[0] = 1u;  // a word beyond the shadow, a local access out of bounds
  }
  var hit = false;
  for (var k = 0u; k < PER; k++) {
    hit = hit | pair_may_conflict(i * PER + k);
  }
  if (hit) {
    found[0] = 1u;
  }
}

@compute @workgroup_size(64)
fn masks(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = gid.x + gid.y * n.x * 64u;
  var hit = false;
  for (var k = 0u; k < PER; k++) {
    let m = i * PER + k;
    hit = hit | (m < span.y && shd[span.z + m] != 0u);
  }
  if (hit) {
    found[0] = 1u;
  }
}
"""
)


def encode_search(device, enc, pre: Prefilter, found: Any, span_buf: Any) -> None:
    """Record the device search of `pre`'s built shadow in `enc`: its passes set the
    first word of `found` (cleared here) when a word may conflict; `span_buf` is a
    16-byte uniform buffer for their bounds."""
    storage = wgpu.BufferBindingType.storage
    ro, uniform = wgpu.BufferBindingType.read_only_storage, wgpu.BufferBindingType.uniform
    layout = ((0, ((0, ro), (1, storage), (2, uniform))),)
    masks = pre.local_words * pre.groups
    span = np.array([pre.words, masks, pre.local_offset + masks, 0], np.uint32)
    device.queue.write_buffer(span_buf, 0, span.tobytes())
    enc.clear_buffer(found, 0, 16)
    for entry, words in (("pairs", pre.words), ("masks", masks)):
        if entry == "masks" and not masks:
            continue
        threads = -(-words // _SEARCH_PER)
        pipeline, layouts = cached_module_pipeline(
            device, _SHADOW_ANY, "<shadow_any>", entry, layout
        )
        bind = device.create_bind_group(
            layout=layouts[0],
            entries=[
                {"binding": 0, "resource": {"buffer": pre.buf, "offset": 0, "size": pre.nbytes}},
                {"binding": 1, "resource": {"buffer": found}},
                {"binding": 2, "resource": {"buffer": span_buf}},
            ],
        )
        groups = max(1, -(-threads // WORKGROUP))
        gx = min(groups, ROW_GROUPS)
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipeline)
        cp.set_bind_group(0, bind)
        cp.dispatch_workgroups(gx, -(-groups // gx), 1)
        cp.end()
