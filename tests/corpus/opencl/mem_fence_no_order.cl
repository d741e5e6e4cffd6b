__kernel void fenced(__global int *out)
{
    __local int tile[64];
    int lid = get_local_id(0);
    tile[lid] = lid;
    mem_fence(CLK_LOCAL_MEM_FENCE);
    out[lid] = tile[63 - lid];
}
