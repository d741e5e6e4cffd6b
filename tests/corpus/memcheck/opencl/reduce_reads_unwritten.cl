/* A tree reduction whose first step starts at half the tile, not half the group:
   the 32 work-items write tile[0..31], then read tile[lid + 32], which no one wrote. */
__kernel void reduce(__global const float *src, __global float *sums) {
    __local float tile[64];
    uint lid = get_local_id(0);
    tile[lid] = src[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 32; s > 0; s >>= 1) {
        if (lid < s)
            tile[lid] += tile[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        sums[get_group_id(0)] = tile[0];
}
