__kernel void accumulate(__global int *out)
{
    __local int acc[4];
    int lid = get_local_id(0);
    if (lid < 4)
        acc[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    acc[lid % 4] += lid + 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < 4)
        out[lid] = acc[lid];
}
