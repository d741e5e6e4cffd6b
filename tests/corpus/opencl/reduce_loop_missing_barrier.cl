__kernel void reduce(__global const float *in, __global float *partial, __local float *scratch)
{
    int lid = get_local_id(0);
    scratch[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 32; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}
