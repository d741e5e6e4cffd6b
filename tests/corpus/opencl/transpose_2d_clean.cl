__kernel void transpose(__global const float *in, __global float *out, int width)
{
    __local float tile[8][9];
    int lx = get_local_id(0), ly = get_local_id(1);
    int gx = get_global_id(0), gy = get_global_id(1);
    tile[ly][lx] = in[gy * width + gx];
    barrier(CLK_LOCAL_MEM_FENCE);
    int ox = get_group_id(1) * 8 + lx;
    int oy = get_group_id(0) * 8 + ly;
    out[oy * width + ox] = tile[lx][ly];
}
