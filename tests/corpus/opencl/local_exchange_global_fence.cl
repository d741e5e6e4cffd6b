__kernel void exchange(__global const int *in, __global int *out)
{
    __local int tile[64];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    barrier(CLK_GLOBAL_MEM_FENCE);
    out[get_global_id(0)] = tile[63 - lid];
}
