#define TS 8

__kernel void matmul(__global const float *a, __global const float *b, __global float *c, int n)
{
    __local float as[TS][TS];
    __local float bs[TS][TS];
    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TS) {
        as[ty][tx] = a[row * n + k0 + tx];
        bs[ty][tx] = b[(k0 + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += as[ty][k] * bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc;
}
