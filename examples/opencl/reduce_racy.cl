// A work-group sum reduction in __local memory that is missing one barrier: each
// step reads a partner's slot that another work-item may still be writing.
__kernel void reduce(__global const float *input, __global float *partial)
{
    __local float tile[64];
    uint lid = get_local_id(0);
    tile[lid] = input[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 32; s > 0; s >>= 1) {
        if (lid < s)
            tile[lid] += tile[lid + s];
        // missing: barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = tile[0];
}
