__kernel void neighbour(__global int *data, __global int *out)
{
    int gid = get_global_id(0);
    data[gid] = gid;
    out[gid] = data[gid + 1];
}
