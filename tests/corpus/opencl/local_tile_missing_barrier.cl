__kernel void shift(__global const float *in, __global float *out)
{
    __local float tile[64];
    int lid = get_local_id(0);
    tile[lid] = in[get_global_id(0)];
    out[get_global_id(0)] = tile[(lid + 1) % 64];
}
