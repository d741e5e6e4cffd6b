__kernel void branchy(__global const int *flags, __global int *out)
{
    __local int tile[64];
    int lid = get_local_id(0);
    tile[lid] = lid;
    if (flags[lid] < 4) {
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[lid] = tile[lid];
}
