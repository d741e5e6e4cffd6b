__kernel void stage(__global const float *in, __global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    event_t e = async_work_group_copy(tile, in + get_group_id(0) * 64, 64, 0);
    wait_group_events(1, &e);
    out[get_global_id(0)] = tile[63 - lid];
}
