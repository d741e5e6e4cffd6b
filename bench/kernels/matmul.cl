#define T 16
__kernel void matmul(__global const float *a, __global const float *b, __global float *c,
                     uint n) {
    __local float ta[T][T];
    __local float tb[T][T];
    size_t lx = get_local_id(0), ly = get_local_id(1);
    size_t col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;
    for (uint k = 0; k < n; k += T) {
        ta[ly][lx] = a[row * n + k + lx];
        tb[ly][lx] = b[(k + ly) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint j = 0; j < T; j++) {
            acc += ta[ly][j] * tb[j][lx];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc;
}
