struct Bucket {
    n: u32,
    items: array<u32, 8>,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> firsts: array<Bucket>;

var<workgroup> buckets: array<Bucket, 4>;

@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wg: vec3<u32>) {
    let b = lid / 8u;
    let k = lid % 8u;
    buckets[b].items[k] = src[gid.x];
    if (k == 0u) {
        buckets[b].n = 8u;
    }
    workgroupBarrier();
    dst[gid.x] = buckets[b].items[7u - k] + buckets[b].n;
    if (lid == 0u) {
        firsts[wg.x] = buckets[0];
    }
}
