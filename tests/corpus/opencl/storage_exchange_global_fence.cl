__kernel void exchange(__global int *buf, __global int *out)
{
    int gid = get_global_id(0);
    int lid = get_local_id(0);
    buf[gid] = gid * 3;
    barrier(CLK_GLOBAL_MEM_FENCE);
    out[gid] = buf[gid - lid + (lid + 1) % 64];
}
