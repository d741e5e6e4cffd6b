__kernel void uneven(__global const int *trips, __global int *out)
{
    int lid = get_local_id(0);
    int n = trips[lid] % 3;
    for (int i = 0; i < n; i++) {
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[lid] = n;
}
