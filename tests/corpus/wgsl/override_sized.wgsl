// Sizes from pipeline-overridable constants, one without a default (the launch file
// gives it); @id(3) decides whether the barrier runs.
override wg: u32;
override stride: u32 = 1u;
@id(3) override skip_barrier: bool = false;

@group(0) @binding(0) var<storage, read_write> data: array<u32>;

var<workgroup> tile: array<u32, wg>;

@compute @workgroup_size(wg)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) group: vec3<u32>) {
    tile[lid] = lid * 3u;
    if (!skip_barrier) {
        workgroupBarrier();
    }
    data[group.x * wg + lid] = tile[(lid + stride) % wg];
}
