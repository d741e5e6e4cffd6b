__kernel void find(__global const int *keys, __global int *hit)
{
    int i = get_global_id(0);
    if (keys[i] == 42)
        hit[0] = i;
}
