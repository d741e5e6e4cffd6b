__kernel void walk(__global int *out)
{
    __local int tile[65];
    int lid = get_local_id(0);
    __local int *mine = tile + lid;
    *mine = lid;
    int next = *(mine + 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    out[lid] = next + tile[lid];
}
