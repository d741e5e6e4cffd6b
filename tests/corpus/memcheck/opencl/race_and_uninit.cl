/* Every work-item of a group stores its pair sum to the group's one output (a race),
   and the last one adds tile[32], which no one wrote. */
__kernel void pairsum(__global const uint *src, __global uint *out) {
    __local uint tile[33];
    uint lid = get_local_id(0);
    tile[lid] = src[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_group_id(0)] = tile[lid] + tile[lid + 1];
}
