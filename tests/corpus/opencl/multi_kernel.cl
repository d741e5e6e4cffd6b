__kernel void stage_ok(__global const float *in, __global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = tile[63 - lid];
}

__kernel void stage_racy(__global const float *in, __global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    out[get_global_id(0)] = tile[63 - lid];
}
