__kernel void two_copies(__global const float *a, __global const float *b,
                         __global float *out, __global const int *flags)
{
    __local float tile[16];
    int lid = get_local_id(0);
    event_t e;
    if (flags[lid] < 8)
        e = async_work_group_copy(tile, a, 16, 0);
    else
        e = async_work_group_copy(tile, b, 16, 0);
    wait_group_events(1, &e);
    out[lid] = tile[15 - lid];
}
