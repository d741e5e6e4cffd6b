__kernel void publish(__global const float *in, __global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    size_t base = get_group_id(0) * 64;
    tile[lid] = in[base + lid];
    barrier(CLK_LOCAL_MEM_FENCE);
    event_t e = async_work_group_copy(out + base, tile, 64, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    tile[lid] = 0.0f;
    wait_group_events(1, &e);
}
