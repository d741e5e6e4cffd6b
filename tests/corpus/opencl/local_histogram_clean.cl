__kernel void histogram(__global const uint *in, __global uint *hist)
{
    __local uint bins[16];
    int lid = get_local_id(0);
    if (lid < 16)
        bins[lid] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    atomic_inc(&bins[in[get_global_id(0)] % 16u]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 16)
        atomic_add(&hist[lid], bins[lid]);
}
