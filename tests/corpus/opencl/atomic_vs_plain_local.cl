__kernel void local_count(__global uint *out)
{
    __local uint cnt;
    int lid = get_local_id(0);
    if (lid == 0)
        cnt = 0u;
    atomic_add(&cnt, 1u);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0)
        out[get_group_id(0)] = cnt;
}
