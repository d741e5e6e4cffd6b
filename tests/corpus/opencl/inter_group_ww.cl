__kernel void stamp(__global int *out)
{
    out[get_local_id(0)] = get_group_id(0) + 1;
}
