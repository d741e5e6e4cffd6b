__kernel void split(__global const float *x, __global float *whole,
                    __global int *expo, __global float *frac)
{
    int gid = get_global_id(0);
    frac[gid] = modf(x[gid] * 2.5f, &whole[gid]) + frexp(x[gid], &expo[gid]);
}
