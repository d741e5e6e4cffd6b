__kernel void histogram(__global const uint *in, __global uint *hist)
{
    uint bin = in[get_global_id(0)] % 8u;
    atomic_inc(&hist[bin]);
}
