__kernel void stencil(__global const float *in, __global float *out, int n)
{
    __local float tile[66];
    int gid = get_global_id(0);
    int lid = get_local_id(0);
    tile[lid + 1] = in[gid];
    if (lid == 0)
        tile[0] = gid > 0 ? in[gid - 1] : 0.0f;
    if (lid == 63)
        tile[65] = gid + 1 < n ? in[gid + 1] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[gid] = 0.25f * tile[lid] + 0.5f * tile[lid + 1] + 0.25f * tile[lid + 2];
}
