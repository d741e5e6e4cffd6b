__kernel void pair(__global const float *a, __global const float *b, __global float *out)
{
    __local float ta[64];
    __local float tb[32];
    int lid = get_local_id(0);
    size_t base = get_group_id(0) * 64;
    event_t ev[2];
    ev[0] = async_work_group_copy(ta, a + base, 64, 0);
    ev[1] = async_work_group_strided_copy(tb, b + base, 32, 2, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    wait_group_events(2, ev);
    out[base + lid] = ta[63 - lid] + tb[lid / 2];
}
