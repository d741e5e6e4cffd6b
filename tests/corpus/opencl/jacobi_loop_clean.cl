__kernel void smooth(__global float *data)
{
    __local float u[66];
    int lid = get_local_id(0);
    int gid = get_global_id(0);
    if (lid == 0) {
        u[0] = 0.0f;
        u[65] = 0.0f;
    }
    u[lid + 1] = data[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int it = 0; it < 4; it++) {
        float v = 0.5f * (u[lid] + u[lid + 2]);
        barrier(CLK_LOCAL_MEM_FENCE);
        u[lid + 1] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    data[gid] = u[lid + 1];
}
