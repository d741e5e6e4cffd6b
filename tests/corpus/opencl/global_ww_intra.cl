__kernel void squash(__global int *out)
{
    out[get_local_id(0) / 8] = get_local_id(0);
}
