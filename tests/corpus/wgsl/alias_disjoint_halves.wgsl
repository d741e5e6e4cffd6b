// One buffer bound twice at disjoint ranges: `src` (binding 0) from byte 0, `dst`
// (binding 1) from byte 512, so dst[i] is word 128 + i of the buffer. Each
// work-item reads two words of the first half and writes one of the second: no
// word is both written and touched by another work-item. (Were the offset lost,
// dst[i] would be src[i], which work-item i - 1 reads: a race.)
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    dst[i] = src[i] + src[(i + 1u) % 128u];
}
