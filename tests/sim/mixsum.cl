__kernel void mixsum(__global const short *a, __global const uchar *b, __global ulong *c,
                  __global const float *d, __global const double *e, __global int *empty,
                  __global int *out, uint n)
{
    int i = get_global_id(0);
    out[i] = a[i] + b[i] + (int)c[i] + (int)d[i] + (int)e[i] + (int)n;
}
