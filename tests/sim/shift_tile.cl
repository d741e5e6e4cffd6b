__kernel void shift_tile(__global int *data, __local int *tmp)
{
    int l = get_local_id(0);
    tmp[l] = data[get_global_id(0)];
    data[get_global_id(0)] = tmp[(l + 1) % get_local_size(0)];
}
