__kernel void bounded(__global float *data, uint n)
{
    __local float tile[64];
    uint gid = get_global_id(0);
    uint lid = get_local_id(0);
    if (gid >= n)
        return;
    tile[lid] = data[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    data[gid] = tile[lid] * 2.0f;
}
