__kernel void pairs(__global int *out)
{
    __local int slot[32];
    int lid = get_local_id(0);
    slot[lid / 2] = lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[lid] = slot[lid / 2];
}
