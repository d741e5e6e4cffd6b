__kernel void mixed_fence(__global int *data)
{
    int lid = get_local_id(0);
    cl_mem_fence_flags f = lid < 8 ? CLK_LOCAL_MEM_FENCE : CLK_GLOBAL_MEM_FENCE;
    data[lid] = lid;
    barrier(f);
    data[lid] += 1;
}
