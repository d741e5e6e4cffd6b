__kernel void scale(__global const float *in, __global float *out, float k, int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = in[i] * k;
}
