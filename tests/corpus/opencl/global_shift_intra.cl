__kernel void shift(__global int *data)
{
    int lid = get_local_id(0);
    data[lid] = data[lid + 1] * 2;
}
