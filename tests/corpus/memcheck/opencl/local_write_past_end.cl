/* Stages a group's slice one element to the right in a __local tile sized for the
   group: the last work-item of every group writes tile[64] of 64. */
__kernel void stage(__global const int *in, __global int *out) {
    __local int tile[64];
    int lid = get_local_id(0);
    tile[lid + 1] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = tile[lid];
}
