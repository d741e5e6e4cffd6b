/* The look-alike of reduce_reads_unwritten: the tile is as large as the group, the
   first step starts at half of it, and the uninitialised scratch buffer is written
   by each work-item before it reads it back. */
__kernel void reduce(__global const float *src, __global float *sums, __global float *scratch) {
    __local float tile[32];
    uint lid = get_local_id(0);
    size_t i = get_global_id(0);
    scratch[i] = src[i] * 2.0f;
    tile[lid] = scratch[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 16; s > 0; s >>= 1) {
        if (lid < s)
            tile[lid] += tile[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        sums[get_group_id(0)] = tile[0];
}
