__kernel void overlap(__global uint *out)
{
    __local ushort h[64];
    __local uint *w = (__local uint *)h;
    int lid = get_local_id(0);
    h[lid] = (ushort)lid;
    if (lid == 33)
        w[0] = 0xffffffffu;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 32)
        out[lid] = w[lid];
}
