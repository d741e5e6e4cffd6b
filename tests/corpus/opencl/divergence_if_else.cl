__kernel void two_paths(__global int *out)
{
    __local int tile[64];
    int lid = get_local_id(0);
    tile[lid] = lid;
    if (lid < 32) {
        barrier(CLK_LOCAL_MEM_FENCE);
        out[lid] = tile[lid];
    } else {
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        out[lid] = tile[lid] + 1;
    }
}
