__kernel void overlap(__global float4 *out)
{
    __local float4 v[16];
    int lid = get_local_id(0);
    __local float *f = (__local float *)v;
    f[lid] = lid + 1.0f;
    if (lid == 9)
        v[0] = (float4)(-1.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 16)
        out[lid] = v[lid];
}
