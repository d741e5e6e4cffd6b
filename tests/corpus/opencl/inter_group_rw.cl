__kernel void swap_halves(__global float *data, __global float *out)
{
    int gid = get_global_id(0);
    data[gid] = gid * 0.5f;
    out[gid] = data[(gid + 64) % 128];
}
