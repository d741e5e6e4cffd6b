__kernel void reduce(__global const float *input, __global float *partial) {
    __local float tile[256];
    size_t lid = get_local_id(0);
    tile[lid] = input[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 128; s > 0; s >>= 1) {
        if (lid < s) {
            tile[lid] = tile[lid] + tile[lid + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        partial[get_group_id(0)] = tile[0];
    }
}
