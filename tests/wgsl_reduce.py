"""A tree reduction in workgroup memory, and the same without the barrier that ends
each level (a race on the tile), for the WGSL prefilter's tests: every group's
accesses are the same (group-invariant: gpurace/instrument/wgsl/invariant.py)."""

from __future__ import annotations

from gpurace.launch import LaunchSpec

REDUCE = """
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;

var<workgroup> tile: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    tile[lid] = src[wg.x * 64u + lid];
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) {
            tile[lid] = tile[lid] + tile[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        sums[wg.x] = tile[0];
    }
}
"""

RACY_REDUCE = REDUCE.replace(
    "            tile[lid] = tile[lid] + tile[lid + s];\n        }\n        workgroupBarrier();",
    "            tile[lid] = tile[lid] + tile[lid + s];\n        }",
)


def reduce_spec(groups: int) -> LaunchSpec:
    """`groups` groups of 64, `src` filled 0, 1, 2, ..."""
    return LaunchSpec.from_dict(
        {"entry": "main", "workgroups": [groups, 1, 1],
         "binding": [{"binding": 0, "type": "u32", "count": 64 * groups, "fill": "arange"},
                     {"binding": 1, "type": "u32", "count": groups}]},
        path="reduce.toml",
    )  # fmt: skip
