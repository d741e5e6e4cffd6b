__kernel void poly(__global const float *x, __global float *y, __constant float *coeff, int degree)
{
    int gid = get_global_id(0);
    float acc = 0.0f;
    for (int i = degree; i >= 0; i--)
        acc = acc * x[gid] + coeff[i];
    y[gid] = acc;
}
