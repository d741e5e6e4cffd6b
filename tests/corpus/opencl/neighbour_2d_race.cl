__kernel void blur(__global const float *in, __global float *out)
{
    __local float tile[8][8];
    int lx = get_local_id(0), ly = get_local_id(1);
    int g = get_global_id(1) * get_global_size(0) + get_global_id(0);
    tile[ly][lx] = in[g];
    out[g] = 0.5f * (tile[ly][lx] + tile[ly][(lx + 1) % 8]);
}
