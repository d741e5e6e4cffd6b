__kernel void rounds(__global const int *in, __global int *out)
{
    __local int tile[64];
    int lid = get_local_id(0);
    int sum = 0;
    tile[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i <= (int)get_group_id(0); i++) {
        sum += tile[(lid + i) % 64];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[get_global_id(0)] = sum;
}
