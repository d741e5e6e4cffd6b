__kernel void bytes(__global const uchar *in, __global uchar *out, __global short *wide)
{
    __local uchar b[64];
    int lid = get_local_id(0);
    int gid = get_global_id(0);
    b[lid] = in[gid] + 1;
    wide[gid] = (short)lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[gid] = b[63 - lid];
}
