__kernel void stage(__global const float *in, __global float *out)
{
    __local float tile[64];
    __local int pos[64];
    int lid = get_local_id(0);
    size_t base = get_group_id(0) * 64;
    event_t e = async_work_group_copy(tile, in + base, 64, 0);
    pos[lid] = 63 - lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    int j = pos[63 - lid];
    wait_group_events(1, &e);
    out[base + lid] = tile[63 - j];
}
