__kernel void partial_copy(__global const float *src, __global float *out,
                           __global const int *flags)
{
    __local float tile[16];
    int lid = get_local_id(0);
    if (flags[lid] < 4) {
        event_t e = async_work_group_copy(tile, src, 16, 0);
        wait_group_events(1, &e);
    }
    out[lid] = lid;
}
